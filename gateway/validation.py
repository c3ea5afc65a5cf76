"""A problem's validation: each reference solution runs against the problem's own tests, over the queue like any
direct execution (the gateway never runs code), and the problem's `validation` says what came of it (docs/api.md,
"Problem validation"): `unchecked` (nothing to run), `pending`, `ready` (every reference passed every test) or
`invalid` (a reference failed: which tests, and their verdicts, never what they printed).

The state is read from the jobs each time a problem is shown, so it is never stale and needs no writer: the
executor finishes a direct execution as it always does."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel import jobs, queue
from services.kernel.contracts import (
    LIVE_JOB_STATUSES,
    VALIDATED_REFERENCES,
    Checker,
    JobKind,
    JobStatus,
    Limits,
    Mode,
    TestCase,
    Verdict,
)
from services.kernel.models import Job, Problem
from services.kernel.plans import DirectExecutionPlan
from services.kernel.registry import Task

log = logging.getLogger(__name__)

UNCHECKED, PENDING, READY, INVALID = "unchecked", "pending", "ready", "invalid"
# How the executor ends a direct execution it cannot run as given (executor/worker.py `execute_direct`): its own
# message about the request, which `GET /v1/executions` shows too.
_REFUSED = "invalid request: "


def start(session: AsyncSession, problem: Problem) -> list[str]:
    """Add one direct-execution job per reference of a problem just stored, for its first VALIDATED_REFERENCES
    (committed with it); their ids are the problem's `validation_jobs`. Nothing for a problem without a reference
    or without a test."""
    if not problem.references or not problem.tests:
        return []
    ids = []
    for reference in problem.references[:VALIDATED_REFERENCES]:
        plan = DirectExecutionPlan(
            language=reference["language"],
            source_code=reference["source_code"],
            tests=[TestCase.model_validate(test) for test in problem.tests],
            mode=Mode(problem.mode),
            entry_point=problem.entry_point,
            checker=Checker.model_validate(problem.checker),
            limits=Limits.model_validate(problem.limits),
            validation=True,
        )
        job = jobs.create_job(session, tenant=problem.tenant, kind=JobKind.EXECUTE_DIRECT, total=1, plan=plan)
        ids.append(job.job_id)
    problem.validation_jobs = ids
    return ids


async def enqueue(tenant: str, job_ids: Iterable[str]) -> None:
    """Queue the validation runs after their commit; one Redis could not take is queued by the reconciler later."""
    for job_id in job_ids:
        try:
            await queue.enqueue(Task.EXECUTE_DIRECT, job_id, tenant=tenant)
        except Exception:  # noqa: BLE001 - the reconciler enqueues it from the database later
            log.warning("validation run %s left to the reconciler", job_id)


async def load_jobs(session: AsyncSession, problems: Iterable[Problem]) -> dict[str, Job]:
    """The validation jobs of these problems, by id, in one read."""
    wanted = sorted({job_id for problem in problems for job_id in problem.validation_jobs or []})
    if not wanted:
        return {}
    return {job.job_id: job for job in await session.scalars(select(Job).where(Job.job_id.in_(wanted)))}


def view(problem: Problem, found: Mapping[str, Job]) -> dict[str, Any]:
    """The problem's `validation` (docs/api.md): its status, each reference's run, and the tests a reference failed
    (`reference`: its index in `references`; `index`: the test's; `status`: the verdict)."""
    job_ids = problem.validation_jobs or []
    if not job_ids:
        reason = "the problem has no reference solution" if not problem.references else "the problem has no tests"
        if problem.references and problem.tests:
            reason = "the problem was stored before problems were validated"
        return {"status": UNCHECKED, "reason": reason, "references": [], "failing_tests": []}
    runs: list[dict[str, Any]] = []
    failing: list[dict[str, Any]] = []
    states = set()
    for position, job_id in enumerate(job_ids):
        job = found.get(job_id)
        result = (job.result or {}) if job is not None else {}
        verdict = result.get("verdict")
        refused = job is not None and job.status == JobStatus.FAILED and (job.error or "").startswith(_REFUSED)
        if refused:
            # The executor cannot run this reference as given (a language function mode does not take): its fault.
            states.add(INVALID)
        elif job is None or job.status in (JobStatus.FAILED, JobStatus.CANCELLED):
            states.add(UNCHECKED)
        elif job.status in LIVE_JOB_STATUSES:
            states.add(PENDING)
        elif verdict == Verdict.AC:
            states.add(READY)
        else:
            states.add(INVALID)
            for test in result.get("tests") or []:
                if test.get("status") != Verdict.AC:
                    failing.append({"reference": position, "index": test.get("index"), "status": test.get("status")})
        runs.append(
            {
                "reference": position,
                "job_id": job_id,
                "status": job.status if job is not None else None,
                "verdict": verdict,
                "passed": result.get("passed"),
                "total": result.get("total"),
                **({"error": job.error} if refused and job is not None else {}),
            }
        )
    # One failing reference makes the problem invalid; else one still running keeps it pending; a run that could not
    # finish (the platform's fault, never the reference's) leaves it unchecked.
    status = next(state for state in (INVALID, PENDING, UNCHECKED, READY) if state in states)
    shown: dict[str, Any] = {"status": status, "references": runs, "failing_tests": failing}
    if status == UNCHECKED:
        shown["reason"] = "a validation run did not finish (its job failed or was cancelled)"
    return shown
