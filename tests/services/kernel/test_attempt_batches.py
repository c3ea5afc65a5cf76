"""Batched claims and results keep exactly-once, on both databases: a batch does for each attempt what one claim or
one finish would have done (a duplicate delivery in the same batch, a cancelled job, an attempt past its stage),
and the executor's coalesced writes lose and duplicate nothing when a batch fails half-way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from executor import worker as executor_worker
from services.kernel import attempts, db, jobs
from services.kernel.attempts import NewAttempt
from services.kernel.batching import Coalescer
from services.kernel.contracts import AttemptStatus, JobKind, JobStatus, Language, Stage
from services.kernel.models import Attempt, Execution, Job, Problem, utcnow
from tests.databases import BACKENDS, migrated_database
from tests.services.kernel.test_attempts import PROBLEM

Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture(params=BACKENDS)
async def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sessions]:
    """A fresh database, served by the process-wide engine the executor worker writes through."""
    postgres_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    async with migrated_database(tmp_path, postgres_url) as url:
        await db.dispose_engine()
        db.init_engine(role="tests", url=url)
        executor_worker._problems.clear()
        try:
            yield db.sessionmaker()
        finally:
            await db.dispose_engine()


async def _problem(session: AsyncSession) -> Problem:
    problem, _ = await attempts.put_problem(session, "t", "sum", dict(PROBLEM), ["body"])
    return problem


async def _job_with(sessions: Sessions, count: int, *, judges: Sequence[str] = ()) -> tuple[str, list[str]]:
    """A batch job of `count` new attempts (committed): its id and theirs."""
    async with sessions() as session:
        problem = await _problem(session)
        job = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_BATCH, total=count)
        ids = []
        for index in range(count):
            source = f"print({index})"
            spec = NewAttempt(language=Language.PYTHON, source_code=source, content={"s": source}, judges=list(judges))
            attempt, _ = await attempts.create_attempt(session, "t", problem, spec, job.job_id, ["body"])
            ids.append(attempt.attempt_id)
        await session.commit()
        return job.job_id, ids


async def _state(sessions: Sessions, attempt_id: str) -> tuple[str, str | None, str | None]:
    async with sessions() as session:
        attempt = await session.get(Attempt, attempt_id)
        assert attempt is not None
        return attempt.status, attempt.stage, attempt.verdict


async def _job(sessions: Sessions, job_id: str) -> Job:
    async with sessions() as session:
        job = await session.get(Job, job_id)
        assert job is not None
        return job


async def _executions(sessions: Sessions, attempt_id: str) -> list[Execution]:
    async with sessions() as session:
        return list(await session.scalars(select(Execution).where(Execution.attempt_id == attempt_id)))


# ---- the batch functions themselves -------------------------------------------------------------------------


async def test_a_batch_claim_claims_like_single_claims(sessions: Sessions) -> None:
    job_id, (first, second, later) = await _job_with(sessions, 3, judges=["sample_tests"])
    async with sessions() as session:
        # `later` is already past execute: a duplicate of its execute task must not claim it again.
        await attempts.claim(session, later, Stage.EXECUTE)
        await attempts.finish_stage(session, later, Stage.EXECUTE, verdict="AC")
        await session.commit()
    async with sessions() as session:
        claimed = await attempts.claim_many(session, [first, "att_unknown", later, second, first], Stage.EXECUTE)
        await session.commit()
    assert [a.attempt_id if a else None for a in claimed] == [first, None, None, second, first]
    assert all(a is None or a.status == AttemptStatus.RUNNING for a in claimed)
    assert await _state(sessions, first) == ("running", "execute", None)
    assert await _state(sessions, later) == ("running", "judge", "AC")
    job = await _job(sessions, job_id)
    # One try per claim, as claims one at a time count them (the earlier single claim of `later` was one).
    assert (job.status, job.tries) == (JobStatus.RUNNING, 4)
    # A retried claim of a stage it holds redoes it, batched or not.
    async with sessions() as session:
        again = await attempts.claim_many(session, [first], Stage.EXECUTE)
        assert again[0] is not None
        assert await attempts.claim_many(session, [], Stage.EXECUTE) == []


async def test_a_batch_claim_ends_the_attempts_of_a_cancelled_job(sessions: Sessions) -> None:
    live_job, (live,) = await _job_with(sessions, 1)
    cancelled_job, (running, queued) = await _job_with(sessions, 2)
    async with sessions() as session:
        await attempts.claim(session, running, Stage.EXECUTE)  # its worker died; the retry comes after the cancel
        await jobs.finish(session, cancelled_job, JobStatus.CANCELLED)
        await session.commit()
    async with sessions() as session:
        claimed = await attempts.claim_many(session, [running, live, queued], Stage.EXECUTE)
        await session.commit()
    assert [a.attempt_id if a else None for a in claimed] == [None, live, None]
    assert (await _state(sessions, running))[:2] == ("cancelled", None)
    assert (await _state(sessions, queued))[:2] == ("cancelled", None)
    assert (await _job(sessions, live_job)).status == JobStatus.RUNNING
    assert (await _job(sessions, cancelled_job)).status == JobStatus.CANCELLED


async def test_a_duplicate_result_in_the_same_batch_moves_the_attempt_once(sessions: Sessions) -> None:
    job_id, (judged,) = await _job_with(sessions, 1, judges=["sample_tests"])
    other_job, (plain, other) = await _job_with(sessions, 2)
    async with sessions() as session:
        await attempts.claim_many(session, [judged, plain, other], Stage.EXECUTE)
        await session.commit()
    async with sessions() as session:
        outcomes = await attempts.finish_many(
            session,
            Stage.EXECUTE,
            [
                (plain, {"verdict": "AC", "passed": 1, "total": 1}),
                (judged, {"verdict": "WA", "passed": 0, "total": 1}),
                (plain, {"verdict": "RE", "passed": 0, "total": 1}),  # the duplicate delivery, later
                (other, {"verdict": "TLE", "passed": 0, "total": 1}),
                ("att_unknown", {"verdict": "AC"}),
            ],
        )
        await session.commit()
    assert outcomes == [(True, None), (True, Stage.JUDGE), (False, None), (True, None), (False, None)]
    assert await _state(sessions, plain) == ("done", None, "AC")
    assert await _state(sessions, other) == ("done", None, "TLE")
    assert await _state(sessions, judged) == ("running", "judge", "WA")
    job = await _job(sessions, other_job)
    assert (job.status, job.progress_done) == (JobStatus.SUCCEEDED, 2)
    assert (await _job(sessions, job_id)).progress_done == 0  # not ended yet: judging is left
    # A late duplicate, batched or not, moves nothing and counts nothing.
    async with sessions() as session:
        late = await attempts.finish_many(session, Stage.EXECUTE, [(plain, {"verdict": "WA"}), (judged, {})])
        assert late == [(False, None), (False, Stage.JUDGE)]
        assert await attempts.finish_stage(session, plain, Stage.EXECUTE, verdict="WA") == (False, None)
        await session.commit()
    assert (await _job(sessions, other_job)).progress_done == 2
    assert await _state(sessions, plain) == ("done", None, "AC")


async def test_a_batch_result_of_a_cancelled_job_ends_it_where_it_stands(sessions: Sessions) -> None:
    job_id, (judged, plain) = await _job_with(sessions, 2, judges=["sample_tests"])
    async with sessions() as session:
        await attempts.claim_many(session, [judged, plain], Stage.EXECUTE)
        await jobs.finish(session, job_id, JobStatus.CANCELLED)
        await session.commit()
    async with sessions() as session:
        outcomes = await attempts.finish_many(
            session, Stage.EXECUTE, [(judged, {"verdict": "AC"}), (plain, {"verdict": "WA"})], last=False
        )
        await session.commit()
    # Its execution is kept, and it does not wait at `judge` for a task the reconciler will never send.
    assert outcomes == [(True, None), (True, None)]
    assert await _state(sessions, judged) == ("cancelled", None, "AC")
    assert await _state(sessions, plain) == ("cancelled", None, "WA")


async def test_a_batch_result_with_last_ends_the_pipeline(sessions: Sessions) -> None:
    job_id, (judged,) = await _job_with(sessions, 1, judges=["sample_tests"])
    async with sessions() as session:
        await attempts.claim_many(session, [judged], Stage.EXECUTE)
        assert await attempts.finish_many(session, Stage.EXECUTE, [(judged, {"verdict": "CE"})], last=True) == [
            (True, None)
        ]
        await session.commit()
    assert await _state(sessions, judged) == ("done", None, "CE")
    assert (await _job(sessions, job_id)).status == JobStatus.SUCCEEDED


async def test_cancel_live_ends_queued_and_running_attempts_and_only_live_ones(sessions: Sessions) -> None:
    job_id, (running, queued, done) = await _job_with(sessions, 3)
    other_job, (elsewhere,) = await _job_with(sessions, 1)
    async with sessions() as session:
        await attempts.claim_many(session, [running, done], Stage.EXECUTE)
        await attempts.finish_many(session, Stage.EXECUTE, [(done, {"verdict": "AC", "passed": 1, "total": 1})])
        assert await attempts.cancel_live(session, job_id) == sorted([running, queued])
        assert await attempts.cancel_live(session, job_id) == []
        # A worker's own end of a stopped stage finds it ended already.
        assert await attempts.end_cancelled(session, [running, done]) == []
        await session.commit()
    assert [(await _state(sessions, a))[0] for a in (running, queued, done)] == ["cancelled", "cancelled", "done"]
    assert (await _state(sessions, elsewhere))[0] == "queued"
    async with sessions() as session:
        assert await attempts.end_cancelled(session, [elsewhere]) == [elsewhere]
        await session.commit()
    assert (await _state(sessions, elsewhere))[0] == "cancelled"
    assert (await _job(sessions, other_job)).progress_done == 0


# ---- the executor's coalesced writes ------------------------------------------------------------------------


def _finished(attempt_id: str, verdict: str) -> executor_worker.Finished:
    passed = int(verdict == "AC")
    return executor_worker.Finished(
        attempt_id=attempt_id,
        values={"verdict": verdict, "passed": passed, "total": 1},
        execution={
            "attempt_id": attempt_id,
            "run": 0,
            "verdict": verdict,
            "passed": passed,
            "total": 1,
            "compile_output": "",
            "tests": [{"index": 0, "status": verdict}],
            "toolchain": "python",
            "build_cached": False,
            "duration_ms": 1,
            "created_at": utcnow(),
        },
    )


def _pipeline(window_s: float = 0.01) -> executor_worker.Pipeline:
    return executor_worker.Pipeline(
        claims=Coalescer(
            executor_worker.claim_batch, executor_worker.claim_one, max_size=16, window_s=window_s, name="claims"
        ),
        results=Coalescer(
            executor_worker.finish_batch, executor_worker.finish_one, max_size=16, window_s=window_s, name="results"
        ),
    )


async def test_concurrent_tasks_share_transactions_and_each_gets_its_own_outcome(sessions: Sessions) -> None:
    job_id, ids = await _job_with(sessions, 6)
    pipeline = _pipeline()
    claimed = await asyncio.gather(*(pipeline.claims.submit(a) for a in [*ids, ids[0]]))
    assert all(c is not None and c.source_code == f"print({i})" for i, c in enumerate(claimed[:6]))
    assert claimed[6] is not None and claimed[0] is not None and claimed[0].problem.tests[0].expected == "3\n"
    assert (pipeline.claims.batches, pipeline.claims.items, pipeline.claims.fallbacks) == (1, 7, 0)
    # The same attempt's result twice in one batch (a duplicate delivery): one moves it and writes its execution.
    results = [_finished(a, "AC" if i % 2 else "WA") for i, a in enumerate(ids)] + [_finished(ids[0], "AC")]
    outcomes = await asyncio.gather(*(pipeline.results.submit(r) for r in results))
    assert outcomes == [(True, None)] * 6 + [(False, None)]
    assert pipeline.results.batches == 1
    for index, attempt_id in enumerate(ids):
        verdict = "AC" if index % 2 else "WA"
        assert await _state(sessions, attempt_id) == ("done", None, verdict)
        assert [e.verdict for e in await _executions(sessions, attempt_id)] == [verdict]
    job = await _job(sessions, job_id)
    assert (job.status, job.progress_done, job.tries) == (JobStatus.SUCCEEDED, 6, 7)


async def test_a_cancelled_attempt_in_a_coalesced_batch_ends_and_the_others_run(sessions: Sessions) -> None:
    live_job, live = await _job_with(sessions, 2, judges=["sample_tests"])
    cancelled_job, (gone,) = await _job_with(sessions, 1)
    async with sessions() as session:
        await attempts.cancel_live(session, cancelled_job)
        await jobs.finish(session, cancelled_job, JobStatus.CANCELLED)
        await session.commit()
    pipeline = _pipeline()
    claimed = await asyncio.gather(*(pipeline.claims.submit(a) for a in [live[0], gone, live[1]]))
    assert [c is not None for c in claimed] == [True, False, True] and pipeline.claims.batches == 1
    # The job of the second is cancelled while both run: both results are kept, the attempt ends there.
    async with sessions() as session:
        await jobs.finish(session, live_job, JobStatus.CANCELLED)
        await session.commit()
    outcomes = await asyncio.gather(*(pipeline.results.submit(_finished(a, "AC")) for a in live))
    assert outcomes == [(True, None), (True, None)]
    for attempt_id in live:
        assert await _state(sessions, attempt_id) == ("cancelled", None, "AC")
        assert len(await _executions(sessions, attempt_id)) == 1
    assert (await _state(sessions, gone))[:2] == ("cancelled", None)
    assert await _executions(sessions, gone) == []


async def test_a_database_error_mid_batch_falls_back_and_loses_or_duplicates_nothing(
    sessions: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id, ids = await _job_with(sessions, 4, judges=["sample_tests"])
    pipeline = _pipeline()

    # The claims' batch fails after its UPDATEs ran (reading the problems): nothing of it may stay.
    real_specs = executor_worker._problem_specs
    failures = {"claims": 1, "results": 1}

    async def failing_specs(session: AsyncSession, keys: set[int]) -> Any:
        if failures["claims"]:
            failures["claims"] -= 1
            raise ConnectionError("the database went away mid-batch")
        return await real_specs(session, keys)

    monkeypatch.setattr(executor_worker, "_problem_specs", failing_specs)
    claimed = await asyncio.gather(*(pipeline.claims.submit(a) for a in ids))
    assert all(c is not None for c in claimed)
    assert (pipeline.claims.fallbacks, failures["claims"]) == (1, 0)
    assert (await _job(sessions, job_id)).tries == 4  # the failed batch's tries were rolled back

    # The results' batch fails after the attempts moved (writing the executions): rolled back, then one by one.
    real_upsert_many = executor_worker.upsert_many

    async def failing_upsert_many(session: AsyncSession, *args: Any, **kwargs: Any) -> None:
        if failures["results"]:
            failures["results"] -= 1
            raise ConnectionError("the database went away mid-batch")
        await real_upsert_many(session, *args, **kwargs)

    monkeypatch.setattr(executor_worker, "upsert_many", failing_upsert_many)
    results = [_finished(a, "AC") for a in ids] + [_finished(ids[1], "WA")]
    outcomes = await asyncio.gather(*(pipeline.results.submit(r) for r in results))
    assert outcomes == [(True, Stage.JUDGE)] * 4 + [(False, Stage.JUDGE)]
    assert (pipeline.results.fallbacks, failures["results"]) == (1, 0)
    for attempt_id in ids:
        assert await _state(sessions, attempt_id) == ("running", "judge", "AC")
        assert len(await _executions(sessions, attempt_id)) == 1
    async with sessions() as session:
        executions = await session.scalar(select(func.count()).select_from(Execution))
    assert executions == 4


async def test_a_failure_of_one_attempt_fails_only_its_own_caller(
    sessions: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ids = await _job_with(sessions, 3)
    pipeline = _pipeline()
    real_claim = attempts.claim

    async def claim(session: AsyncSession, attempt_id: str, stage: Stage) -> Attempt | None:
        if attempt_id == ids[1]:
            raise ConnectionError("this one cannot be claimed")
        return await real_claim(session, attempt_id, stage)

    async def claim_many(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the batch fails")

    monkeypatch.setattr(attempts, "claim", claim)
    monkeypatch.setattr(attempts, "claim_many", claim_many)
    outcomes = await asyncio.gather(*(pipeline.claims.submit(a) for a in ids), return_exceptions=True)
    assert outcomes[0] is not None and not isinstance(outcomes[0], BaseException)
    assert isinstance(outcomes[1], ConnectionError)
    assert outcomes[2] is not None and not isinstance(outcomes[2], BaseException)
    assert [(await _state(sessions, a))[0] for a in ids] == ["running", "queued", "running"]


async def test_batches_of_one_write_each_attempt_alone(sessions: Sessions) -> None:
    job_id, ids = await _job_with(sessions, 2)
    pipeline = executor_worker.Pipeline(
        claims=Coalescer(executor_worker.claim_batch, executor_worker.claim_one, max_size=1, window_s=0.01),
        results=Coalescer(executor_worker.finish_batch, executor_worker.finish_one, max_size=1, window_s=0.01),
    )
    assert all(await asyncio.gather(*(pipeline.claims.submit(a) for a in ids)))
    assert await asyncio.gather(*(pipeline.results.submit(_finished(a, "AC")) for a in ids)) == [(True, None)] * 2
    assert pipeline.claims.batches == pipeline.results.batches == 0
    assert (await _job(sessions, job_id)).progress_done == 2


# ---- a batch submission, stored in one INSERT -----------------------------------------------------------------


def _spec(source: str, uid: str | None = None, **fields: Any) -> NewAttempt:
    return NewAttempt(
        language=Language.PYTHON, source_code=source, content={"s": source}, attempt_uid=uid, judges=[], **fields
    )


async def test_a_batch_submission_answers_as_attempts_stored_one_at_a_time(sessions: Sessions) -> None:
    async with sessions() as session:
        problem = await _problem(session)
        stored, _ = await attempts.create_attempt(session, "t", problem, _spec("print(1)", "u1"), "job_a", ["b"])
        await session.commit()
    async with sessions() as session:
        problem = await _problem(session)
        batch = attempts.AttemptBatch(session, "t", "job_b")
        await batch.load_uids(["u1", "u2", "u2"])
        again, created_again = batch.add(problem, _spec("print(1)", "u1"), ["b", 0])
        first, created_first = batch.add(problem, _spec("print(2)", "u2"), ["b", 1])
        twice, created_twice = batch.add(problem, _spec("print(2)", "u2"), ["b", 2])
        plain, created_plain = batch.add(problem, _spec("print(3)"), ["b", 3])
        with pytest.raises(attempts.SubmissionError) as conflict:
            batch.add(problem, _spec("print(4)", "u2"), ["b", 4])
        assert (conflict.value.status, conflict.value.loc) == (409, ["b", 4, "attempt_uid"])
        with pytest.raises(attempts.SubmissionError) as reserved:
            batch.add(problem, _spec("print(5)", "mutant:x"), ["b", 5])
        assert reserved.value.loc == ["b", 5, "attempt_uid"]
        await batch.flush()
        await session.commit()
    assert (again.attempt_id, created_again) == (stored.attempt_id, False)
    assert created_first and (twice.attempt_id, created_twice) == (first.attempt_id, False)
    assert created_plain
    async with sessions() as session:
        rows = list(await session.scalars(select(Attempt).where(Attempt.job_id == "job_b")))
    assert sorted(a.attempt_id for a in rows) == sorted([first.attempt_id, plain.attempt_id])
    assert all((a.status, a.stage, a.pipeline) == ("queued", "execute", ["execute"]) for a in rows)
    async with sessions() as session:
        found = await attempts.find_problems(session, "t", ["sum", "nothing", "sum"])
    assert list(found) == ["sum"]
