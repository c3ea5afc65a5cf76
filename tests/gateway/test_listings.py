"""The listings (`GET /v1/problems`, `/v1/jobs`, `/v1/reports`, and `/v1/attempts` on the same paging), in-process
on real SQLite: oldest first, cursor pages without duplicates or gaps, filters, a tenant's rows only, hidden tests
only for authors, reports without their results, and a page's SQL statements that do not grow with its size."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, event
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.db import make_engine
from services.kernel.models import Attempt, Base, Job, Problem, Report, ReportPlot, new_id
from tests.gateway.conftest import InProcessGateway

LISTINGS = ("/v1/problems", "/v1/jobs", "/v1/reports", "/v1/attempts")


def _client(gateway: InProcessGateway, tenant: str, scopes: list[str]) -> httpx.Client:
    """A client with a new key of `tenant` holding `scopes` (the admin key makes it)."""
    admin_key = gateway.admin_key_path.read_text().strip()
    with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as admin:
        response = admin.post("/v1/keys", json={"tenant": tenant, "scopes": scopes})
        assert response.status_code == 201, response.text
    return httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {response.json()['key']}"}, timeout=60)


@pytest.fixture()
def tenants(gateway: InProcessGateway) -> Iterator[tuple[str, httpx.Client, httpx.Client, httpx.Client]]:
    """A fresh tenant's name, a submit+read client of it, a read+author client of it, and another tenant's client."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    with (
        _client(gateway, tenant, ["submit", "read"]) as reader,
        _client(gateway, tenant, ["read", "author"]) as author,
        _client(gateway, f"{tenant}-other", ["submit", "read"]) as stranger,
    ):
        yield tenant, reader, author, stranger


def _insert(database_url: str, rows: Sequence[Base]) -> None:
    """Store `rows` straight in the gateway's database, in the order given (parents first)."""

    async def run() -> None:
        engine = make_engine(database_url, role="tests")
        try:
            async with AsyncSession(engine, expire_on_commit=False) as session:
                for row in rows:
                    session.add(row)
                    await session.flush()
                await session.commit()
        finally:
            await engine.dispose()

    asyncio.run(run())


def _walk(client: httpx.Client, path: str, limit: int, **params: Any) -> list[list[dict[str, Any]]]:
    """Every page of a listing, following its cursors to the end."""
    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        response = client.get(path, params={**params, "limit": limit, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"items", "next_cursor"}
        pages.append(body["items"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(body["items"]) == limit, "only the last page is short"
        assert len(pages) < 100, "the cursor does not advance"


def _items(pages: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [item for page in pages for item in page]


def _error_locs(response: httpx.Response) -> list[list[str | int]]:
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    return [error["loc"] for error in response.json().get("errors", [])]


def _problem_body(i: int, hidden: int) -> dict[str, Any]:
    tests = [{"input": f"{i}\n", "expected": f"{i}\n", "public": True}]
    tests += [{"input": f"{i} {h}\n", "expected": f"secret-{i}-{h}\n"} for h in range(hidden)]
    return {"problem_id": f"p/{i}-{uuid.uuid4().hex[:6]}", "statement": f"echo {i}", "tests": tests}


def _job(tenant: str, kind: str, status: str, at: datetime) -> Job:
    return Job(job_id=new_id("job"), tenant=tenant, kind=kind, status=status, progress_total=1, created_at=at)


def test_problems_page_oldest_first_as_the_single_read_answers(
    tenants: tuple[str, httpx.Client, httpx.Client, httpx.Client],
) -> None:
    _, reader, author, stranger = tenants
    created = []
    for i in range(7):
        response = reader.post("/v1/problems", json=_problem_body(i, hidden=i % 3))
        assert response.status_code == 201, response.text
        created.append(response.json()["problem_id"])
    for i in range(2):
        assert stranger.post("/v1/problems", json=_problem_body(100 + i, hidden=1)).status_code == 201

    pages = _walk(reader, "/v1/problems", 3)
    assert [len(page) for page in pages] == [3, 3, 1]
    listed = _items(pages)
    assert [item["problem_id"] for item in listed] == created  # oldest first, no duplicate, no gap
    for item in listed:
        # Without `author`: exactly what the single read shows this key, so the public tests only.
        assert item == reader.get(f"/v1/problems/{item['problem_id']}").json()
        assert all(test["public"] for test in item["tests"]) and len(item["tests"]) == 1
        assert "secret" not in str(item)
    assert [item["hidden_tests"] for item in listed] == [i % 3 for i in range(7)]

    by_author = _items(_walk(author, "/v1/problems", 2))
    assert [item["problem_id"] for item in by_author] == created
    for item in by_author:
        assert item == author.get(f"/v1/problems/{item['problem_id']}").json()
        assert len(item["tests"]) == 1 + item["hidden_tests"]

    # One page exactly: no cursor to a page that would be empty.
    whole = reader.get("/v1/problems", params={"limit": 7}).json()
    assert len(whole["items"]) == 7 and whole["next_cursor"] is None
    # The other tenant sees its own two only.
    theirs = _items(_walk(stranger, "/v1/problems", 50))
    assert len(theirs) == 2 and not {item["problem_id"] for item in theirs} & set(created)


def test_jobs_page_with_kind_and_status_filters(
    gateway: InProcessGateway, tenants: tuple[str, httpx.Client, httpx.Client, httpx.Client]
) -> None:
    tenant, reader, _, stranger = tenants
    base = datetime.now(UTC).replace(microsecond=0)
    kinds, statuses = ("judge", "report", "perturb"), ("queued", "running", "succeeded", "failed")
    # Pairs of jobs created at the same instant: the id breaks the tie, so pages split ties without losing one.
    ours = [_job(tenant, kinds[i % 3], statuses[i % 4], base + timedelta(seconds=i // 2)) for i in range(10)]
    theirs = [_job(f"{tenant}-other", "judge", "queued", base + timedelta(seconds=i)) for i in range(3)]
    _insert(gateway.database_url, [*ours, *theirs])
    order = [job.job_id for job in sorted(ours, key=lambda job: (job.created_at, job.job_id))]

    pages = _walk(reader, "/v1/jobs", 3)
    assert [len(page) for page in pages] == [3, 3, 3, 1]
    listed = _items(pages)
    assert [item["job_id"] for item in listed] == order
    for item in listed:
        assert item == reader.get(f"/v1/jobs/{item['job_id']}").json()

    def ids(**filters: str) -> list[str]:
        return [item["job_id"] for item in _items(_walk(reader, "/v1/jobs", 1, **filters))]

    def expected(kind: str | None = None, status: str | None = None) -> list[str]:
        wanted = {j.job_id for j in ours if kind in (None, j.kind) and status in (None, j.status)}
        return [job_id for job_id in order if job_id in wanted]

    assert ids(kind="judge") == expected(kind="judge") and len(expected(kind="judge")) == 4
    assert ids(status="queued") == expected(status="queued") and len(expected(status="queued")) == 3
    assert ids(kind="report", status="running") == expected("report", "running") != []
    assert ids(kind="similarity") == []
    # The other tenant's jobs are its own alone.
    assert [item["job_id"] for item in _items(_walk(stranger, "/v1/jobs", 2))] == [job.job_id for job in theirs]


def test_reports_page_without_their_results(
    gateway: InProcessGateway, tenants: tuple[str, httpx.Client, httpx.Client, httpx.Client]
) -> None:
    tenant, reader, _, stranger = tenants
    posted = []
    for _ in range(2):  # queued: no worker builds them
        response = reader.post("/v1/reports", json={"kind": "similarity", "filter": {"job_id": "job_none"}})
        assert response.status_code == 202, response.text
        posted.append(response.json()["report_id"])
    later = datetime.now(UTC) + timedelta(seconds=1)
    built_job = _job(tenant, "report", "succeeded", later)
    built = Report(
        report_id=new_id("rep"),
        tenant=tenant,
        kind="agreement",
        params={"kind": "agreement"},
        job_id=built_job.job_id,
        result={"big": "x" * 100_000},
        html="<html>page</html>",
        created_at=later,
        finished_at=later + timedelta(seconds=1),
    )
    plots = [ReportPlot(report_id=built.report_id, name=name, png=b"\x89PNG") for name in ("reliability", "auc")]
    # A report whose job row is gone reads as failed, as the single read says.
    orphan = Report(
        report_id=new_id("rep"),
        tenant=tenant,
        kind="agreement",
        params={},
        job_id="job_gone",
        created_at=later + timedelta(seconds=2),
    )
    other = Report(
        report_id=new_id("rep"), tenant=f"{tenant}-other", kind="agreement", params={}, job_id="job_x", created_at=later
    )
    _insert(gateway.database_url, [built_job, built, *plots, orphan, other])

    listed = _items(_walk(reader, "/v1/reports", 2))
    assert [item["report_id"] for item in listed] == [*posted, built.report_id, orphan.report_id]
    for item in listed:
        single = reader.get(f"/v1/reports/{item['report_id']}").json()
        assert "result" in single and "result" not in item
        assert item == {key: value for key, value in single.items() if key != "result"}
    built_item, orphan_item = listed[2], listed[3]
    assert built_item["status"] == "succeeded" and built_item["html"] == f"/v1/reports/{built.report_id}/html"
    assert built_item["plots"] == {
        "auc": f"/v1/reports/{built.report_id}/plots/auc.png",
        "reliability": f"/v1/reports/{built.report_id}/plots/reliability.png",
    }
    assert reader.get(built_item["plots"]["auc"]).content == b"\x89PNG"
    assert orphan_item["status"] == "failed" and orphan_item["plots"] == {} and orphan_item["html"] is None
    assert [item["status"] for item in listed[:2]] == ["queued", "queued"]

    def ids(kind: str) -> list[str]:
        return [item["report_id"] for item in _items(_walk(reader, "/v1/reports", 1, kind=kind))]

    assert ids("similarity") == posted
    assert ids("agreement") == [built.report_id, orphan.report_id]
    assert ids("cocreation") == []
    assert [item["report_id"] for item in _items(_walk(stranger, "/v1/reports", 5))] == [other.report_id]


def test_attempts_page_on_the_shared_paging(
    gateway: InProcessGateway, tenants: tuple[str, httpx.Client, httpx.Client, httpx.Client]
) -> None:
    tenant, reader, _, stranger = tenants
    problem = Problem(
        tenant=tenant, problem_id=new_id("p"), statement="s", tests=[], checker={}, limits={}, content_hash="h"
    )
    _insert(gateway.database_url, [problem])
    base = datetime.now(UTC).replace(microsecond=0)
    attempts = [
        Attempt(
            attempt_id=new_id("att"),
            tenant=tenant,
            problem_pk=problem.id,
            language="python",
            source_code="print(1)",
            source_hash="h",
            content_hash="h",
            status="done" if i % 2 else "queued",
            created_at=base + timedelta(seconds=i // 3),
        )
        for i in range(8)
    ]
    _insert(gateway.database_url, attempts)
    order = [a.attempt_id for a in sorted(attempts, key=lambda a: (a.created_at, a.attempt_id))]
    assert [item["attempt_id"] for item in _items(_walk(reader, "/v1/attempts", 3))] == order
    done = [item["attempt_id"] for item in _items(_walk(reader, "/v1/attempts", 2, status="done"))]
    assert done == [a for a in order if a in {x.attempt_id for x in attempts if x.status == "done"}]
    assert _items(_walk(stranger, "/v1/attempts", 50)) == []


@pytest.mark.parametrize("path", LISTINGS)
@pytest.mark.parametrize("cursor", ["!!!", "bm90IGpzb24", "WyJub3QgYSBkYXRlIiwgImEiXQ", "WzEsIDIsIDNd"])
def test_a_cursor_this_api_did_not_give_is_400(gateway_tenant: httpx.Client, path: str, cursor: str) -> None:
    response = gateway_tenant.get(path, params={"cursor": cursor})
    assert response.status_code == 400, response.text
    assert _error_locs(response) == [["query", "cursor"]]


def test_a_forged_cursor_out_of_the_datetime_range_is_400(gateway_tenant: httpx.Client) -> None:
    # ["0001-01-01T00:00:00+01:00", "a"]: a valid ISO datetime whose UTC instant does not exist.
    cursor = "WyIwMDAxLTAxLTAxVDAwOjAwOjAwKzAxOjAwIiwgImEiXQ"
    for path in LISTINGS:
        response = gateway_tenant.get(path, params={"cursor": cursor})
        assert response.status_code == 400, (path, response.text)


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/v1/jobs", {"kind": "nope"}, "kind"),
        ("/v1/jobs", {"status": "done"}, "status"),  # an attempt's status, not a job's
        ("/v1/reports", {"kind": "judge"}, "kind"),  # a job's kind, not a report's
        ("/v1/problems", {"limit": 0}, "limit"),
        ("/v1/jobs", {"limit": 501}, "limit"),
        ("/v1/reports", {"limit": "many"}, "limit"),
    ],
)
def test_a_bad_filter_or_limit_is_422_naming_it(
    gateway_tenant: httpx.Client, path: str, params: dict[str, Any], field: str
) -> None:
    response = gateway_tenant.get(path, params=params)
    assert response.status_code == 422, response.text
    assert _error_locs(response) == [["query", field]]


def test_listings_need_a_read_key(gateway: InProcessGateway) -> None:
    with _client(gateway, f"t-{uuid.uuid4().hex[:10]}", ["submit"]) as submitter:
        for path in LISTINGS[:3]:
            assert submitter.get(path).status_code == 403
    for path in LISTINGS[:3]:
        assert httpx.get(f"{gateway.url}{path}").status_code == 401


class _Statements:
    """The SQL statements every engine of this process runs while `counting` (the gateway's runs in its thread)."""

    def __init__(self) -> None:
        self.counting = False
        self.seen: list[str] = []

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if self.counting:
            self.seen.append(statement)

    def of(self, client: httpx.Client, path: str) -> tuple[dict[str, Any], list[str]]:
        self.seen = []
        self.counting = True
        try:
            response = client.get(path)
        finally:
            self.counting = False
        assert response.status_code == 200, response.text
        return response.json(), list(self.seen)


def test_a_page_costs_the_same_statements_for_any_size(
    gateway: InProcessGateway, tenants: tuple[str, httpx.Client, httpx.Client, httpx.Client]
) -> None:
    tenant, reader, _, _ = tenants
    base = datetime.now(UTC)
    rows: list[Base] = []
    for i in range(60):
        at = base + timedelta(milliseconds=i)
        job = _job(tenant, "report", "succeeded", at)
        report = Report(
            report_id=new_id("rep"), tenant=tenant, kind="agreement", params={}, job_id=job.job_id, created_at=at
        )
        rows += [
            Problem(tenant=tenant, problem_id=f"p{i:02}", statement="s", tests=[{"input": "1", "public": False}],
                    checker={}, limits={}, content_hash="h", created_at=at),
            job,
            report,
            ReportPlot(report_id=report.report_id, name="a", png=b"a"),
            ReportPlot(report_id=report.report_id, name="b", png=b"b"),
        ]  # fmt: skip
    _insert(gateway.database_url, rows)
    statements = _Statements()
    event.listen(Engine, "before_cursor_execute", statements)
    try:
        counts = {}
        for path in LISTINGS[:3]:
            reader.get(path, params={"limit": 1})  # a connection's own first statements are not the page's
            sizes = []
            for limit in (5, 50, 500):
                page, seen = statements.of(reader, f"{path}?limit={limit}")
                assert len(page["items"]) == min(limit, 60)
                sizes.append(len(seen))
            assert len(set(sizes)) == 1, (path, sizes, seen)
            counts[path] = sizes[0]
    finally:
        event.remove(Engine, "before_cursor_execute", statements)
    print(f"\nstatements a page: {counts}")
    # The key and the page; the reports' plots' names in one more.
    assert counts["/v1/problems"] == counts["/v1/jobs"] == counts["/v1/reports"] - 1
    assert all(item["plots"] for item in reader.get("/v1/reports", params={"limit": 500}).json()["items"])
