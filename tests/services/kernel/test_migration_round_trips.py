"""Every revision's downgrade undoes its upgrade exactly, on SQLite and on a real PostgreSQL: from the newest
schema, each step down and up again leaves the schema as it was (tables, columns with their types, nullability and
defaults, primary keys, indexes, unique constraints, foreign keys, check constraints), the way down ends at an
empty database (only Alembic's own table), and the way back up gives the newest schema again. Every step down also
gives exactly the schema a fresh database gets from `upgrade base -> that revision` (a separate empty database,
brought up one revision at a time). A downgrade keeps the rows of every table it keeps, in every column that
revision has on a fresh database (so a downgrade that drops one column too many fails), and so does the upgrade
after it."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from services.kernel.db import make_engine
from services.launcher.migrate import alembic_config
from tests.databases import BACKENDS, empty_database

Schema = dict[str, Any]
Rows = dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend the tests are parametrized with (module-scoped, so `fresh_schemas` is built once per backend)."""
    return str(request.param)


def _postgres_url(request: pytest.FixtureRequest, backend: str) -> str | None:
    return request.getfixturevalue("postgres_url") if backend == "postgresql" else None


@pytest.fixture
async def url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """An empty database (no schema at all) on the backend the test is parametrized with."""
    async with empty_database(tmp_path, _postgres_url(request, backend)) as database_url:
        yield database_url


@pytest.fixture(scope="module")
async def fresh_schemas(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Schema]:
    """The schema a fresh database has at each revision ("base" included): a separate empty database on the
    backend, brought from base up to the head one revision at a time, never downgraded."""
    postgres_url = _postgres_url(request, backend)
    async with empty_database(tmp_path_factory.mktemp("fresh"), postgres_url) as fresh:
        await _migrate(fresh, "up", "base")
        schemas = {"base": await _schema(fresh)}
        for revision, _ in reversed(_revisions(fresh)):
            await _migrate(fresh, "up", revision)
            schemas[revision] = await _schema(fresh)
    return schemas


def _revisions(url: str) -> list[tuple[str, str]]:
    """(revision, the revision below it or "base"), newest first."""
    script = ScriptDirectory.from_config(alembic_config(url))
    steps = []
    for revision in script.walk_revisions():
        down = revision.down_revision
        assert down is None or isinstance(down, str), f"{revision.revision} merges branches"
        steps.append((revision.revision, down or "base"))
    return steps


async def _migrate(url: str, direction: str, target: str) -> None:
    """`alembic upgrade|downgrade target`, in a thread (Alembic's env runs its own event loop)."""
    run = command.upgrade if direction == "up" else command.downgrade
    await asyncio.to_thread(run, alembic_config(url), target)


async def _run_sync(url: str, fn: Any, *, write: bool = False) -> Any:
    engine = make_engine(url, role="tests")
    try:
        async with engine.begin() if write else engine.connect() as connection:
            return await connection.run_sync(fn)
    finally:
        await engine.dispose()


def _type(column: dict[str, Any], dialect: sa.Dialect) -> str:
    try:
        return str(column["type"].compile(dialect=dialect))
    except sa.exc.CompileError:
        return repr(column["type"])


def _inspect(connection: Connection) -> Schema:
    """What SQLAlchemy's inspector sees of the database, in a form that compares with ==."""
    inspector = sa.inspect(connection)
    dialect = connection.dialect
    tables: dict[str, Any] = {}
    for table in sorted(inspector.get_table_names()):
        columns = [
            (c["name"], _type(c, dialect), c["nullable"], str(c.get("default")), c.get("autoincrement"))
            for c in inspector.get_columns(table)
        ]
        pk = inspector.get_pk_constraint(table)
        indexes = sorted(
            (
                str(i["name"]),
                tuple(str(name) for name in i["column_names"]),
                bool(i["unique"]),
                str(i.get("duplicates_constraint")),
            )
            for i in inspector.get_indexes(table)
        )
        uniques = sorted((str(u["name"]), tuple(u["column_names"])) for u in inspector.get_unique_constraints(table))
        foreign_keys = sorted(
            (
                str(f["name"]),
                tuple(f["constrained_columns"]),
                f["referred_table"],
                tuple(f["referred_columns"]),
                tuple(sorted((f.get("options") or {}).items())),
            )
            for f in inspector.get_foreign_keys(table)
        )
        try:
            checks = sorted((str(c["name"]), c["sqltext"]) for c in inspector.get_check_constraints(table))
        except NotImplementedError:
            checks = []
        tables[table] = {
            "columns": columns,
            "primary_key": (pk.get("name"), tuple(pk["constrained_columns"])),
            "indexes": indexes,
            "unique_constraints": uniques,
            "foreign_keys": foreign_keys,
            "check_constraints": checks,
        }
    sequences: list[str] = []
    if dialect.name == "postgresql":
        sequences = sorted(inspector.get_sequence_names())
    return {"tables": tables, "sequences": sequences}


async def _schema(url: str) -> Schema:
    return dict(await _run_sync(url, _inspect))


def _differences(before: Schema, after: Schema) -> list[str]:
    """Readable differences between two schemas, for the assertion's message."""
    lines = []
    if before["sequences"] != after["sequences"]:
        lines.append(f"sequences: {before['sequences']} -> {after['sequences']}")
    for table in sorted(set(before["tables"]) | set(after["tables"])):
        old, new = before["tables"].get(table), after["tables"].get(table)
        if old is None or new is None:
            lines.append(f"table {table}: {'added' if old is None else 'dropped'}")
            continue
        for part in old:
            if old[part] != new[part]:
                lines.append(f"{table}.{part}:\n  before {old[part]}\n  after  {new[part]}")
    return lines


async def test_every_downgrade_undoes_its_upgrade_and_base_is_empty(url: str, fresh_schemas: dict[str, Schema]) -> None:
    await _migrate(url, "up", "head")
    head = await _schema(url)
    assert "attempt" in head["tables"] and "alembic_version" in head["tables"]

    steps = _revisions(url)
    assert set(fresh_schemas) == {"base"} | {revision for revision, _ in steps}
    assert head == fresh_schemas[steps[0][0]]
    for revision, down in steps:  # we are at `revision`
        before = await _schema(url)
        await _migrate(url, "down", down)
        lower = await _schema(url)
        assert lower != before, f"downgrading {revision} changed nothing"
        assert lower == fresh_schemas[down], (
            f"downgrading {revision} differs from a fresh upgrade base -> {down}:\n"
            + "\n".join(_differences(fresh_schemas[down], lower))
        )
        await _migrate(url, "up", revision)
        after = await _schema(url)
        assert after == before, f"{down} -> {revision} round trip changed:\n" + "\n".join(_differences(before, after))
        await _migrate(url, "down", down)
        assert await _schema(url) == lower, f"downgrading {revision} twice gave two schemas"

    base = await _schema(url)
    assert base == fresh_schemas["base"]
    assert list(base["tables"]) == ["alembic_version"], base["tables"].keys()
    assert base["sequences"] == []
    assert await _run_sync(url, lambda c: c.execute(sa.text("SELECT count(*) FROM alembic_version")).scalar()) == 0

    await _migrate(url, "up", "head")
    again = await _schema(url)
    assert again == head, "base -> head differs from the first upgrade:\n" + "\n".join(_differences(head, again))


# A row in every table of the newest schema, every foreign key used (a mutant refers to its parent attempt).
T0 = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
FIXTURE_ROWS: dict[str, list[dict[str, Any]]] = {
    "api_key": [
        {
            "key_id": "key_1",
            "key_hash": "h" * 64,
            "tenant": "t",
            "name": "k",
            "scopes": ["submit", "read"],
            "created_at": T0,
            "quotas": {"attempts_per_minute": 5},
        }
    ],
    "job": [
        {
            "job_id": "job_1",
            "tenant": "t",
            "kind": "execute_batch",
            "status": "succeeded",
            "progress_done": 2,
            "progress_total": 2,
            "params": {"a": 1},
            "tries": 1,
            "created_at": T0,
            "finished_at": T0,
        }
    ],
    "job_unit": [{"job_id": "job_1", "unit": "att_parent"}],
    "judge_response_cache": [{"cache_key": "c" * 64, "content": "{}", "served_model": "m", "created_at": T0}],
    "problem": [
        {
            "id": 1,
            "tenant": "t",
            "problem_id": "sum",
            "title": "A + B",
            "statement": "add",
            "mode": "stdio",
            "tests": [{"input": "1 2\n", "expected": "3\n"}],
            "checker": {"kind": "exact"},
            "limits": {"wall_time_s": 2},
            "references": [],
            "content_hash": "p" * 64,
            "created_at": T0,
        }
    ],
    "attempt": [
        {
            "attempt_id": "att_parent",
            "attempt_uid": "u1",
            "tenant": "t",
            "problem_pk": 1,
            "language": "python",
            "source_code": "print(1)",
            "source_hash": "s" * 64,
            "content_hash": "a" * 64,
            "judges": ["sample_tests"],
            "repeats": 1,
            "job_id": "job_1",
            "status": "done",
            "verdict": "AC",
            "passed": 1,
            "total": 1,
            "created_at": T0,
            "finished_at": T0,
            "pipeline": ["execute", "judge"],
            "stage": None,
        },
        {
            "attempt_id": "att_mutant",
            "tenant": "t",
            "problem_pk": 1,
            "language": "python",
            "source_code": "print(2)",
            "source_hash": "m" * 64,
            "content_hash": "b" * 64,
            "repeats": 1,
            "parent_attempt_id": "att_parent",
            "operator": "flip",
            "severity": 0.5,
            "guard_context": True,
            "status": "queued",
            "created_at": T0,
            "pipeline": ["execute"],
            "stage": "execute",
            "mutation": {"seed": 7},
        },
    ],
    "execution": [
        {
            "attempt_id": "att_parent",
            "run": 0,
            "verdict": "AC",
            "passed": 1,
            "total": 1,
            "compile_output": "",
            "tests": [{"verdict": "AC"}],
            "toolchain": "python 3.12",
            "build_cached": False,
            "duration_ms": 12,
            "created_at": T0,
        }
    ],
    "judgment": [
        {
            "attempt_id": "att_parent",
            "judge": "sample_tests",
            "condition": "blind",
            "repeat": 0,
            "status": "ok",
            "rubric": "cocreation",
            "prompt_version": "v1",
            "fields": {"p_ac": 0.9},
            "p_ac": 0.9,
            "score": 0.9,
            "tries": 1,
            "updated_at": T0,
        }
    ],
    "report": [
        {
            "report_id": "rep_1",
            "tenant": "t",
            "kind": "judge_quality",
            "params": {},
            "job_id": "job_1",
            "result": {"ok": True},
            "html": "<p>",
            "created_at": T0,
        }
    ],
    "report_plot": [{"report_id": "rep_1", "name": "roc", "png": b"\x89PNG\x00\x01"}],
    "calibration": [
        {
            "calibration_id": "cal_1",
            "tenant": "t",
            "judge": "j",
            "condition": "blind",
            "method": "platt",
            "cluster": "trajectory",
            "version": 1,
            "applied": True,
            "fitted_on": {"n": 20},
            "fitted_map": {"method": "platt", "coef": 0.5, "intercept": 0.0},
            "result": {"applied": True},
            "job_id": "job_1",
            "created_at": T0,
        }
    ],
    "study": [
        {
            "study_id": "std_1",
            "tenant": "t",
            "name": "s",
            "spec": {"name": "s"},
            "spec_hash": "h",
            "state": {"problem_ids": ["p"]},
            "created_at": T0,
            "updated_at": T0,
        }
    ],
    "similarity_pair": [
        {
            "job_id": "job_1",
            "ordinal": 0,
            "pair_key": "k",
            "problem_pk": 1,
            "mode": "stdio",
            "reference_language": "python",
            "reference_source": "print(1)",
            "candidate_language": "python",
            "candidate_source": "print(2)",
            "status": "done",
            "result": {"score": 1.0},
            "created_at": T0,
        }
    ],
}


def _reflect(connection: Connection) -> sa.MetaData:
    metadata = sa.MetaData()
    metadata.reflect(connection)
    metadata.remove(metadata.tables["alembic_version"])
    return metadata


def _refill(connection: Connection) -> None:
    """Empty every table and insert FIXTURE_ROWS (the newest schema: every table of it has rows)."""
    metadata = _reflect(connection)
    assert set(metadata.tables) == set(FIXTURE_ROWS), "a table of the newest schema has no fixture rows"
    for table in reversed(metadata.sorted_tables):
        connection.execute(table.delete())
    for table in metadata.sorted_tables:
        for row in FIXTURE_ROWS[table.name]:  # one by one: the rows name different columns, the parent comes first
            connection.execute(table.insert().values(row))


def _read(connection: Connection) -> Rows:
    """Every row of every table (but Alembic's), ordered by primary key, as dicts of every column."""
    rows: Rows = {}
    for table in _reflect(connection).sorted_tables:
        order = list(table.primary_key.columns) or list(table.columns)
        rows[table.name] = [dict(row._mapping) for row in connection.execute(sa.select(table).order_by(*order))]
    return rows


def _columns(schema: Schema) -> dict[str, set[str]]:
    """The tables (but Alembic's) of a schema, each with the names of its columns."""
    return {
        table: {column[0] for column in parts["columns"]}
        for table, parts in schema["tables"].items()
        if table != "alembic_version"
    }


def _project(rows: Rows, columns: dict[str, set[str]]) -> Rows:
    """`rows` restricted to the tables and columns of `columns` (taken from a fresh database at a lower revision,
    never from the downgraded database itself: a column the downgrade lost must still be expected)."""
    return {
        table: [{name: value for name, value in row.items() if name in names} for row in rows[table]]
        for table, names in columns.items()
    }


async def test_downgrades_keep_the_rows_of_what_they_keep(url: str, fresh_schemas: dict[str, Schema]) -> None:
    """head -> each lower revision -> head, from a full row set each time: every table the lower revision has (on a
    fresh database) keeps every row, with the same values in every column it has there, down and back up."""
    await _migrate(url, "up", "head")
    head_revision = _revisions(url)[0][0]
    targets = [down for _, down in _revisions(url) if down != "base"]
    assert targets, "a single revision: nothing to round-trip"
    for target in targets:
        await _run_sync(url, _refill, write=True)
        at_head = await _run_sync(url, _read)
        assert all(at_head[table] for table in FIXTURE_ROWS), at_head

        await _migrate(url, "down", target)
        below = await _run_sync(url, _read)
        assert all(below.values()), f"{head_revision} -> {target} emptied a table it keeps: {below}"
        kept = _columns(fresh_schemas[target])
        has = {table: set(table_rows[0]) for table, table_rows in below.items()}
        odd = {table: sorted(kept.get(table, set()) ^ has.get(table, set())) for table in sorted(set(kept) | set(has))}
        assert has == kept, f"{head_revision} -> {target}: columns unlike a fresh {target}'s: " + str(
            {table: names for table, names in odd.items() if names}
        )
        assert below == _project(at_head, kept), f"{head_revision} -> {target} changed rows it keeps"

        await _migrate(url, "up", "head")
        back = await _run_sync(url, _read)
        assert _project(back, kept) == below, f"{target} -> {head_revision} changed rows it had"
        lost = {table for table in at_head if table not in below}
        assert all(back[table] == [] for table in lost) and set(back) == set(at_head)

    # The step an operator rolls back most (the newest revision) keeps everything but what that revision added:
    # here, an API key's quotas, which come back as null (the configured default).
    await _run_sync(url, _refill, write=True)
    at_head = await _run_sync(url, _read)
    await _migrate(url, "down", targets[0])
    await _migrate(url, "up", "head")
    back = await _run_sync(url, _read)
    expected = {table: [dict(row) for row in table_rows] for table, table_rows in at_head.items()}
    if head_revision == "0007":
        expected["api_key"][0]["quotas"] = None
    if head_revision == "0011":  # the studies table: dropped, and back empty
        expected["study"] = []
    if head_revision == "0012":  # the calibration table: dropped, and back empty
        expected["calibration"] = []
    assert back == expected
