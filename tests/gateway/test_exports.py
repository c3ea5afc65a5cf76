"""`GET /v1/exports/attempts` and `tribunal export` on the in-process gateway (real SQLite and Redis, no workers):
rows inserted straight into its database, read back as JSONL and CSV."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, event
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.routes.exports import COLUMNS, PAGE_ATTEMPTS
from services.kernel.db import make_engine
from services.kernel.models import Attempt, Execution, Job, Judgment, Problem, new_id
from services.launcher.cli import main
from tests.gateway.conftest import InProcessGateway

SECRET = "hidden-SECRET-7f3a"
BASE = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Tenant:
    name: str
    key: str
    client: httpx.Client


@pytest.fixture()
def tenant(gateway: InProcessGateway) -> Iterator[Tenant]:
    """A fresh tenant whose name the test knows (it inserts rows under it), with a read key."""
    name = f"exp-{uuid.uuid4().hex[:10]}"
    admin_key = gateway.admin_key_path.read_text().strip()
    with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as admin:
        key = admin.post("/v1/keys", json={"tenant": name, "scopes": ["read"]}).json()["key"]
    with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
        yield Tenant(name, key, client)


def _insert(database_url: str, rows: list[Any]) -> None:
    async def run() -> None:
        engine = make_engine(database_url, role="tests")
        try:
            async with AsyncSession(engine, expire_on_commit=False) as session:
                for row in rows:  # in order: each problem before the attempts that point at its id
                    session.add(row)
                    if isinstance(row, Problem):
                        await session.flush()
                await session.commit()
        finally:
            await engine.dispose()

    asyncio.run(run())


def _problem(tenant: str, problem_id: str | None = None) -> Problem:
    tests = [
        {"input": "1 2\n", "expected": "3\n", "public": True},
        {"input": SECRET, "expected": SECRET, "public": False},
    ]
    return Problem(
        tenant=tenant,
        problem_id=problem_id or new_id("p"),
        statement="add",
        tests=tests,
        checker={},
        limits={},
        content_hash="h",
    )


def _seed(
    gateway: InProcessGateway, tenant: str, job_id: str, n: int, judges: int = 2, **attempt: Any
) -> tuple[Problem, list[str]]:
    """One problem of `tenant` with `n` attempts of job `job_id` (all created at the same instant, so the keyset's
    tie-break on attempt_id matters), each executed (a hidden test's output quoting SECRET) and judged by
    `judges` judges."""
    problem = _problem(tenant)
    _insert(
        gateway.database_url, [problem, Job(job_id=job_id, tenant=tenant, kind="execute_batch", status="succeeded")]
    )
    rows: list[Any] = []
    ids = []
    for index in range(n):
        attempt_id = new_id("att")
        ids.append(attempt_id)
        rows.append(
            Attempt(
                attempt_id=attempt_id,
                attempt_uid=f"{job_id}-{index}",
                tenant=tenant,
                problem_pk=problem.id,
                language="python",
                source_code=f"print('{SECRET}')",
                source_hash="h",
                content_hash="h",
                participant="p1",
                turn=index,
                status="done",
                verdict="WA",
                passed=1,
                total=2,
                job_id=job_id,
                created_at=BASE,
                **attempt,
            )
        )
        test = {"index": 1, "status": "WA", "public": False, "stdout": SECRET, "stderr": SECRET, "message": SECRET}
        rows.append(Execution(attempt_id=attempt_id, verdict="WA", passed=1, total=2, tests=[test]))
        for judge in range(judges):
            rows.append(
                Judgment(
                    attempt_id=attempt_id,
                    judge=f"j{judge}",
                    condition="blind",
                    status="ok",
                    p_ac=0.25,
                    score=2.0,
                    raw_response=SECRET,
                    fields={"rationale": SECRET},
                    served_model="m",
                    tokens_in=10,
                    tokens_out=5,
                )
            )
    _insert(gateway.database_url, rows)
    return problem, ids


def _jsonl(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def test_jsonl_and_csv_of_a_job(gateway: InProcessGateway, tenant: Tenant) -> None:
    job_id = new_id("job")
    problem, ids = _seed(gateway, tenant.name, job_id, 3)
    response = tenant.client.get("/v1/exports/attempts", params={"job_id": job_id})
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["content-disposition"] == 'attachment; filename="attempts.jsonl"'
    rows = _jsonl(response)
    assert [(row["attempt_id"], row["judge"]) for row in rows] == [(i, j) for i in sorted(ids) for j in ("j0", "j1")]
    assert set(rows[0]) == set(COLUMNS)
    assert rows[0]["problem_id"] == problem.problem_id and rows[0]["passed"] == 1 and rows[0]["total"] == 2
    assert rows[0]["judgment_status"] == "ok" and rows[0]["p_ac"] == 0.25 and rows[0]["tokens_in"] == 10
    assert SECRET not in response.text

    response = tenant.client.get("/v1/exports/attempts", params={"job_id": job_id, "format": "csv"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    assert "attachment" in response.headers["content-disposition"]
    table = list(csv.DictReader(io.StringIO(response.text)))
    assert len(table) == 6 and tuple(table[0]) == COLUMNS
    assert table[0]["attempt_id"] == sorted(ids)[0] and table[0]["score"] == "2.0" and table[0]["error"] == ""
    assert SECRET not in response.text


def test_filters_and_an_attempt_without_judgments(gateway: InProcessGateway, tenant: Tenant) -> None:
    job_a, job_b = new_id("job"), new_id("job")
    problem_a, ids_a = _seed(gateway, tenant.name, job_a, 2, judges=0)
    problem_b, ids_b = _seed(gateway, tenant.name, job_b, 1)
    rows = _jsonl(tenant.client.get("/v1/exports/attempts", params={"problem_id": problem_a.problem_id}))
    assert sorted(row["attempt_id"] for row in rows) == sorted(ids_a)
    assert all(row["judge"] is None and row["judgment_status"] is None for row in rows)
    both = {"problem_id": problem_b.problem_id, "job_id": job_b}
    assert [row["attempt_id"] for row in _jsonl(tenant.client.get("/v1/exports/attempts", params=both))] == ids_b * 2
    crossed = {"problem_id": problem_a.problem_id, "job_id": job_b}
    assert _jsonl(tenant.client.get("/v1/exports/attempts", params=crossed)) == []


def test_other_tenants_rows_are_invisible(gateway: InProcessGateway, tenant: Tenant) -> None:
    other = f"other-{uuid.uuid4().hex[:8]}"
    job_id = new_id("job")
    problem, _ = _seed(gateway, other, job_id, 2)
    for params in ({"job_id": job_id}, {"problem_id": problem.problem_id}):
        response = tenant.client.get("/v1/exports/attempts", params=params)
        assert response.status_code == 404, response.text
        assert response.json()["errors"][0]["loc"] == ["query", next(iter(params))]
    # A problem id both tenants use: only the caller's attempts.
    mine = _problem(tenant.name, problem.problem_id)
    _insert(gateway.database_url, [mine])
    assert _jsonl(tenant.client.get("/v1/exports/attempts", params={"problem_id": problem.problem_id})) == []


def test_bad_queries_name_the_field(tenant: Tenant) -> None:
    response = tenant.client.get("/v1/exports/attempts")
    assert response.status_code == 422 and response.json()["errors"][0]["loc"] == ["query", "job_id"]
    response = tenant.client.get("/v1/exports/attempts", params={"job_id": "job_x", "format": "xlsx"})
    assert response.status_code == 422 and response.json()["errors"][0]["loc"] == ["query", "format"]
    for field in ("job_id", "problem_id"):
        response = tenant.client.get("/v1/exports/attempts", params={field: "nope"})
        assert response.status_code == 404 and response.json()["errors"][0]["loc"] == ["query", field]


def test_csv_cells_that_a_spreadsheet_would_run_are_text(gateway: InProcessGateway, tenant: Tenant) -> None:
    job_id = new_id("job")
    problem, (attempt_id,) = _seed(gateway, tenant.name, job_id, 1, judges=0)
    formulas = ["=HYPERLINK(1)", "+1+1", "-2+3", "@SUM(A1)"]
    judgments = [
        Judgment(attempt_id=attempt_id, judge=f"j{i}", condition="blind", status="error", error=text)
        for i, text in enumerate(formulas)
    ]
    _insert(gateway.database_url, judgments)
    response = tenant.client.get("/v1/exports/attempts", params={"job_id": job_id, "format": "csv"})
    table = list(csv.DictReader(io.StringIO(response.text)))
    assert [row["error"] for row in table] == ["'" + text for text in formulas]
    # JSON Lines carries the text as it is.
    rows = _jsonl(tenant.client.get("/v1/exports/attempts", params={"job_id": job_id}))
    assert [row["error"] for row in rows] == formulas


@pytest.fixture()
def statements() -> Iterator[list[str]]:
    """Every SQL statement any engine of this process (the in-process gateway's too) runs meanwhile."""
    seen: list[str] = []

    def on_execute(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", on_execute)
    yield seen
    event.remove(Engine, "before_cursor_execute", on_execute)


def test_a_large_export_streams_in_pages(gateway: InProcessGateway, tenant: Tenant, statements: list[str]) -> None:
    job_id = new_id("job")
    n = 2 * PAGE_ATTEMPTS + 7  # three pages of attempts, 3,021 judgment rows
    _, ids = _seed(gateway, tenant.name, job_id, n, judges=3)
    statements.clear()
    rows = _jsonl(tenant.client.get("/v1/exports/attempts", params={"job_id": job_id}))
    assert len(rows) == 3 * n
    assert [row["attempt_id"] for row in rows[::3]] == sorted(ids)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT") and "judgment" in s]
    assert len(reads) == 3, reads  # one judgment read a page of attempts, not one per attempt or per row
    assert len(statements) < 20, statements


def test_cli_export_streams_to_a_file(gateway: InProcessGateway, tenant: Tenant, tmp_path: Path) -> None:
    job_id = new_id("job")
    _, ids = _seed(gateway, tenant.name, job_id, 2)
    out = tmp_path / "out.csv"
    args = ["--job-id", job_id, "--format", "csv", "--output", str(out), "--url", gateway.url, "--key", tenant.key]
    assert main(["export", *args]) == 0
    table = list(csv.DictReader(io.StringIO(out.read_text())))
    assert sorted({row["attempt_id"] for row in table}) == sorted(ids) and len(table) == 4
    assert main(["export", "--job-id", "nope", "--url", gateway.url, "--key", tenant.key]) == 1
