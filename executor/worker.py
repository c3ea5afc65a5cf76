"""The executor worker: the only place the executor meets the queue and the database."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from executor.run import Executor
from services.kernel import attempts, jobs, queue, telemetry, worker
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
from services.kernel.db import session_scope, upsert
from services.kernel.models import Execution, Job, Problem, utcnow
from services.kernel.registry import LANGUAGES_KEY, Task
from services.kernel.settings import get_settings

log = logging.getLogger("tribunal.executor")


def _tests(raw: list[dict[str, Any]]) -> list[TestCase]:
    return [TestCase.model_validate(test) for test in raw]


def _record_telemetry(language: str, outcome: ExecutionResult) -> None:
    telemetry.executions.labels(language, outcome.verdict).inc()
    telemetry.build_cache.labels(language, "hit" if outcome.build_cached else "miss").inc()
    for test in outcome.tests:
        telemetry.sandbox_seconds.labels(language, "run").observe(test.cpu_time_ms / 1000)


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


@queue.task(Task.EXECUTE_ATTEMPT)
async def execute_attempt(ctx: dict[str, Any], attempt_id: str) -> None:
    """The execute stage of an attempt: run it against its problem's tests and store the verdict, once."""
    async with session_scope() as session:
        attempt = await attempts.claim(session, attempt_id, Stage.EXECUTE)
        if attempt is None:
            return  # past this stage (a duplicate or a retry after the write), ended, or cancelled
        problem = await session.get(Problem, attempt.problem_pk)
        assert problem is not None
        tenant, language, source_code = attempt.tenant, attempt.language, attempt.source_code
        tests, mode, entry_point = _tests(problem.tests), Mode(problem.mode), problem.entry_point
        checker, limits = Checker.model_validate(problem.checker), Limits.model_validate(problem.limits)
    executor: Executor = ctx["executor"]
    started = time.perf_counter()
    try:
        outcome = await executor.execute(
            tenant=tenant,
            language=language,
            source_code=source_code,
            tests=tests,
            mode=mode,
            entry_point=entry_point,
            checker=checker,
            limits=limits,
        )
    except Exception as exc:
        if not _is_last_try(ctx):
            raise
        log.exception("attempt %s failed on its last try", attempt_id)
        outcome = _internal_error(exc, len(tests))
    duration_ms = int((time.perf_counter() - started) * 1000)
    async with session_scope() as session:
        # The attempt moves first, and the execution is written only by the write that moved it, in the same
        # transaction: a duplicate delivery that lost the race cannot overwrite the tests behind the verdict.
        moved, following = await attempts.finish_stage(
            session, attempt_id, Stage.EXECUTE, verdict=outcome.verdict, passed=outcome.passed, total=outcome.total
        )
        if moved:
            await upsert(
                session,
                Execution.__table__,
                {
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
                keys=["attempt_id", "run"],
            )
    if following is not None:
        await attempts.enqueue_stage(attempt_id, following)
    _record_telemetry(language, outcome)


def _direct_result(outcome: ExecutionResult) -> dict[str, Any]:
    return {
        "verdict": outcome.verdict,
        "passed": outcome.passed,
        "total": outcome.total,
        "compile_output": outcome.compile_output,
        "toolchain": outcome.toolchain,
        "tests": stored_tests(outcome),
    }


@queue.task(Task.EXECUTE_DIRECT)
async def execute_direct(ctx: dict[str, Any], job_id: str) -> None:
    """Run a program given inline (stdin or tests) and store the result on its job."""
    async with session_scope() as session:
        job = await session.get(Job, job_id)
        if job is None or job.status not in LIVE_JOB_STATUSES:
            return
        await jobs.mark_running(session, job_id)
        params = dict(job.params or {})
        tenant = job.tenant
    if params.get("tests") is None:
        tests = [TestCase(input=params.get("stdin") or "", public=True)]
    else:
        tests = _tests(params["tests"])
    executor: Executor = ctx["executor"]
    try:
        outcome = await executor.execute(
            tenant=tenant,
            language=params["language"],
            source_code=params["source_code"],
            tests=tests,
            mode=Mode(params.get("mode", Mode.STDIO)),
            entry_point=params.get("entry_point"),
            checker=Checker.model_validate(params.get("checker") or {}),
            limits=Limits.model_validate(params.get("limits") or {}),
        )
    except Exception as exc:
        if not _is_last_try(ctx):
            raise
        async with session_scope() as session:
            log.exception("execution job %s failed on its last try", job_id)
            await jobs.finish(session, job_id, JobStatus.FAILED, error=f"internal error ({type(exc).__name__})")
        return
    async with session_scope() as session:
        await jobs.finish(session, job_id, JobStatus.SUCCEEDED, result=_direct_result(outcome))
    _record_telemetry(params["language"], outcome)


async def _startup(ctx: dict[str, Any]) -> None:
    settings = get_settings()
    executor = Executor(
        settings.data_dir / "executor",
        slots=settings.executor_slots,
        nsjail_path=settings.nsjail_path,
        sandbox_uid=settings.sandbox_uid,
    )
    ctx["executor"] = executor
    languages = await asyncio.to_thread(executor.languages)
    await ctx["redis"].set(LANGUAGES_KEY, json.dumps(languages))


def run_worker() -> None:
    """Run the executor worker until SIGTERM/SIGINT."""
    worker.run(worker.build_worker("executor", functions=[execute_attempt, execute_direct], on_startup=_startup))
