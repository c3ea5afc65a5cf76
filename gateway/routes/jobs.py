"""Jobs: poll progress, cancel."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.schemas import JobOut
from gateway.submissions import not_found
from services.kernel import attempts, jobs
from services.kernel.contracts import LIVE_JOB_STATUSES, JobStatus
from services.kernel.models import Job

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


async def _own_job(session: SessionDep, job_id: str, tenant: str) -> Job:
    job = await jobs.get_job(session, job_id)
    if job is None or job.tenant != tenant:
        raise not_found("job", job_id)
    return job


@router.get("/{job_id}", response_model=JobOut)
async def get(job_id: str, principal: ReadKey, session: SessionDep) -> dict[str, Any]:
    return jobs.job_view(await _own_job(session, job_id, principal.tenant))


@router.delete("/{job_id}", response_model=JobOut)
async def cancel(job_id: str, principal: SubmitKey, session: SessionDep) -> dict[str, Any]:
    """Cancel a live job; work not yet started is dropped, work already done stays. A finished job is unchanged."""
    job = await _own_job(session, job_id, principal.tenant)
    if job.status in LIVE_JOB_STATUSES:
        # Attempts first, then the job: the same lock order as the workers, so the two never deadlock.
        await attempts.cancel_queued(session, job_id)
        await jobs.finish(session, job_id, JobStatus.CANCELLED, error="cancelled by the client")
        # A perturbation job's confirmation (a similarity job waiting for its seeds) cannot end without it.
        confirm_job_id = (job.params or {}).get("confirm_job_id")
        if confirm_job_id:
            await jobs.finish(session, confirm_job_id, JobStatus.CANCELLED, error="its perturbation job was cancelled")
    await session.commit()
    session.expire_all()
    return jobs.job_view(await _own_job(session, job_id, principal.tenant))
