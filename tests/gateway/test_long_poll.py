"""`GET /v1/attempts/{attempt_id}?wait_s=`: a read that waits for its attempt to end (a long poll), against the
real stack (gateway, workers, Redis, SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest

from gateway.waiting import EndedAttempts
from services.launcher.stack import EmbeddedStack
from tests.helpers import add_sum_problem, change_rows, submit


def test_a_waiting_read_answers_once_the_attempt_ended(tenant_client: httpx.Client, admin: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    accepted = submit(tenant_client, problem_id, "python", "a, b = map(int, input().split())\nprint(a + b)\n")
    requests_before = _gets_of_attempts(admin)
    view = tenant_client.get(f"/v1/attempts/{accepted['attempt_id']}", params={"wait_s": 60}, timeout=90).json()
    # One read, and it answered with the attempt ended: the verdict, not a status to poll again.
    assert view["status"] == "done" and view["verdict"] == "AC", view
    assert _gets_of_attempts(admin) - requests_before == 1


def test_a_waiting_read_answers_the_attempt_as_it_is_when_the_wait_is_over(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client, limits={"cpu_time_s": 5, "wall_time_s": 10})
    accepted = submit(tenant_client, problem_id, "python", "import time\ntime.sleep(8)\n")
    view = tenant_client.get(f"/v1/attempts/{accepted['attempt_id']}", params={"wait_s": 0.3}).json()
    assert view["status"] in ("queued", "running"), view
    assert view["attempt_id"] == accepted["attempt_id"] and view["verdict"] is None


def test_an_end_nobody_announces_is_still_seen(tenant_client: httpx.Client, stack: EmbeddedStack) -> None:
    # The attempt is ended behind the workers' back (as a path that announces nothing would): the waiting read
    # finds the end on its own recheck, not at the end of its wait.
    problem_id = add_sum_problem(tenant_client, limits={"cpu_time_s": 5, "wall_time_s": 10})
    accepted = submit(tenant_client, problem_id, "python", "import time\ntime.sleep(8)\n")
    attempt_id = accepted["attempt_id"]
    answers: list[dict[str, Any]] = []

    def read() -> None:
        answers.append(tenant_client.get(f"/v1/attempts/{attempt_id}", params={"wait_s": 50}, timeout=60).json())

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.3)
    changed = change_rows(
        stack.database_url,
        "UPDATE attempt SET status = 'failed', stage = NULL WHERE attempt_id = :attempt_id",
        attempt_id=attempt_id,
    )
    assert changed == 1
    reader.join(40)  # well before the wait's own end (50 s): the recheck found it
    assert answers and answers[0]["status"] == "failed", answers


@pytest.mark.parametrize("wait_s", ["-1", "61", "soon", "nan", "inf"])
def test_a_bad_wait_is_a_4xx_naming_the_field(tenant_client: httpx.Client, wait_s: str) -> None:
    problem_id = add_sum_problem(tenant_client)
    accepted = submit(tenant_client, problem_id, "python", "print(1)\n")
    response = tenant_client.get(f"/v1/attempts/{accepted['attempt_id']}", params={"wait_s": wait_s})
    assert response.status_code == 422, response.text
    assert ["query", "wait_s"] in [error["loc"] for error in response.json()["errors"]]


def test_waiting_on_another_tenants_attempt_is_a_404_at_once(tenant_client: httpx.Client, admin: httpx.Client) -> None:
    problem_id = add_sum_problem(admin)
    accepted = submit(admin, problem_id, "python", "import time\ntime.sleep(5)\n")
    response = tenant_client.get(f"/v1/attempts/{accepted['attempt_id']}", params={"wait_s": 60}, timeout=5)
    assert response.status_code == 404


def _gets_of_attempts(client: httpx.Client) -> float:
    """How many GET /v1/attempts/{attempt_id} the gateway has answered (its Prometheus counter)."""
    text = client.get("/metrics").text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("tribunal_http_requests_total{") and 'route="/v1/attempts/{attempt_id}"' in line:
            if 'method="GET"' in line:
                total += float(line.rsplit(" ", 1)[1])
    return total


# --- the waiting room itself ------------------------------------------------------------------------------------


async def _still_there() -> bool:
    return False


async def _gone() -> bool:
    return True


async def test_waits_past_a_tenants_or_the_processes_quota_answer_at_once() -> None:
    room = EndedAttempts(per_tenant=2, total=3)
    waits = [asyncio.create_task(room.wait("a", f"att_{n}", 30, _still_there)) for n in range(2)]
    waits.append(asyncio.create_task(room.wait("b", "att_b", 30, _still_there)))
    await asyncio.sleep(0.05)
    assert room.waiting() == 3
    assert await room.wait("a", "att_more", 30, _still_there) is False  # tenant a has its two
    assert await room.wait("c", "att_c", 30, _still_there) is False  # the process has its three
    room._wake(["att_0"])  # as an announcement (or the recheck) would
    assert await waits[0] is True
    for wait in waits[1:]:
        wait.cancel()
    await asyncio.gather(*waits[1:], return_exceptions=True)
    assert room.waiting() == 0
    await room.close()


async def test_a_wait_ends_when_its_client_goes_away() -> None:
    room = EndedAttempts()
    assert await asyncio.wait_for(room.wait("a", "att_0", 30, _gone), 5) is False
    assert room.waiting() == 0
    await room.close()
