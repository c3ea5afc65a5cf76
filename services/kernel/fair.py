"""Fair scheduling between tenants: every worker kind serves tenants in turn, so one tenant's backlog delays another
tenant's work by at most one unit.

arq keeps one sorted set per queue, scored by the time (ms) a job may run from: its enqueue time, or the end of a
retry's delay. Left to itself, a worker reads the oldest due ids and starts them in that order, so 1,000 units
queued by one tenant run before the one unit another tenant queued a second later. Beside arq's queue, each queue
`Q` keeps (all under `tribunal:fair:Q:`):

    tenant:<tenant>   zset   that tenant's job ids, scored like arq's queue (a copy: arq's own score decides)
    tenants           zset   tenants with jobs listed, scored by when a job of theirs was last claimed (`serial`)
    last              hash   tenant -> that score, kept while the tenant has nothing listed (it keeps its turn)
    owner             hash   job id -> tenant
    running           hash   job id -> tenant, for the jobs claimed and not ended
    serial            string a counter: the order of claims

`enqueue_job` writes arq's job and queue entry and these, in one script. A worker does not read arq's queue: it
asks `claim` for as many jobs as it has free slots, and the script picks them one at a time, each from the tenant
with the fewest jobs running (across every worker of the queue), then the one served least recently, taking that
tenant's oldest job that is due, not running and still in arq's queue; it sets arq's in-progress mark itself, so
two workers never claim one job. A job that ended for good leaves the sets when its worker finishes it
(`release`); whatever a crash left behind (a worker killed mid-job, a job removed from arq's queue by other code)
is cleaned up by the next claim that meets it. A job someone enqueued into arq's queue directly (an older gateway
during a rolling update, arq's own API) is adopted under the tenant `UNATTRIBUTED` when a claim sees it among the
oldest due, and given its real tenant by the reconciler (`adopt`).

Inside a worker, jobs already started share resources (the executor's sandbox slots, an LLM endpoint's
concurrency): `FairSlots` is the semaphore for those, serving waiting tenants in the same order. The tenant of the
job a coroutine runs for is in `JOB_TENANT` (set by the worker for each job it starts: services/kernel/worker.py).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, cast

from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms

# The tenant of work enqueued without one (straight into arq's queue); never a valid tenant name
# (gateway/schemas/keys.py: tenants start with a letter or digit).
UNATTRIBUTED = "?"
# A claim adopts orphans among this many of the oldest due ids of arq's queue.
ORPHAN_SCAN = 64
# A claim looks at this many listed jobs at most (running or stale ones it passes over), so a script never blocks
# Redis for long; what it did not reach, the next claim does.
CLAIM_BUDGET = 5000

# The tenant whose job the current coroutine runs (None outside a job).
JOB_TENANT: contextvars.ContextVar[str | None] = contextvars.ContextVar("tribunal_job_tenant", default=None)


def prefix(queue_name: str) -> str:
    """The common prefix of a queue's fairness keys."""
    return f"tribunal:fair:{queue_name}:"


def tenant_key(queue_name: str, tenant: str) -> str:
    return f"{prefix(queue_name)}tenant:{tenant}"


# Shared by the scripts: key names from the prefix, and listing a tenant among those with work.
_LUA_KEYS = """
local P = ARGV[1]
local queue, tenants, owner, running, last = KEYS[1], P .. 'tenants', P .. 'owner', P .. 'running', P .. 'last'
local function listed(tenant) return P .. 'tenant:' .. tenant end
local function list_tenant(tenant)
  if redis.call('ZSCORE', tenants, tenant) == false then
    redis.call('ZADD', tenants, tonumber(redis.call('HGET', last, tenant) or '0'), tenant)
  end
end
"""

# ARGV: prefix, job id, tenant, serialized job, score, expiry (ms), arq's job and result key prefixes.
# arq's enqueue_job, plus the fairness entries: nothing if the job (or its kept result) exists. 1 if enqueued.
_ENQUEUE = (
    _LUA_KEYS
    + """
local id, tenant, score = ARGV[2], ARGV[3], ARGV[5]
if redis.call('EXISTS', ARGV[7] .. id, ARGV[8] .. id) > 0 then return 0 end
redis.call('SET', ARGV[7] .. id, ARGV[4], 'PX', ARGV[6])
redis.call('ZADD', queue, score, id)
redis.call('ZADD', listed(tenant), score, id)
redis.call('HSET', owner, id, tenant)
list_tenant(tenant)
return 1
"""
)

# ARGV: prefix, now (ms), how many, arq's in-progress key prefix, its lifetime (ms), orphan scan, budget,
# UNATTRIBUTED. Returns a flat list: job id, its score in arq's queue, its tenant; for each job claimed.
_CLAIM = (
    _LUA_KEYS
    + """
local now, count, mark, mark_ms = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local budget, nobody = tonumber(ARGV[7]), ARGV[8]
local head = redis.call('ZRANGEBYSCORE', queue, '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[6]))
for i = 1, #head, 2 do
  if redis.call('HSETNX', owner, head[i], nobody) == 1 then
    redis.call('ZADD', listed(nobody), head[i + 1], head[i])
    list_tenant(nobody)
  end
end
local busy = {}
local held = redis.call('HGETALL', running)
for i = 1, #held, 2 do
  if redis.call('EXISTS', mark .. held[i]) == 1 then
    busy[held[i + 1]] = (busy[held[i + 1]] or 0) + 1
  else
    redis.call('HDEL', running, held[i])
  end
end
local order = {}
local rows = redis.call('ZRANGE', tenants, 0, -1, 'WITHSCORES')
for i = 1, #rows, 2 do order[#order + 1] = {name = rows[i], last = tonumber(rows[i + 1]), done = false} end
local claimed = {}
while #claimed < 3 * count and budget > 0 do
  local best = nil
  for _, t in ipairs(order) do
    if not t.done then
      if best == nil then
        best = t
      else
        local bt, bb = busy[t.name] or 0, busy[best.name] or 0
        if bt < bb or (bt == bb and t.last < best.last) then best = t end
      end
    end
  end
  if best == nil then break end
  local key = listed(best.name)
  local found, offset = false, 0
  while not found and budget > 0 do
    local page = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'LIMIT', offset, 64)
    if #page == 0 then break end
    local passed = 0
    for _, id in ipairs(page) do
      budget = budget - 1
      local score = redis.call('ZSCORE', queue, id)
      if score == false then
        redis.call('ZREM', key, id)
        if redis.call('HGET', owner, id) == best.name then redis.call('HDEL', owner, id) end
      elseif tonumber(score) > now then
        redis.call('ZADD', key, score, id)
      elseif redis.call('EXISTS', mark .. id) == 1 then
        passed = passed + 1
      else
        redis.call('SET', mark .. id, '1', 'PX', mark_ms)
        redis.call('HSET', running, id, best.name)
        claimed[#claimed + 1] = id
        claimed[#claimed + 1] = score
        claimed[#claimed + 1] = best.name
        found = true
        break
      end
    end
    offset = offset + passed
  end
  if found then
    busy[best.name] = (busy[best.name] or 0) + 1
    best.last = redis.call('INCR', P .. 'serial')
    redis.call('ZADD', tenants, best.last, best.name)
    redis.call('HSET', last, best.name, best.last)
  else
    best.done = true
    if redis.call('ZCARD', key) == 0 then redis.call('ZREM', tenants, best.name) end
  end
end
return claimed
"""
)

# ARGV: prefix, job id. The job's worker is done with it: no longer running; if it left arq's queue (it ended for
# good, not a retry), no longer listed.
_RELEASE = (
    _LUA_KEYS
    + """
local id = ARGV[2]
redis.call('HDEL', running, id)
if redis.call('ZSCORE', queue, id) ~= false then return 0 end
local tenant = redis.call('HGET', owner, id)
if not tenant then return 0 end
redis.call('ZREM', listed(tenant), id)
redis.call('HDEL', owner, id)
if redis.call('ZCARD', listed(tenant)) == 0 then redis.call('ZREM', tenants, tenant) end
return 1
"""
)

# ARGV: prefix, job id, tenant, UNATTRIBUTED. A job in arq's queue that no tenant's list holds (or only the
# unattributed one's) is listed under `tenant`. 1 if it was.
_ADOPT = (
    _LUA_KEYS
    + """
local id, tenant, nobody = ARGV[2], ARGV[3], ARGV[4]
local score = redis.call('ZSCORE', queue, id)
if score == false then return 0 end
local current = redis.call('HGET', owner, id)
if current == tenant or (current and current ~= nobody) then return 0 end
if current then redis.call('ZREM', listed(nobody), id) end
redis.call('ZADD', listed(tenant), score, id)
redis.call('HSET', owner, id, tenant)
if redis.call('HEXISTS', running, id) == 1 then redis.call('HSET', running, id, tenant) end
list_tenant(tenant)
return 1
"""
)


@dataclass(frozen=True)
class Claimed:
    """A job a claim gave this worker: arq's in-progress mark is set for it."""

    job_id: str
    score: int  # its score in arq's queue (the time it was due from)
    tenant: str


async def enqueue_job(
    redis: ArqRedis, queue_name: str, function: str, args: tuple[Any, ...], *, job_id: str, tenant: str
) -> bool:
    """arq's `enqueue_job` (same job, same queue entry; nothing if the job or its kept result exists), listed under
    `tenant` in the same script. True if it was enqueued."""
    now = timestamp_ms()
    job = serialize_job(function, args, {}, None, now, serializer=redis.job_serializer)
    added = await redis.register_script(_ENQUEUE)(
        keys=[queue_name],
        args=[
            prefix(queue_name),
            job_id,
            tenant,
            job,
            now,
            redis.expires_extra_ms,
            job_key_prefix,
            result_key_prefix,
        ],
    )
    return bool(added)


async def claim(redis: ArqRedis, queue_name: str, count: int, *, in_progress_ms: int) -> list[Claimed]:
    """Up to `count` due jobs of the queue, chosen tenant by tenant (the module's docstring), each marked in
    progress for `in_progress_ms`."""
    if count < 1:
        return []
    flat = await redis.register_script(_CLAIM)(
        keys=[queue_name],
        args=[
            prefix(queue_name),
            timestamp_ms(),
            count,
            in_progress_key_prefix,
            in_progress_ms,
            ORPHAN_SCAN,
            CLAIM_BUDGET,
            UNATTRIBUTED,
        ],
    )
    return [Claimed(_text(flat[i]), int(float(_text(flat[i + 1]))), _text(flat[i + 2])) for i in range(0, len(flat), 3)]


async def release(redis: ArqRedis, queue_name: str, job_id: str) -> None:
    """The worker is done with the job (it ended, or waits for a retry)."""
    await redis.register_script(_RELEASE)(keys=[queue_name], args=[prefix(queue_name), job_id])


async def adopt(redis: ArqRedis, queue_name: str, job_id: str, tenant: str) -> bool:
    """List a job that is in arq's queue but in no tenant's list (or only the unattributed one's) under `tenant`."""
    adopted = await redis.register_script(_ADOPT)(
        keys=[queue_name], args=[prefix(queue_name), job_id, tenant, UNATTRIBUTED]
    )
    return bool(adopted)


async def owner(redis: ArqRedis, queue_name: str, job_id: str) -> str | None:
    """The tenant a job is listed under, if any."""
    value = await cast(Awaitable[bytes | None], redis.hget(f"{prefix(queue_name)}owner", job_id))
    return None if value is None else _text(value)


def _text(value: bytes | str | int) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class FairSlots:
    """A semaphore of `slots` for the jobs a worker already started, which serves waiting tenants in turn: a freed
    slot goes to the tenant holding the fewest, then to the one granted least recently, first come first served
    within a tenant. The tenant is the current job's (`JOB_TENANT`; work outside a job counts as one tenant, "").
    Used as `async with slots:`; the tenant must not change between entering and leaving (it is set once per job)."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self.slots = slots
        self._free = slots
        self._held: dict[str, int] = {}
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self._granted: dict[str, int] = {}
        self._serial = 0

    @staticmethod
    def _tenant() -> str:
        return JOB_TENANT.get() or ""

    def held(self, tenant: str) -> int:
        return self._held.get(tenant, 0)

    def locked(self) -> bool:
        return self._free == 0

    async def acquire(self, tenant: str) -> None:
        if self._free > 0:
            self._free -= 1
            self._take(tenant)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(tenant)  # granted as it was cancelled: pass the slot on
            else:
                queued = self._waiting.get(tenant)
                if queued is not None and waiter in queued:
                    queued.remove(waiter)
                    if not queued:
                        del self._waiting[tenant]
            raise

    def release(self, tenant: str) -> None:
        held = self._held.get(tenant, 0) - 1
        if held < 0:
            raise RuntimeError(f"FairSlots released more often than acquired by {tenant!r}")
        if held:
            self._held[tenant] = held
        else:
            self._held.pop(tenant, None)
        while self._waiting:
            following = min(self._waiting, key=lambda t: (self._held.get(t, 0), self._granted.get(t, 0)))
            queued = self._waiting[following]
            waiter = queued.popleft()
            if not queued:
                del self._waiting[following]
            if not waiter.done():
                self._take(following)
                waiter.set_result(None)
                return
        self._free += 1

    def _take(self, tenant: str) -> None:
        self._held[tenant] = self._held.get(tenant, 0) + 1
        self._serial += 1
        self._granted[tenant] = self._serial

    async def __aenter__(self) -> None:
        await self.acquire(self._tenant())

    async def __aexit__(self, *exc: object) -> None:
        self.release(self._tenant())
