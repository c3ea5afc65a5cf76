"""Job state in the database: queued -> running -> succeeded | failed | cancelled, with progress counts.

Every transition is a conditional UPDATE, so a retried or duplicated worker can never move a job backwards
or count the same unit of work twice, and only a live job's progress moves: once a job has ended (a cancel), its
`progress.done` never changes again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel import telemetry
from services.kernel.contracts import LIVE_JOB_STATUSES, TERMINAL_JOB_STATUSES, JobKind, JobStatus
from services.kernel.models import Job, JobUnit, new_id, utcnow
from services.kernel.plans import PLANS, Plan, stored


def create_job(
    session: AsyncSession,
    *,
    tenant: str,
    kind: str,
    total: int,
    plan: Plan | None = None,
    job_id: str | None = None,
) -> Job:
    """Add a queued job to the session (the caller commits it together with the work it describes), with its plan
    (services/kernel/plans.py: a model of the kind's, stored as JSON). A job without one stores null, which reads
    back as its kind's defaults."""
    if plan is not None and not isinstance(plan, PLANS[JobKind(kind)]):
        raise TypeError(f"a {kind} job's plan is a {PLANS[JobKind(kind)].__name__}, not a {type(plan).__name__}")
    job = Job(
        job_id=job_id or new_id("job"),
        tenant=tenant,
        kind=kind,
        status=JobStatus.QUEUED,
        progress_total=total,
        params=stored(plan) if plan is not None else None,
    )
    session.add(job)
    telemetry.jobs.labels(kind, JobStatus.QUEUED).inc()
    return job


async def get_job(session: AsyncSession, job_id: str) -> Job | None:
    return await session.get(Job, job_id)


async def mark_running(session: AsyncSession, job_id: str, tries: int = 1) -> bool:
    """queued -> running; True if this call made the move. Counts the try either way (`tries` of them: a batch
    of claims counts one per claim)."""
    kind = await session.scalar(
        update(Job)
        .where(Job.job_id == job_id, Job.status == JobStatus.QUEUED)
        .values(status=JobStatus.RUNNING, started_at=utcnow(), tries=Job.tries + tries)
        .returning(Job.kind)
    )
    moved = kind is not None
    if moved:
        telemetry.jobs.labels(kind, JobStatus.RUNNING).inc()
    else:
        await session.execute(
            update(Job).where(Job.job_id == job_id, Job.status == JobStatus.RUNNING).values(tries=Job.tries + tries)
        )
    return moved


async def add_progress(session: AsyncSession, job_id: str, done: int = 1) -> bool:
    """Count finished units of a live job; the job succeeds when the last one lands. Callers count each unit
    once. A job no longer live (cancelled, failed, succeeded) is left as it is: its progress is frozen where its
    end found it (False)."""
    counted = (
        await session.execute(
            update(Job)
            .where(Job.job_id == job_id, Job.status.in_(LIVE_JOB_STATUSES))
            .values(progress_done=Job.progress_done + done)
            .returning(Job.kind, Job.status, Job.progress_done, Job.progress_total)
        )
    ).first()
    # The row is the transaction's to change now (SQLite's write lock, PostgreSQL's row lock), so the conditional
    # UPDATE below is skipped only when what it just returned says it would match nothing.
    if counted is None:
        return False
    if counted.progress_done < counted.progress_total:
        return True
    result = await session.execute(
        update(Job)
        .where(
            Job.job_id == job_id,
            Job.status.in_(LIVE_JOB_STATUSES),
            Job.progress_done >= Job.progress_total,
        )
        .values(status=JobStatus.SUCCEEDED, finished_at=utcnow())
    )
    if result.rowcount:  # type: ignore[attr-defined]
        telemetry.jobs.labels(counted.kind, JobStatus.SUCCEEDED).inc()
    return True


async def finish(
    session: AsyncSession,
    job_id: str,
    status: JobStatus,
    *,
    result: dict[str, Any] | None = None,
    error: str | None = None,
) -> bool:
    """Move a live job to a terminal status; a job already terminal stays as it is (False)."""
    assert status in TERMINAL_JOB_STATUSES
    values: dict[str, Any] = {"status": status, "finished_at": utcnow(), "error": error}
    if result is not None:
        values["result"] = result
    if status == JobStatus.SUCCEEDED:
        values["progress_done"] = Job.progress_total
    res = await session.execute(
        update(Job).where(Job.job_id == job_id, Job.status.in_(LIVE_JOB_STATUSES)).values(**values)
    )
    moved = bool(res.rowcount)  # type: ignore[attr-defined]
    if moved:
        kind = await session.scalar(select(Job.kind).where(Job.job_id == job_id))
        telemetry.jobs.labels(kind or "unknown", status).inc()
    return moved


async def record_unit(session: AsyncSession, job_id: str, unit: str) -> bool:
    """Write the job_unit row `unit` unless it exists; True if this call wrote it. Alone it is a record (e.g. a
    synthesis draw's outcome); `count_unit_once` also counts it toward the job's progress."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    result = await session.execute(
        insert(JobUnit).values(job_id=job_id, unit=unit).on_conflict_do_nothing(index_elements=["job_id", "unit"])
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def count_unit_once(session: AsyncSession, job_id: str, unit: str) -> bool:
    """Add one to the job's progress unless this unit was already counted (a retried task) or the job is no longer
    live (a cancelled job's progress stays frozen; the unit is still recorded); True if counted."""
    if not await record_unit(session, job_id, unit):
        return False
    return await add_progress(session, job_id)


async def add_total(session: AsyncSession, job_id: str, more: int) -> bool:
    """Grow a live job's total by units discovered while it runs (a seed's mutants); callers add each once, in
    the transaction that creates the units. False if the job is no longer live (a cancel committed first, or is
    committing: the UPDATE waits for its lock): the caller then creates nothing and rolls back."""
    result = await session.execute(
        update(Job)
        .where(Job.job_id == job_id, Job.status.in_(LIVE_JOB_STATUSES))
        .values(progress_total=Job.progress_total + more)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def job_units(session: AsyncSession, job_id: str) -> set[str]:
    """Every unit row of a job (counted units and, for synthesis jobs, draw records; services/kernel/subjects.py
    names them)."""
    return set((await session.scalars(select(JobUnit.unit).where(JobUnit.job_id == job_id))).all())


def job_view(job: Job) -> dict[str, Any]:
    """The public JSON shape of a job (api.md)."""
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "status": job.status,
        "progress": {"done": job.progress_done, "total": job.progress_total},
        "error": job.error,
        "result": job.result,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }
