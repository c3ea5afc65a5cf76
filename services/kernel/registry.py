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

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.contracts import LIVE_ATTEMPT_STATUSES, LIVE_JOB_STATUSES, JobKind, JobStatus, Stage
from services.kernel.models import Attempt, Job, JobUnit, Report, SimilarityPair
from services.kernel.settings import Settings


class Task(StrEnum):
    """Every kind of queued work, named by the function a worker runs for it."""

    EXECUTE_ATTEMPT = "execute_attempt"
    EXECUTE_DIRECT = "execute_direct"
    JUDGE_ATTEMPT = "judge_attempt"
    BUILD_REPORT = "build_report"
    PERTURB_ATTEMPT = "perturb_attempt"
    VERIFY_MUTANT = "verify_mutant"
    SYNTHESIZE_PROGRAM = "synthesize_program"
    FINISH_SYNTHESIS = "finish_synthesis"
    PREPARE_CALIBRATION = "prepare_calibration"
    SCORE_PAIR = "score_pair"


# What workers publish at start for the gateway to serve: the executor its toolchains (GET /v1/languages).
LANGUAGES_KEY = "tribunal:languages"


class Work(NamedTuple):
    """One task about one subject, and the tenant whose work it is (queues serve tenants in turn)."""

    task: Task
    subject: str
    tenant: str


# Work the database holds as pending; the reconciler re-enqueues what Redis lost, as the same tenant's.
PendingWork = list[Work]
PendingQuery = Callable[[AsyncSession, datetime, int], Awaitable[PendingWork]]


@dataclass(frozen=True)
class Service:
    """One worker kind."""

    name: str  # the worker kind: `tribunal worker NAME`, process names `NAME-0`, ...
    queue: str  # the Redis queue its workers read
    tasks: tuple[Task, ...]
    entry_point: str  # "module:function" that runs one worker process until SIGTERM
    max_jobs: Callable[[Settings], int]  # jobs one worker process runs at once
    # How long an idle worker waits between two looks at its queue (arq's poll_delay).
    poll_delay: Callable[[Settings], float] = lambda settings: settings.background_poll_delay_s
    # Attempt stages this service runs: an attempt waiting at one of them is enqueued as `stage_tasks[stage]`.
    stage_tasks: dict[Stage, Task] = field(default_factory=dict)
    # Pending work of its own (beyond attempts at its stages) that the database knows of.
    pending: PendingQuery | None = None


async def _live_jobs(session: AsyncSession, kind: JobKind, cutoff: datetime, limit: int) -> list[Job]:
    """The oldest live jobs of `kind` created before `cutoff`."""
    rows = await session.scalars(
        select(Job)
        .where(Job.kind == kind, Job.status.in_(LIVE_JOB_STATUSES), Job.created_at < cutoff)
        .order_by(Job.created_at)
        .limit(limit)
    )
    return list(rows.all())


async def _pending_direct_executions(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    rows = await session.execute(
        select(Job.job_id, Job.tenant)
        .where(Job.kind == JobKind.EXECUTE_DIRECT, Job.status.in_(LIVE_JOB_STATUSES), Job.created_at < cutoff)
        .order_by(Job.created_at)
        .limit(limit)
    )
    return [Work(Task.EXECUTE_DIRECT, job_id, tenant) for job_id, tenant in rows.all()]


async def _pending_rejudging(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """Re-judge jobs: every attempt of the job whose unit is not counted yet (subject `attempt@job`)."""
    work: PendingWork = []
    for job in await _live_jobs(session, JobKind.JUDGE, cutoff, limit):
        counted = await job_units(session, job.job_id)
        work += [
            Work(Task.JUDGE_ATTEMPT, f"{a}@{job.job_id}", job.tenant)
            for a in (job.params or {}).get("attempt_ids", [])
            if a not in counted
        ]
    return work[:limit]


async def _pending_reports(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    rows = await session.execute(
        select(Report.report_id, Report.tenant)
        .join(Job, Job.job_id == Report.job_id)
        .where(Job.status.in_(LIVE_JOB_STATUSES), Job.created_at < cutoff)
        .order_by(Job.created_at)
        .limit(limit)
    )
    return [Work(Task.BUILD_REPORT, report_id, tenant) for report_id, tenant in rows.all()]


async def _pending_perturbations(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """Perturbation jobs: each seed not yet perturbed (unit `perturb:<attempt>`), and, when the job judges,
    each seed not yet judged under its conditions (unit `<attempt>`, counted by the judge worker)."""
    work: PendingWork = []
    for job in await _live_jobs(session, JobKind.PERTURB, cutoff, limit):
        counted = await job_units(session, job.job_id)
        params = job.params or {}
        for attempt_id in params.get("attempt_ids", []):
            if f"perturb:{attempt_id}" not in counted:
                work.append(Work(Task.PERTURB_ATTEMPT, f"{attempt_id}@{job.job_id}", job.tenant))
            if params.get("judges") and attempt_id not in counted:
                work.append(Work(Task.JUDGE_ATTEMPT, f"{attempt_id}@{job.job_id}", job.tenant))
    return work[:limit]


# ---- AXIOM synthesis jobs (JobKind.SYNTHESIZE, run by the perturb service) ------------------------------------
#
# The plan is in the job's params (written by POST /v1/benchmarks:synthesize): `slots`, each one program to
# synthesise, named `r<requirement>:t<target>:<index>` (paper 000: M programs per target per requirement), with
# the slots it waits for (`after`: a requirement's deteriorative slots wait for its exemplar slots, III-B2 before
# III-B3). The state is in the job's job_unit rows, so the gateway, the worker and the reconciler read one truth:
#   `axiom:<slot>`                  the slot is filled (a kept program) or given up (its draws ran out); counted
#   `draw:<slot>:<draw>:<outcome>`  what one draw of a slot gave, not counted: `candidate` (its attempt is being
#                                   executed and verified), then `kept` or `mismatch`; or why the LLM step gave
#                                   no program (`provider`, `malformed`, `refusal`, `ignored_rule`,
#                                   `target_unreached`), `duplicate` (a program the job already has) or `error`
#   `axiom:final`                   context disruption (III-B4) and representative selection (III-C1) done; counted
#   `report:<attempt>`              a representative's calibration report (III-C2) prepared; counted
#   `<attempt>`                     a seed judged under the job's conditions (the judge worker counts it)

SYNTHESIS_FINAL = "axiom:final"
DRAW_CANDIDATE = "candidate"
DRAW_KEPT = "kept"
DRAW_MISMATCH = "mismatch"


def synthesis_slot(requirement: int, target: int, index: int) -> str:
    """The name of the `index`-th program of `target` score for the job's `requirement`-th requirement."""
    return f"r{requirement}:t{target}:{index}"


def parse_synthesis_slot(slot: str) -> tuple[int, int, int]:
    """(requirement, target, index) of a slot name. Raises ValueError."""
    requirement, target, index = slot.split(":")
    if not requirement.startswith("r") or not target.startswith("t"):
        raise ValueError(f"not a synthesis slot: {slot!r}")
    return int(requirement[1:]), int(target[1:]), int(index)


def slot_unit(slot: str) -> str:
    return f"axiom:{slot}"


def draw_unit(slot: str, draw: int, outcome: str) -> str:
    return f"draw:{slot}:{draw}:{outcome}"


def report_unit(attempt_id: str) -> str:
    return f"report:{attempt_id}"


def synthesis_draws(rows: Iterable[str]) -> dict[str, dict[int, set[str]]]:
    """slot -> draw -> the outcomes recorded for it, from a job's unit rows."""
    draws: dict[str, dict[int, set[str]]] = {}
    for row in rows:
        if row.startswith("draw:"):
            slot, draw, outcome = row.removeprefix("draw:").rsplit(":", 2)
            draws.setdefault(slot, {}).setdefault(int(draw), set()).add(outcome)
    return draws


def next_draw(draws: dict[int, set[str]]) -> int | None:
    """The draw a slot not yet counted runs next: 0 when none was made; None while its last draw's candidate is
    being executed and verified; else the one after its last (which was rejected or did not match its target)."""
    if not draws:
        return 0
    last = max(draws)
    return None if draws[last] == {DRAW_CANDIDATE} else last + 1


def synthesis_tally(rows: Iterable[str]) -> dict[str, int]:
    """How the draws of a synthesis job ended, by outcome (`kept`, `mismatch`, a rejection kind, `duplicate`,
    `error`), with `pending` for candidates still being executed and verified."""
    tally: dict[str, int] = {}
    for draws in synthesis_draws(rows).values():
        for outcomes in draws.values():
            ended = sorted(outcomes - {DRAW_CANDIDATE})
            key = ended[0] if ended else "pending"
            tally[key] = tally.get(key, 0) + 1
    return dict(sorted(tally.items()))


def synthesis_work(job: Job, rows: set[str]) -> PendingWork:
    """What a live synthesis job needs next, from its plan and its unit rows: the next draw of every slot whose
    prerequisites are counted, the final step once every slot is, the calibration reports it then asked for, and
    the seeds' judging. The worker enqueues this after each step; the reconciler re-enqueues what Redis lost."""
    params = job.params or {}
    work: PendingWork = []
    draws = synthesis_draws(rows)
    every_slot_counted = True
    for entry in params.get("slots", []):
        slot = entry["slot"]
        if slot_unit(slot) in rows:
            continue
        every_slot_counted = False
        if any(slot_unit(before) not in rows for before in entry.get("after", [])):
            continue
        following = next_draw(draws.get(slot, {}))
        if following is not None:
            work.append(Work(Task.SYNTHESIZE_PROGRAM, f"{slot}:{following}@{job.job_id}", job.tenant))
    if every_slot_counted and SYNTHESIS_FINAL not in rows:
        work.append(Work(Task.FINISH_SYNTHESIS, job.job_id, job.tenant))
    if SYNTHESIS_FINAL in rows:
        for attempt_id in (job.result or {}).get("reports", []):
            if report_unit(attempt_id) not in rows:
                work.append(Work(Task.PREPARE_CALIBRATION, f"{attempt_id}@{job.job_id}", job.tenant))
    if params.get("judges"):
        work += [
            Work(Task.JUDGE_ATTEMPT, f"{attempt_id}@{job.job_id}", job.tenant)
            for attempt_id in params.get("seed_ids", [])
            if attempt_id not in rows
        ]
    return work


async def job_units(session: AsyncSession, job_id: str) -> set[str]:
    """Every unit row of a job (counted units and, for synthesis jobs, draw records)."""
    return set((await session.scalars(select(JobUnit.unit).where(JobUnit.job_id == job_id))).all())


async def _pending_synthesis(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    work: PendingWork = []
    for job in await _live_jobs(session, JobKind.SYNTHESIZE, cutoff, limit):
        work += synthesis_work(job, await job_units(session, job.job_id))
    return work[:limit]


async def _pending_perturb_service(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """The perturb service's own work: perturbation jobs' seeds and synthesis jobs' steps."""
    work = await _pending_perturbations(session, cutoff, limit)
    return (work + await _pending_synthesis(session, cutoff, limit))[:limit]


def pair_unit(ordinal: int) -> str:
    """The job unit counted once a similarity job's pair `ordinal` is scored (or has failed for good)."""
    return f"pair:{ordinal}"


def pair_subject(job_id: str, ordinal: int) -> str:
    """The queue subject of a similarity job's pair: `<ordinal>@<job>`."""
    return f"{ordinal}@{job_id}"


async def _pending_similarity(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """Similarity jobs: every pair whose unit is not counted yet."""
    work: PendingWork = []
    for job in await _live_jobs(session, JobKind.SIMILARITY, cutoff, limit):
        counted = await job_units(session, job.job_id)
        ordinals = await session.scalars(
            select(SimilarityPair.ordinal).where(SimilarityPair.job_id == job.job_id).order_by(SimilarityPair.ordinal)
        )
        work += [
            Work(Task.SCORE_PAIR, pair_subject(job.job_id, o), job.tenant)
            for o in ordinals
            if pair_unit(o) not in counted
        ]
        if len(work) >= limit:
            break
    return work[:limit]


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
            poll_delay=lambda settings: settings.worker_poll_delay_s,
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
        Service(
            name="perturb",
            queue="tribunal:perturb",
            tasks=(
                Task.PERTURB_ATTEMPT,
                Task.VERIFY_MUTANT,
                Task.SYNTHESIZE_PROGRAM,
                Task.FINISH_SYNTHESIS,
                Task.PREPARE_CALIBRATION,
            ),
            entry_point="services.perturb.worker:run_worker",
            max_jobs=lambda settings: max(4, settings.executor_slots),
            stage_tasks={Stage.VERIFY: Task.VERIFY_MUTANT},
            pending=_pending_perturb_service,
        ),
        Service(
            name="similarity",
            queue="tribunal:similarity",
            tasks=(Task.SCORE_PAIR,),
            # The executor's code (it runs the programs, in nsjail), on a queue of its own so that a dataset of
            # thousands of pairs never delays attempts; each pair holds two sandbox slots at once.
            entry_point="executor.similarity_worker:run_worker",
            max_jobs=lambda settings: max(1, settings.executor_slots // 2),
            pending=_pending_similarity,
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
            select(Attempt.attempt_id, Attempt.stage, Attempt.tenant)
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
    return [
        Work(STAGE_TASK[Stage(stage)], attempt_id, tenant) for attempt_id, stage, tenant in rows if stage in STAGE_TASK
    ]
