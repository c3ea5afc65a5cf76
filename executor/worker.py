"""The executor worker: the only place the executor meets the queue and the database."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from executor.run import Executor, InvalidRequest
from services.kernel import attempts, cancel, jobs, queue, telemetry, worker
from services.kernel.batching import Coalescer
from services.kernel.contracts import (
    LIVE_JOB_STATUSES,
    Checker,
    ExecutionResult,
    JobStatus,
    Limits,
    Mode,
    Stage,
    TestCase,
    Verdict,
)
from services.kernel.db import session_scope, upsert, upsert_many
from services.kernel.models import Execution, Job, Problem, utcnow
from services.kernel.plans import DirectExecutionPlan
from services.kernel.registry import LANGUAGES_KEY, Task
from services.kernel.settings import get_settings

log = logging.getLogger("tribunal.executor")


def _tests(raw: list[dict[str, Any]]) -> list[TestCase]:
    return [TestCase.model_validate(test) for test in raw]


def _record_telemetry(language: str, outcome: ExecutionResult, origin: str) -> None:
    telemetry.executions.labels(language, outcome.verdict, origin).inc()
    telemetry.build_cache_lookups.labels(language, "hit" if outcome.build_cached else "miss").inc()
    for test in outcome.tests:
        telemetry.sandbox_duration.labels(language, "test").observe(test.wall_time_ms / 1000)
        telemetry.sandbox_cpu.labels(language).observe(test.cpu_time_ms / 1000)
        telemetry.sandbox_memory.labels(language).observe(test.memory_kb * 1024)


def _is_last_try(ctx: dict[str, Any]) -> bool:
    return int(ctx.get("job_try", 1)) >= get_settings().job_max_tries


def _internal_error(exc: Exception, total: int) -> ExecutionResult:
    # The exception's text may name host paths: it goes to the log, only its type is shown.
    return ExecutionResult(
        verdict=Verdict.IE, passed=0, total=total, compile_output=f"internal error ({type(exc).__name__})"
    )


def stored_tests(outcome: ExecutionResult) -> list[dict[str, Any]]:
    """Per-test results as stored: the contract's fields, plus `time_ms` (CPU) that older readers expect."""
    return [{**test.model_dump(mode="json"), "time_ms": test.cpu_time_ms} for test in outcome.tests]


@dataclass(frozen=True)
class ProblemSpec:
    """What running an attempt needs of its problem, parsed once (problems never change once stored)."""

    tests: list[TestCase]
    mode: Mode
    entry_point: str | None
    checker: Checker
    limits: Limits

    @classmethod
    def of(cls, problem: Problem) -> ProblemSpec:
        return cls(
            tests=_tests(problem.tests),
            mode=Mode(problem.mode),
            entry_point=problem.entry_point,
            checker=Checker.model_validate(problem.checker),
            limits=Limits.model_validate(problem.limits),
        )


@dataclass(frozen=True)
class Claimed:
    """A claimed attempt, as its execution needs it."""

    tenant: str
    language: str
    source_code: str
    problem: ProblemSpec
    job_id: str | None = None


@dataclass(frozen=True)
class Finished:
    """An attempt's verdict (`values`, stored on the attempt) and its Execution row, to store once."""

    attempt_id: str
    values: dict[str, Any]
    execution: dict[str, Any]


_PROBLEM_CACHE_SIZE = 1024
_problems: OrderedDict[int, ProblemSpec] = OrderedDict()


async def _problem_specs(session: AsyncSession, keys: set[int]) -> dict[int, ProblemSpec]:
    """The problems `keys` (primary keys), from this process's cache or read in one statement."""
    missing = sorted(key for key in keys if key not in _problems)
    if missing:
        for problem in await session.scalars(select(Problem).where(Problem.id.in_(missing))):
            _problems[problem.id] = ProblemSpec.of(problem)
    found = {}
    for key in keys:
        if key in _problems:
            _problems.move_to_end(key)
            found[key] = _problems[key]
    while len(_problems) > _PROBLEM_CACHE_SIZE:
        _problems.popitem(last=False)
    return found


async def claim_batch(attempt_ids: Sequence[str]) -> list[Claimed | None]:
    """Claim the execute stage of several attempts in one transaction (attempts.claim_many)."""
    async with session_scope() as session:
        claimed = await attempts.claim_many(session, attempt_ids, Stage.EXECUTE)
        problems = await _problem_specs(session, {a.problem_pk for a in claimed if a is not None})
    return [
        None if a is None else Claimed(a.tenant, a.language, a.source_code, problems[a.problem_pk], a.job_id)
        for a in claimed
    ]


async def claim_one(attempt_id: str) -> Claimed | None:
    """Claim the execute stage of one attempt in its own transaction (attempts.claim)."""
    async with session_scope() as session:
        attempt = await attempts.claim(session, attempt_id, Stage.EXECUTE)
        if attempt is None:
            return None
        problems = await _problem_specs(session, {attempt.problem_pk})
        return Claimed(
            attempt.tenant, attempt.language, attempt.source_code, problems[attempt.problem_pk], attempt.job_id
        )


_EXECUTION_KEYS = ["attempt_id", "run"]


async def finish_batch(results: Sequence[Finished]) -> list[tuple[bool, Stage | None]]:
    """Store several verdicts in one transaction (attempts.finish_many): each attempt moves first, and its
    Execution row is written only if this write moved it, so a duplicate that lost cannot overwrite the tests
    behind the verdict."""
    async with session_scope() as session:
        outcomes = await attempts.finish_many(session, Stage.EXECUTE, [(r.attempt_id, r.values) for r in results])
        rows = [r.execution for r, (moved, _) in zip(results, outcomes, strict=True) if moved]
        await upsert_many(session, Execution.__table__, rows, keys=_EXECUTION_KEYS)
    return outcomes


async def finish_one(result: Finished) -> tuple[bool, Stage | None]:
    """Store one verdict in its own transaction (attempts.finish_stage), as finish_batch does."""
    async with session_scope() as session:
        moved, following = await attempts.finish_stage(session, result.attempt_id, Stage.EXECUTE, **result.values)
        if moved:
            await upsert(session, Execution.__table__, result.execution, keys=_EXECUTION_KEYS)
    return moved, following


@dataclass
class InFlight:
    """Where this process's attempts are, for the coalescers to tell whether anyone else may join a batch."""

    started: int = 0  # execute_attempt tasks that have asked for their claim and not yet returned
    executing: int = 0  # claimed and being executed, result not yet submitted


@dataclass
class Pipeline:
    """The executor process's claim and result coalescers (services/kernel/batching.py)."""

    claims: Coalescer[str, Claimed | None]
    results: Coalescer[Finished, tuple[bool, Stage | None]]
    in_flight: InFlight = field(default_factory=InFlight)

    @classmethod
    def from_settings(cls, jobs_running: Callable[[], int] | None = None) -> Pipeline:
        """The pipeline of a worker whose `jobs_running()` says how many jobs it has started and not finished
        (services/kernel/worker.py); without it, a batch formed from idle always waits out the window."""
        settings = get_settings()
        size, window = settings.executor_batch_max, settings.executor_batch_window_ms / 1000
        # One batch at a time, claims or results: SQLite has one writer, and this process's own transactions
        # would otherwise wait for each other in SQLite's busy handler (sleeps of up to 100 ms).
        writes = asyncio.Lock()
        in_flight = InFlight()
        return cls(
            # A claim can be joined only by a job the worker has started that has not asked for its claim yet.
            claims=Coalescer(
                claim_batch,
                claim_one,
                max_size=size,
                window_s=window,
                name="claims",
                lock=writes,
                quiet=None if jobs_running is None else lambda: jobs_running() <= in_flight.started,
            ),
            # A result can only be joined by another attempt's, so with none being executed it goes at once.
            results=Coalescer(
                finish_batch,
                finish_one,
                max_size=size,
                window_s=window,
                name="results",
                lock=writes,
                quiet=lambda: in_flight.executing == 0,
            ),
            in_flight=in_flight,
        )


def _pipeline(ctx: dict[str, Any]) -> Pipeline:
    if "pipeline" not in ctx:
        ctx["pipeline"] = Pipeline.from_settings()
    pipeline: Pipeline = ctx["pipeline"]
    return pipeline


@queue.task(Task.EXECUTE_ATTEMPT)
async def execute_attempt(ctx: dict[str, Any], attempt_id: str) -> None:
    """The execute stage of an attempt: run it against its problem's tests and store the verdict, once. The
    claims and results of concurrent tasks share transactions (Pipeline)."""
    pipeline = _pipeline(ctx)
    pipeline.in_flight.started += 1
    try:
        await _execute_attempt(ctx, pipeline, attempt_id)
    finally:
        pipeline.in_flight.started -= 1


async def _end_cancelled(attempt_id: str) -> None:
    """An attempt whose execution its job's cancel stopped ends `cancelled` (the cancel itself normally wrote that
    already), with no verdict and no execution stored: the run was cut short, not judged."""
    async with session_scope() as session:
        ended = await attempts.end_cancelled(session, [attempt_id])
    await queue.announce_ended(ended)


async def _execute_attempt(ctx: dict[str, Any], pipeline: Pipeline, attempt_id: str) -> None:
    claimed = await pipeline.claims.submit(attempt_id)
    if claimed is None:
        return  # past this stage (a duplicate or a retry after the write), ended, or cancelled
    problem = claimed.problem
    executor: Executor = ctx["executor"]
    started = time.perf_counter()

    async def execute() -> ExecutionResult:
        try:
            return await executor.execute(
                tenant=claimed.tenant,
                language=claimed.language,
                source_code=claimed.source_code,
                tests=problem.tests,
                mode=problem.mode,
                entry_point=problem.entry_point,
                checker=problem.checker,
                limits=problem.limits,
            )
        except InvalidRequest as exc:
            # Permanent: retrying cannot help (the gateway refuses such requests; this is what got past it).
            log.error("attempt %s cannot be executed as given: %s", attempt_id, exc)
            return ExecutionResult(
                verdict=Verdict.IE, passed=0, total=len(problem.tests), compile_output=f"invalid request: {exc}"
            )
        except Exception as exc:
            if not _is_last_try(ctx):
                raise  # retried (services/kernel/queue.py `task`)
            log.exception("attempt %s failed on its last try", attempt_id)
            return _internal_error(exc, len(problem.tests))

    pipeline.in_flight.executing += 1
    try:
        # Stopped if its job is cancelled: the jails of its tests are killed, and nothing of the run is a verdict.
        outcome = await cancel.watch_of(ctx).run(claimed.job_id, execute())
    finally:
        pipeline.in_flight.executing -= 1
    if isinstance(outcome, cancel.Stopped):
        await _end_cancelled(attempt_id)
        return
    duration_ms = int((time.perf_counter() - started) * 1000)
    # The attempt moves first, and the execution is written only by the write that moved it, in the same
    # transaction: a duplicate delivery that lost the race cannot overwrite the tests behind the verdict.
    moved, following = await pipeline.results.submit(
        Finished(
            attempt_id=attempt_id,
            values={"verdict": outcome.verdict, "passed": outcome.passed, "total": outcome.total},
            execution={
                "attempt_id": attempt_id,
                "run": 0,
                "verdict": outcome.verdict,
                "passed": outcome.passed,
                "total": outcome.total,
                "compile_output": outcome.compile_output,
                "tests": stored_tests(outcome),
                "toolchain": outcome.toolchain,
                "build_cached": outcome.build_cached,
                "duration_ms": duration_ms,
                "created_at": utcnow(),
            },
        )
    )
    await attempts.after_stage(attempt_id, moved, following, tenant=claimed.tenant)
    _record_telemetry(claimed.language, outcome, "attempt")


# What a validation run's per-test results keep: a hidden test's output is its expected value, and any key that
# reads a problem may read its validation jobs (GET /v1/jobs/{id}).
_PROGRAM_OUTPUT = ("stdout", "stderr", "message", "exit_code", "rerun_reasons")


def _direct_result(outcome: ExecutionResult, *, validation: bool = False) -> dict[str, Any]:
    tests = stored_tests(outcome)
    if validation:
        tests = [{k: v for k, v in test.items() if k not in _PROGRAM_OUTPUT} for test in tests]
    return {
        "verdict": outcome.verdict,
        "passed": outcome.passed,
        "total": outcome.total,
        "compile_output": outcome.compile_output,
        "toolchain": outcome.toolchain,
        "tests": tests,
    }


@queue.task(Task.EXECUTE_DIRECT)
async def execute_direct(ctx: dict[str, Any], job_id: str) -> None:
    """Run a program given inline (stdin or tests) and store the result on its job."""
    async with session_scope() as session:
        job = await session.get(Job, job_id)
        if job is None or job.status not in LIVE_JOB_STATUSES:
            return
        await jobs.mark_running(session, job_id)
        plan = job.plan(DirectExecutionPlan)
        tenant = job.tenant
    tests = [TestCase(input=plan.stdin or "", public=True)] if plan.tests is None else list(plan.tests)
    executor: Executor = ctx["executor"]
    run = executor.execute(
        tenant=tenant,
        language=plan.language,
        source_code=plan.source_code,
        tests=tests,
        mode=plan.mode,
        entry_point=plan.entry_point,
        checker=plan.checker,
        limits=plan.limits,
    )
    try:
        # Stopped, its jails killed, if the job is cancelled: the cancel already ended the job, with no result.
        outcome = await cancel.watch_of(ctx).run(job_id, run)
        if isinstance(outcome, cancel.Stopped):
            return
    except InvalidRequest as exc:
        async with session_scope() as session:
            await jobs.finish(session, job_id, JobStatus.FAILED, error=f"invalid request: {exc}")
        return
    except Exception as exc:
        if not _is_last_try(ctx):
            raise  # retried (services/kernel/queue.py `task`)
        async with session_scope() as session:
            log.exception("execution job %s failed on its last try", job_id)
            await jobs.finish(session, job_id, JobStatus.FAILED, error=f"internal error ({type(exc).__name__})")
        return
    async with session_scope() as session:
        await jobs.finish(
            session, job_id, JobStatus.SUCCEEDED, result=_direct_result(outcome, validation=plan.validation)
        )
    _record_telemetry(plan.language, outcome, "direct")


async def _startup(ctx: dict[str, Any]) -> None:
    settings = get_settings()
    executor = Executor(
        settings.data_dir / "executor",
        slots=settings.executor_slots,
        nsjail_path=settings.nsjail_path,
        sandbox_uid=settings.sandbox_uid,
    )
    ctx["executor"] = executor
    ctx["pipeline"] = Pipeline.from_settings(ctx.get("jobs_running"))
    languages = await asyncio.to_thread(executor.languages)
    telemetry.start_execution_series(language["id"] for language in languages)
    await ctx["redis"].set(LANGUAGES_KEY, json.dumps(languages))


async def _shutdown(ctx: dict[str, Any]) -> None:
    # Ends the pre-made jails that wait for a run now, and removes their cgroups and folders (a worker that dies
    # instead leaves them to its successor: their zygotes end when this process's channels close).
    executor: Executor | None = ctx.get("executor")
    if executor is not None:
        await asyncio.to_thread(executor.close)


def run_worker() -> None:
    """Run the executor worker until SIGTERM/SIGINT."""
    worker.run(
        worker.build_worker(
            "executor", functions=[execute_attempt, execute_direct], on_startup=_startup, on_shutdown=_shutdown
        )
    )
