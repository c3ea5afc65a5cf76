"""Red team s7: a long poll whose client went away kept waiting (and reading the database every second) until its
attempt ended or wait_s passed: a client could park many server-side waiters while holding no connection. Now a
waiting request ends with its client, and a tenant's waits beyond MAX_WAITS_PER_TENANT answer at once."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import httpx

from services.launcher.stack import EmbeddedStack
from tests.gateway.test_long_poll import _gets_of_attempts
from tests.helpers import add_sum_problem, submit

ABANDONED = 100


def test_an_abandoned_wait_ends_with_its_client(
    tenant_client: httpx.Client, admin: httpx.Client, stack: EmbeddedStack
) -> None:
    problem_id = add_sum_problem(tenant_client, limits={"cpu_time_s": 5, "wall_time_s": 10})
    accepted = submit(tenant_client, problem_id, "python", "import time\ntime.sleep(8)\n")
    attempt_id = accepted["attempt_id"]
    url = urlsplit(stack.url)
    request = (
        f"GET /v1/attempts/{attempt_id}?wait_s=60 HTTP/1.1\r\nHost: {url.hostname}\r\n"
        f"Authorization: {tenant_client.headers['authorization']}\r\n\r\n"
    ).encode()
    before = _gets_of_attempts(admin)
    sockets = []
    for _ in range(ABANDONED):
        client = socket.create_connection((url.hostname, url.port))
        client.sendall(request)
        sockets.append(client)
    time.sleep(0.5)  # every request has reached its wait
    for client in sockets:
        client.close()  # the clients go away
    # Each abandoned request ends with its client, well before its 60 s (it does not keep waiting for the attempt
    # to end); the bound is generous for a machine shared with other suites.
    deadline = time.monotonic() + 20
    while (answered := _gets_of_attempts(admin) - before) < ABANDONED:
        assert time.monotonic() < deadline, f"{ABANDONED - answered:.0f} abandoned waits are still running"
        time.sleep(0.2)
