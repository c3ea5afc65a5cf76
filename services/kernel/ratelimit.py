"""Quotas: each key's limits, the Redis token buckets that meter requests, and the tenants' daily LLM judge tokens.

A key's `quotas` (models.ApiKey) name any of QUOTA_NAMES; a missing or null one is the deployment's default
(settings `quota_*`). Requests are metered by two token buckets, the key's and its tenant's, taken in one Lua
script so that a request is counted in both or in neither. The caps on live work (queued attempts, running
executions, reports not yet built) are counted in the database by the gateway (gateway/quotas.py); LLM judge
tokens per tenant and UTC day are counted here, in Redis, by the judge worker.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, cast, get_args

from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.models import ApiKey
from services.kernel.settings import get_settings

QuotaName = Literal[
    "requests_per_minute", "queued_attempts", "running_executions", "queued_reports", "judge_tokens_per_day"
]
QUOTA_NAMES: tuple[QuotaName, ...] = get_args(QuotaName)
# The largest value a quota may be set to; above it a limit is meaningless and a typo more likely than intent.
MAX_QUOTA = 10**9

_PREFIX = "tribunal:quota"


def quota_default(name: QuotaName) -> int:
    """The deployment's value of `name` (TRIBUNAL_QUOTA_<NAME>)."""
    return int(getattr(get_settings(), f"quota_{name}"))


def quota_of(quotas: Mapping[str, Any] | None, name: QuotaName) -> int:
    """A key's value of `name`: its own if set, else the default."""
    value = (quotas or {}).get(name)
    return int(value) if value is not None else quota_default(name)


# Two buckets (KEYS[1] the key's, KEYS[2] the tenant's), each holding up to ARGV[1] tokens and refilled at ARGV[1]
# per 60 s, as a hash {tokens, at_ms}. A request takes one token from both, or from neither when either is empty.
# Redis's own clock, so that gateways on several hosts agree. Returns {allowed, retry_after_ms, empty bucket (1|2)}.
_TAKE_LUA = """
local capacity = tonumber(ARGV[1])
local per_ms = capacity / 60000.0
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local levels = {}
for i, key in ipairs(KEYS) do
  local state = redis.call('HMGET', key, 'tokens', 'at_ms')
  local tokens = tonumber(state[1])
  local at_ms = tonumber(state[2])
  if tokens == nil or at_ms == nil then
    tokens = capacity
  else
    tokens = math.min(capacity, tokens + math.max(0, now_ms - at_ms) * per_ms)
  end
  levels[i] = tokens
end
for i, tokens in ipairs(levels) do
  if tokens < 1 then
    return {0, math.ceil((1 - tokens) / per_ms), i}
  end
end
local ttl_ms = math.ceil(capacity / per_ms) + 1000
for i, key in ipairs(KEYS) do
  redis.call('HSET', key, 'tokens', tostring(levels[i] - 1), 'at_ms', tostring(now_ms))
  redis.call('PEXPIRE', key, ttl_ms)
end
return {1, 0, 0}
"""


@dataclass(frozen=True)
class Refusal:
    """A request refused by a bucket: which one (`key` or `tenant`) and when a token is next there."""

    bucket: Literal["key", "tenant"]
    retry_after_s: int


async def take_request(redis: Redis, *, key_id: str, tenant: str, per_minute: int) -> Refusal | None:
    """Count one request against the key's and the tenant's buckets (each `per_minute`); None if admitted."""
    script = redis.register_script(_TAKE_LUA)
    keys = [f"{_PREFIX}:rpm:key:{key_id}", f"{_PREFIX}:rpm:tenant:{tenant}"]
    allowed, retry_ms, which = cast(list[int], await script(keys=keys, args=[per_minute]))
    if allowed:
        return None
    return Refusal("key" if which == 1 else "tenant", max(1, math.ceil(int(retry_ms) / 1000)))


# ---- LLM judge tokens per tenant and UTC day -------------------------------------------------------------------


def _tokens_key(tenant: str, now: datetime | None = None) -> str:
    day = (now or datetime.now(UTC)).astimezone(UTC).date().isoformat()
    return f"{_PREFIX}:judge_tokens:{tenant}:{day}"


# Kept a day past its own: long enough that a judgment finishing just after midnight is counted in the right day.
_TOKENS_TTL_S = 2 * 86_400


async def tenant_judge_token_limit(session: AsyncSession, tenant: str) -> int:
    """The tenant's judge_tokens_per_day: the largest among its live keys (a key without one counts as the
    default), or the default when it has none. A judgment is not made by a key, so the tenant's most generous key
    decides."""
    rows = (
        await session.scalars(select(ApiKey.quotas).where(ApiKey.tenant == tenant, ApiKey.revoked_at.is_(None)))
    ).all()
    values = [quota_of(quotas, "judge_tokens_per_day") for quotas in rows]
    return max(values, default=quota_default("judge_tokens_per_day"))


@dataclass(frozen=True)
class JudgeTokenBudget:
    """A tenant's LLM judge tokens for today against its daily limit. A judgment is refused once the day's spend
    has reached the limit; judgments already in flight may take it past the limit by their own tokens."""

    redis: Redis
    tenant: str
    limit: int

    async def spent(self) -> int:
        """Tokens the tenant's judgments reported today (UTC)."""
        value = await self.redis.get(_tokens_key(self.tenant))
        return int(value or 0)

    async def exhausted(self) -> bool:
        return await self.spent() >= self.limit

    async def spend(self, tokens: int) -> int:
        """Add `tokens` to today's spend; returns the new total."""
        key = _tokens_key(self.tenant)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incrby(key, max(0, tokens))
            pipe.expire(key, _TOKENS_TTL_S)
            total, _ = await pipe.execute()
        return int(total)
