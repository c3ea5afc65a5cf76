"""Workers serve tenants in turn (services/kernel/fair.py): one tenant's backlog delays another tenant's unit by at
most one unit per slot. Real Redis, real arq workers (services/kernel/worker.py's WakeableWorker, in this process or
as processes), a trivial task of known cost; every bound is on the order of starts, never on speed."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.worker import Retry, Worker, func

from services.kernel import attempts, db, fair, jobs, reconcile
from services.kernel.attempts import NewAttempt
from services.kernel.contracts import JobKind, Language
from services.kernel.queue import task_key
from services.kernel.registry import QUEUE_OF, Task
from services.kernel.worker import WakeableWorker
from tests.databases import BACKENDS, migrated_database
from tests.services.kernel.test_attempts import PROBLEM

REPO = Path(__file__).resolve().parents[3]
SLOTS = 2
COST_S = 0.05
BACKLOG = 1000


class Starts:
    """What each unit saw when it started, in the order units started: (tenant, index, try, due score, start ms,
    the tenant its coroutine ran as)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, int, int, str | None]] = []

    def keys(self) -> list[tuple[str, int]]:
        return [(tenant, index) for tenant, index, *_ in self.rows]

    def index_of(self, tenant: str, index: int, job_try: int = 1) -> int | None:
        for position, (t, i, tried, *_rest) in enumerate(self.rows):
            if (t, i, tried) == (tenant, index, job_try):
                return position
        return None


def _unit(starts: Starts, *, retry_first: set[str] = frozenset(), slots: fair.FairSlots | None = None) -> Any:
    """The task: note the start, then hold a slot of the worker (or of `slots`, a sandbox-like pool shared by the
    jobs already started) for COST_S. Tenants in `retry_first` raise Retry on their first try."""

    async def unit(ctx: dict[str, Any], tenant: str, index: int) -> None:
        if slots is None:
            starts.rows.append(
                (tenant, index, ctx["job_try"], ctx["score"], int(time.time() * 1000), fair.JOB_TENANT.get())
            )
            if tenant in retry_first and ctx["job_try"] == 1:
                raise Retry(defer=0.3)
            await asyncio.sleep(COST_S)
            return
        async with slots:
            starts.rows.append(
                (tenant, index, ctx["job_try"], ctx["score"], int(time.time() * 1000), fair.JOB_TENANT.get())
            )
            await asyncio.sleep(COST_S)

    return func(unit, name="unit")


@contextlib.asynccontextmanager
async def _workers(
    redis_url: str, queue: str, function: Any, *, count: int = 1, max_jobs: int = SLOTS, plain_arq: bool = False
) -> AsyncIterator[list[Worker]]:
    """`count` workers of `queue` running in this process until the block ends (plain arq workers: the control)."""
    settings = RedisSettings.from_dsn(redis_url)
    common: dict[str, Any] = {
        "functions": [function],
        "redis_settings": settings,
        "queue_name": queue,
        "max_jobs": max_jobs,
        "job_timeout": 60,
        "max_tries": 3,
        "handle_signals": False,
        "keep_result": 60,
    }
    workers: list[Worker] = [
        Worker(poll_delay=0.02, **common)
        if plain_arq
        else WakeableWorker(kind="fair-test", poll_delay=0.02, heartbeat_s=5.0, **common)
        for _ in range(count)
    ]
    running = [asyncio.create_task(worker.async_run()) for worker in workers]
    try:
        yield workers
    finally:
        for worker in workers:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await worker.close()
        for task in running:
            with contextlib.suppress(BaseException):
                await task


@pytest.fixture()
async def pool(redis_url: str) -> AsyncIterator[ArqRedis]:
    redis = await create_pool(RedisSettings.from_dsn(redis_url))
    yield redis
    await redis.aclose()


def _queue() -> str:
    return f"fair-{uuid.uuid4().hex[:8]}"


async def _enqueue(pool: ArqRedis, queue: str, tenant: str, count: int, *, start: int = 0) -> None:
    for index in range(start, start + count):
        job_id = f"{queue}:{tenant}-{index}"  # arq's job ids are global, not per queue
        assert await fair.enqueue_job(pool, queue, "unit", (tenant, index), job_id=job_id, tenant=tenant)


async def _until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def _fair_keys(pool: ArqRedis, queue: str) -> dict[str, Any]:
    """What the fairness lists still hold for the queue."""
    prefix = fair.prefix(queue)
    tenants = [t.decode() for t in await pool.zrange(f"{prefix}tenants", 0, -1)]
    return {
        "tenants": tenants,
        "listed": {t: await pool.zcard(fair.tenant_key(queue, t)) for t in ("A", "B", "C", fair.UNATTRIBUTED)},
        "owner": await pool.hlen(f"{prefix}owner"),
        "running": await pool.hlen(f"{prefix}running"),
    }


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_backlog_of_1000_delays_another_tenants_unit_by_at_most_the_slots(
    pool: ArqRedis, redis_url: str, workers: int
) -> None:
    queue, starts = _queue(), Starts()
    async with _workers(redis_url, queue, _unit(starts), count=workers):
        await _enqueue(pool, queue, "A", BACKLOG)
        await _until(lambda: len(starts.rows) >= 4 * SLOTS * workers, 30, "A's backlog never started")
        before = len(starts.rows)
        await _enqueue(pool, queue, "B", 1)
        await _until(lambda: ("B", 0) in starts.keys(), 30, "B's unit never started")
        b_at = starts.index_of("B", 0)
    assert b_at is not None
    # Every slot may have been claimed for A just before B's unit was queued; the first slot freed after is B's.
    a_first = b_at - before
    assert a_first <= SLOTS * workers + 1, f"{a_first} of A's units started after B's was queued, before it"
    # A's backlog was still there: B did not merely wait for it to drain.
    assert len(starts.rows) < BACKLOG / 2
    # The unit ran as its tenant's (what FairSlots inside a worker reads).
    assert {(row[0], row[5]) for row in starts.rows} <= {("A", "A"), ("B", "B")}


async def test_plain_arq_serves_the_backlog_first(pool: ArqRedis, redis_url: str) -> None:
    # The control: the same measure on arq's own worker (oldest due first) finds B behind nearly all of A's units.
    queue, starts, backlog = _queue(), Starts(), 40
    async with _workers(redis_url, queue, _unit(starts), plain_arq=True):
        for index in range(backlog):
            await pool.enqueue_job("unit", "A", index, _queue_name=queue, _job_id=f"{queue}:A-{index}")
        await _until(lambda: len(starts.rows) >= SLOTS, 30, "A's backlog never started")
        before = len(starts.rows)
        await pool.enqueue_job("unit", "B", 0, _queue_name=queue, _job_id=f"{queue}:B-0")
        await _until(lambda: ("B", 0) in starts.keys(), 60, "B's unit never started")
        b_at = starts.index_of("B", 0)
    assert b_at is not None and b_at - before >= backlog - before - SLOTS


async def test_three_tenants_interleave(pool: ArqRedis, redis_url: str) -> None:
    # All queued before any worker runs, A's first: oldest-first would start 60 of A's.
    queue, starts = _queue(), Starts()
    for tenant in "ABC":
        await _enqueue(pool, queue, tenant, 200)
    async with _workers(redis_url, queue, _unit(starts)):
        await _until(lambda: len(starts.rows) >= 60, 60, "the units never started")
    first = [tenant for tenant, *_ in starts.rows[:60]]
    for end in range(1, 61):
        counts = [first[:end].count(t) for t in "ABC"]
        # Claimed in strict turn; two units claimed one after the other may start in either order (each start is a
        # few Redis round trips after its claim), so a prefix may be one ahead: 2, not 1.
        assert max(counts) - min(counts) <= 2, f"after {end} starts: {dict(zip('ABC', counts, strict=True))}"
    # Within a tenant, in arq's order: oldest first (units queued in the same millisecond by job id).
    for tenant in "ABC":
        started = [(score, f"{queue}:{t}-{index}") for t, index, _, score, *_ in starts.rows if t == tenant]
        assert started == sorted(started)


async def test_a_retry_of_b_is_not_starved_by_as_backlog(pool: ArqRedis, redis_url: str) -> None:
    # B's unit fails its first try and is due again 0.3 s later, when A's backlog is queued ahead of it (in arq's
    # order, its retry is the newest entry of the queue). Once due, it is among the next units claimed.
    queue, starts = _queue(), Starts()
    async with _workers(redis_url, queue, _unit(starts, retry_first={"B"})):
        await _enqueue(pool, queue, "A", BACKLOG)
        await _until(lambda: len(starts.rows) >= 4 * SLOTS, 30, "A's backlog never started")
        await _enqueue(pool, queue, "B", 1)
        await _until(lambda: starts.index_of("B", 0, 2) is not None, 30, "B's retry never started")
    second = starts.index_of("B", 0, 2)
    assert second is not None and starts.index_of("B", 0, 1) is not None
    due_ms = starts.rows[second][3]  # the retry's score in arq's queue: when it became due
    a_after_due = [row for row in starts.rows[:second] if row[0] == "A" and row[4] > due_ms]
    assert len(a_after_due) <= SLOTS + 1, f"{len(a_after_due)} of A's units started after B's retry was due"
    assert len(starts.rows) < BACKLOG / 2


async def test_started_jobs_share_slots_tenant_by_tenant(pool: ArqRedis, redis_url: str) -> None:
    # As in the executor: a worker starts more jobs than it has sandbox slots (4 per slot there, so compiles
    # overlap; 8 here), and the started jobs wait for the slots. B's unit, once claimed, waits for the next slot
    # freed, not behind every job A has started (with asyncio.Semaphore: behind ~13 of them).
    queue, starts, sandbox = _queue(), Starts(), fair.FairSlots(SLOTS)
    async with _workers(redis_url, queue, _unit(starts, slots=sandbox), max_jobs=8 * SLOTS):
        await _enqueue(pool, queue, "A", 200)
        await _until(lambda: len(starts.rows) >= 8 * SLOTS, 30, "A's backlog never started")
        before = len(starts.rows)
        await _enqueue(pool, queue, "B", 1)
        await _until(lambda: ("B", 0) in starts.keys(), 30, "B's unit never got a slot")
        b_at = starts.index_of("B", 0)
    assert b_at is not None
    # Claimed once a job slot frees (A's next unit through the sandbox), then the next sandbox slot freed.
    assert b_at - before <= SLOTS + 2, f"{b_at - before} of A's units went through the slots first"


async def test_the_lists_are_empty_once_every_job_ended(pool: ArqRedis, redis_url: str) -> None:
    queue, starts = _queue(), Starts()
    async with _workers(redis_url, queue, _unit(starts, retry_first={"B"})) as workers:
        await _enqueue(pool, queue, "A", 10)
        await _enqueue(pool, queue, "B", 2)
        # Ten of A's, and B's two twice each (their first tries are retried).
        await _until(lambda: len(starts.rows) == 14 and workers[0].jobs_complete == 12, 30, "the units never ended")
        await _until(lambda: not workers[0].tasks or all(t.done() for t in workers[0].tasks.values()), 10, "busy")
        assert await pool.zcard(queue) == 0
        assert await _fair_keys(pool, queue) == {
            "tenants": [],
            "listed": {"A": 0, "B": 0, "C": 0, fair.UNATTRIBUTED: 0},
            "owner": 0,
            "running": 0,
        }


async def test_work_enqueued_without_a_tenant_is_still_served(pool: ArqRedis, redis_url: str) -> None:
    # An older gateway during a rolling update (or arq's own API) enqueues straight into arq's queue.
    queue, starts = _queue(), Starts()
    await pool.enqueue_job("unit", "C", 0, _queue_name=queue, _job_id=f"{queue}:C-0")
    async with _workers(redis_url, queue, _unit(starts)):
        await _until(lambda: ("C", 0) in starts.keys(), 30, "the unattributed unit never started")
    assert starts.rows[0][5] == fair.UNATTRIBUTED


# ---- a worker process killed mid-job ---------------------------------------------------------------------------

HEARTBEAT_S = 0.5


@pytest.fixture()
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def _start_worker(processes: list[subprocess.Popen[bytes]], redis_url: str, queue: str, sleep_s: float) -> None:
    # tests/services/kernel/liveness_worker.py: a WakeableWorker whose one task, `record`, notes its try and sleeps.
    argv = [
        sys.executable,
        "-m",
        "tests.services.kernel.liveness_worker",
        redis_url,
        queue,
        str(HEARTBEAT_S),
        str(sleep_s),
    ]
    processes.append(subprocess.Popen(argv, cwd=REPO))


async def test_a_dead_workers_claims_are_taken_again(
    pool: ArqRedis, redis_url: str, processes: list[subprocess.Popen[bytes]]
) -> None:
    queue, tag = _queue(), uuid.uuid4().hex[:8]
    job_id = f"record-{tag}"
    assert await fair.enqueue_job(pool, queue, "record", (tag,), job_id=job_id, tenant="A")
    _start_worker(processes, redis_url, queue, sleep_s=300)
    await _until_redis(pool, f"liveness:{tag}", [b"1"], "the first worker never started the job")
    assert await pool.hget(f"{fair.prefix(queue)}running", job_id) == b"A"
    processes[0].send_signal(signal.SIGKILL)
    processes[0].wait()
    _start_worker(processes, redis_url, queue, sleep_s=0)
    # Claimed again (try 2) once the dead worker's mark expired, as the same tenant's.
    await _until_redis(pool, f"liveness:{tag}", [b"1", b"2", b"done"], "the dead worker's job was not taken again")
    # Then it ends for good, and leaves the lists (the worker releases it just after the task returns).
    empty = {"tenants": [], "listed": {"A": 0, "B": 0, "C": 0, fair.UNATTRIBUTED: 0}, "owner": 0, "running": 0}
    deadline = time.monotonic() + 10
    while await _fair_keys(pool, queue) != empty and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert await _fair_keys(pool, queue) == empty


async def _until_redis(pool: ArqRedis, key: str, expected: list[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while await pool.lrange(key, 0, -1) != expected:
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


# ---- the reconciler -------------------------------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
    postgres_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    async with migrated_database(tmp_path, postgres_url) as url:
        await db.dispose_engine()
        db.init_engine("tests", url)
        try:
            yield
        finally:
            await db.dispose_engine()


@pytest.fixture()
async def own_redis(redis_url: str) -> AsyncIterator[ArqRedis]:
    """A Redis database of this test's own: the reconciler enqueues onto the real queues' names."""
    redis = await create_pool(RedisSettings.from_dsn(f"{redis_url.rsplit('/', 1)[0]}/7"))
    await redis.flushdb()
    yield redis
    await redis.flushdb()
    await redis.aclose()


async def _attempts_of(tenant: str, count: int) -> list[str]:
    async with db.session_scope() as session:
        problem, _ = await attempts.put_problem(session, tenant, "sum", dict(PROBLEM), ["body"])
        job = jobs.create_job(session, tenant=tenant, kind=JobKind.EXECUTE_BATCH, total=count)
        ids = []
        for index in range(count):
            source = f"print({index})"
            spec = NewAttempt(language=Language.PYTHON, source_code=source, content={"s": source}, judges=[])
            attempt, _ = await attempts.create_attempt(session, tenant, problem, spec, job.job_id, ["body"])
            ids.append(attempt.attempt_id)
        return ids


async def test_the_reconciler_enqueues_lost_work_as_its_tenants(database: None, own_redis: ArqRedis) -> None:
    lost_a, lost_b = await _attempts_of("tenant-a", 3), await _attempts_of("tenant-b", 1)
    # One more of B's, enqueued without a tenant (an older gateway): the reconciler gives it its tenant.
    (unattributed,) = await _attempts_of("tenant-b", 1)
    async with db.session_scope() as session:
        direct = jobs.create_job(session, tenant="tenant-c", kind=JobKind.EXECUTE_DIRECT, total=1)
    executor_queue = QUEUE_OF[Task.EXECUTE_ATTEMPT]
    orphan = task_key(Task.EXECUTE_ATTEMPT, unattributed)
    await own_redis.enqueue_job(Task.EXECUTE_ATTEMPT.value, unattributed, _job_id=orphan, _queue_name=executor_queue)

    restored = await reconcile.reconcile_once(own_redis, grace_s=0)

    assert restored == 5
    for tenant, ids in (("tenant-a", lost_a), ("tenant-b", [*lost_b, unattributed])):
        for attempt_id in ids:
            assert await fair.owner(own_redis, executor_queue, task_key(Task.EXECUTE_ATTEMPT, attempt_id)) == tenant
    assert await fair.owner(own_redis, executor_queue, task_key(Task.EXECUTE_DIRECT, direct.job_id)) == "tenant-c"
    # Claimed in turn: each tenant's first before anyone's second.
    claimed = await fair.claim(own_redis, executor_queue, 6, in_progress_ms=10_000)
    assert sorted(job.tenant for job in claimed[:3]) == ["tenant-a", "tenant-b", "tenant-c"]
    assert sorted(job.tenant for job in claimed) == ["tenant-a"] * 3 + ["tenant-b"] * 2 + ["tenant-c"]


# ---- FairSlots ---------------------------------------------------------------------------------------------------


async def _hold(slots: fair.FairSlots, tenant: str, order: list[str], release: asyncio.Event) -> None:
    fair.JOB_TENANT.set(tenant)
    async with slots:
        order.append(tenant)
        await release.wait()


async def test_fair_slots_serve_waiting_tenants_in_turn() -> None:
    slots, order, go = fair.FairSlots(2), [], asyncio.Event()
    holders = [asyncio.create_task(_hold(slots, "A", order, go)) for _ in range(12)]
    await asyncio.sleep(0)
    late = asyncio.create_task(_hold(slots, "B", order, go))
    cancelled = asyncio.create_task(_hold(slots, "C", order, go))
    await asyncio.sleep(0.01)
    assert order == ["A", "A"] and slots.held("A") == 2
    cancelled.cancel()  # a waiter that gives up leaves no slot behind
    await asyncio.sleep(0.01)
    go.set()
    await asyncio.gather(*holders, late, return_exceptions=True)
    # B, queued after ten of A's waiters, was granted the first slot freed.
    assert order.index("B") == 2
    assert order.count("A") == 12 and "C" not in order
    assert not slots.locked() and slots.held("A") == slots.held("B") == 0
