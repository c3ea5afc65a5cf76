"""AXIOM's rule-based synthesis (paper 000 III-B, III-C; `POST /v1/benchmarks:synthesize`, docs/axiom.md): its
draws. The plan is the job's (services/kernel/plans.py `SynthesisPlan`) and its state is its job_unit rows
(services/kernel/subjects.py names them, services/kernel/pending.py `synthesis_work` reads what comes next).

`synthesize_program` (`<slot>:<draw>@job`): one draw of one slot (a program of one target score for one
requirement): an LLM perturbation of a random 5-point program of the requirement's pool (III-B2 for target 5,
III-B3 for 1-4). A candidate becomes a mutant attempt (execute -> verify (-> judge)), and the verify stage
(verification.py) keeps it or sends the slot to its next draw (`settle_draw`); an LLM failure is recorded as the
draw's outcome, classified, and the slot draws again. A slot whose draws run out (`max_draws`) is given up: the job
always ends. Its last steps are benchmark.py's. Every step is idempotent: draws and counted units are job_unit
rows written in the transaction that does the step.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel import attempts, cancel, jobs, queue, ratelimit
from services.kernel.contracts import LIVE_JOB_STATUSES, JobKind
from services.kernel.db import session_scope
from services.kernel.jobs import job_units
from services.kernel.models import Attempt, Job, Problem
from services.kernel.pending import synthesis_draws, synthesis_work
from services.kernel.plans import SynthesisPlan, SynthesisRequirement
from services.kernel.ratelimit import JudgeTokenBudget
from services.kernel.registry import Task
from services.kernel.subjects import (
    DRAW_CANDIDATE,
    DRAW_DUPLICATE,
    DRAW_ERROR,
    DRAW_KEPT,
    DRAW_MISMATCH,
    draw_unit,
    parse_draw_subject,
    parse_synthesis_slot,
    slot_unit,
)
from services.lib.mutation.axiom_records import benchmark_entry
from services.lib.mutation.axiom_rules import load_rules
from services.perturb import llms
from services.perturb.axiom.sequences import derive_seed
from services.perturb.axiom.synthesis import (
    KIND_EXEMPLAR,
    Candidate,
    FailureKind,
    Rejection,
    SeedProgram,
    pick_parent,
    synthesize,
    to_new_mutant,
)
from services.perturb.shared import judgments_each, worker_redis

log = logging.getLogger("tribunal.perturb")

RULES = load_rules()


async def settle_draw(session: AsyncSession, job_id: str, slot: str, draw: int, *, kept: bool) -> None:
    """A verified candidate: its slot is filled (counted), or the draw did not match its target."""
    await jobs.record_unit(session, job_id, draw_unit(slot, draw, DRAW_KEPT if kept else DRAW_MISMATCH))
    if kept:
        await jobs.count_unit_once(session, job_id, slot_unit(slot))


async def live_synthesis(session: AsyncSession, job_id: str) -> Job | None:
    job = await jobs.get_job(session, job_id)
    if job is None or job.kind != JobKind.SYNTHESIZE or job.status not in LIVE_JOB_STATUSES:
        return None
    return job


async def advance(job_id: str) -> None:
    """Enqueue what the job needs next (registry.synthesis_work); the reconciler does it if Redis is down."""
    async with session_scope() as session:
        job = await live_synthesis(session, job_id)
        if job is None:
            return
        work = synthesis_work(job, await job_units(session, job_id))
    try:
        for task, subject, tenant in work:
            await queue.enqueue(task, subject, tenant=tenant)
    except Exception:  # noqa: BLE001 - the database holds the work; the reconciler retries
        log.warning("could not enqueue the next steps of synthesis job %s; the reconciler will", job_id)


async def _requirement_pool(
    session: AsyncSession, job_id: str, requirement_index: int, requirement: SynthesisRequirement, below: int | None
) -> list[Attempt]:
    """The requirement's 5-point pool (III-B2): its seeds, then the exemplars the job kept for it (those of slots
    before `below` only, so that exemplar k is drawn from a pool that does not depend on timing)."""
    seeds = {
        a.attempt_id: a
        for a in (await session.scalars(select(Attempt).where(Attempt.attempt_id.in_(requirement.seed_ids)))).all()
    }
    pool = [seeds[attempt_id] for attempt_id in requirement.seed_ids if attempt_id in seeds]
    exemplars: list[tuple[int, Attempt]] = []
    for attempt in (
        await session.scalars(
            select(Attempt).where(Attempt.job_id == job_id, Attempt.problem_pk == requirement.problem_pk)
        )
    ).all():
        record = benchmark_entry(attempt.mutation, job_id)
        if record.get("kind") != KIND_EXEMPLAR or record.get("kept") is not True:
            continue
        owner, _, index = parse_synthesis_slot(str(record["slot"]))
        if owner == requirement_index and (below is None or index < below):
            exemplars.append((index, attempt))
    return pool + [attempt for _, attempt in sorted(exemplars, key=lambda item: item[0])]


@queue.task(Task.SYNTHESIZE_PROGRAM)
async def synthesize_program(ctx: dict[str, Any], subject: str) -> None:
    """One draw of one slot: an LLM perturbation toward the slot's target score, made an attempt if it yields a
    program; an LLM failure is recorded as the draw's outcome and the slot draws again. The program is an attempt
    of the tenant's: without room under its caps the draw waits, before asking the LLM, and again before storing
    what the LLM gave (its answer is then read from the response cache when the draw runs again)."""
    slot, draw, job_id = parse_draw_subject(subject)
    requirement_index, target, index = parse_synthesis_slot(slot)
    problem: Problem | None = None
    pool: list[Attempt] = []
    redis = await worker_redis(ctx)
    wait_s: float | None = None
    budget: JudgeTokenBudget | None = None
    async with session_scope() as session:
        job = await live_synthesis(session, job_id)
        if job is None:
            return
        rows = await job_units(session, job_id)
        if slot_unit(slot) in rows:
            return  # filled or given up
        made = synthesis_draws(rows).get(slot, {}).get(draw)
        params = job.plan(SynthesisPlan)
        requirement = params.requirements[requirement_index]
        tenant = job.tenant
        each = judgments_each(params.judges, params.conditions)  # a program is judged once per judge, condition
        if made:
            pass  # this draw already ran (a duplicate, or a retry after its commit)
        elif draw >= params.max_draws:
            await jobs.count_unit_once(session, job_id, slot_unit(slot))  # given up: its draws ran out
        else:
            await jobs.mark_running(session, job_id)
            room = await ratelimit.growth_room(session, redis, job, judgments_each=each)
            budget = await ratelimit.job_token_budget(session, redis, job)
            if room.count < 1:
                wait_s = room.wait_s
            elif budget is not None and await budget.exhausted():
                wait_s = ratelimit.next_day_wait_s()  # the LLM tokens of the day are spent: ask nothing more
            else:
                problem = await session.get(Problem, requirement.problem_pk)
                pool = await _requirement_pool(
                    session, job_id, requirement_index, requirement, index if target == 5 else None
                )
                if problem is None or not pool:  # deleted meanwhile: nothing to perturb
                    await jobs.record_unit(session, job_id, draw_unit(slot, draw, DRAW_ERROR))
    if wait_s is not None:
        await ratelimit.wait_at_cap(ctx, wait_s)
    if problem is None or not pool:
        await advance(job_id)
        return
    seed = derive_seed("axiom", params.seed, requirement.problem_id, target, index, draw)
    programs = [
        SeedProgram(problem.statement, attempt.source_code, attempt.language, 5, attempt.attempt_id) for attempt in pool
    ]
    parent = pick_parent(programs, seed)
    outcome: Candidate | Rejection | None = None
    runners = llms.runners(ctx, params.llms)
    try:
        if isinstance(runners, str):
            outcome = Rejection(FailureKind.PROVIDER, runners)
        else:
            metered = [llms.MeteredRunner(runner) for runner in runners]
            try:
                drawn = await cancel.watch_of(ctx).run(job_id, synthesize(metered, parent, target, RULES, seed))
            finally:
                await llms.spend(budget, metered)
            if isinstance(drawn, cancel.Stopped):
                return  # the job was cancelled: its provider call ended with it
            outcome = drawn
    except Exception:  # noqa: BLE001 - recorded as the draw's outcome; the slot draws again
        log.exception("synthesis draw %s of job %s failed", f"{slot}:{draw}", job_id)
    created: list[Attempt] = []
    async with ratelimit.growth_lock(redis, tenant) as locked, session_scope() as session:
        live = await live_synthesis(session, job_id)
        if live is None:
            return
        now = await ratelimit.growth_room(session, redis, live, judgments_each=each) if locked else None
        if isinstance(outcome, Candidate) and (now is None or now.count < 1):
            wait_s = now.wait_s if now is not None else ratelimit.WAIT_AT_CAP_S  # another draw took the room
        elif isinstance(outcome, Candidate):
            spec = to_new_mutant(outcome, judges=params.judges, conditions=params.conditions, rules=RULES)
            record = {
                **spec.mutation["axiom"],
                "job_id": job_id,
                "slot": slot,
                "draw": draw,
                "problem_id": requirement.problem_id,
            }
            parent_row = await session.get(Attempt, parent.program_id)
            assert parent_row is not None
            row, new = await attempts.create_mutant(
                session, parent_row, replace(spec, mutation={"axiom": record}), job_id
            )
            if new and not await jobs.add_total(session, job_id, 1):  # the attempt counts when it ends
                await session.rollback()  # cancelled meanwhile: the program is not created
                return
            if new:
                created.append(row)
                await jobs.record_unit(session, job_id, draw_unit(slot, draw, DRAW_CANDIDATE))
                if each and now is not None and not now.exempt and redis is not None:
                    await ratelimit.add_judgments(redis, tenant, each, None)
            else:
                owner = benchmark_entry(row.mutation, job_id)
                same = (owner.get("slot"), owner.get("draw")) == (slot, draw)
                await jobs.record_unit(
                    session, job_id, draw_unit(slot, draw, DRAW_CANDIDATE if same else DRAW_DUPLICATE)
                )
        else:
            kind = outcome.kind.value if isinstance(outcome, Rejection) else DRAW_ERROR
            if isinstance(outcome, Rejection):
                log.info("synthesis draw %s:%s of job %s rejected (%s): %s", slot, draw, job_id, kind, outcome.reason)
            await jobs.record_unit(session, job_id, draw_unit(slot, draw, kind))
    if wait_s is not None:
        await ratelimit.wait_at_cap(ctx, wait_s)
    await attempts.enqueue_first_stages(created)
    await advance(job_id)
