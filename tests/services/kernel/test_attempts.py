"""The attempt lifecycle on both databases: each stage of a pipeline is claimed and finished once, the next stage
is data, only the write that ends an attempt counts toward its job, and the reconciler reads pending work from
the registry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel import attempts, jobs, registry
from services.kernel.attempts import NewAttempt, NewMutant, SubmissionError
from services.kernel.contracts import Arm, AttemptStatus, JobKind, JobStatus, Language, Stage
from services.kernel.models import Attempt, Job, Problem, utcnow
from services.kernel.pending import pending_attempts
from services.kernel.registry import SERVICES, Task
from tests.databases import BACKENDS, database_sessions

PROBLEM: dict[str, Any] = {
    "title": "sum",
    "statement": "Print a + b.",
    "mode": "stdio",
    "entry_point": None,
    "tests": [{"input": "1 2\n", "expected": "3\n", "public": True}],
    "checker": {"kind": "tokens"},
    "limits": {},
    "references": [],
    "input_spec": None,
}


@pytest.fixture(params=BACKENDS)
async def session(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncSession]:
    async with database_sessions(request, tmp_path) as sessions, sessions() as session:
        yield session


async def _problem(session: AsyncSession) -> Problem:
    problem, _ = await attempts.put_problem(session, "t", "sum", dict(PROBLEM), ["body"])
    return problem


async def _submit(
    session: AsyncSession, problem: Problem, *, judges: list[str], uid: str | None = None, source: str = "print(3)"
) -> tuple[Attempt, Job]:
    job = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_ATTEMPT, total=1)
    spec = NewAttempt(
        language=Language.PYTHON, source_code=source, content={"source_code": source}, attempt_uid=uid, judges=judges
    )
    attempt, _ = await attempts.create_attempt(session, "t", problem, spec, job.job_id, ["body"])
    await session.commit()
    return attempt, job


async def _reload(session: AsyncSession, row: Attempt | Job) -> None:
    await session.commit()
    await session.refresh(row)


async def test_a_judged_attempt_goes_execute_then_judge_then_done_once(session: AsyncSession) -> None:
    attempt, job = await _submit(session, await _problem(session), judges=["sample_tests"])
    assert (attempt.pipeline, attempt.stage, attempt.status) == (["execute", "judge"], "execute", "queued")

    assert await attempts.claim(session, attempt.attempt_id, Stage.JUDGE) is None  # not at that stage yet
    claimed = await attempts.claim(session, attempt.attempt_id, Stage.EXECUTE)
    assert claimed is not None and claimed.status == AttemptStatus.RUNNING
    await _reload(session, job)
    assert job.status == JobStatus.RUNNING

    moved, following = await attempts.finish_stage(session, attempt.attempt_id, Stage.EXECUTE, verdict="AC")
    assert (moved, following) == (True, Stage.JUDGE)
    # A duplicate of the execute task that finishes late moves nothing.
    assert await attempts.finish_stage(session, attempt.attempt_id, Stage.EXECUTE, verdict="WA") == (False, Stage.JUDGE)
    await _reload(session, attempt)
    assert (attempt.stage, attempt.status, attempt.verdict) == ("judge", "running", "AC")
    assert await attempts.claim(session, attempt.attempt_id, Stage.EXECUTE) is None

    assert await attempts.claim(session, attempt.attempt_id, Stage.JUDGE) is not None
    assert await attempts.finish_stage(session, attempt.attempt_id, Stage.JUDGE) == (True, None)
    assert await attempts.finish_stage(session, attempt.attempt_id, Stage.JUDGE) == (False, None)
    await _reload(session, attempt)
    await session.refresh(job)
    assert (attempt.status, attempt.stage) == ("done", None) and attempt.finished_at is not None
    assert (job.status, job.progress_done) == ("succeeded", 1)


async def test_an_unjudged_attempt_is_done_after_execution(session: AsyncSession) -> None:
    attempt, job = await _submit(session, await _problem(session), judges=[])
    assert attempt.pipeline == ["execute"]
    assert await attempts.claim(session, attempt.attempt_id, Stage.EXECUTE) is not None
    assert await attempts.finish_stage(session, attempt.attempt_id, Stage.EXECUTE, verdict="WA") == (True, None)
    await _reload(session, attempt)
    await session.refresh(job)
    assert (attempt.status, attempt.verdict, job.status) == ("done", "WA", "succeeded")


async def test_a_retried_claim_redoes_the_stage_it_holds(session: AsyncSession) -> None:
    """A worker killed mid-stage leaves the attempt running at that stage; the retry may claim it again."""
    attempt, _ = await _submit(session, await _problem(session), judges=[])
    assert await attempts.claim(session, attempt.attempt_id, Stage.EXECUTE) is not None
    await session.commit()
    assert await attempts.claim(session, attempt.attempt_id, Stage.EXECUTE) is not None


async def test_the_same_uid_is_idempotent_and_other_content_conflicts(session: AsyncSession) -> None:
    problem = await _problem(session)
    first, _ = await _submit(session, problem, judges=[], uid="u1")
    again, _ = await _submit(session, problem, judges=[], uid="u1")
    assert again.attempt_id == first.attempt_id
    with pytest.raises(SubmissionError) as conflict:
        await _submit(session, problem, judges=[], uid="u1", source="print(4)")
    assert (conflict.value.status, conflict.value.loc) == (409, ["body", "attempt_uid"])


async def test_unknown_judges_and_function_mode_outside_python_name_their_field(session: AsyncSession) -> None:
    problem = await _problem(session)
    job = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_ATTEMPT, total=1)
    spec = NewAttempt(language=Language.C, source_code="int main(){}", content={}, judges=["nobody"])
    with pytest.raises(SubmissionError) as unknown:
        await attempts.create_attempt(session, "t", problem, spec, job.job_id, ["body"])
    assert unknown.value.loc == ["body", "judges"] and "nobody" in unknown.value.message
    function_problem, _ = await attempts.put_problem(
        session, "t", "f", {**PROBLEM, "mode": "function", "entry_point": "f", "tests": []}, ["body"]
    )
    with pytest.raises(SubmissionError) as language:
        await attempts.create_attempt(session, "t", function_problem, spec, job.job_id, ["body"])
    assert language.value.loc == ["body", "language"]


async def test_a_mutant_is_an_attempt_linked_to_its_parent(session: AsyncSession) -> None:
    parent, _ = await _submit(session, await _problem(session), judges=[], uid="seed")
    job = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_BATCH, total=1)
    spec = NewMutant(
        source_code="print(2)",
        operator="ARITH_FLIP",
        arm=Arm.SEMANTIC,
        severity=4,
        guard_context=False,
        judges=["sample_tests"],
        mutation={"line": 1, "column": 7},
    )
    mutant, created = await attempts.create_mutant(session, parent, spec, job.job_id)
    await session.commit()
    assert created
    assert (mutant.parent_attempt_id, mutant.operator, mutant.arm, mutant.severity) == (
        parent.attempt_id,
        "ARITH_FLIP",
        "semantic",
        4,
    )
    assert (mutant.problem_pk, mutant.language, mutant.participant) == (parent.problem_pk, "python", None)
    assert (mutant.pipeline, mutant.stage, mutant.conditions) == (["execute", "verify", "judge"], "execute", ["blind"])
    assert mutant.mutation == {"line": 1, "column": 7}
    again, created_again = await attempts.create_mutant(session, parent, spec, job.job_id)
    assert (again.attempt_id, created_again) == (mutant.attempt_id, False)


async def test_cancelling_ends_every_attempt_of_the_job_and_none_is_left_running(session: AsyncSession) -> None:
    problem = await _problem(session)
    queued, job = await _submit(session, problem, judges=[])
    assert await attempts.cancel_live(session, job.job_id) == [queued.attempt_id]
    await jobs.finish(session, job.job_id, JobStatus.CANCELLED)
    await _reload(session, queued)
    assert (queued.status, queued.stage) == ("cancelled", None)
    assert await attempts.claim(session, queued.attempt_id, Stage.EXECUTE) is None

    # Cancelled while its execute stage runs: the stage's result is kept, and the attempt ends there instead of
    # waiting at `judge` for a task the reconciler will never send (it leaves cancelled jobs alone).
    executing, other = await _submit(session, problem, judges=["sample_tests"])
    assert await attempts.claim(session, executing.attempt_id, Stage.EXECUTE) is not None
    await jobs.finish(session, other.job_id, JobStatus.CANCELLED)
    await session.commit()
    moved = await attempts.finish_stage(session, executing.attempt_id, Stage.EXECUTE, verdict="AC")
    assert moved == (True, None)
    await _reload(session, executing)
    assert (executing.status, executing.stage, executing.verdict) == ("cancelled", None, "AC")

    # Cancelled between its stages: the next stage's claim ends it.
    waiting, third = await _submit(session, problem, judges=["sample_tests"])
    assert await attempts.claim(session, waiting.attempt_id, Stage.EXECUTE) is not None
    await attempts.finish_stage(session, waiting.attempt_id, Stage.EXECUTE, verdict="WA")
    await jobs.finish(session, third.job_id, JobStatus.CANCELLED)
    await session.commit()
    assert await attempts.claim(session, waiting.attempt_id, Stage.JUDGE) is None
    await _reload(session, waiting)
    assert (waiting.status, waiting.stage, waiting.verdict) == ("cancelled", None, "WA")


def test_a_stage_missing_from_the_pipeline_is_the_last() -> None:
    assert attempts.next_stage(["execute", "judge"], "execute") == Stage.JUDGE
    assert attempts.next_stage(["execute", "judge"], "judge") is None
    assert attempts.next_stage([], "execute") is None


async def test_pending_attempts_are_read_by_stage_from_the_registry(session: AsyncSession) -> None:
    problem = await _problem(session)
    waiting, _ = await _submit(session, problem, judges=["sample_tests"])
    executed, _ = await _submit(session, problem, judges=["sample_tests"])
    await attempts.claim(session, executed.attempt_id, Stage.EXECUTE)
    await attempts.finish_stage(session, executed.attempt_id, Stage.EXECUTE, verdict="AC")
    finished, _ = await _submit(session, problem, judges=[])
    await attempts.claim(session, finished.attempt_id, Stage.EXECUTE)
    await attempts.finish_stage(session, finished.attempt_id, Stage.EXECUTE, verdict="AC")
    cancelled, cancelled_job = await _submit(session, problem, judges=[])
    await jobs.finish(session, cancelled_job.job_id, JobStatus.CANCELLED)
    await session.commit()

    pending = await pending_attempts(session, utcnow() + timedelta(seconds=1), 100)
    assert sorted(pending) == sorted(
        [(Task.EXECUTE_ATTEMPT, waiting.attempt_id, "t"), (Task.JUDGE_ATTEMPT, executed.attempt_id, "t")]
    )
    # Newer than the cutoff: not pending yet (the queue may still be about to deliver it).
    assert await pending_attempts(session, utcnow() - timedelta(hours=1), 100) == []


def test_the_registry_serves_every_task_and_stage_exactly_once() -> None:
    served = [task for service in SERVICES.values() for task in service.tasks]
    assert sorted(served) == sorted(Task) and len(served) == len(set(served))
    assert set(registry.STAGE_TASK) == set(Stage)
    for service in SERVICES.values():
        assert all(registry.QUEUE_OF[task] == service.queue for task in service.tasks)
        module, _, function = service.entry_point.partition(":")
        assert module and function, service.entry_point
    assert registry.ALL_QUEUES == tuple(sorted({s.queue for s in SERVICES.values()}))


def test_a_worker_must_run_exactly_its_declared_tasks() -> None:
    from services.kernel.worker import build_worker

    async def execute_attempt(ctx: dict[str, Any], subject: str) -> None: ...

    with pytest.raises(RuntimeError, match="the executor worker runs"):
        build_worker("executor", functions=[execute_attempt])


async def test_a_client_may_not_use_the_mutants_uid_prefix(session: AsyncSession) -> None:
    with pytest.raises(SubmissionError) as reserved:
        await _submit(session, await _problem(session), judges=[], uid="mutant:job_x:att_y:ARITH_FLIP:0")
    assert reserved.value.loc == ["body", "attempt_uid"] and "reserved" in reserved.value.message
