"""What the database holds as pending, for the reconciler (services/kernel/reconcile.py): the database is the
truth, so work it holds as pending but Redis lost is enqueued again, as the same tenant's.

Attempts waiting at a stage are pending for the service that runs that stage (`pending_attempts`); beyond them,
each service has a query of its own in `PENDING`, keyed by the service's name (services/kernel/registry.py). A
job's plan (services/kernel/plans.py) says what it asked for, its job_unit rows (services/kernel/subjects.py) what
of it is done; what is left is pending.

A synthesis job's next steps are its plan and its units read together (`synthesis_work`): the perturb worker
enqueues them after each step, the reconciler re-enqueues what Redis lost, and a cancel names them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.contracts import LIVE_ATTEMPT_STATUSES, LIVE_JOB_STATUSES, JobKind, JobStatus, Stage
from services.kernel.jobs import job_units
from services.kernel.models import Attempt, Job, Report, SimilarityPair
from services.kernel.plans import JudgePlan, PerturbPlan, SynthesisPlan
from services.kernel.registry import SERVICES, STAGE_TASK, Task, Work
from services.kernel.subjects import (
    DRAW_CANDIDATE,
    SYNTHESIS_FINAL,
    draw_subject,
    job_subject,
    judged_unit,
    pair_subject,
    pair_unit,
    parse_draw_unit,
    perturbed_unit,
    report_unit,
    slot_unit,
)

# Work the database holds as pending; the reconciler re-enqueues what Redis lost, as the same tenant's.
PendingWork = list[Work]
PendingQuery = Callable[[AsyncSession, datetime, int], Awaitable[PendingWork]]


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
            Work(Task.JUDGE_ATTEMPT, job_subject(a, job.job_id), job.tenant)
            for a in job.plan(JudgePlan).attempt_ids
            if judged_unit(a) not in counted
        ]
    return work[:limit]


async def _pending_reports(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """The reports service's work: reports not yet built, and live calibration jobs (subject: the job)."""
    rows = await session.execute(
        select(Report.report_id, Report.tenant)
        .join(Job, Job.job_id == Report.job_id)
        .where(Job.status.in_(LIVE_JOB_STATUSES), Job.created_at < cutoff)
        .order_by(Job.created_at)
        .limit(limit)
    )
    work = [Work(Task.BUILD_REPORT, report_id, tenant) for report_id, tenant in rows.all()]
    calibrations = [
        Work(Task.CALIBRATE_JUDGE, job.job_id, job.tenant)
        for job in await _live_jobs(session, JobKind.CALIBRATE, cutoff, limit)
    ]
    return (work + calibrations)[:limit]


async def _pending_perturbations(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """Perturbation jobs: each seed not yet perturbed, and, when the job judges, each seed not yet judged under
    its conditions (counted by the judge worker)."""
    work: PendingWork = []
    for job in await _live_jobs(session, JobKind.PERTURB, cutoff, limit):
        counted = await job_units(session, job.job_id)
        plan = job.plan(PerturbPlan)
        for attempt_id in plan.attempt_ids:
            if perturbed_unit(attempt_id) not in counted:
                work.append(Work(Task.PERTURB_ATTEMPT, job_subject(attempt_id, job.job_id), job.tenant))
            if plan.judges and judged_unit(attempt_id) not in counted:
                work.append(Work(Task.JUDGE_ATTEMPT, job_subject(attempt_id, job.job_id), job.tenant))
    return work[:limit]


# ---- AXIOM synthesis jobs (JobKind.SYNTHESIZE, run by the perturb service) ------------------------------------
#
# The plan (plans.SynthesisPlan) names the slots, each one program to synthesise, with the slots it waits for; the
# state is in the job's job_unit rows (subjects.py names them), so the gateway, the worker and the reconciler read
# one truth.


def synthesis_draws(rows: Iterable[str]) -> dict[str, dict[int, set[str]]]:
    """slot -> draw -> the outcomes recorded for it, from a job's unit rows."""
    draws: dict[str, dict[int, set[str]]] = {}
    for row in rows:
        if (record := parse_draw_unit(row)) is not None:
            slot, draw, outcome = record
            draws.setdefault(slot, {}).setdefault(draw, set()).add(outcome)
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
    `error`, `cancelled`), with `pending` for candidates still being executed and verified."""
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
    plan = job.plan(SynthesisPlan)
    work: PendingWork = []
    draws = synthesis_draws(rows)
    every_slot_counted = True
    for entry in plan.slots:
        if slot_unit(entry.slot) in rows:
            continue
        every_slot_counted = False
        if any(slot_unit(before) not in rows for before in entry.after):
            continue
        following = next_draw(draws.get(entry.slot, {}))
        if following is not None:
            work.append(Work(Task.SYNTHESIZE_PROGRAM, draw_subject(entry.slot, following, job.job_id), job.tenant))
    if every_slot_counted and SYNTHESIS_FINAL not in rows:
        work.append(Work(Task.FINISH_SYNTHESIS, job.job_id, job.tenant))
    if SYNTHESIS_FINAL in rows:
        for attempt_id in (job.result or {}).get("reports", []):
            if report_unit(attempt_id) not in rows:
                work.append(Work(Task.PREPARE_CALIBRATION, job_subject(attempt_id, job.job_id), job.tenant))
    if plan.judges:
        work += [
            Work(Task.JUDGE_ATTEMPT, job_subject(attempt_id, job.job_id), job.tenant)
            for attempt_id in plan.seed_ids
            if judged_unit(attempt_id) not in rows
        ]
    return work


async def _pending_synthesis(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    work: PendingWork = []
    for job in await _live_jobs(session, JobKind.SYNTHESIZE, cutoff, limit):
        work += synthesis_work(job, await job_units(session, job.job_id))
    return work[:limit]


async def _pending_perturb_service(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """The perturb service's own work: perturbation jobs' seeds and synthesis jobs' steps."""
    work = await _pending_perturbations(session, cutoff, limit)
    return (work + await _pending_synthesis(session, cutoff, limit))[:limit]


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


# Each service's pending work of its own (beyond attempts at its stages), by service name.
PENDING: dict[str, PendingQuery] = {
    "executor": _pending_direct_executions,
    "judge": _pending_rejudging,
    "reports": _pending_reports,
    "perturb": _pending_perturb_service,
    "similarity": _pending_similarity,
}


def _check_services() -> None:
    """Every query belongs to a declared service; checked on import."""
    if not set(PENDING) <= set(SERVICES):
        raise RuntimeError(f"pending queries of undeclared services: {sorted(set(PENDING) - set(SERVICES))}")


_check_services()


async def pending_before(session: AsyncSession, cutoff: datetime, limit: int) -> PendingWork:
    """Every (task, subject, tenant) the database holds as pending from before `cutoff`: at most `limit` of each
    kind (the oldest; the next pass continues)."""
    work = await pending_attempts(session, cutoff, limit)
    for query in PENDING.values():
        work += await query(session, cutoff, limit)
    return work
