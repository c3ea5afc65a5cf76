"""A tenant's LLM judge tokens per UTC day, counted in Redis: spent, exhausted at the limit, kept per tenant and
day, and expiring."""

from __future__ import annotations

import asyncio
import uuid

from redis.asyncio import Redis

from services.kernel.ratelimit import JudgeTokenBudget


def test_the_daily_budget_is_counted_per_tenant_and_expires(redis_url: str) -> None:
    async def run() -> None:
        redis = Redis.from_url(f"{redis_url.rsplit('/', 1)[0]}/7")
        try:
            tenant, other = uuid.uuid4().hex, uuid.uuid4().hex
            budget = JudgeTokenBudget(redis, tenant, limit=100)
            assert await budget.spent() == 0 and not await budget.exhausted()
            assert await budget.spend(60) == 60
            assert not await budget.exhausted()
            assert await budget.spend(40) == 100
            assert await budget.exhausted()
            # Another tenant's day is its own.
            assert not await JudgeTokenBudget(redis, other, limit=100).exhausted()
            # A negative count (a provider's nonsense) never gives tokens back.
            assert await budget.spend(-50) == 100
            keys = [k async for k in redis.scan_iter(match=f"tribunal:quota:judge_tokens:{tenant}:*")]
            assert len(keys) == 1
            assert 86_400 < await redis.ttl(keys[0]) <= 2 * 86_400
        finally:
            await redis.aclose()

    asyncio.run(run())
