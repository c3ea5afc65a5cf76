"""Quotas per key and tenant: request buckets, caps on live work, LLM judge tokens per day, and their API."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from services.kernel.ratelimit import take_request
from services.launcher.stack import EmbeddedStack
from tests.helpers import add_sum_problem, change_rows, fetch_rows, wait_attempt, wait_job

# Programs that hold a worker slot for a while without using the CPU, ended by their wall-time limit.
SLEEPER = "import time\ntime.sleep(30)\n"
SLEEPER_LIMITS = {"cpu_time_s": 1, "wall_time_s": 1.5}


def _new_key(admin: httpx.Client, tenant: str | None = None, **quotas: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"tenant": tenant or f"q-{uuid.uuid4().hex[:10]}", "scopes": ["submit", "read"]}
    if quotas:
        body["quotas"] = quotas
    response = admin.post("/v1/keys", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


@pytest.fixture()
def keyed(stack: EmbeddedStack) -> Iterator[Any]:
    clients: list[httpx.Client] = []

    def open_client(key: str) -> httpx.Client:
        client = httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        client.close()


def _assert_quota_problem(response: httpx.Response, limit: str, value: int) -> dict[str, Any]:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    retry_after = int(response.headers["retry-after"])
    assert retry_after >= 1
    problem = response.json()
    assert problem["status"] == 429 and problem["title"] == "Too Many Requests"
    assert problem["limit"] == limit and problem["quota"] == value
    assert f"quota {limit} ({value})" in problem["detail"]
    return dict(problem)


def test_requests_over_the_rate_are_429_and_other_tenants_are_unaffected(
    admin: httpx.Client, tenant_client: httpx.Client, keyed: Any
) -> None:
    limited = _new_key(admin, requests_per_minute=5)
    client = keyed(limited["key"])
    for _ in range(5):
        assert client.get("/v1/languages").status_code == 200
    refused = client.get("/v1/languages")
    problem = _assert_quota_problem(refused, "requests_per_minute", 5)
    # One token comes back every 12 s at 5 per minute.
    assert 1 <= int(refused.headers["retry-after"]) <= 12
    assert problem["scope"] == "key"
    # A second key of the same tenant has a full bucket of its own, but the tenant's is empty.
    sibling = keyed(_new_key(admin, tenant=limited["tenant"], requests_per_minute=5)["key"])
    assert _assert_quota_problem(sibling.get("/v1/languages"), "requests_per_minute", 5)["scope"] == "tenant"
    # Other tenants, and the admin, are not slowed down by it.
    assert tenant_client.get("/v1/languages").status_code == 200
    assert admin.get("/v1/keys").status_code == 200
    metrics = admin.get("/metrics").text
    assert 'tribunal_quota_rejections_total{limit="requests_per_minute"}' in metrics


def test_the_request_buckets_refill_and_count_a_refusal_in_neither(redis_url: str) -> None:
    import asyncio

    async def run() -> None:
        redis = Redis.from_url(f"{redis_url.rsplit('/', 1)[0]}/7")
        try:
            key, tenant = uuid.uuid4().hex, uuid.uuid4().hex
            # 60 per minute: a bucket of 60, and a token back every second.
            for _ in range(60):
                assert await take_request(redis, key_id=key, tenant=tenant, per_minute=60) is None
            refusal = await take_request(redis, key_id=key, tenant=tenant, per_minute=60)
            assert refusal is not None and refusal.bucket == "key" and refusal.retry_after_s == 1
            await asyncio.sleep(1.1)
            assert await take_request(redis, key_id=key, tenant=tenant, per_minute=60) is None
            # Another key of the tenant: refused by the tenant's bucket, which takes nothing from its own.
            other_key = uuid.uuid4().hex
            refusal = await take_request(redis, key_id=other_key, tenant=tenant, per_minute=60)
            assert refusal is not None and refusal.bucket == "tenant"
            assert await redis.exists(f"tribunal:quota:rpm:key:{other_key}") == 0
            assert 0 < await redis.pttl(f"tribunal:quota:rpm:tenant:{tenant}") <= 61_000
        finally:
            await redis.aclose()

    asyncio.run(run())


def test_queued_attempts_cap_counts_the_tenants_live_attempts(admin: httpx.Client, keyed: Any) -> None:
    client = keyed(_new_key(admin, queued_attempts=2)["key"])
    problem_id = add_sum_problem(client, limits=SLEEPER_LIMITS)

    def attempts(n: int, tag: str) -> list[dict[str, Any]]:
        return [
            {"problem_id": problem_id, "language": "python", "source_code": SLEEPER + f"# {tag} {i}\n"}
            for i in range(n)
        ]

    # A batch whose new attempts alone pass the cap is refused whole: nothing is stored.
    _assert_quota_problem(client.post("/v1/attempts:batch", json={"attempts": attempts(3, "a")}), "queued_attempts", 2)
    assert client.get("/v1/attempts").json()["items"] == []
    accepted = client.post("/v1/attempts:batch", json={"attempts": attempts(2, "b")})
    assert accepted.status_code == 202, accepted.text
    single = {"problem_id": problem_id, "language": "python", "source_code": SLEEPER + "# c\n"}
    refused = client.post("/v1/attempts", json=single)
    assert _assert_quota_problem(refused, "queued_attempts", 2)["scope"] == "tenant"
    assert refused.headers["retry-after"] == "1"
    # Once the tenant's attempts have ended, it may submit again.
    assert client.delete(f"/v1/jobs/{accepted.json()['job_id']}").status_code == 200
    wait_job(client, accepted.json()["job_id"])
    for attempt_id in accepted.json()["attempt_ids"]:
        wait_attempt(client, attempt_id, timeout_s=30)
    again = client.post("/v1/attempts", json=single)
    assert again.status_code == 202, again.text
    client.delete(f"/v1/jobs/{again.json()['job_id']}")


def test_running_executions_cap(admin: httpx.Client, keyed: Any) -> None:
    client = keyed(_new_key(admin, running_executions=1)["key"])
    body = {"language": "python", "source_code": SLEEPER, "stdin": "", "limits": SLEEPER_LIMITS}
    first = client.post("/v1/executions", json=body)
    assert first.status_code == 202, first.text
    _assert_quota_problem(client.post("/v1/executions", json=body), "running_executions", 1)
    wait_job(client, first.json()["job_id"], timeout_s=30)
    assert client.post("/v1/executions", json={**body, "source_code": "print(1)\n", "wait": True}).status_code in (
        200,
        202,
    )


def test_queued_reports_cap(stack: EmbeddedStack, admin: httpx.Client, keyed: Any) -> None:
    created = _new_key(admin, queued_reports=1)
    client = keyed(created["key"])
    # A report job not yet built, held in place (no report row, so no worker or reconciler takes it).
    job_id = f"job_{uuid.uuid4().hex[:20]}"
    change_rows(
        stack.database_url,
        "INSERT INTO job (job_id, tenant, kind, status, progress_done, progress_total, tries, created_at) "
        "VALUES (:job_id, :tenant, 'report', 'running', 0, 1, 0, CURRENT_TIMESTAMP)",
        job_id=job_id,
        tenant=created["tenant"],
    )
    body = {"kind": "judge_quality", "bootstrap": 0, "folds": 2}
    _assert_quota_problem(client.post("/v1/reports", json=body), "queued_reports", 1)
    change_rows(stack.database_url, "UPDATE job SET status = 'cancelled' WHERE job_id = :job_id", job_id=job_id)
    accepted = client.post("/v1/reports", json=body)
    assert accepted.status_code == 202, accepted.text
    wait_job(client, accepted.json()["job_id"], timeout_s=60)


def test_quotas_round_trip_through_the_keys_api(admin: httpx.Client, tenant_client: httpx.Client) -> None:
    created = _new_key(admin, queued_attempts=7, judge_tokens_per_day=1000)
    assert created["quotas"] == {
        "requests_per_minute": None,
        "queued_attempts": 7,
        "running_executions": None,
        "queued_reports": None,
        "judge_tokens_per_day": 1000,
        "queued_pairs": None,
        "judgments_per_request": None,
        "judgments_per_day": None,
    }
    listed = {k["key_id"]: k for k in admin.get("/v1/keys").json()}
    assert listed[created["key_id"]]["quotas"] == created["quotas"]
    changed = admin.put(f"/v1/keys/{created['key_id']}/quotas", json={"requests_per_minute": 30})
    assert changed.status_code == 200, changed.text
    # PUT replaces: what it leaves out goes back to the default.
    assert changed.json()["quotas"] == {
        **created["quotas"],
        "requests_per_minute": 30,
        "queued_attempts": None,
        "judge_tokens_per_day": None,
    }
    listed = {k["key_id"]: k for k in admin.get("/v1/keys").json()}
    assert listed[created["key_id"]]["quotas"]["requests_per_minute"] == 30
    assert admin.put("/v1/keys/key_nope/quotas", json={}).status_code == 404
    assert tenant_client.put(f"/v1/keys/{created['key_id']}/quotas", json={}).status_code == 403
    # A key created without quotas lists every limit as the default.
    plain = _new_key(admin)
    assert set(plain["quotas"].values()) == {None}


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (0, "requests_per_minute"),
        (-3, "queued_attempts"),
        (10**9 + 1, "running_executions"),
        ("5", "queued_reports"),
        (True, "judge_tokens_per_day"),
        (2.5, "queued_attempts"),
        (1, "requests_per_hour"),
    ],
)
def test_bad_quota_values_are_422_naming_the_field(admin: httpx.Client, value: Any, field: str) -> None:
    body = {"tenant": "bad-quotas", "scopes": ["read"], "quotas": {field: value}}
    response = admin.post("/v1/keys", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    # Named by its path; or, from the gateway's check of JSON scalar types (which runs first), in the message.
    assert any(
        e["loc"] == ["body", "quotas", field] or (e["loc"] == ["body", "quotas"] and f"{field}:" in e["msg"])
        for e in response.json()["errors"]
    ), response.text
    key_id = admin.get("/v1/keys").json()[0]["key_id"]
    put = admin.put(f"/v1/keys/{key_id}/quotas", json={field: value})
    assert put.status_code == 422, put.text
    assert ["body", field] in [e["loc"] for e in put.json()["errors"]]
    assert admin.post("/v1/keys", json={**body, "quotas": "lots"}).status_code == 422


def test_llm_judgments_over_the_tenants_daily_tokens_fail_with_reason_budget(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any
) -> None:
    created = _new_key(admin, judge_tokens_per_day=1)
    client = keyed(created["key"])
    problem_id = add_sum_problem(client)
    source = "a, b = map(int, input().split())\nprint(a + b)\n"

    def judged(tag: str) -> dict[str, Any]:
        response = client.post(
            "/v1/attempts",
            json={
                "problem_id": problem_id,
                "language": "python",
                "source_code": source + f"# {tag}\n",
                "judges": ["scripted"],
            },
        )
        assert response.status_code == 202, response.text
        view = wait_attempt(client, response.json()["attempt_id"], timeout_s=60)
        (judgment,) = [j for j in view["judgments"] if j["judge"] == "scripted"]
        return dict(judgment)

    # The day's spend starts at 0 < 1: the first judgment is made, and its tokens are counted...
    assert judged("first")["status"] == "ok"
    # ...which spends the day's budget: the next one is a recorded failure, not a silent skip.
    refused = judged("second")
    assert refused["status"] == "failed"
    assert refused["error"].startswith("budget: quota judge_tokens_per_day (1)")
    rows = fetch_rows(
        stack.database_url,
        "SELECT j.status, j.error FROM judgment j JOIN attempt a ON a.attempt_id = j.attempt_id "
        "WHERE a.tenant = :tenant AND j.status = 'failed'",
        tenant=created["tenant"],
    )
    assert len(rows) == 1 and rows[0]["error"].startswith("budget:")
    # Raising the tenant's limit lets its judgments through again.
    admin.put(f"/v1/keys/{created['key_id']}/quotas", json={"judge_tokens_per_day": 10**9})
    assert judged("third")["status"] == "ok"
