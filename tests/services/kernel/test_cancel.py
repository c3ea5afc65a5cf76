"""Cancels (services/kernel/cancel.py), piece by piece, on real Redis and both databases: what a cancel ends in the
database and which queued tasks it names; how a worker process's CancelWatch stops the units of a cancelled job
(told by a message, by a mark a later unit finds, or by a sweep when the message was missed) and only those; and
the bulk removal of a job's queued tasks, which leaves running ones alone. The whole path, with jails, is
tests/gateway/test_cancel.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.constants import in_progress_key_prefix, job_key_prefix
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.kernel import attempts, cancel, db, jobs, queue
from services.kernel.attempts import NewAttempt
from services.kernel.contracts import JobKind, JobStatus, Language, PairStatus, Stage
from services.kernel.jobs import job_units
from services.kernel.models import Attempt, Job, SimilarityPair
from services.kernel.pending import synthesis_tally
from services.kernel.plans import JudgePlan, PerturbPlan, SynthesisPlan, SynthesisSlot
from services.kernel.registry import QUEUE_OF, Task
from services.kernel.subjects import pair_subject
from tests.databases import BACKENDS, migrated_database
from tests.services.kernel.test_attempts import PROBLEM

Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture(params=BACKENDS)
async def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sessions]:
    postgres_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    async with migrated_database(tmp_path, postgres_url) as url:
        await db.dispose_engine()
        db.init_engine(role="tests", url=url)
        try:
            yield db.sessionmaker()
        finally:
            await db.dispose_engine()


@pytest.fixture()
async def pool(redis_url: str) -> AsyncIterator[ArqRedis]:
    redis = await create_pool(RedisSettings.from_dsn(redis_url))
    yield redis
    await redis.aclose()


# ---- the database ---------------------------------------------------------------------------------------------


async def _perturbation(sessions: Sessions) -> tuple[Job, Job, dict[str, str]]:
    """A perturbation job with a confirmation job: a seed, and mutants that are queued, running, done; the
    confirmation has a scored pair and a queued one."""
    async with sessions() as session:
        problem, _ = await attempts.put_problem(session, "t", "sum", dict(PROBLEM), ["body"])
        confirm = jobs.create_job(session, tenant="t", kind=JobKind.SIMILARITY, total=2)
        job = jobs.create_job(
            session,
            tenant="t",
            kind=JobKind.PERTURB,
            total=4,
            plan=PerturbPlan(attempt_ids=["att_seed"], confirm_job_id=confirm.job_id),
        )
        ids = {}
        for name in ("queued", "running", "done"):
            spec = NewAttempt(language=Language.PYTHON, source_code=f"print({name!r})", content={"n": name}, judges=[])
            attempt, _ = await attempts.create_attempt(session, "t", problem, spec, job.job_id, ["body"])
            ids[name] = attempt.attempt_id
        for ordinal, status in enumerate((PairStatus.SCORED, PairStatus.QUEUED)):
            session.add(
                SimilarityPair(
                    job_id=confirm.job_id,
                    ordinal=ordinal,
                    pair_key=f"p{ordinal}",
                    mode="stdio",
                    reference_language="python",
                    reference_source="print(1)",
                    candidate_language="python",
                    candidate_source="print(2)",
                    status=status,
                )
            )
        await session.commit()
    async with sessions() as session:
        await attempts.claim_many(session, [ids["running"], ids["done"]], Stage.EXECUTE)
        await attempts.finish_many(session, Stage.EXECUTE, [(ids["done"], {"verdict": "AC", "passed": 1, "total": 1})])
        await session.commit()
    return job, confirm, ids


async def test_a_cancel_ends_every_live_piece_of_the_job_and_its_confirmation(sessions: Sessions) -> None:
    job, confirm, ids = await _perturbation(sessions)
    async with sessions() as session:
        loaded = await session.get(Job, job.job_id)
        assert loaded is not None
        ended = await cancel.cancel_job(session, loaded)
        await session.commit()
    assert ended is not None
    assert ended.job_ids == [job.job_id, confirm.job_id]
    assert ended.attempt_ids == sorted([ids["queued"], ids["running"]])
    # Every stage's task of each attempt it ended, its own seed tasks, and the queued pair's task: what may wait.
    for attempt_id in ended.attempt_ids:
        assert {(task, attempt_id) for task in (Task.EXECUTE_ATTEMPT, Task.VERIFY_MUTANT, Task.JUDGE_ATTEMPT)} <= set(
            ended.work
        )
    assert (Task.SCORE_PAIR, pair_subject(confirm.job_id, 1)) in ended.work
    assert (Task.SCORE_PAIR, pair_subject(confirm.job_id, 0)) not in ended.work
    assert (Task.PERTURB_ATTEMPT, f"att_seed@{job.job_id}") in ended.work
    async with sessions() as session:
        statuses = {a.attempt_id: a.status for a in await session.scalars(select(Attempt))}
        pairs = {p.ordinal: p.status for p in await session.scalars(select(SimilarityPair))}
        both = {j.job_id: j for j in await session.scalars(select(Job))}
    assert statuses == {ids["queued"]: "cancelled", ids["running"]: "cancelled", ids["done"]: "done"}
    assert pairs == {0: "scored", 1: "cancelled"}
    assert {j.status for j in both.values()} == {JobStatus.CANCELLED}
    assert both[job.job_id].progress_done == 1  # the mutant that was done before the cancel
    # The running mutant's result comes in late: it moves nothing, counts nothing, and progress stays frozen.
    async with sessions() as session:
        late = await attempts.finish_many(session, Stage.EXECUTE, [(ids["running"], {"verdict": "TLE"})])
        assert late == [(False, None)]
        assert await jobs.count_unit_once(session, confirm.job_id, "pair:1") is False
        await session.commit()
        again = await session.get(Job, job.job_id)
        assert again is not None and again.progress_done == 1
        running = await session.get(Attempt, ids["running"])
        assert running is not None and (running.status, running.verdict) == ("cancelled", None)
        # A second cancel finds nothing live.
        assert await cancel.cancel_job(session, again) is None


async def test_a_job_that_ended_first_is_not_cancelled(sessions: Sessions) -> None:
    async with sessions() as session:
        job = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_DIRECT, total=1)
        await session.commit()
    async with sessions() as session:
        stale = await session.get(Job, job.job_id)  # read while live, as the gateway reads it before its writes
        assert stale is not None
        async with sessions() as other:
            await jobs.finish(other, job.job_id, JobStatus.SUCCEEDED, result={"verdict": "AC"})
            await other.commit()
        assert await cancel.cancel_job(session, stale) is None
        await session.rollback()
    async with sessions() as session:
        ended = await session.get(Job, job.job_id)
        assert ended is not None and (ended.status, ended.progress_done) == (JobStatus.SUCCEEDED, 1)


# ---- Redis: the queued tasks ----------------------------------------------------------------------------------


async def test_drop_queued_removes_waiting_tasks_and_leaves_running_ones(pool: ArqRedis) -> None:
    job_id = f"job_{uuid.uuid4().hex[:12]}"
    subjects = [pair_subject(job_id, ordinal) for ordinal in range(50)]
    other = pair_subject(f"job_{uuid.uuid4().hex[:12]}", 0)
    for subject in [*subjects, other]:
        assert await queue.enqueue(Task.SCORE_PAIR, subject, tenant="t", pool=pool, wake=False)
    name = QUEUE_OF[Task.SCORE_PAIR]
    running = queue.task_key(Task.SCORE_PAIR, subjects[0])
    await pool.set(in_progress_key_prefix + running, b"1", px=60_000)
    try:
        dropped = await cancel.drop_queued([(Task.SCORE_PAIR, s) for s in subjects], pool=pool)
        assert dropped == 49
        for subject in subjects[1:]:
            key = queue.task_key(Task.SCORE_PAIR, subject)
            assert await pool.zscore(name, key) is None and not await pool.exists(job_key_prefix + key)
        # The running one stays its worker's (the cancel's message stops it), and so does another job's task.
        assert await pool.zscore(name, running) is not None
        assert await pool.zscore(name, queue.task_key(Task.SCORE_PAIR, other)) is not None
        assert await cancel.drop_queued([(Task.SCORE_PAIR, s) for s in subjects[1:]], pool=pool) == 0
    finally:
        await pool.delete(in_progress_key_prefix + running)
        await cancel.drop_queued([(Task.SCORE_PAIR, s) for s in [subjects[0], other]], pool=pool)


# ---- a worker process's units ---------------------------------------------------------------------------------


class _Probe:
    """A unit's work: says when it started, then waits (or returns at once); notes how it ended."""

    def __init__(self, wait_s: float = 60.0) -> None:
        self.wait_s = wait_s
        self.started = asyncio.Event()
        self.ended: str | None = None

    async def __call__(self) -> str:
        self.started.set()
        try:
            await asyncio.sleep(self.wait_s)
        except asyncio.CancelledError:
            self.ended = "cancelled"
            raise
        self.ended = "finished"
        return "value"


async def _listening(pool: ArqRedis, sweep_s: float = cancel.SWEEP_S) -> tuple[cancel.CancelWatch, asyncio.Task[Any]]:
    watch = cancel.CancelWatch(pool, sweep_s=sweep_s)
    listener = asyncio.create_task(watch.listen(retry_s=0.1))
    # Subscribed once the channel counts a subscriber more (other watches of this session may be listening too).
    for _ in range(200):
        if listener.done() or any(n for _, n in await pool.pubsub_numsub(cancel.CANCEL_CHANNEL)):
            break
        await asyncio.sleep(0.01)
    return watch, listener


async def _stop(listener: asyncio.Task[Any]) -> None:
    listener.cancel()
    with pytest.raises(asyncio.CancelledError):
        await listener


async def test_a_published_cancel_stops_the_units_of_its_job_and_only_those(pool: ArqRedis) -> None:
    watch, listener = await _listening(pool)
    cancelled, kept = f"job_{uuid.uuid4().hex[:12]}", f"job_{uuid.uuid4().hex[:12]}"
    try:
        first, second, other = _Probe(), _Probe(), _Probe(wait_s=0.5)
        units = [
            asyncio.create_task(watch.run(cancelled, first())),
            asyncio.create_task(watch.run(cancelled, second())),
            asyncio.create_task(watch.run(kept, other())),
        ]
        await asyncio.wait_for(asyncio.gather(first.started.wait(), second.started.wait()), 10)
        assert watch.running() == {cancelled: 2, kept: 1}
        await cancel.announce([cancelled], pool=pool)
        outcomes = await asyncio.wait_for(asyncio.gather(*units), 10)
        assert outcomes == [cancel.STOPPED, cancel.STOPPED, "value"]
        assert (first.ended, second.ended, other.ended) == ("cancelled", "cancelled", "finished")
        assert watch.running() == {}
        # A unit of the job that starts later never runs: the watch heard of the cancel (no Redis asked).
        late = _Probe()
        assert await watch.run(cancelled, late()) is cancel.STOPPED and not late.started.is_set()
        assert watch.known_cancelled(cancelled) and not watch.known_cancelled(kept)
    finally:
        await _stop(listener)
        await pool.delete(cancel.cancelled_key(cancelled))


async def test_a_watch_that_missed_the_message_finds_the_mark(pool: ArqRedis) -> None:
    job_id = f"job_{uuid.uuid4().hex[:12]}"
    try:
        # No listener: a unit that starts after the cancel finds the job's mark in Redis and never runs.
        await pool.set(cancel.cancelled_key(job_id), b"1", ex=60)
        deaf = cancel.CancelWatch(pool)
        probe = _Probe()
        assert await deaf.run(job_id, probe()) is cancel.STOPPED and not probe.started.is_set()
        # A unit already running when the mark was set (the message lost) is stopped by the periodic sweep.
        other = f"job_{uuid.uuid4().hex[:12]}"
        watch, listener = await _listening(pool, sweep_s=0.2)
        try:
            running = _Probe()
            unit = asyncio.create_task(watch.run(other, running()))
            await asyncio.wait_for(running.started.wait(), 10)
            await pool.set(cancel.cancelled_key(other), b"1", ex=60)  # marked, never published
            assert await asyncio.wait_for(unit, 10) is cancel.STOPPED
            assert running.ended == "cancelled"
        finally:
            await _stop(listener)
            await pool.delete(cancel.cancelled_key(other))
    finally:
        await pool.delete(cancel.cancelled_key(job_id))


async def test_a_unit_whose_caller_is_cancelled_is_not_reported_as_stopped(pool: ArqRedis) -> None:
    """A worker's shutdown (or the queue's time limit) cancels the task itself: that propagates, as before."""
    watch = cancel.CancelWatch(pool)
    probe = _Probe()
    caller = asyncio.create_task(watch.run(f"job_{uuid.uuid4().hex[:12]}", probe()))
    await asyncio.wait_for(probe.started.wait(), 10)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert probe.ended == "cancelled" and watch.running() == {}


async def test_a_units_own_error_and_result_pass_through(pool: ArqRedis) -> None:
    watch = cancel.CancelWatch(pool)

    async def broken() -> None:
        raise ValueError("the unit's own error")

    with pytest.raises(ValueError, match="own error"):
        await watch.run(f"job_{uuid.uuid4().hex[:12]}", broken())
    assert await watch.run(None, _Probe(wait_s=0)()) == "value"
    assert watch.running() == {}


async def test_a_cancel_names_the_steps_other_kinds_of_job_may_have_queued(sessions: Sessions) -> None:
    async with sessions() as session:
        synthesis = jobs.create_job(
            session,
            tenant="t",
            kind=JobKind.SYNTHESIZE,
            total=2,
            plan=SynthesisPlan(
                requirements=[],
                seed_ids=[],
                targets=[4, 3],
                llms=[],
                slots=[SynthesisSlot(slot="r0:t4:0"), SynthesisSlot(slot="r0:t3:0", after=["r0:t4:0"])],
            ),
        )
        direct = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_DIRECT, total=1)
        rejudge = jobs.create_job(
            session,
            tenant="t",
            kind=JobKind.JUDGE,
            total=2,
            plan=JudgePlan(attempt_ids=["a", "b"], judges=["sample_tests"], conditions=["blind"], repeats=1),
        )
        await session.commit()
    found = {}
    for job in (synthesis, direct, rejudge):
        async with sessions() as session:
            loaded = await session.get(Job, job.job_id)
            assert loaded is not None
            ended = await cancel.cancel_job(session, loaded)
            await session.commit()
        assert ended is not None and ended.job_ids == [job.job_id]
        found[job.kind] = set(ended.work)
    assert found[JobKind.SYNTHESIZE] == {
        (Task.SYNTHESIZE_PROGRAM, f"r0:t4:0:0@{synthesis.job_id}"),  # the first draw of the slot that is due
        (Task.FINISH_SYNTHESIS, synthesis.job_id),
    }
    # The draw that was due ends as a draw the cancel stopped: nothing of the job is left pending.
    async with sessions() as session:
        assert synthesis_tally(await job_units(session, synthesis.job_id)) == {"cancelled": 1}
    assert found[JobKind.EXECUTE_DIRECT] == {(Task.EXECUTE_DIRECT, direct.job_id)}
    assert found[JobKind.JUDGE] == {(Task.JUDGE_ATTEMPT, f"{a}@{rejudge.job_id}") for a in ("a", "b")}
