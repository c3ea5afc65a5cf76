"""Cancels that stop work: `DELETE /v1/jobs/{id}` ends every piece of a job where it stands, in the database and in
every worker process, wherever those run.

What a cancel does, in order:
1. `cancel_job`, in the gateway's transaction: every live attempt of the job (and of its confirmation job, a
   perturbation's similarity job) ends `cancelled`, queued or running; every pair not yet scored ends `cancelled`;
   the jobs end `cancelled`. From then on nothing a worker writes changes them: a stage's end, a pair's score and a
   unit's count are all conditional on the attempt, pair or job being live (services/kernel/attempts.py, jobs.py),
   so `progress.done` is frozen where the cancel found it.
2. `after_commit`: each job's mark is set in Redis (`cancelled_key`, for a unit that starts later or a worker that
   missed the message), and the job ids are published on CANCEL_CHANNEL; the job's tasks that no worker has
   started are removed from their queues in one script per queue (`drop_queued`), so a 5,000-pair dataset is not
   dequeued pair by pair; readers waiting on its attempts are told they ended.
3. In every worker process, a `CancelWatch` (one per process, started by services/kernel/worker.py) keeps the units
   it runs by job: `run(job_id, work)` runs one unit (an attempt's stage, a pair, a perturbation step) as a task
   of its own, and a message naming its job cancels that task. Cancelling a task that waits for a jail stops the
   jail: executor/engine.py's `Engine.run` calls the run's RunControl.cancel(), which ends nsjail and with it every
   process of the jail's cgroups (services/lib/sandbox/), and waits until the jail is gone. `run` then answers
   STOPPED and the worker writes nothing but the unit's `cancelled` end (which the cancel's own write normally
   made already).

A watch that lost its subscription subscribes again and looks up every job it runs units of (`sweep`), and does so
every SWEEP_S anyway, so a missed message stops a unit within seconds too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix, job_key_prefix, retry_key_prefix
from redis.exceptions import RedisError
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel import attempts, jobs, queue
from services.kernel.contracts import LIVE_JOB_STATUSES, JobKind, JobStatus, PairStatus
from services.kernel.models import Job, Report, SimilarityPair, utcnow
from services.kernel.pending import synthesis_draws, synthesis_work
from services.kernel.plans import JudgePlan, PerturbPlan
from services.kernel.registry import QUEUE_OF, STAGE_TASK, Task
from services.kernel.subjects import (
    DRAW_CANCELLED,
    DRAW_CANDIDATE,
    draw_unit,
    job_subject,
    pair_subject,
    parse_draw_subject,
)

log = logging.getLogger("tribunal.cancel")

# Job ids, space-separated, published once their cancel is committed.
CANCEL_CHANNEL = "tribunal:cancel"
# `<prefix><job_id>` exists for a day after the job was cancelled: a unit that starts later finds it.
CANCELLED_KEY_PREFIX = "tribunal:cancelled:"
CANCELLED_TTL_S = 24 * 3600
# A watch looks up the jobs of its running units this often, whatever it heard (a message it missed).
SWEEP_S = 2.0
# Job ids a watch remembers as cancelled (it skips their units without asking Redis).
_REMEMBERED = 4096
# Task ids removed per script call (a script blocks Redis while it runs).
_DROP_CHUNK = 1000
# The ctx key of the worker process's CancelWatch.
WATCH = "cancel_watch"

QueuedWork = list[tuple[Task, str]]


def cancelled_key(job_id: str) -> str:
    return f"{CANCELLED_KEY_PREFIX}{job_id}"


# ---- the database: what a cancel ends ---------------------------------------------------------------------------


@dataclass
class Cancelled:
    """What `cancel_job` ended: the jobs, their attempts, and the tasks that may still be queued for them."""

    job_ids: list[str]
    attempt_ids: list[str] = field(default_factory=list)
    work: QueuedWork = field(default_factory=list)


async def cancel_job(session: AsyncSession, job: Job) -> Cancelled | None:
    """End a live job `cancelled` with everything of it that is live, in the caller's transaction (see the module's
    docstring); None if the job is no longer live (it ended first: the caller rolls back, and nothing changed).

    Rows are written in the order the workers lock them (attempts, then pairs, then jobs: a stage's end writes its
    attempt and then its job, a pair's score its pair and then its job), so on PostgreSQL a cancel and a worker never
    wait for each other in a circle."""
    if job.status not in LIVE_JOB_STATUSES:
        return None
    confirm_job_id = job.plan(PerturbPlan).confirm_job_id if job.kind == JobKind.PERTURB else None
    job_ids = [job.job_id, *([str(confirm_job_id)] if confirm_job_id else [])]
    attempt_ids = [attempt_id for job_id in job_ids for attempt_id in await attempts.cancel_live(session, job_id)]
    ordinals = await _cancel_pairs(session, job_ids)
    if not await jobs.finish(session, job.job_id, JobStatus.CANCELLED, error="cancelled by the client"):
        return None
    ended = [job.job_id]
    # A perturbation job's confirmation (a similarity job waiting for its seeds) cannot end without it.
    if confirm_job_id and await jobs.finish(
        session, str(confirm_job_id), JobStatus.CANCELLED, error="its perturbation job was cancelled"
    ):
        ended.append(str(confirm_job_id))
    work: QueuedWork = [(task, attempt_id) for attempt_id in attempt_ids for task in sorted(set(STAGE_TASK.values()))]
    work += [(Task.SCORE_PAIR, pair_subject(job_id, ordinal)) for job_id, ordinal in ordinals]
    work += await _own_tasks(session, job)
    return Cancelled(job_ids=ended, attempt_ids=attempt_ids, work=work)


async def _cancel_pairs(session: AsyncSession, job_ids: Sequence[str]) -> list[tuple[str, int]]:
    """Every pair of these jobs not yet scored ends `cancelled` (a pair is `queued` while its try runs too)."""
    result = await session.execute(
        update(SimilarityPair)
        .where(SimilarityPair.job_id.in_(job_ids), SimilarityPair.status == PairStatus.QUEUED)
        .values(status=PairStatus.CANCELLED, error="its job was cancelled", finished_at=utcnow())
        .returning(SimilarityPair.job_id, SimilarityPair.ordinal)
        .execution_options(synchronize_session=False)
    )
    return sorted((job_id, ordinal) for job_id, ordinal in result.all())


async def _own_tasks(session: AsyncSession, job: Job) -> QueuedWork:
    """The tasks a job of each kind may have queued about itself, beyond its attempts' stages and its pairs."""
    match job.kind:
        case JobKind.EXECUTE_DIRECT:
            return [(Task.EXECUTE_DIRECT, job.job_id)]
        case JobKind.JUDGE:
            return [(Task.JUDGE_ATTEMPT, job_subject(a, job.job_id)) for a in job.plan(JudgePlan).attempt_ids]
        case JobKind.PERTURB:
            seeds = job.plan(PerturbPlan).attempt_ids
            tasks = (Task.PERTURB_ATTEMPT, Task.JUDGE_ATTEMPT)
            return [(task, job_subject(a, job.job_id)) for a in seeds for task in tasks]
        case JobKind.SYNTHESIZE:
            rows = await jobs.job_units(session, job.job_id)
            work = [(item[0], item[1]) for item in synthesis_work(job, rows)]
            await _end_draws(session, job.job_id, rows, work)
            return [*work, (Task.FINISH_SYNTHESIS, job.job_id)]
        case JobKind.CALIBRATE:
            return [(Task.CALIBRATE_JUDGE, job.job_id)]
        case JobKind.REPORT:
            reports = await session.scalars(select(Report.report_id).where(Report.job_id == job.job_id))
            return [(Task.BUILD_REPORT, report_id) for report_id in reports]
    return []


async def _end_draws(session: AsyncSession, job_id: str, rows: set[str], work: QueuedWork) -> None:
    """A synthesis job's draws that had not ended (due to run, running, or their program being executed) end with
    the outcome `cancelled`, so the job's tally shows none of them as pending."""
    unended = {
        (slot, draw)
        for slot, draws in synthesis_draws(rows).items()
        for draw, outcomes in draws.items()
        if outcomes == {DRAW_CANDIDATE}
    }
    for task, subject in work:
        if task == Task.SYNTHESIZE_PROGRAM:
            due_slot, due_draw, _ = parse_draw_subject(subject)
            unended.add((due_slot, due_draw))
    for slot, draw in sorted(unended):
        await jobs.record_unit(session, job_id, draw_unit(slot, draw, DRAW_CANCELLED))


# ---- Redis: telling the workers, dropping what waits ------------------------------------------------------------

# KEYS[1]: a queue. ARGV: arq's in-progress, job and retry key prefixes, then task ids. Each task that no worker has
# started leaves the queue, and its job and retry keys go (what a worker's claim meets of it later is cleaned up
# there: services/kernel/fair.py). Returns how many left.
_DROP = """
local removed = 0
for i = 4, #ARGV do
  local id = ARGV[i]
  if redis.call('EXISTS', ARGV[1] .. id) == 0 and redis.call('ZREM', KEYS[1], id) == 1 then
    redis.call('DEL', ARGV[2] .. id, ARGV[3] .. id)
    removed = removed + 1
  end
end
return removed
"""


async def announce(job_ids: Sequence[str], *, pool: ArqRedis | None = None) -> None:
    """Mark the jobs cancelled in Redis and publish their ids (after the commit that cancelled them)."""
    if not job_ids:
        return
    redis = pool or await queue.get_pool()
    async with redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.set(cancelled_key(job_id), b"1", ex=CANCELLED_TTL_S)
        pipe.publish(CANCEL_CHANNEL, " ".join(job_ids).encode())
        await pipe.execute()


async def drop_queued(work: Iterable[tuple[Task, str]], *, pool: ArqRedis | None = None) -> int:
    """Remove these tasks from their queues unless a worker has started them; how many were removed."""
    by_queue: dict[str, list[str]] = {}
    for task, subject in work:
        by_queue.setdefault(QUEUE_OF[task], []).append(queue.task_key(task, subject))
    if not by_queue:
        return 0
    redis = pool or await queue.get_pool()
    drop = redis.register_script(_DROP)
    removed = 0
    for queue_name, ids in sorted(by_queue.items()):
        for start in range(0, len(ids), _DROP_CHUNK):
            chunk = ids[start : start + _DROP_CHUNK]
            removed += int(
                await drop(keys=[queue_name], args=[in_progress_key_prefix, job_key_prefix, retry_key_prefix, *chunk])
            )
    return removed


async def after_commit(cancelled: Cancelled, *, pool: ArqRedis | None = None) -> None:
    """Tell every worker, drop the queued tasks, wake readers waiting on the attempts. Best effort: the database
    already says what ended, so a worker that hears nothing (Redis down) still writes nothing over it; its running
    units then end at their own limits."""
    try:
        redis = pool or await queue.get_pool()
        await announce(cancelled.job_ids, pool=redis)
        dropped = await drop_queued(cancelled.work, pool=redis)
        log.info("cancelled %s: %d queued task(s) dropped", ", ".join(cancelled.job_ids), dropped)
    except (RedisError, OSError, RuntimeError) as exc:  # RuntimeError: no Redis configured (queue.get_pool)
        log.warning("could not tell the workers that %s was cancelled (%s)", ", ".join(cancelled.job_ids), exc)
    for start in range(0, len(cancelled.attempt_ids), _DROP_CHUNK):
        await queue.announce_ended(cancelled.attempt_ids[start : start + _DROP_CHUNK], pool=pool)


# ---- in a worker process: stopping the units that run --------------------------------------------------------


class Stopped:
    """What `CancelWatch.run` answers for a unit its job's cancel stopped (or that started after it)."""

    def __repr__(self) -> str:
        return "STOPPED"


STOPPED = Stopped()


class _Unit:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.task: asyncio.Task[Any] | None = None
        self.cancelled = False

    def stop(self) -> None:
        self.cancelled = True
        if self.task is not None:
            self.task.cancel("its job was cancelled")


class CancelWatch:
    """This process's running units, by job, stopped when their job is cancelled (the module's docstring)."""

    def __init__(self, redis: ArqRedis | None = None, *, sweep_s: float = SWEEP_S) -> None:
        self.redis = redis
        self.sweep_s = sweep_s
        self._units: dict[str, set[_Unit]] = {}
        self._known: OrderedDict[str, None] = OrderedDict()

    def running(self) -> dict[str, int]:
        """Units running now, by job."""
        return {job_id: len(units) for job_id, units in self._units.items()}

    def known_cancelled(self, job_id: str) -> bool:
        """Whether this process has heard that the job was cancelled (no Redis asked: O(1))."""
        return job_id in self._known

    def cancel_jobs(self, job_ids: Iterable[str]) -> int:
        """Stop every unit of these jobs running here, and skip any that starts later; how many were stopped."""
        stopped = 0
        for job_id in job_ids:
            self._known[job_id] = None
            self._known.move_to_end(job_id)
            for unit in list(self._units.get(job_id, ())):
                if not unit.cancelled:
                    unit.stop()
                    stopped += 1
        while len(self._known) > _REMEMBERED:
            self._known.popitem(last=False)
        if stopped:
            log.info("stopped %d running unit(s) of cancelled job(s) %s", stopped, " ".join(job_ids))
        return stopped

    async def is_cancelled(self, job_id: str) -> bool:
        """Heard of here, or marked in Redis (a message this process missed). Redis unreachable: not cancelled."""
        if self.known_cancelled(job_id):
            return True
        if self.redis is None:
            return False
        try:
            marked = bool(await self.redis.exists(cancelled_key(job_id)))
        except (RedisError, OSError) as exc:
            log.warning("could not look up whether job %s was cancelled (%s)", job_id, exc)
            return False
        if marked:
            self.cancel_jobs([job_id])
        return marked

    async def run[T](self, job_id: str | None, work: Coroutine[Any, Any, T]) -> T | Stopped:
        """Run one unit of job `job_id` as a task of its own: its result, or STOPPED if the job is cancelled before
        it starts or while it runs (the task is cancelled, and awaited until it has stopped: a jail it waited for
        is gone). Exceptions of the work propagate; so does a cancellation of the caller (a worker's shutdown)."""
        if job_id is None:
            return await work
        unit = _Unit(job_id)
        self._units.setdefault(job_id, set()).add(unit)
        try:
            # Registered first, then looked up: a cancel committed before this point is marked in Redis, and one
            # published after it reaches `unit` (its stop() before the task exists just marks it).
            if await self.is_cancelled(job_id) or unit.cancelled:
                return STOPPED
            current = asyncio.current_task()
            already = current.cancelling() if current is not None else 0
            unit.task = asyncio.ensure_future(work)
            try:
                result = await unit.task
            except asyncio.CancelledError:
                if current is not None and current.cancelling() > already:
                    raise  # the caller itself is being cancelled (a worker's shutdown, the queue's time limit)
                if unit.cancelled:
                    return STOPPED
                raise
            except Exception:
                if unit.cancelled:
                    return STOPPED  # whatever the stop made the work raise is not the unit's outcome
                raise
            # Work that returned although it was stopped (it caught the cancellation) reports nothing either.
            return STOPPED if unit.cancelled else result
        finally:
            units = self._units.get(job_id)
            if units is not None:
                units.discard(unit)
                if not units:
                    del self._units[job_id]
            if unit.task is None:
                work.close()  # never started: no "coroutine was never awaited"

    async def sweep(self) -> None:
        """Look up every job with a unit running here; stop the units of those marked cancelled."""
        if self.redis is None or not self._units:
            return
        job_ids = sorted(self._units)
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.exists(cancelled_key(job_id))
            marks = await pipe.execute()
        self.cancel_jobs([job_id for job_id, marked in zip(job_ids, marks, strict=True) if marked])

    async def listen(self, retry_s: float = 1.0) -> None:
        """Until cancelled: stop the units of every job published on CANCEL_CHANNEL, and `sweep` every sweep_s and
        whenever the subscription is made (again). A broken subscription is made again after `retry_s`."""
        assert self.redis is not None
        loop = asyncio.get_running_loop()
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(CANCEL_CHANNEL)
                await self.sweep()
                swept = loop.time()
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=self.sweep_s)
                    if message is not None and message.get("type") == "message":
                        data = message["data"]
                        self.cancel_jobs((data.decode() if isinstance(data, bytes) else str(data)).split())
                    if loop.time() - swept >= self.sweep_s:
                        await self.sweep()
                        swept = loop.time()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - subscribed again; meanwhile units start after a lookup
                log.warning("cancel channel lost (%s); subscribing again", exc)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
            await asyncio.sleep(retry_s)


def watch_of(ctx: dict[str, Any]) -> CancelWatch:
    """The worker process's CancelWatch (services/kernel/worker.py starts it); one without a listener if none was
    started (a worker function called on its own), which still finds a cancel marked in Redis."""
    watch = ctx.get(WATCH)
    if not isinstance(watch, CancelWatch):
        watch = ctx[WATCH] = CancelWatch(ctx.get("redis"))
    return watch


async def start(ctx: dict[str, Any]) -> None:
    """Start the worker process's CancelWatch and its listener (a worker's startup)."""
    watch = ctx[WATCH] = CancelWatch(ctx["redis"])
    ctx["cancel_listener"] = asyncio.create_task(watch.listen())


async def stop(ctx: dict[str, Any]) -> None:
    """Stop the listener (a worker's shutdown)."""
    listener = ctx.pop("cancel_listener", None)
    if listener is not None:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
