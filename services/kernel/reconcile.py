"""The reconciler: the database is the truth, so work it holds as pending but Redis lost is enqueued again."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from arq.connections import ArqRedis
from arq.jobs import JobStatus
from sqlalchemy import select

from services.kernel import queue, telemetry
from services.kernel.db import session_scope
from services.kernel.models import Attempt, Execution, Job, JobUnit, Report, utcnow
from services.kernel.queue import Task

log = logging.getLogger("tribunal.reconcile")

# A pass looks at this many of the oldest pending items; the next pass continues.
_BATCH = 2000


async def reconcile_once(pool: ArqRedis, grace_s: float) -> int:
    """Enqueue every pending execution, judging and direct execution older than `grace_s` that Redis lost."""
    cutoff = utcnow() - timedelta(seconds=grace_s)
    async with session_scope() as session:
        # An attempt with its execution stored is waiting for its judges; without, for the executor.
        pending = (
            await session.execute(
                select(Attempt.attempt_id, Execution.id)
                .outerjoin(Job, Job.job_id == Attempt.job_id)
                .outerjoin(Execution, (Execution.attempt_id == Attempt.attempt_id) & (Execution.run == 0))
                .where(
                    Attempt.status.in_(("queued", "running")),
                    Attempt.created_at < cutoff,
                    (Job.status.is_(None)) | (Job.status != "cancelled"),
                )
                .order_by(Attempt.created_at)
                .limit(_BATCH)
            )
        ).all()
        direct_ids = (
            await session.scalars(
                select(Job.job_id)
                .where(Job.kind == "execute_direct", Job.status.in_(("queued", "running")), Job.created_at < cutoff)
                .order_by(Job.created_at)
                .limit(_BATCH)
            )
        ).all()
        report_ids = (
            await session.scalars(
                select(Report.report_id)
                .join(Job, Job.job_id == Report.job_id)
                .where(Job.status.in_(("queued", "running")), Job.created_at < cutoff)
                .limit(_BATCH)
            )
        ).all()
        rejudge_subjects: list[str] = []
        for job in (
            await session.scalars(
                select(Job).where(Job.kind == "judge", Job.status.in_(("queued", "running")), Job.created_at < cutoff)
            )
        ).all():
            counted = set((await session.scalars(select(JobUnit.unit).where(JobUnit.job_id == job.job_id))).all())
            rejudge_subjects += [
                f"{a}@{job.job_id}" for a in (job.params or {}).get("attempt_ids", []) if a not in counted
            ]
    work = [
        (Task.EXECUTE_ATTEMPT, [a for a, executed in pending if executed is None]),
        (Task.JUDGE_ATTEMPT, [a for a, executed in pending if executed is not None] + rejudge_subjects[:_BATCH]),
        (Task.EXECUTE_DIRECT, list(direct_ids)),
        (Task.BUILD_REPORT, list(report_ids)),
    ]
    restored = 0
    for task, subjects in work:
        for subject in subjects:
            if await queue.task_status(task, subject, pool=pool) == JobStatus.not_found:
                if await queue.enqueue(task, subject, pool=pool):
                    telemetry.reconciled.labels(task.value).inc()
                    restored += 1
    if restored:
        log.warning("reconciler re-enqueued %d task(s) that Redis no longer held", restored)
    return restored


async def reconcile_forever(pool: ArqRedis, interval_s: float, grace_s: float) -> None:
    """Run `reconcile_once` every `interval_s` until cancelled; errors are logged, never fatal."""
    while True:
        try:
            await reconcile_once(pool, grace_s)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the next pass tries again
            log.exception("reconcile pass failed")
        await asyncio.sleep(interval_s)
