"""The tenant's admission lock (gateway/quotas.py `admission`), on a real Redis: held, a submission of the same
tenant waits for it and is then refused with 429 naming the cap; another tenant's is not held up; with Redis
unreachable the submission goes on, counted unlocked (as the request buckets fail open)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from gateway import quotas
from gateway.errors import QuotaExceeded
from gateway.principal import Principal
from services.kernel import queue, ratelimit
from services.kernel.embedded import free_port


def _principal(tenant: str, scopes: frozenset[str] = frozenset({"submit"})) -> Principal:
    return Principal(key_id=f"key-{tenant}", tenant=tenant, scopes=scopes, quotas={"queued_attempts": 3})


@pytest.fixture
async def redis(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)

    async def pool() -> Redis:
        return client

    monkeypatch.setattr(queue, "get_pool", pool)
    monkeypatch.setattr(quotas, "ADMISSION_WAIT_S", 0.3)
    yield client
    await client.aclose()


async def test_a_held_tenant_is_refused_naming_the_cap_and_others_are_not(redis: Redis) -> None:
    async with ratelimit.tenant_lock(redis, "busy", hold_s=10, wait_s=1) as locked:
        assert locked
        with pytest.raises(QuotaExceeded) as refused:
            async with quotas.admission(_principal("busy"), "queued_attempts"):
                pytest.fail("admitted while the tenant's lock was held")
        assert refused.value.status_code == 429 and refused.value.extensions["limit"] == "queued_attempts"
        assert refused.value.headers == {"Retry-After": "1"}
        assert "being counted" in refused.value.detail
        entered = []
        async with quotas.admission(_principal("other"), "queued_attempts"):
            entered.append("other")
        async with quotas.admission(_principal("busy", frozenset({"admin"})), "queued_attempts"):
            entered.append("admin")  # admin keys have no caps and take no lock
        assert entered == ["other", "admin"]
    # Released: the tenant is admitted, and holds the lock while inside.
    async with quotas.admission(_principal("busy"), "queued_attempts"):
        async with ratelimit.tenant_lock(redis, "busy", hold_s=10, wait_s=0.1) as again:
            assert not again
    async with ratelimit.tenant_lock(redis, "busy", hold_s=10, wait_s=0.1) as after:
        assert after


async def test_without_redis_a_submission_is_counted_unlocked(monkeypatch: pytest.MonkeyPatch) -> None:
    unreachable = Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=1)

    async def pool() -> Redis:
        return unreachable

    monkeypatch.setattr(queue, "get_pool", pool)
    entered = False
    async with quotas.admission(_principal("alone"), "queued_attempts"):
        entered = True
    assert entered
    await unreachable.aclose()
