"""The queue facade over arq: one enqueue helper, one task decorator, telemetry added here and only here. Which
queue serves a task is the service registry's to say (services/kernel/registry.py).

Enqueueing also publishes on the queue's wake channel (`wake_channel`), so that its idle workers start the task at
once instead of at their next poll (services/kernel/worker.py); polling stays, for whatever no publish announces
(arq's own retries, a message lost while a worker reconnects).

Every task is enqueued as some tenant's work, and workers claim jobs tenant by tenant rather than oldest first
(services/kernel/fair.py); arq's queue and its scores (the time each job may run from) stay as arq keeps them."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.constants import in_progress_key_prefix
from arq.jobs import Job, JobStatus
from arq.worker import Retry
from redis.exceptions import RedisError

from services.kernel import fair, telemetry
from services.kernel.registry import ALL_QUEUES, QUEUE_OF, SERVICES, Task
from services.kernel.settings import get_settings

log = logging.getLogger("tribunal.queue")

_pool: ArqRedis | None = None


def redis_settings(url: str | None = None) -> RedisSettings:
    resolved = url or get_settings().redis_url
    if not resolved:
        raise RuntimeError("TRIBUNAL_REDIS_URL is not set (the embedded launcher sets it when it starts Redis)")
    return RedisSettings.from_dsn(resolved)


async def get_pool() -> ArqRedis:
    """The process-wide arq Redis pool."""
    global _pool
    if _pool is None:
        _pool = await create_pool(redis_settings())
    return _pool


async def close_pool() -> None:
    global _pool
    if _pool is not None:
        await _pool.aclose()
    _pool = None


def task_key(task: Task, subject: str) -> str:
    """The arq job id for a task about one subject: enqueueing it twice while it exists is a no-op."""
    return f"{task.value}:{subject}"


def wake_channel(queue_name: str) -> str:
    """The Redis channel on which enqueueing tells a queue's workers that work is waiting."""
    return f"tribunal:wake:{queue_name}"


# The Redis channel on which workers announce attempts that reached a final status (after the commit): message =
# attempt ids, space-separated. Readers waiting on an attempt (GET /v1/attempts/{id}?wait_s=) listen to it.
ATTEMPTS_ENDED_CHANNEL = "tribunal:attempts-ended"


async def announce_ended(attempt_ids: Sequence[str], *, pool: ArqRedis | None = None) -> None:
    """Tell readers waiting on these attempts that they ended (call after the commit). Best effort: a reader that
    misses it finds the end when it next looks (gateway/waiting.py)."""
    if not attempt_ids:
        return
    try:
        redis = pool or await get_pool()
        await redis.publish(ATTEMPTS_ENDED_CHANNEL, " ".join(attempt_ids).encode())
    except (RedisError, OSError, RuntimeError) as exc:  # RuntimeError: no Redis configured (get_pool)
        log.debug("could not announce ended attempts: %s", exc)


async def notify(queue_name: str, *, pool: ArqRedis | None = None) -> None:
    """Wake the queue's idle workers now. Best effort: a worker that misses it finds the work at its next poll."""
    redis = pool or await get_pool()
    try:
        await redis.publish(wake_channel(queue_name), b"")
    except (RedisError, OSError) as exc:
        log.debug("could not wake the workers of %s: %s", queue_name, exc)


async def enqueue(task: Task, subject: str, *, tenant: str, pool: ArqRedis | None = None, wake: bool = True) -> bool:
    """Put `task(subject)` on its queue, as work of `tenant` (its workers serve tenants in turn:
    services/kernel/fair.py); False if the same task for the same subject is already there. Unless `wake` is False
    (the caller calls `notify` itself, e.g. once for many), the queue's workers are woken."""
    redis = pool or await get_pool()
    added = await fair.enqueue_job(
        redis, QUEUE_OF[task], task.value, (subject,), job_id=task_key(task, subject), tenant=tenant
    )
    if added:
        telemetry.queue_enqueued.labels(task.value).inc()
        if wake:
            await notify(QUEUE_OF[task], pool=redis)
    return added


async def adopt(task: Task, subject: str, *, tenant: str, pool: ArqRedis | None = None) -> bool:
    """List a queued task that no tenant's list holds (enqueued without one) as `tenant`'s (fair.adopt)."""
    redis = pool or await get_pool()
    return await fair.adopt(redis, QUEUE_OF[task], task_key(task, subject), tenant)


async def task_status(task: Task, subject: str, *, pool: ArqRedis | None = None) -> JobStatus:
    redis = pool or await get_pool()
    return await Job(task_key(task, subject), redis, _queue_name=QUEUE_OF[task]).status()


async def wait_for(task: Task, subject: str, timeout_s: float, *, pool: ArqRedis | None = None) -> bool:
    """Wait until the task has finished (True) or `timeout_s` passed (False)."""
    redis = pool or await get_pool()
    job = Job(task_key(task, subject), redis, _queue_name=QUEUE_OF[task])
    try:
        await job.result(timeout=timeout_s, poll_delay=0.005)
    except TimeoutError:
        return False
    except Exception:  # noqa: BLE001 - the task raised; the database holds its recorded outcome
        return True
    return True


async def queue_depths(pool: ArqRedis | None = None) -> dict[str, int]:
    """Tasks in each queue: waiting, deferred (a retry's delay) or running (arq keeps them there until done)."""
    redis = pool or await get_pool()
    return {name: int(await redis.zcard(name)) for name in ALL_QUEUES}


# The score of the oldest task of a queue that is due and not running, in one atomic step (a task finishing meanwhile
# cannot be mistaken for one waiting since it was enqueued): due tasks are paged oldest first, skipping those with an
# in-progress mark, looking at most ARGV[3] of them (beyond that many running at once the queue is saturated anyway,
# and the age is a lower bound: the oldest look no further).
_OLDEST_WAITING = """
local offset, page, limit = 0, 256, tonumber(ARGV[3])
while offset < limit do
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', offset, page)
  if #due == 0 then return false end
  for i = 1, #due, 2 do
    if redis.call('EXISTS', ARGV[2] .. due[i]) == 0 then return due[i + 1] end
  end
  offset = offset + page
end
return false
"""
OLDEST_SCAN_LIMIT = 100_000


async def oldest_waiting_ages(pool: ArqRedis | None = None) -> dict[str, float]:
    """Seconds the oldest task of each queue has waited for a worker: due (arq's score is the time, in ms, it may
    run from: its enqueue time, or the end of a retry's delay) and not running. 0 where none waits."""
    redis = pool or await get_pool()
    oldest = redis.register_script(_OLDEST_WAITING)
    now_ms = time.time() * 1000
    ages: dict[str, float] = {}
    for name in ALL_QUEUES:
        score = await oldest(keys=[name], args=[now_ms, in_progress_key_prefix, OLDEST_SCAN_LIMIT])
        ages[name] = max(0.0, (now_ms - float(score)) / 1000) if score else 0.0
    return ages


# Worker processes say they are alive in one sorted set per kind, each member scored with when it stops counting:
# WORKER_ALIVE_LIVES heartbeats after its last beat (services/kernel/worker.py), so a killed worker stops counting
# within that. Times are Redis's own clock (TIME), so workers' and gateways' clocks need not agree.
WORKER_ALIVE_PREFIX = "tribunal:workers-alive:"
WORKER_ALIVE_LIVES = 4
_BEAT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
return now_ms
"""
_COUNT_ALIVE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local counts = {}
for i, key in ipairs(KEYS) do counts[i] = redis.call('ZCOUNT', key, '(' .. now_ms, '+inf') end
return counts
"""


def workers_alive_key(kind: str) -> str:
    return f"{WORKER_ALIVE_PREFIX}{kind}"


async def beat(kind: str, process: str, lifetime_s: float, *, pool: ArqRedis | None = None) -> None:
    """Say that `process` (of worker kind `kind`) is alive for `lifetime_s` more seconds."""
    redis = pool or await get_pool()
    await redis.register_script(_BEAT)(keys=[workers_alive_key(kind)], args=[process, int(lifetime_s * 1000)])


async def say_gone(kind: str, process: str, *, pool: ArqRedis | None = None) -> None:
    """Stop counting `process` as alive at once (a clean shutdown)."""
    redis = pool or await get_pool()
    await redis.zrem(workers_alive_key(kind), process)


async def live_workers(pool: ArqRedis | None = None) -> dict[str, int]:
    """Worker processes per registered kind whose last beat has not expired (kinds with none are 0)."""
    redis = pool or await get_pool()
    kinds = list(SERVICES)
    counts = await redis.register_script(_COUNT_ALIVE)(keys=[workers_alive_key(kind) for kind in kinds])
    return {kind: int(count) for kind, count in zip(kinds, counts, strict=True)}


P = ParamSpec("P")
R = TypeVar("R")


# A task that raises is tried again after this delay, doubled per try up to RETRY_MAX_DELAY_S, until the
# settings' job_max_tries; then it gives up (services/kernel/terminal.py says what that leaves behind).
RETRY_FIRST_DELAY_S = 2.0
RETRY_MAX_DELAY_S = 30.0
# Tries arq may make beyond job_max_tries (its max_tries is the sum): each only records the give-up, for when the
# database was unreachable at the last try (an outage), RETRY_MAX_DELAY_S apart.
GIVE_UP_TRIES = 5
# What a worker calls when a task gives up: (task, subject, reason). Installed in the worker's ctx under this name
# (services/kernel/worker.py), so that this module does not import the database's modules.
GIVE_UP = "give_up"
GiveUp = Callable[[Task, str, str], Awaitable[None]]


def task_deadline_s() -> float:
    """How long one try of a task may run: the queue's task limit (settings' job_timeout_s) less a margin (a tenth,
    at most 5 s) in which a try that ran out records that its subject gave up. arq's own limit, reached only if
    that write hangs, ends a task without a word to its subject."""
    limit = float(get_settings().job_timeout_s)
    return max(0.5, limit - min(5.0, limit * 0.1))


def retry_delay_s(job_try: int) -> float:
    """The wait before try `job_try + 1` of a task whose try `job_try` raised."""
    return float(min(RETRY_MAX_DELAY_S, RETRY_FIRST_DELAY_S * 2 ** (job_try - 1)))


def task(kind: Task) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R | None]]]:
    """Wrap a worker function (its first argument after ctx is the task's subject). Duration, retries and failures
    are measured here, once for every task. An exception is retried with arq's `Retry` (arq retries nothing
    else), after `retry_delay_s`, up to the settings' job_max_tries; the last try's exception gives up, and so
    does at once a try that runs past task_deadline_s: the worker's GIVE_UP hook ends the subject with the reason
    (the exception's type only: its text may name host paths), and the task ends there, the subject's terminal
    state being the record. If that write fails, arq's extra tries (GIVE_UP_TRIES) attempt only the write."""

    def decorate(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R | None]]:
        @functools.wraps(fn)
        async def wrapper(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> R | None:
            job_try = int(ctx.get("job_try", 1))
            max_tries = get_settings().job_max_tries
            if job_try > 1:
                telemetry.task_retries.labels(kind.value).inc()
            if job_try > max_tries:
                # The last try gave up, but could not record it: only that is left to do.
                await _record_give_up(ctx, kind, args, f"gave up after {max_tries} tries")
                return None
            started = time.perf_counter()
            outcome = "ok"
            deadline = asyncio.timeout(task_deadline_s())
            try:
                async with deadline:
                    return await fn(ctx, *args, **kwargs)
            except Retry:
                outcome = "retry"
                raise
            except Exception as exc:
                if deadline.expired():
                    # Not tried again: a try that ran out of time would take as long again, holding a worker for
                    # the limit times the tries.
                    outcome = "error"
                    telemetry.task_failures.labels(kind.value).inc()
                    telemetry.task_give_ups.labels(kind.value).inc()
                    limit = get_settings().job_timeout_s
                    log.error("%s %s gave up: it ran past the task limit (%s s)", kind.value, args[:1], limit)
                    await _record_give_up(ctx, kind, args, f"gave up: it ran past the task limit ({limit} s)")
                    return None
                if job_try < max_tries:
                    outcome = "retry"
                    log.warning("%s %s raised %s on try %d; retrying", kind, args[:1], type(exc).__name__, job_try)
                    raise Retry(defer=retry_delay_s(job_try)) from exc
                outcome = "error"
                telemetry.task_failures.labels(kind.value).inc()
                telemetry.task_give_ups.labels(kind.value).inc()
                log.error("%s %s gave up: %s on its last try", kind.value, args[:1], type(exc).__name__)
                await _record_give_up(ctx, kind, args, f"gave up after {job_try} tries ({type(exc).__name__})")
                return None
            except BaseException:
                outcome = "error"
                telemetry.task_failures.labels(kind.value).inc()
                raise
            finally:
                telemetry.task_duration.labels(kind.value, outcome).observe(time.perf_counter() - started)

        wrapper.__name__ = kind.value
        wrapper.__qualname__ = kind.value
        return wrapper

    return decorate


async def _record_give_up(ctx: dict[str, Any], kind: Task, args: tuple[Any, ...], reason: str) -> None:
    """End the task's subject through the worker's GIVE_UP hook; if that fails (the database is unreachable), try
    again later, as one of arq's GIVE_UP_TRIES extra tries."""
    give_up: GiveUp | None = ctx.get(GIVE_UP)
    if give_up is None or not args:
        return
    try:
        await give_up(kind, str(args[0]), reason)
    except Exception as exc:
        log.warning("%s %s: could not record that it gave up (%s); trying again", kind.value, args[0], exc)
        raise Retry(defer=RETRY_MAX_DELAY_S) from exc
