"""A crash or a lost queue loses nothing and duplicates nothing: the database is the truth."""

from __future__ import annotations

import signal
import time

import httpx
import redis

from services.launcher.stack import EmbeddedStack
from tests.helpers import add_sum_problem, count_rows, submit, wait_attempt

SLOW_SUM = "import time\ntime.sleep(2.5)\na, b = map(int, input().split())\nprint(a + b)\n"


def _executions(stack: EmbeddedStack, attempt_id: str) -> int:
    return count_rows(stack.database_url, "SELECT COUNT(*) FROM execution WHERE attempt_id = :a", a=attempt_id)


def _wait_status(client: httpx.Client, attempt_id: str, status: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while client.get(f"/v1/attempts/{attempt_id}").json()["status"] != status:
        assert time.monotonic() < deadline, f"attempt never reached {status}"
        time.sleep(0.02)


def test_worker_killed_mid_job_is_retried_and_finishes_once(stack: EmbeddedStack, tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(
        tenant_client, tests=[{"input": "1 2\n", "expected": "3\n"}], limits={"wall_time_s": 10}
    )
    accepted = submit(tenant_client, problem_id, "python", SLOW_SUM)
    _wait_status(tenant_client, accepted["attempt_id"], "running")
    stack.stop_process("executor-0", sig=signal.SIGKILL)
    stack.start_worker("executor-0")
    view = wait_attempt(tenant_client, accepted["attempt_id"], timeout_s=120)
    assert view["verdict"] == "AC"
    job = tenant_client.get(f"/v1/jobs/{accepted['job_id']}").json()
    assert job["status"] == "succeeded"
    assert job["progress"] == {"done": 1, "total": 1}
    assert _executions(stack, accepted["attempt_id"]) == 1


def test_work_redis_lost_is_reconciled_from_the_database(stack: EmbeddedStack, tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    stack.stop_process("executor-0")
    accepted = submit(tenant_client, problem_id, "python", "a, b = map(int, input().split())\nprint(a + b)\n")
    assert stack.redis_url
    client = redis.Redis.from_url(stack.redis_url)
    client.flushdb()  # Redis restarted without persistence: the queue is gone, the database is not.
    client.close()
    stack.start_worker("executor-0")
    view = wait_attempt(tenant_client, accepted["attempt_id"], timeout_s=60)
    assert view["verdict"] == "AC"
    assert _executions(stack, accepted["attempt_id"]) == 1
    job = tenant_client.get(f"/v1/jobs/{accepted['job_id']}").json()
    assert job["progress"] == {"done": 1, "total": 1} and job["status"] == "succeeded"
