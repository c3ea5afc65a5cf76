"""Every task ends its subject: an exception is retried with arq's Retry up to job_max_tries, and the last try's
gives up, ending the attempt or job it was about with the reason (services/kernel/queue.py `task`,
services/kernel/terminal.py), on both databases."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from arq.worker import Retry
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.kernel import attempts, jobs, queue, terminal
from services.kernel.attempts import NewAttempt
from services.kernel.contracts import AttemptStatus, JobKind, JobStatus, Language, Stage
from services.kernel.models import Attempt, Job, Report
from services.kernel.registry import Task
from services.kernel.settings import get_settings
from tests.databases import BACKENDS, database_sessions
from tests.services.kernel.test_attempts import PROBLEM

# --- the retry wrapper ----------------------------------------------------------------------------------------------


class Failing:
    """A task body that raises `error` and a GIVE_UP hook that records what it is told."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.gave_up: list[tuple[Task, str, str]] = []

    async def body(self, ctx: dict[str, Any], subject: str) -> None:
        raise self.error

    async def give_up(self, kind: Task, subject: str, reason: str) -> None:
        self.gave_up.append((kind, subject, reason))


async def test_an_exception_is_retried_with_a_growing_delay_until_the_last_try() -> None:
    failing = Failing(OSError("/secret/host/path is gone"))
    wrapped = queue.task(Task.EXECUTE_DIRECT)(failing.body)
    last = get_settings().job_max_tries
    delays = []
    for job_try in range(1, last):
        with pytest.raises(Retry) as retried:
            await wrapped({"job_try": job_try, queue.GIVE_UP: failing.give_up}, "job_1")
        delays.append(retried.value.defer_score)
    assert delays == sorted(delays) and delays[0] == queue.RETRY_FIRST_DELAY_S * 1000
    assert failing.gave_up == []
    # The last try gives up: the subject is ended with the exception's type, never its text, and the task ends.
    assert await wrapped({"job_try": last, queue.GIVE_UP: failing.give_up}, "job_1") is None
    assert failing.gave_up == [(Task.EXECUTE_DIRECT, "job_1", f"gave up after {last} tries (OSError)")]


async def test_a_try_that_runs_past_the_task_limit_gives_up_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """arq's own timeout would end the task and leave its subject `running` for ever (the reconciler sees a task
    that completed); the wrapper's deadline, inside arq's, ends the subject instead, on the first try: a try that
    ran out of time would take as long again."""
    monkeypatch.setenv("TRIBUNAL_JOB_TIMEOUT_S", "1")
    get_settings.cache_clear()
    try:
        assert queue.task_deadline_s() == 0.9
        slow = Failing(OSError("unused"))

        async def endless(ctx: dict[str, Any], subject: str) -> None:
            await asyncio.sleep(30)

        wrapped = queue.task(Task.EXECUTE_ATTEMPT)(endless)
        started = time.monotonic()
        assert await wrapped({"job_try": 1, queue.GIVE_UP: slow.give_up}, "att_1") is None
        assert 0.8 < time.monotonic() - started < 5
        assert slow.gave_up == [(Task.EXECUTE_ATTEMPT, "att_1", "gave up: it ran past the task limit (1 s)")]
        # A TimeoutError of the task's own (a client's timeout) is an exception like any other: retried.
        timing_out = Failing(TimeoutError("a provider's read timed out"))
        with pytest.raises(Retry):
            await queue.task(Task.EXECUTE_ATTEMPT)(timing_out.body)({"job_try": 1, queue.GIVE_UP: slow.give_up}, "a")
        assert timing_out.gave_up == [] and len(slow.gave_up) == 1
    finally:
        get_settings.cache_clear()


async def test_a_give_up_that_cannot_be_recorded_is_tried_again_alone() -> None:
    failing = Failing(OSError("boom"))
    outage = Failing(ConnectionRefusedError("the database is down"))

    async def unrecordable(kind: Task, subject: str, reason: str) -> None:
        await outage.give_up(kind, subject, reason)
        raise outage.error

    wrapped = queue.task(Task.EXECUTE_ATTEMPT)(failing.body)
    last = get_settings().job_max_tries
    with pytest.raises(Retry):
        await wrapped({"job_try": last, queue.GIVE_UP: unrecordable}, "att_1")
    # arq's next try (beyond job_max_tries) does not run the task again: it only records the give-up.
    assert await wrapped({"job_try": last + 1, queue.GIVE_UP: failing.give_up}, "att_1") is None
    assert failing.gave_up == [(Task.EXECUTE_ATTEMPT, "att_1", f"gave up after {last} tries")]
    assert [subject for _, subject, _ in outage.gave_up] == ["att_1"]


async def test_a_retry_the_task_asked_for_and_a_cancellation_pass_through() -> None:
    for error, expected in ((Retry(defer=5), Retry), (BaseException("cancelled"), BaseException)):
        failing = Failing(error)
        wrapped = queue.task(Task.BUILD_REPORT)(failing.body)
        with pytest.raises(expected):
            await wrapped({"job_try": get_settings().job_max_tries, queue.GIVE_UP: failing.give_up}, "rep_1")
        assert failing.gave_up == []


# --- what giving up leaves behind ---------------------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
async def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    async with database_sessions(request, tmp_path) as made:
        yield made


async def _attempt(session: AsyncSession, *, total: int = 1) -> tuple[Attempt, Job]:
    problem, _ = await attempts.put_problem(session, "t", "sum", dict(PROBLEM), ["body"])
    job = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_BATCH, total=total)
    spec = NewAttempt(language=Language.PYTHON, source_code="print(3)", content={"source_code": "print(3)"})
    attempt, _ = await attempts.create_attempt(session, "t", problem, spec, job.job_id, ["body"])
    await session.commit()
    return attempt, job


async def test_giving_up_ends_every_kind_of_subject(
    sessions: async_sessionmaker[AsyncSession], monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextlib.asynccontextmanager
    async def scope() -> AsyncIterator[AsyncSession]:
        async with sessions() as session:
            yield session
            await session.commit()

    monkeypatch.setattr(terminal, "session_scope", scope)
    async with sessions() as session:
        attempt, attempt_job = await _attempt(session)
        await attempts.claim(session, attempt.attempt_id, Stage.EXECUTE)
        await session.commit()
        unit_job = jobs.create_job(session, tenant="t", kind=JobKind.JUDGE, total=3)
        direct_job = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_DIRECT, total=1)
        report_job = jobs.create_job(session, tenant="t", kind=JobKind.REPORT, total=1)
        session.add(Report(report_id="rep_x", tenant="t", kind="agreement", params={}, job_id=report_job.job_id))
        await session.commit()
        ids = (attempt.attempt_id, attempt_job.job_id, unit_job.job_id, direct_job.job_id, report_job.job_id)

    await terminal.give_up(Task.EXECUTE_ATTEMPT, ids[0], "gave up after 3 tries (OSError)")
    await terminal.give_up(Task.JUDGE_ATTEMPT, f"{ids[0]}@{ids[2]}", "gave up after 3 tries (KeyError)")
    await terminal.give_up(Task.EXECUTE_DIRECT, ids[3], "gave up after 3 tries (RuntimeError)")
    await terminal.give_up(Task.BUILD_REPORT, "rep_x", "gave up after 3 tries (MemoryError)")
    # Giving up again (a duplicate task) changes nothing.
    await terminal.give_up(Task.EXECUTE_ATTEMPT, ids[0], "another reason")

    async with sessions() as session:
        ended = await session.get(Attempt, ids[0])
        assert ended is not None and (ended.status, ended.stage) == (AttemptStatus.FAILED, None)
        rows = {job.job_id: job for job in await session.scalars(select(Job).where(Job.job_id.in_(ids[1:])))}
    # The batch's job counted it, so it ended; the first reason is kept.
    assert (rows[ids[1]].progress_done, rows[ids[1]].status) == (1, JobStatus.SUCCEEDED)
    assert rows[ids[1]].error == "gave up after 3 tries (OSError)"
    for job_id, reason in ((ids[2], "KeyError"), (ids[3], "RuntimeError"), (ids[4], "MemoryError")):
        assert rows[job_id].status == JobStatus.FAILED, job_id
        assert rows[job_id].error == f"gave up after 3 tries ({reason})"


async def test_an_attempt_that_gave_up_fails_its_own_job(sessions: async_sessionmaker[AsyncSession]) -> None:
    async with sessions() as session:
        problem, _ = await attempts.put_problem(session, "t", "sum", dict(PROBLEM), ["body"])
        job = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_ATTEMPT, total=1)
        spec = NewAttempt(language=Language.PYTHON, source_code="print(3)", content={"source_code": "print(3)"})
        attempt, _ = await attempts.create_attempt(session, "t", problem, spec, job.job_id, ["body"])
        await session.commit()
        assert await attempts.give_up(session, attempt.attempt_id, "gave up after 3 tries (OSError)")
        assert not await attempts.give_up(session, attempt.attempt_id, "again")
        await session.commit()
        await session.refresh(job)
        assert (job.status, job.error) == (JobStatus.FAILED, "gave up after 3 tries (OSError)")
