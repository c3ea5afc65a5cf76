"""Direct executions: run a program on stdin or tests without storing a problem; optionally wait."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gateway import quotas
from gateway.deps import SessionDep, SubmitKey
from gateway.responses import CleanJSONResponse
from gateway.schemas import ExecutionIn
from services.kernel import jobs, queue
from services.kernel.contracts import TERMINAL_JOB_STATUSES, JobKind, JobStatus
from services.kernel.models import Job
from services.kernel.plans import DirectExecutionPlan
from services.kernel.registry import Task
from services.kernel.settings import get_settings

router = APIRouter(prefix="/v1/executions", tags=["executions"])


@router.post(
    "",
    status_code=202,
    response_model=dict[str, Any],
    responses={200: {"description": "The finished execution, when `wait` is true"}},
)
async def execute(body: ExecutionIn, principal: SubmitKey, session: SessionDep) -> Any:
    plan = DirectExecutionPlan.model_validate(body.model_dump(exclude={"wait"}))
    async with quotas.admission(principal, "running_executions"):
        await quotas.check_running_executions(session, principal)
        job = jobs.create_job(session, tenant=principal.tenant, kind=JobKind.EXECUTE_DIRECT, total=1, plan=plan)
        await session.commit()
    job_id = job.job_id
    try:
        await queue.enqueue(Task.EXECUTE_DIRECT, job_id, tenant=principal.tenant)
    except Exception:  # noqa: BLE001 - the reconciler enqueues it from the database later
        return CleanJSONResponse({"job_id": job_id, "status": JobStatus.QUEUED}, status_code=202)
    if body.wait and await queue.wait_for(Task.EXECUTE_DIRECT, job_id, get_settings().wait_timeout_s):
        session.expire_all()
        finished = await session.get(Job, job_id)
        if finished is not None and finished.status in TERMINAL_JOB_STATUSES:
            return CleanJSONResponse(_result(finished), status_code=200)
    return CleanJSONResponse({"job_id": job_id, "status": JobStatus.QUEUED}, status_code=202)


def _result(job: Job) -> dict[str, Any]:
    return {"job_id": job.job_id, "status": job.status, "error": job.error, **(job.result or {})}
