"""Revision 0009 widens judgment.status for `not_applicable`, on SQLite and on a real PostgreSQL (which enforces
VARCHAR lengths): after it a row that did not apply is stored as written, with its reason; its downgrade turns such
a row into a failed one with the same reason (what the older schema recorded), so that it fits the older column,
and keeps every other row as it was."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Connection

from services.kernel.db import make_engine
from services.launcher.migrate import alembic_config
from tests.databases import BACKENDS, empty_database


@pytest.fixture(params=BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    postgres_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    async with empty_database(tmp_path, postgres_url) as database_url:
        yield database_url


async def _migrate(url: str, direction: str, target: str) -> None:
    run = command.upgrade if direction == "up" else command.downgrade
    await asyncio.to_thread(run, alembic_config(url), target)


async def _sync(url: str, fn: Any) -> Any:
    engine = make_engine(url, role="tests")
    try:
        async with engine.begin() as connection:
            return await connection.run_sync(fn)
    finally:
        await engine.dispose()


def _insert_attempt(connection: Connection) -> None:
    connection.execute(
        sa.text(
            "INSERT INTO problem (id, tenant, problem_id, title, statement, mode, tests, checker, limits, "
            "\"references\", content_hash, created_at) VALUES (1, 't', 'p', '', 's', 'function', '[]', '{}', '{}', "
            "'[]', 'h', '2026-01-01')"
        )
    )
    connection.execute(
        sa.text(
            "INSERT INTO attempt (attempt_id, tenant, problem_pk, language, source_code, source_hash, content_hash, "
            "judges, repeats, status, pipeline, created_at) VALUES "
            "('att_1', 't', 1, 'python', 'x', 'h', 'h', '[]', 1, 'done', '[\"execute\", \"judge\"]', '2026-01-01')"
        )
    )


def _insert_judgment(judge: str, status: str, error: str | None) -> Any:
    def insert(connection: Connection) -> None:
        connection.execute(
            sa.text(
                "INSERT INTO judgment (attempt_id, judge, condition, repeat, status, rubric, prompt_version, tries, "
                "error, updated_at) VALUES ('att_1', :judge, 'blind', 0, :status, 'refinement_effort', 'offline:x', "
                "1, :error, '2026-01-01')"
            ),
            {"judge": judge, "status": status, "error": error},
        )

    return insert


def _judgments(connection: Connection) -> dict[str, tuple[str, str | None]]:
    rows = connection.execute(sa.text("SELECT judge, status, error FROM judgment")).all()
    return {row[0]: (row[1], row[2]) for row in rows}


def _status_length(connection: Connection) -> int | None:
    column = next(c for c in sa.inspect(connection).get_columns("judgment") if c["name"] == "status")
    return column["type"].length


async def test_not_applicable_fits_after_0009_and_becomes_failed_below_it(url: str) -> None:
    await _migrate(url, "up", "0008")
    assert await _sync(url, _status_length) == 8
    await _sync(url, _insert_attempt)
    await _sync(url, _insert_judgment("lint", "ok", None))
    await _sync(url, _insert_judgment("sample_tests", "failed", "unavailable: lint: pylint is not installed"))

    await _migrate(url, "up", "0009")
    assert await _sync(url, _status_length) == 16
    await _sync(url, _insert_judgment("chrf", "not_applicable", "no reference solution in python"))
    after = await _sync(url, _judgments)
    assert after == {
        "lint": ("ok", None),
        "sample_tests": ("failed", "unavailable: lint: pylint is not installed"),
        "chrf": ("not_applicable", "no reference solution in python"),
    }

    await _migrate(url, "down", "0008")
    assert await _sync(url, _status_length) == 8
    below = await _sync(url, _judgments)
    assert below == {**after, "chrf": ("failed", "no reference solution in python")}

    await _migrate(url, "up", "head")
    assert await _sync(url, _judgments) == below
