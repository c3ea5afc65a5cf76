"""The service registry: every worker kind, declared once.

A service declares its tasks, its queue, how many jobs one of its workers runs at once, which attempt stages it
serves, and what the database says it has pending (for the reconciler). Everything that needs to know the list of
services reads it from here: the queue (which queue serves a task), the CLI's `worker` command, `tribunal up`, the
reconciler and the Prometheus queue gauges. Adding a service is a package with a `run_worker()` plus one entry in
`SERVICES` (and its task names in `Task`); docs/architecture.md walks through it.

The kernel does not import the services (they sit above it): a service's entry point is named as
"module:function" and imported by the launcher when it starts that worker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.contracts import LIVE_ATTEMPT_STATUSES, LIVE_JOB_STATUSES, JobKind, JobStatus, Stage
from services.kernel.models import Attempt, Job, JobUnit, Report
from services.kernel.settings import Settings


class Task(StrEnum):
    """Every kind of queued work, named by the function a worker runs for it."""

    EXECUTE_ATTEMPT = "execute_attempt"
    EXECUTE_DIRECT = "execute_direct"
    JUDGE_ATTEMPT = "judge_attempt"
    BUILD_REPORT = "build_report"


# What workers publish at start for the gateway to serve: the executor its toolchains (GET /v1/languages).
LANGUAGES_KEY = "tribunal:languages"

# (task, subject) pairs the database holds as pending; the reconciler re-enqueues those Redis lost.
PendingWork = list[tuple[Task, str]]
PendingQuery = Callable[[AsyncSession, datetime, int], Awaitable[PendingWork]]


@dataclass(frozen=True)
class Service:
    """One worker kind."""

    name: str  # the worker kind: `tribunal worker NAME`, process names `NAME-0`, ...
    queue: str  # the Redis queue its workers read
    tasks: tuple[Task, ...]
    entry_point: str  # "module:function" that runs one worker process until SIGTERM
    max_jobs: Callable[[Settings], int]  # jobs one worker process runs at once
    # Attempt stages this service runs: an attempt waiting at one of them is enqueued as `stage_tasks[stage]`.
    stage_tasks: dict[Stage, Task] = field(default_factory=dict)
    # Pending work of its own (beyond attempts at its stages) that the database knows of.
    pending: PendingQuery | None = None


async def _pending_direct_executions(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    ids = await session.scalars(
        select(Job.job_id)
        .where(Job.kind == JobKind.EXECUTE_DIRECT, Job.status.in_(LIVE_JOB_STATUSES), Job.created_at < cutoff)
        .order_by(Job.created_at)
        .limit(limit)
    )
    return [(Task.EXECUTE_DIRECT, job_id) for job_id in ids]


async def _pending_rejudging(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """Re-judge jobs: every attempt of the job whose unit is not counted yet (subject `attempt@job`)."""
    work: PendingWork = []
    live = await session.scalars(
        select(Job)
        .where(Job.kind == JobKind.JUDGE, Job.status.in_(LIVE_JOB_STATUSES), Job.created_at < cutoff)
        .order_by(Job.created_at)
        .limit(limit)
    )
    for job in live.all():
        counted = set((await session.scalars(select(JobUnit.unit).where(JobUnit.job_id == job.job_id))).all())
        work += [
            (Task.JUDGE_ATTEMPT, f"{a}@{job.job_id}")
            for a in (job.params or {}).get("attempt_ids", [])
            if a not in counted
        ]
    return work[:limit]


async def _pending_reports(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    ids = await session.scalars(
        select(Report.report_id)
        .join(Job, Job.job_id == Report.job_id)
        .where(Job.status.in_(LIVE_JOB_STATUSES), Job.created_at < cutoff)
        .order_by(Job.created_at)
        .limit(limit)
    )
    return [(Task.BUILD_REPORT, report_id) for report_id in ids]


SERVICES: dict[str, Service] = {
    service.name: service
    for service in (
        Service(
            name="executor",
            queue="tribunal:executor",
            tasks=(Task.EXECUTE_ATTEMPT, Task.EXECUTE_DIRECT),
            entry_point="executor.worker:run_worker",
            # More jobs than sandbox slots, so one attempt's compile overlaps another's tests.
            max_jobs=lambda settings: max(4, settings.executor_slots * 4),
            stage_tasks={Stage.EXECUTE: Task.EXECUTE_ATTEMPT},
            pending=_pending_direct_executions,
        ),
        Service(
            name="judge",
            queue="tribunal:judge",
            tasks=(Task.JUDGE_ATTEMPT,),
            entry_point="judge.worker:run_worker",
            max_jobs=lambda settings: settings.judge_slots,
            stage_tasks={Stage.JUDGE: Task.JUDGE_ATTEMPT},
            pending=_pending_rejudging,
        ),
        Service(
            name="reports",
            queue="tribunal:reports",
            tasks=(Task.BUILD_REPORT,),
            entry_point="services.reports.worker:run_worker",
            max_jobs=lambda settings: 2,
            pending=_pending_reports,
        ),
    )
}

# Older names of worker kinds, still accepted by `tribunal worker` (the reports worker was "metrics").
FORMER_NAMES: dict[str, str] = {"metrics": "reports"}

QUEUE_OF: dict[Task, str] = {task: service.queue for service in SERVICES.values() for task in service.tasks}
STAGE_TASK: dict[Stage, Task] = {
    stage: task for service in SERVICES.values() for stage, task in service.stage_tasks.items()
}
ALL_QUEUES: tuple[str, ...] = tuple(sorted({service.queue for service in SERVICES.values()}))


def _check_complete() -> None:
    """Every task is served by exactly one service and every stage by one; checked on import."""
    served = [task for service in SERVICES.values() for task in service.tasks]
    if sorted(served) != sorted(Task) or len(set(served)) != len(served):
        raise RuntimeError("every Task must be declared by exactly one service")
    if set(STAGE_TASK) != set(Stage):
        raise RuntimeError("every Stage must be served by a service")


_check_complete()


async def pending_attempts(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """Attempts still live, created before `cutoff`, at a stage Redis may have lost, with their stage's task.
    Attempts of a cancelled job are not pending."""
    rows = (
        await session.execute(
            select(Attempt.attempt_id, Attempt.stage)
            .outerjoin(Job, Job.job_id == Attempt.job_id)
            .where(
                Attempt.status.in_(LIVE_ATTEMPT_STATUSES),
                Attempt.stage.is_not(None),
                Attempt.created_at < cutoff,
                (Job.status.is_(None)) | (Job.status != JobStatus.CANCELLED),
            )
            .order_by(Attempt.created_at)
            .limit(limit)
        )
    ).all()
    return [(STAGE_TASK[Stage(stage)], attempt_id) for attempt_id, stage in rows if stage in STAGE_TASK]
