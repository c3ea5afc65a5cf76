"""Small helpers the HTTP tests share: wait for an attempt or job to finish, make simple problems."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx


def wait_attempt(client: httpx.Client, attempt_id: str, timeout_s: float = 90) -> dict[str, Any]:
    """The attempt once it ended, read with the API's long poll (`wait_s`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        wait_s = max(0.0, min(10.0, deadline - time.monotonic()))
        response = client.get(f"/v1/attempts/{attempt_id}", params={"wait_s": wait_s}, timeout=wait_s + 30)
        view = response.json()
        if view["status"] in ("done", "failed", "cancelled"):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"attempt {attempt_id} still {view['status']} after {timeout_s} s")


def wait_job(client: httpx.Client, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job['status']} after {timeout_s} s")
        time.sleep(0.05)


def add_sum_problem(client: httpx.Client, **overrides: Any) -> str:
    """A stdio problem: read two integers, print their sum. Returns its problem_id."""
    body = {
        "problem_id": f"sum-{uuid.uuid4().hex[:8]}",
        "title": "A + B",
        "statement": "Read two integers and print their sum.",
        "tests": [
            {"input": "1 2\n", "expected": "3\n", "public": True},
            {"input": "10 -4\n", "expected": "6\n"},
            {"input": "2000000000 2000000000\n", "expected": "4000000000\n"},
        ],
        **overrides,
    }
    response = client.post("/v1/problems", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["problem_id"])


def submit(client: httpx.Client, problem_id: str, language: str, source: str, **extra: Any) -> dict[str, Any]:
    response = client.post(
        "/v1/attempts", json={"problem_id": problem_id, "language": language, "source_code": source, **extra}
    )
    assert response.status_code == 202, response.text
    return dict(response.json())


SUM_SOURCES = {
    "python": "a, b = map(int, input().split())\nprint(a + b)\n",
    "c": '#include <stdio.h>\nint main(void){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);return 0;}\n',
    "cpp": "#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}\n",
    "java": (
        "import java.util.*;\npublic class Solution {\n  public static void main(String[] args) {\n"
        "    Scanner s = new Scanner(System.in);\n    long a = s.nextLong(), b = s.nextLong();\n"
        "    System.out.println(a + b);\n  }\n}\n"
    ),
}


def _on_database(database_url: str, statement: str, params: dict[str, Any], *, write: bool = False) -> Any:
    """Run one SQL statement straight against the stack's database (SQLite file or PostgreSQL): its result's rows
    as dicts, or (`write`) how many rows it changed, committed."""
    import asyncio

    from sqlalchemy import text

    from services.kernel.db import make_engine

    async def run() -> Any:
        engine = make_engine(database_url, role="tests")
        try:
            async with engine.begin() if write else engine.connect() as connection:
                result = await connection.execute(text(statement), params)
                return result.rowcount if write else [dict(row._mapping) for row in result.all()]
        finally:
            await engine.dispose()

    return asyncio.run(run())


def count_rows(database_url: str, sql: str, **params: Any) -> int:
    """Run a COUNT query straight against the stack's database (SQLite file or PostgreSQL)."""
    rows = _on_database(database_url, sql, params)
    return int(next(iter(rows[0].values())))


def fetch_rows(database_url: str, sql: str, **params: Any) -> list[dict[str, Any]]:
    """Rows of a query straight against the stack's database, as dicts."""
    return list(_on_database(database_url, sql, params))


def change_rows(database_url: str, sql: str, **params: Any) -> int:
    """Run an UPDATE (or another write) straight against the stack's database, committed; rows changed."""
    return int(_on_database(database_url, sql, params, write=True))
