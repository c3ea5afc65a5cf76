"""Jobs: list with a cursor, poll progress, cancel."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from sqlalchemy import select

from gateway import paging
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.schemas import JobOut, JobPage
from gateway.submissions import not_found
from services.kernel import cancel as cancelling
from services.kernel import jobs
from services.kernel.contracts import JobKind, JobStatus
from services.kernel.models import Job

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


async def _own_job(session: SessionDep, job_id: str, tenant: str) -> Job:
    job = await jobs.get_job(session, job_id)
    if job is None or job.tenant != tenant:
        raise not_found("job", job_id)
    return job


@router.get("", response_model=JobPage)
async def list_jobs(
    principal: ReadKey,
    session: SessionDep,
    kind: JobKind | None = None,
    status: JobStatus | None = None,
    limit: paging.Limit = paging.DEFAULT_LIMIT,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The tenant's jobs, oldest first, each as `GET /v1/jobs/{job_id}` answers it."""
    query = select(Job).where(Job.tenant == principal.tenant)
    if kind is not None:
        query = query.where(Job.kind == kind)
    if status is not None:
        query = query.where(Job.status == status)
    rows = (await session.scalars(paging.window(query, Job.created_at, Job.job_id, cursor, limit))).all()
    page, next_cursor = paging.split(rows, limit, lambda job: (job.created_at, job.job_id))
    return {"items": [jobs.job_view(job) for job in page], "next_cursor": next_cursor}


@router.get("/{job_id}", response_model=JobOut)
async def get(job_id: str, principal: ReadKey, session: SessionDep) -> dict[str, Any]:
    return jobs.job_view(await _own_job(session, job_id, principal.tenant))


@router.delete("/{job_id}", response_model=JobOut)
async def cancel(job_id: str, principal: SubmitKey, session: SessionDep) -> dict[str, Any]:
    """Cancel a live job: every attempt, pair and step of it that has not ended ends `cancelled` (running ones are
    stopped, their jails killed, within seconds), its queued work is dropped, and its progress stays where it is;
    what already ended stays as it ended. A finished job is unchanged (services/kernel/cancel.py)."""
    job = await _own_job(session, job_id, principal.tenant)
    ended = await cancelling.cancel_job(session, job)
    if ended is None:
        await session.rollback()  # it ended first (its last unit landed): nothing of it changes
    else:
        await session.commit()
        await cancelling.after_commit(ended)
    session.expire_all()
    return jobs.job_view(await _own_job(session, job_id, principal.tenant))
