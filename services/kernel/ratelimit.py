"""Quotas: each key's limits, the Redis token buckets that meter requests, and the tenants' daily LLM judge tokens.

A key's `quotas` (models.ApiKey) name any of QUOTA_NAMES; a missing or null one is the deployment's default
(settings `quota_*`). Requests are metered by two token buckets, the key's and its tenant's, taken in one Lua
script so that a request is counted in both or in neither. The caps on live work (queued attempts, similarity
pairs not yet scored, running executions, reports not yet built) are counted in the database, by the gateway where
work is submitted (gateway/quotas.py) and by the perturb worker where a job grows (`growth_room`); the judgments a
tenant asks for per UTC day are counted here, in Redis, as they are asked for; LLM judge tokens per tenant and UTC
day are counted here too, by the judge worker.

A job that grows (a perturbation's mutants, a synthesis job's programs and 0-point pairs) is bound by the quotas of
the key that created it: the gateway records that key's id in the job's plan (plans.OwnedPlan `owner_key_id`),
and the worker reads the key's quotas as they are at each step (`job_owner_quotas`), so a change of them applies to
a job already running; a job made by an admin key has no caps, as its key has none.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NoReturn, cast, get_args

from arq.constants import retry_key_prefix
from arq.worker import Retry
from redis.asyncio import Redis
from redis.exceptions import LockError, RedisError
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.contracts import LIVE_ATTEMPT_STATUSES, LIVE_JOB_STATUSES
from services.kernel.models import ApiKey, Attempt, Job, SimilarityPair
from services.kernel.plans import OwnedPlan
from services.kernel.settings import get_settings

QuotaName = Literal[
    "requests_per_minute",
    "queued_attempts",
    "running_executions",
    "queued_reports",
    "judge_tokens_per_day",
    "queued_pairs",
    "judgments_per_request",
    "judgments_per_day",
]
QUOTA_NAMES: tuple[QuotaName, ...] = get_args(QuotaName)
# The largest value a quota may be set to; above it a limit is meaningless and a typo more likely than intent.
MAX_QUOTA = 10**9
# A perturbation seed yields at most this many mutants, even with all_sites (the first in the generator's order are
# kept): the perturb worker cuts there, and the gateway counts that many when it bounds a request's judgments.
MAX_MUTANTS_PER_SEED = 200

_PREFIX = "tribunal:quota"


def quota_default(name: QuotaName) -> int:
    """The deployment's value of `name` (TRIBUNAL_QUOTA_<NAME>)."""
    return int(getattr(get_settings(), f"quota_{name}"))


# A limit left unset on a key that sets its companion is at most the companion's value: a key held to N queued
# attempts is held to N similarity pairs too (a pair runs two programs), unless it sets queued_pairs of its own.
_BOUNDED_BY: dict[QuotaName, QuotaName] = {"queued_pairs": "queued_attempts"}


def quota_of(quotas: Mapping[str, Any] | None, name: QuotaName) -> int:
    """A key's value of `name`: its own if set, else the default (no more than its companion's, _BOUNDED_BY)."""
    value = (quotas or {}).get(name)
    if value is not None:
        return int(value)
    companion = _BOUNDED_BY.get(name)
    if companion is not None and (quotas or {}).get(companion) is not None:
        return min(quota_default(name), int((quotas or {})[companion]))
    return quota_default(name)


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


def seconds_to_next_utc_day(now: datetime | None = None) -> int:
    """Whole seconds (at least 1) until the next UTC day begins: when a daily count starts again."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    midnight = datetime.combine(moment.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    return max(1, math.ceil((midnight - moment).total_seconds()))


# ---- live work a tenant holds (the caps counted in the database) -------------------------------------------------


async def live_attempts(session: AsyncSession, tenant: str) -> int:
    """The tenant's attempts `queued` or `running`: what queued_attempts bounds."""
    query = select(func.count()).where(Attempt.tenant == tenant, Attempt.status.in_(LIVE_ATTEMPT_STATUSES))
    return int(await session.scalar(query) or 0)


async def unscored_pairs(session: AsyncSession, tenant: str) -> int:
    """The tenant's similarity pairs not yet scored (status `queued`) in its live similarity jobs, whichever job
    made them (a dataset, a single pair, a perturbation's confirmation): what queued_pairs bounds."""
    query = (
        select(func.count())
        .select_from(SimilarityPair)
        .join(Job, Job.job_id == SimilarityPair.job_id)
        .where(Job.tenant == tenant, Job.status.in_(LIVE_JOB_STATUSES), SimilarityPair.status == "queued")
    )
    return int(await session.scalar(query) or 0)


# ---- judgments a tenant asks for per UTC day ---------------------------------------------------------------------
#
# One counter per tenant and UTC day, in Redis: a request's judgments (attempts x judges x conditions x repeats)
# are added when the gateway accepts it, a growing job's when its worker creates the programs to judge. The gateway
# adds them only if the day's count stays within the limit (one Lua script: count and add in one step).


def _judgments_key(tenant: str, now: datetime | None = None) -> str:
    day = (now or datetime.now(UTC)).astimezone(UTC).date().isoformat()
    return f"{_PREFIX}:judgments:{tenant}:{day}"


# KEYS[1] the day's counter; ARGV: judgments to add, the limit (-1: none), TTL (s). Returns {added (1|0), count}.
_ADD_JUDGMENTS_LUA = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local adding = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
if limit >= 0 and used + adding > limit then
  return {0, used}
end
local total = redis.call('INCRBY', KEYS[1], adding)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return {1, total}
"""


async def judgments_asked_today(redis: Redis, tenant: str) -> int:
    """The judgments the tenant asked for this UTC day."""
    return int(await redis.get(_judgments_key(tenant)) or 0)


async def add_judgments(redis: Redis, tenant: str, count: int, limit: int | None) -> tuple[bool, int]:
    """Add `count` judgments to the tenant's day, unless that would take it past `limit` (None: add anyway).
    Returns (added, the day's count after)."""
    script = redis.register_script(_ADD_JUDGMENTS_LUA)
    args = [max(0, count), -1 if limit is None else limit, _TOKENS_TTL_S]
    added, total = cast(list[int], await script(keys=[_judgments_key(tenant)], args=args))
    return bool(added), int(total)


async def take_back_judgments(redis: Redis, tenant: str, count: int) -> None:
    """Undo `add_judgments` of a request that was not stored after all."""
    if count > 0:
        await redis.decrby(_judgments_key(tenant), count)


# ---- jobs that grow: their owner's quotas, the room they have, and waiting at a cap ----------------------------

# A growing job's step that finds no room waits this long (seconds, with jitter) before it looks again; longer when
# only the next UTC day can bring room back.
WAIT_AT_CAP_S = 1.0
WAIT_FOR_NEXT_DAY_S = 15.0
# More than any cap: the room of an exempt job.
UNBOUNDED = 2**62


async def job_owner_quotas(session: AsyncSession, job: Job) -> Mapping[str, Any] | None:
    """The quotas of the key that created `job`, as they are now: None when that key is an admin key (no caps);
    the defaults when the job names no key (made before keys were recorded) or its key is gone."""
    plan = job.plan()
    key_id = plan.owner_key_id if isinstance(plan, OwnedPlan) else None
    if not key_id:
        return {}
    row = await session.get(ApiKey, str(key_id))
    if row is None:
        return {}
    if "admin" in (row.scopes or []):
        return None
    return row.quotas or {}


@dataclass(frozen=True)
class Room:
    """How many more programs a growing job may create now, and the limit that decides it (None: no limit binds).
    `wait_s` is how long to wait before looking again when `count` is 0."""

    count: int
    limit: QuotaName | None = None

    @property
    def exempt(self) -> bool:
        """The job's owner has no caps (an admin key)."""
        return self.count >= UNBOUNDED

    @property
    def wait_s(self) -> float:
        return next_day_wait_s() if self.limit == "judgments_per_day" else cap_wait_s()


def cap_wait_s() -> float:
    """How long a step at a cap on live work waits before it looks again (jittered, so waiters spread out)."""
    return WAIT_AT_CAP_S * random.uniform(1.0, 1.5)  # noqa: S311 - jitter only


def next_day_wait_s() -> float:
    """How long a step at a daily limit waits before it looks again: the next UTC day, or a change of the limit."""
    return min(float(seconds_to_next_utc_day()), WAIT_FOR_NEXT_DAY_S) * random.uniform(1.0, 1.5)  # noqa: S311


async def growth_room(
    session: AsyncSession, redis: Redis | None, job: Job, *, judgments_each: int = 0, pairs_each: int = 0
) -> Room:
    """How many more attempts `job` may create now under its owner's caps: queued_attempts against the tenant's
    live attempts; with `pairs_each` (a confirmation pair per program), queued_pairs against its pairs not yet
    scored; with `judgments_each` (judges x conditions x repeats per program), judgments_per_day against the
    judgments its tenant asked for today (not without Redis: a step run outside a worker, where no queue is)."""
    quotas = await job_owner_quotas(session, job)
    if quotas is None:
        return Room(UNBOUNDED)
    bounds: list[tuple[int, QuotaName]] = [
        (quota_of(quotas, "queued_attempts") - await live_attempts(session, job.tenant), "queued_attempts")
    ]
    if pairs_each > 0:
        free = quota_of(quotas, "queued_pairs") - await unscored_pairs(session, job.tenant)
        bounds.append((free // pairs_each, "queued_pairs"))
    if judgments_each > 0 and redis is not None:
        free = quota_of(quotas, "judgments_per_day") - await judgments_asked_today(redis, job.tenant)
        bounds.append((free // judgments_each, "judgments_per_day"))
    count, limit = min(bounds, key=lambda bound: bound[0])
    return Room(max(0, count), limit)


async def job_token_budget(session: AsyncSession, redis: Redis | None, job: Job) -> JudgeTokenBudget | None:
    """The LLM tokens a job's own LLM calls (synthesis draws, calibration reports) spend: its tenant's
    judge_tokens_per_day, as the judge worker counts them. None when its owner has no caps or there is no Redis."""
    if redis is None or await job_owner_quotas(session, job) is None:
        return None
    return JudgeTokenBudget(redis, job.tenant, await tenant_judge_token_limit(session, job.tenant))


@contextlib.asynccontextmanager
async def tenant_lock(redis: Redis, tenant: str, *, hold_s: float, wait_s: float) -> AsyncIterator[bool]:
    """The tenant's one admission lock, held by whoever counts the tenant's live work and stores more of it (a
    gateway submission, gateway/quotas.py `admission`; a worker growing a job, growth_lock), so that no two of
    them count the same room. Yields whether it was had within `wait_s`; it expires `hold_s` after it was taken
    if its holder dies. A Redis error while taking it propagates."""
    lock = redis.lock(f"{_PREFIX}:grow:{tenant}", timeout=hold_s, blocking_timeout=wait_s)
    try:
        acquired = await lock.acquire()
    except LockError:
        acquired = False
    try:
        yield acquired
    finally:
        if acquired:
            with contextlib.suppress(LockError, RedisError, OSError):  # unreleased, it expires by itself
                await lock.release()


@contextlib.asynccontextmanager
async def growth_lock(redis: Redis | None, tenant: str, *, timeout_s: float = 60.0) -> AsyncIterator[bool]:
    """Held while a worker counts a tenant's room and stores what fits in it, so that two growing jobs (or two
    seeds of one, or a submission at the gateway: tenant_lock) cannot both take the last of it. Yields False when
    the lock could not be had within its wait (the caller then waits at the cap and tries again); the lock expires
    by itself if its holder dies. Without Redis (a step run outside a worker, where no other worker is) there is
    nothing to lock against."""
    if redis is None:
        yield True
        return
    async with tenant_lock(redis, tenant, hold_s=timeout_s, wait_s=timeout_s / 2) as locked:
        yield locked


async def wait_at_cap(ctx: Mapping[str, Any], delay_s: float) -> NoReturn:
    """End this try of a growing job's task and run it again after `delay_s`: arq's Retry, with the try taken back
    (a wait at a cap is not a failure, and must never use up the task's tries however long the cap holds)."""
    job_id = ctx.get("job_id")
    redis = ctx.get("redis")
    if job_id and redis is not None:
        await redis.decr(retry_key_prefix + str(job_id))
    raise Retry(defer=delay_s)
