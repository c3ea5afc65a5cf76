"""Reading attempts in-process against real SQLite and PostgreSQL: listing a page costs a bounded number of SQL
statements whatever its size, and the panel it returns is the one `metrics.panel` defines (docs/judges.md)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from gateway.app import create_app
from gateway.deps import open_session
from metrics.panel import panel_from_rows
from services.kernel.db import make_engine
from services.kernel.keys import create_key
from services.kernel.models import Attempt, Execution, Judgment, Problem, new_id
from services.launcher.migrate import upgrade_async

JUDGES = ("alpha", "beta", "gamma")
CONDITIONS = ("blind", "nonblind")


@dataclass
class Db:
    """A real database, and the SQL statements its engine runs while `counting`."""

    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    statements: list[str] = field(default_factory=list)
    counting: bool = False


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Db]:
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'reads.db'}"
    await upgrade_async(url)
    engine = make_engine(url, role="tests")
    db = Db(engine, async_sessionmaker(engine, expire_on_commit=False))

    def on_execute(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if db.counting:
            db.statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", on_execute)
    yield db
    await engine.dispose()


async def _client(db: Db, tenant: str) -> httpx.AsyncClient:
    """A client of a gateway app built in-process, whose sessions come from `db`, with a read key of `tenant`."""
    async with db.sessions() as session:
        _, key = await create_key(session, tenant=tenant, scopes=["read"])
        await session.commit()
    app = create_app()

    async def session_override() -> AsyncIterator[AsyncSession]:
        async with db.sessions() as session:
            yield session

    app.dependency_overrides[open_session] = session_override
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gateway", headers={"Authorization": f"Bearer {key}"}
    )
    return client


async def _counted_get(db: Db, client: httpx.AsyncClient, path: str) -> tuple[Any, list[str]]:
    db.statements.clear()
    db.counting = True
    try:
        response = await client.get(path)
    finally:
        db.counting = False
    assert response.status_code == 200, response.text
    return response.json(), list(db.statements)


def _problem(tenant: str) -> Problem:
    return Problem(
        tenant=tenant, problem_id=new_id("p"), statement="s", tests=[], checker={}, limits={}, content_hash="h"
    )


def _attempt(tenant: str, problem: Problem, at: datetime, **extra: Any) -> Attempt:
    return Attempt(
        attempt_id=new_id("att"),
        tenant=tenant,
        problem_pk=problem.id,
        language="python",
        source_code="print(1)",
        source_hash="h",
        content_hash="h",
        conditions=list(CONDITIONS),
        status="done",
        created_at=at,
        **extra,
    )


def _judgment(attempt: Attempt, judge: str, condition: str, **values: Any) -> Judgment:
    return Judgment(attempt_id=attempt.attempt_id, judge=judge, condition=condition, **{"status": "ok", **values})


async def _seed_page(db: Db, tenant: str, n: int) -> list[Attempt]:
    """`n` attempts over three problems, each executed and judged by three judges under two conditions (with
    repeats, failures and perturbation mutants mixed in), plus another tenant's judgments of the same judges."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    async with db.sessions() as session:
        problems = [_problem(tenant) for _ in range(3)]
        other = _problem(f"{tenant}-other")
        session.add_all([*problems, other])
        await session.flush()
        attempts: list[Attempt] = []
        for i in range(n):
            parent = attempts[-1].attempt_id if i % 7 == 6 else None
            extra = {"parent_attempt_id": parent, "operator": "ARITH_FLIP", "arm": "semantic"} if parent else {}
            attempts.append(
                _attempt(tenant, problems[i % 3], base + timedelta(seconds=i), participant=f"u{i % 4}", **extra)
            )
        strangers = [_attempt(f"{tenant}-other", other, base + timedelta(seconds=i)) for i in range(5)]
        session.add_all([*attempts, *strangers])
        await session.flush()
        rows: list[Any] = []
        for i, attempt in enumerate(attempts):
            rows.append(
                Execution(
                    attempt_id=attempt.attempt_id,
                    run=0,
                    verdict="AC",
                    passed=1,
                    total=1,
                    tests=[{"index": 0, "status": "AC", "time_ms": 1, "memory_kb": 10, "public": True}],
                )  # fmt: skip
            )
            for j, judge in enumerate(JUDGES):
                for condition in CONDITIONS:
                    value = ((i * (j + 3) + len(condition)) % 11) / 10  # ties on purpose
                    if judge == "gamma":  # a 0-5 rubric judge: a score and no p_ac
                        rows.append(_judgment(attempt, judge, condition, score=float(i % 6)))
                    elif i % 5 == 4 and judge == "beta":
                        rows.append(_judgment(attempt, judge, condition, status="failed", error="timeout"))
                    else:
                        rows.append(_judgment(attempt, judge, condition, p_ac=value, score=float(round(5 * value))))
                    if i % 3 == 0:  # a repeat never counts
                        rows.append(_judgment(attempt, judge, condition, repeat=1, p_ac=1 - value, score=0.0))
        for i, attempt in enumerate(strangers):
            rows += [_judgment(attempt, judge, "blind", p_ac=i / 10, score=float(i)) for judge in JUDGES]
        session.add_all(rows)
        await session.commit()
    return attempts


async def _tidy_rows(db: Db, tenant: str) -> list[dict[str, Any]]:
    """The tenant's tidy judgment table, as the metrics worker builds it (metrics/worker.py, load_rows)."""
    async with db.sessions() as session:
        result = await session.execute(
            select(Attempt, Judgment)
            .join(Judgment, Judgment.attempt_id == Attempt.attempt_id)
            .where(Attempt.tenant == tenant)
        )
        return [
            {
                "attempt_id": a.attempt_id,
                "judge": j.judge,
                "condition": j.condition,
                "repeat": j.repeat,
                "status": j.status,
                "p_ac": j.p_ac,
                "score": j.score,
                "parent_attempt_id": a.parent_attempt_id,
            }  # fmt: skip
            for a, j in result.tuples()
        ]


async def test_listing_costs_the_same_statements_for_any_page_size(db: Db) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    attempts = await _seed_page(db, tenant, 60)
    client = await _client(db, tenant)
    async with client:
        await client.get("/v1/attempts?limit=1")  # the connection's own first statements are not the page's
        page5, five = await _counted_get(db, client, "/v1/attempts?limit=5")
        page50, fifty = await _counted_get(db, client, "/v1/attempts?limit=50")
        page500, all_of_them = await _counted_get(db, client, "/v1/attempts?limit=500")
        one, single = await _counted_get(db, client, f"/v1/attempts/{attempts[0].attempt_id}")
        filtered, by_problem = await _counted_get(
            db, client, f"/v1/attempts?limit=50&problem_id={page5['items'][0]['problem_id']}"
        )
    assert (len(page5["items"]), len(page50["items"]), len(page500["items"])) == (5, 50, 60)
    assert len(filtered["items"]) == 20
    assert all(item["judgments"] for item in page500["items"])
    counts = (len(five), len(fifty), len(all_of_them), len(single), len(by_problem))
    print(f"\n{db.engine.dialect.name}: statements for a page of 5, 50, 60, one attempt, by problem: {counts}")
    # The key, the page, its problems, executions, judgments, the panel populations (one query) and the served
    # calibrations (one per tenant on the page: gateway/calibrated.py).
    assert len(five) == len(fifty) == len(all_of_them) == 7, "\n".join(fifty)
    assert len(by_problem) == len(five) + 1  # the problem_id filter looks the problem up first
    # The single read, which clients poll, reads the attempt with its problem's id and its execution in one
    # statement: the key, that one, the judgments, the panel populations and the served calibrations.
    assert len(single) == len(five) - 2, "\n".join(single)
    # The batch path and the single read agree item by item.
    assert one == page500["items"][0]
    by_id = {item["attempt_id"]: item for item in page500["items"]}
    assert [by_id[item["attempt_id"]] for item in page50["items"]] == page50["items"]


async def test_api_panel_is_the_metrics_librarys_on_the_same_population(db: Db) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    attempts = await _seed_page(db, tenant, 40)
    client = await _client(db, tenant)
    async with client:
        items = (await client.get("/v1/attempts?limit=500")).json()["items"]
    expected = panel_from_rows(await _tidy_rows(db, tenant))
    assert len(items) == len(attempts) and any(item["parent_attempt_id"] for item in items)
    for item in items:
        panel = item["panel"]
        if item["parent_attempt_id"]:  # a mutant is outside the population: no panel of its own
            assert panel is None and item["attempt_id"] not in expected
            continue
        want = expected[item["attempt_id"]]
        assert set(panel["by_condition"]) == set(want) == set(CONDITIONS)
        for condition, value in want.items():
            got = panel["by_condition"][condition]
            assert got["consensus"] == pytest.approx(value.consensus, abs=1e-12)
            assert got["judges"] == value.judges
        assert (panel["condition"], panel["consensus"]) == ("blind", panel["by_condition"]["blind"]["consensus"])


async def test_panel_worked_example_with_ties_and_a_mutant(db: Db) -> None:
    """Hand-computed: mutants, repeats, failures and other tenants' judgments change nothing.

    blind, judge A: a1 .1, a2 .5, a3 .5, a4 .9 -> average ranks 1, 2.5, 2.5, 4 -> / 4: .25 .625 .625 1
    (counting the mutant's .0 would make them .4 .7 .7 1). Judge B: .2 .1 .8 .7 -> .5 .25 1 .75.
    Panel: .375 .4375 .8125 .875, two judges each.
    nonblind, judge C (offline: p_ac and score = round(5 p_ac)): a1 .31 (2), a2 .35 (2) -> ranked on p_ac: .5 1
    (on score they would tie at .75); judge D (0-5 rubric, no p_ac): a1 1, a2 4 -> .5 1; a3's C row failed.
    Panel: a1 .5, a2 1.
    """
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    base = datetime(2026, 2, 1, tzinfo=UTC)
    async with db.sessions() as session:
        problem, other = _problem(tenant), _problem(f"{tenant}-other")
        session.add_all([problem, other])
        await session.flush()
        a1, a2, a3, a4 = (_attempt(tenant, problem, base + timedelta(seconds=i)) for i in range(4))
        mutant = _attempt(tenant, problem, base + timedelta(seconds=5), parent_attempt_id=a1.attempt_id)
        stranger = _attempt(f"{tenant}-other", other, base)
        session.add_all([a1, a2, a3, a4, mutant, stranger])
        await session.flush()
        session.add_all(
            [
                *(_judgment(a, "A", "blind", p_ac=p) for a, p in ((a1, 0.1), (a2, 0.5), (a3, 0.5), (a4, 0.9))),
                *(_judgment(a, "B", "blind", p_ac=p) for a, p in ((a1, 0.2), (a2, 0.1), (a3, 0.8), (a4, 0.7))),
                _judgment(mutant, "A", "blind", p_ac=0.0),
                _judgment(mutant, "B", "blind", p_ac=0.0),
                _judgment(a4, "B", "blind", repeat=1, p_ac=0.05),
                _judgment(stranger, "A", "blind", p_ac=0.3),
                _judgment(a1, "C", "nonblind", p_ac=0.31, score=2.0),
                _judgment(a2, "C", "nonblind", p_ac=0.35, score=2.0),
                _judgment(a3, "C", "nonblind", status="failed", error="timeout"),
                _judgment(a1, "D", "nonblind", score=1.0),
                _judgment(a2, "D", "nonblind", score=4.0),
            ]
        )
        await session.commit()
    client = await _client(db, tenant)
    async with client:
        views = {a.attempt_id: (await client.get(f"/v1/attempts/{a.attempt_id}")).json() for a in (a1, a2, a3, a4)}
        listed = (await client.get("/v1/attempts")).json()["items"]
    blind = {a1.attempt_id: 0.375, a2.attempt_id: 0.4375, a3.attempt_id: 0.8125, a4.attempt_id: 0.875}
    nonblind = {a1.attempt_id: 0.5, a2.attempt_id: 1.0}
    for attempt_id, view in views.items():
        panel = view["panel"]
        assert panel["condition"] == "blind"
        assert panel["consensus"] == pytest.approx(blind[attempt_id]) and panel["judges"] == 2
        assert panel["definition"] == "unweighted mean percentile rank, paper 001 VI-A10"
        assert panel["used_judges"] == ["A", "B"] and panel["population"] == {"A": 4, "B": 4}
        assert panel["missing_judges"] == []
        if attempt_id in nonblind:
            assert panel["by_condition"]["nonblind"] == {
                "consensus": pytest.approx(nonblind[attempt_id]),
                "judges": 2,
                "definition": "unweighted mean percentile rank, paper 001 VI-A10",
                "used_judges": ["C", "D"],
                "population": {"C": 2, "D": 2},
                "missing_judges": [],
            }
            assert panel["unscored_conditions"] == {}
        else:
            assert set(panel["by_condition"]) == {"blind"}
    # a3's only nonblind judgment failed: the panel says so instead of dropping the condition silently.
    assert views[a3.attempt_id]["panel"]["unscored_conditions"] == {"nonblind": [{"judge": "C", "reason": "failed"}]}
    assert [item["panel"] for item in listed[:4]] == [views[a.attempt_id]["panel"] for a in (a1, a2, a3, a4)]
    assert listed[4]["attempt_id"] == mutant.attempt_id and listed[4]["panel"] is None
    # The metrics library gives the same numbers from the same rows.
    expected = panel_from_rows(await _tidy_rows(db, tenant))
    assert {a: v["blind"].consensus for a, v in expected.items()} == pytest.approx(blind)
    assert {a: v["nonblind"].consensus for a, v in expected.items() if "nonblind" in v} == pytest.approx(nonblind)
