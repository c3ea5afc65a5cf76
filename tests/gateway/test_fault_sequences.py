"""Faults in sequence during a batch, on a stack of its own (its own Redis, and its own database: a SQLite file, or a
PostgreSQL cluster which this test stops and starts): the executor and judge workers SIGKILLed mid-job, Redis
restarted, the database stopped and started (PostgreSQL) or locked by another writer for a while (SQLite), the
reports worker SIGKILLed mid-report. Every attempt ends exactly once, every judgment is one row per attempt x judge x
condition, and the counts reconcile (issue #12)."""

from __future__ import annotations

import signal
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.kernel.db import sqlite_path
from services.launcher.stack import EmbeddedStack
from tests.conftest import STACK_ENV
from tests.helpers import add_sum_problem, fetch_rows, wait_job
from tests.servers import PostgresCluster

SLOW_SUM = "import time\ntime.sleep({delay})\na, b = map(int, input().split())\nprint(a + b)\n# {n}\n"
pytestmark = pytest.mark.stack  # its own stack (fault_stack), and on PostgreSQL its own cluster

JUDGES = ["sample_tests", "edit_similarity"]
BATCH = 24


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def cluster(request: pytest.FixtureRequest) -> Iterator[PostgresCluster | None]:
    """The PostgreSQL cluster the test stops and starts, or None on SQLite (the stack's own database file)."""
    if request.param == "sqlite":
        yield None
        return
    cluster = PostgresCluster()
    cluster.start()
    yield cluster
    cluster.remove()


@pytest.fixture(scope="module")
def fault_stack(
    tmp_path_factory: pytest.TempPathFactory, cluster: PostgresCluster | None, judges_file: Path
) -> Iterator[EmbeddedStack]:
    # No redis_url: the stack starts a Redis of its own, which the test restarts. No database URL on SQLite: the
    # stack's default file in its data dir.
    stack = EmbeddedStack(
        tmp_path_factory.mktemp("faults-sqlite" if cluster is None else "faults-postgresql"),
        database_url=None if cluster is None else cluster.url,
        judges_file=judges_file,
        extra_env=STACK_ENV,
    )
    stack.start()
    yield stack
    stack.stop()


@pytest.fixture()
def client(fault_stack: EmbeddedStack) -> Iterator[httpx.Client]:
    admin_key = fault_stack.admin_key_path.read_text().strip()
    with httpx.Client(base_url=fault_stack.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as admin:
        tenant = f"t-{uuid.uuid4().hex[:10]}"
        key = admin.post("/v1/keys", json={"tenant": tenant, "scopes": ["submit", "read"]}).json()["key"]
    with httpx.Client(
        base_url=fault_stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as tenant_client:
        yield tenant_client


def _statuses(stack: EmbeddedStack, attempt_ids: list[str]) -> dict[str, str]:
    rows = fetch_rows(stack.database_url, "SELECT attempt_id, status FROM attempt WHERE job_id IS NOT NULL")
    return {row["attempt_id"]: row["status"] for row in rows if row["attempt_id"] in attempt_ids}


def _until(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if condition():  # type: ignore[operator]
                return
        except (httpx.HTTPError, OSError):
            pass  # the gateway may answer 5xx or drop a connection while its database is down
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _lock_sqlite(database_url: str, seconds: float) -> None:
    """Hold SQLite's write lock from another connection for `seconds`: every writer of the stack waits meanwhile."""
    path = sqlite_path(database_url)
    assert path is not None, database_url
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        time.sleep(seconds)
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def test_kills_and_restarts_during_a_batch_end_every_attempt_once(
    fault_stack: EmbeddedStack, cluster: PostgresCluster | None, client: httpx.Client
) -> None:
    problem_id = add_sum_problem(client, tests=[{"input": "1 2\n", "expected": "3\n"}], limits={"wall_time_s": 10})
    body = {
        "attempts": [
            {
                "problem_id": problem_id,
                "language": "python",
                "source_code": SLOW_SUM.format(delay=0.3, n=n),
                "judges": JUDGES,
            }
            for n in range(BATCH)
        ]
    }
    batch = client.post("/v1/attempts:batch", json=body)
    assert batch.status_code == 202, batch.text
    job_id, attempt_ids = batch.json()["job_id"], batch.json()["attempt_ids"]

    def some_done() -> bool:
        return list(_statuses(fault_stack, attempt_ids).values()).count("done") >= 2

    _until(some_done, 120, "no attempt finished before the faults")
    fault_stack.stop_process("executor-0", sig=signal.SIGKILL)
    fault_stack.start_worker("executor-0")
    fault_stack.stop_process("judge-0", sig=signal.SIGKILL)
    fault_stack.start_worker("judge-0")
    assert fault_stack.redis is not None
    fault_stack.redis.stop()  # Redis restarted without persistence: its queues are gone
    time.sleep(1)
    fault_stack.redis.start()
    if cluster is not None:
        cluster.stop("fast")  # the database goes away under every worker and the gateway, then comes back
        time.sleep(2)
        cluster.start()
    else:
        _lock_sqlite(fault_stack.database_url, 2)  # a file cannot go away; another writer holds it instead

    ended = ("succeeded", "failed", "cancelled")
    _until(lambda: client.get(f"/v1/jobs/{job_id}").json()["status"] in ended, 240, "the batch never ended")
    job = client.get(f"/v1/jobs/{job_id}").json()
    statuses = _statuses(fault_stack, attempt_ids)
    # Every attempt ended, exactly once: one execution row each, one judgment per judge (one condition, one repeat).
    assert sorted(statuses) == sorted(attempt_ids)
    assert set(statuses.values()) <= {"done", "failed"}, statuses
    executions = fetch_rows(
        fault_stack.database_url,
        "SELECT attempt_id, COUNT(*) AS n FROM execution WHERE run = 0 GROUP BY attempt_id",
    )
    per_attempt = {row["attempt_id"]: row["n"] for row in executions if row["attempt_id"] in statuses}
    assert all(count == 1 for count in per_attempt.values()), per_attempt
    judgments = fetch_rows(
        fault_stack.database_url,
        "SELECT attempt_id, judge, condition, repeat, COUNT(*) AS n FROM judgment "
        "GROUP BY attempt_id, judge, condition, repeat",
    )
    mine = [row for row in judgments if row["attempt_id"] in statuses]
    assert all(row["n"] == 1 for row in mine), mine
    done = [attempt_id for attempt_id, status in statuses.items() if status == "done"]
    judged = {(row["attempt_id"], row["judge"]) for row in mine}
    assert all((attempt_id, judge) in judged for attempt_id in done for judge in JUDGES)
    assert all(attempt_id in per_attempt for attempt_id in done)
    # The counts reconcile: the job counted every attempt once.
    assert job["progress"] == {"done": BATCH, "total": BATCH}, job
    assert job["status"] == "succeeded", job


def test_the_reports_worker_killed_mid_report_still_ends_the_report(
    fault_stack: EmbeddedStack, client: httpx.Client
) -> None:
    accepted = client.post("/v1/reports", json={"kind": "judge_quality", "bootstrap": 2000, "folds": 3})
    assert accepted.status_code == 202, accepted.text
    fault_stack.stop_process("reports-0", sig=signal.SIGKILL)
    fault_stack.start_worker("reports-0")
    job = wait_job(client, accepted.json()["job_id"], timeout_s=180)
    assert job["status"] in ("succeeded", "failed"), job
    report = client.get(f"/v1/reports/{accepted.json()['report_id']}").json()
    assert report["status"] == job["status"]
