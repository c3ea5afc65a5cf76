"""The executor worker: the only place the executor meets the queue and the database."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import asdict
from typing import Any

from sqlalchemy import update

from executor.run import CheckerSpec, ExecutionOutcome, Executor, Limits, TestCase
from services.kernel import jobs, queue, telemetry, worker
from services.kernel.db import session_scope, upsert
from services.kernel.languages import LANGUAGES_KEY
from services.kernel.models import Attempt, Execution, Job, Problem, utcnow
from services.kernel.queue import EXECUTOR_QUEUE, Task
from services.kernel.settings import get_settings

log = logging.getLogger("tribunal.executor")


def _tests(raw: list[dict[str, Any]]) -> list[TestCase]:
    return [
        TestCase(
            input=t.get("input"), expected=t.get("expected"), code=t.get("code"), public=bool(t.get("public", False))
        )
        for t in raw
    ]


def _checker(raw: dict[str, Any] | None) -> CheckerSpec:
    return CheckerSpec(**raw) if raw else CheckerSpec()


def _limits(raw: dict[str, Any] | None) -> Limits:
    return Limits(**raw) if raw else Limits()


def _record_metrics(language: str, outcome: ExecutionOutcome) -> None:
    telemetry.executions.labels(language, outcome.verdict).inc()
    telemetry.build_cache.labels(language, "hit" if outcome.build_cached else "miss").inc()
    for test in outcome.tests:
        telemetry.sandbox_seconds.labels(language, "run").observe(test.time_ms / 1000)


def _is_last_try(ctx: dict[str, Any]) -> bool:
    return int(ctx.get("job_try", 1)) >= get_settings().job_max_tries


@queue.task(Task.EXECUTE_ATTEMPT)
async def execute_attempt(ctx: dict[str, Any], attempt_id: str) -> None:
    """Run an attempt against its problem's tests and store the verdict, exactly once."""
    async with session_scope() as session:
        attempt = await session.get(Attempt, attempt_id)
        if attempt is None or attempt.status in ("done", "failed"):
            return  # already finished (a duplicate or a retry after the write): nothing to do
        job = await session.get(Job, attempt.job_id) if attempt.job_id else None
        if job is not None and job.status == "cancelled":
            return
        problem = await session.get(Problem, attempt.problem_pk)
        assert problem is not None
        job_id = attempt.job_id
        # Conditional, so a cancel that landed since the read wins. Lock order everywhere: attempt, then job.
        claimed = await session.execute(
            update(Attempt)
            .where(Attempt.attempt_id == attempt_id, Attempt.status.in_(("queued", "running")))
            .values(status="running")
        )
        if not claimed.rowcount:  # type: ignore[attr-defined]
            return
        if job is not None:
            await jobs.mark_running(session, job.job_id)
        judged = bool(attempt.judges)
        tenant = attempt.tenant
        language, source_code, tests = attempt.language, attempt.source_code, _tests(problem.tests)
        mode, entry_point = problem.mode, problem.entry_point
        checker, limits = _checker(problem.checker), _limits(problem.limits)
    executor: Executor = ctx["executor"]
    started = time.perf_counter()
    try:
        outcome = await executor.execute(
            tenant=tenant,
            language=language,
            source_code=source_code,
            tests=tests,
            mode=mode,  # type: ignore[arg-type]
            entry_point=entry_point,
            checker=checker,
            limits=limits,
        )
    except Exception as exc:
        if not _is_last_try(ctx):
            raise
        log.exception("attempt %s failed on its last try", attempt_id)
        outcome = ExecutionOutcome(
            verdict="IE",
            passed=0,
            total=len(tests),
            # The exception's text may name host paths: it is in the log above, only its type is shown.
            compile_output=f"internal error ({type(exc).__name__})",
            tests=[],
            toolchain="",
            build_cached=False,
        )
    duration_ms = int((time.perf_counter() - started) * 1000)
    async with session_scope() as session:
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
                "tests": [asdict(t) for t in outcome.tests],
                "toolchain": outcome.toolchain,
                "build_cached": outcome.build_cached,
                "duration_ms": duration_ms,
                "created_at": utcnow(),
            },
            keys=["attempt_id", "run"],
        )
        result = {"verdict": outcome.verdict, "passed": outcome.passed, "total": outcome.total}
        pending = Attempt.status.in_(("queued", "running"))
        if judged:
            # Judging comes next; the judge worker moves the attempt to done and counts it.
            await session.execute(update(Attempt).where(Attempt.attempt_id == attempt_id, pending).values(**result))
        else:
            # Only the write that moves the attempt to done counts toward its job: a retry never counts twice.
            moved = await session.execute(
                update(Attempt)
                .where(Attempt.attempt_id == attempt_id, pending)
                .values(status="done", finished_at=utcnow(), **result)
            )
            if moved.rowcount and job_id:  # type: ignore[attr-defined]
                await jobs.add_progress(session, job_id)
    if judged:
        await queue.enqueue(Task.JUDGE_ATTEMPT, attempt_id)
    _record_metrics(language, outcome)


def _direct_result(outcome: ExecutionOutcome) -> dict[str, Any]:
    return {
        "verdict": outcome.verdict,
        "passed": outcome.passed,
        "total": outcome.total,
        "compile_output": outcome.compile_output,
        "toolchain": outcome.toolchain,
        "tests": [asdict(t) for t in outcome.tests],
    }


@queue.task(Task.EXECUTE_DIRECT)
async def execute_direct(ctx: dict[str, Any], job_id: str) -> None:
    """Run a program given inline (stdin or tests) and store the result on its job."""
    async with session_scope() as session:
        job = await session.get(Job, job_id)
        if job is None or job.status not in ("queued", "running"):
            return
        await jobs.mark_running(session, job_id)
        params = dict(job.params or {})
        tenant = job.tenant
    if params.get("tests") is None:
        tests = [TestCase(input=params.get("stdin") or "", expected=None, public=True)]
    else:
        tests = _tests(params["tests"])
    executor: Executor = ctx["executor"]
    try:
        outcome = await executor.execute(
            tenant=tenant,
            language=params["language"],
            source_code=params["source_code"],
            tests=tests,
            mode=params.get("mode", "stdio"),
            entry_point=params.get("entry_point"),
            checker=_checker(params.get("checker")),
            limits=_limits(params.get("limits")),
        )
    except Exception as exc:
        if not _is_last_try(ctx):
            raise
        async with session_scope() as session:
            log.exception("execution job %s failed on its last try", job_id)
            await jobs.finish(session, job_id, "failed", error=f"internal error ({type(exc).__name__})")
        return
    async with session_scope() as session:
        await jobs.finish(session, job_id, "succeeded", result=_direct_result(outcome))
    _record_metrics(params["language"], outcome)


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
    settings = get_settings()
    worker.run(
        worker.build_worker(
            role="executor",
            functions=[execute_attempt, execute_direct],
            queue_name=EXECUTOR_QUEUE,
            # More jobs than sandbox slots, so one attempt's compile overlaps another's tests.
            max_jobs=max(4, settings.executor_slots * 4),
            on_startup=_startup,
        )
    )
