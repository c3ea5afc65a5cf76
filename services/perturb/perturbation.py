"""Paper 001's perturbation (V-D): a perturbation job's plan (services/kernel/plans.py `PerturbPlan`) made mutants.

`perturb_attempt` (`seed@job`): parse one accepted seed program, generate its mutants (services.lib.mutation, in a
bounded child process: isolation.py), and create each as an attempt linked to its seed through the kernel's
lifecycle (`attempts.create_mutant`), whose pipeline is execute -> verify (-> judge when the job judges). The job's
total grows by the mutants created, in the same transaction that counts the seed as perturbed, so a retry never
creates or counts anything twice. With `confirm`, each mutant is also a pair of a similarity job (its seed, it).
The verify stage is verification.py's.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel import attempts, cancel, jobs, queue, ratelimit, telemetry
from services.kernel.attempts import NewMutant
from services.kernel.contracts import LIVE_JOB_STATUSES
from services.kernel.db import session_scope
from services.kernel.models import Attempt, JobUnit, Problem, SimilarityPair
from services.kernel.plans import PerturbPlan
from services.kernel.ratelimit import MAX_MUTANTS_PER_SEED
from services.kernel.registry import Task
from services.kernel.subjects import confirmation_seed_unit, job_subject, pair_subject, perturbed_unit
from services.lib.mutation import Mutant, operators_for
from services.perturb.isolation import NotPerturbable, generate_isolated
from services.perturb.shared import judgments_each, parse_subject, worker_redis

log = logging.getLogger("tribunal.perturb")

# A seed yields at most MAX_MUTANTS_PER_SEED mutants (services/kernel/ratelimit.py: all_sites on a large program can
# yield thousands, each a sandbox run); the first ones in the generator's order (catalogue order, then position)
# are kept.


def mutation_record(mutant: Mutant, seed: int) -> dict[str, Any]:
    """What an attempt stores of how it was made (its `mutation` column)."""
    return {"seed": seed, "line": mutant.line, "column": mutant.column, "diff": mutant.diff}


# The mutants of the seeds this process generated and is still creating, by (job, seed): a seed that waits at its
# tenant's cap is generated once, not again each time it looks (another process generates them again: the
# generator is deterministic). Bounded by the text it holds, least recently used out first; a seed leaves it once
# every mutant of it is created.
_GENERATED: OrderedDict[tuple[str, str], list[Mutant]] = OrderedDict()
_GENERATED_MAX_CHARS = 64 * 1024 * 1024


def _text_size(mutants: Sequence[Mutant]) -> int:
    return sum(len(mutant.source) + len(mutant.diff) for mutant in mutants)


async def _generated(seed_id: str, job_id: str, source: str, language: str, params: PerturbPlan) -> list[Mutant]:
    key = (job_id, seed_id)
    if key in _GENERATED:
        _GENERATED.move_to_end(key)
        return _GENERATED[key]
    # The named operators that apply to this seed's language (a job may mix languages); None: all of them.
    applicable = {operator.name for operator in operators_for(language)}
    names = None if params.operators is None else [n for n in params.operators if n in applicable]
    try:
        # The seed is a tenant's program: it is parsed in a bounded child process (isolation.py), never here.
        mutants = (
            []
            if names == []
            else await generate_isolated(
                source, language, seed=params.seed, operators=names, all_sites=params.all_sites
            )
        )
    except NotPerturbable as exc:
        log.warning("seed %s (%s) gives no mutants: %s", seed_id, language, exc)
        mutants = []
    if len(mutants) > MAX_MUTANTS_PER_SEED:
        log.warning("seed %s has %d mutants; the first %d are kept", seed_id, len(mutants), MAX_MUTANTS_PER_SEED)
        mutants = mutants[:MAX_MUTANTS_PER_SEED]
    _GENERATED[key] = mutants
    while len(_GENERATED) > 1 and sum(_text_size(kept) for kept in _GENERATED.values()) > _GENERATED_MAX_CHARS:
        _GENERATED.popitem(last=False)
    return mutants


async def _stored_mutants(session: AsyncSession, job_id: str, seed_id: str) -> set[tuple[str | None, str]]:
    """(operator, source hash) of every mutant of `seed_id` the job already has: what create_mutant would return
    instead of creating (within a job, one operator's same source for one parent is one mutant)."""
    rows = await session.execute(
        select(Attempt.operator, Attempt.source_hash).where(
            Attempt.job_id == job_id, Attempt.parent_attempt_id == seed_id
        )
    )
    return {(operator, digest) for operator, digest in rows.tuples()}


@queue.task(Task.PERTURB_ATTEMPT)
async def perturb_attempt(ctx: dict[str, Any], subject: str) -> None:
    """Create the mutants of one seed for one perturbation job, once each, as the tenant's caps leave room: the
    mutants that do not fit wait (the task is tried again after a delay, a wait not counting as a try), and the
    seed is counted as perturbed once every one of them is created."""
    seed_id, job_id = parse_subject(subject)
    unit = perturbed_unit(seed_id)
    redis = await worker_redis(ctx)
    async with session_scope() as session:
        job = await jobs.get_job(session, job_id)
        if job is None or job.status not in LIVE_JOB_STATUSES:
            return
        if await session.get(JobUnit, (job_id, unit)) is not None:
            return  # already perturbed: a duplicate or a retry after the commit
        parent = await session.get(Attempt, seed_id)
        if parent is None:
            return
        await jobs.mark_running(session, job_id)
        params = job.plan(PerturbPlan)
        source, language, tenant = parent.source_code, parent.language, parent.tenant
        each = judgments_each(params.judges, params.conditions)
        pairs_each = 1 if params.confirm_job_id else 0
        room = await ratelimit.growth_room(session, redis, job, judgments_each=each, pairs_each=pairs_each)
    if room.count < 1 and (job_id, seed_id) not in _GENERATED:
        await ratelimit.wait_at_cap(ctx, room.wait_s)  # no room at all: nothing is generated until there is
    generated = await cancel.watch_of(ctx).run(job_id, _generated(seed_id, job_id, source, language, params))
    if isinstance(generated, cancel.Stopped):
        return  # the job was cancelled: none of its mutants is created
    mutants = generated
    created: list[tuple[int, Attempt]] = []
    complete = True
    async with ratelimit.growth_lock(redis, tenant) as locked:
        if not locked:
            await ratelimit.wait_at_cap(ctx, ratelimit.WAIT_AT_CAP_S)
        async with session_scope() as session:
            job = await jobs.get_job(session, job_id)
            if job is None or job.status not in LIVE_JOB_STATUSES:
                return
            if await session.get(JobUnit, (job_id, unit)) is not None:
                return
            parent = await session.get(Attempt, seed_id)
            assert parent is not None
            room = await ratelimit.growth_room(session, redis, job, judgments_each=each, pairs_each=pairs_each)
            stored = await _stored_mutants(session, job_id, seed_id)
            for index, mutant in enumerate(mutants):
                if (mutant.operator, attempts.source_hash(mutant.source)) in stored:
                    continue  # created by an earlier try
                if len(created) >= room.count:
                    complete = False  # the rest wait for room
                    break
                spec = NewMutant(
                    source_code=mutant.source,
                    operator=mutant.operator,
                    arm=mutant.arm,
                    severity=mutant.severity,
                    guard_context=mutant.guard_context,
                    judges=params.judges,
                    conditions=params.conditions,
                    mutation=mutation_record(mutant, params.seed),
                )
                row, new = await attempts.create_mutant(session, parent, spec, job_id)
                if new:
                    created.append((index, row))
            # The total grows before the seed's unit is counted, so the job cannot look finished in between.
            if not await jobs.add_total(session, job_id, len(created)):
                await session.rollback()  # cancelled meanwhile: none of these mutants is created
                return
            if complete:
                await jobs.count_unit_once(session, job_id, unit)
            confirmations = await _add_confirmations(session, params, parent, created, complete=complete)
            if created and each and not room.exempt and redis is not None:
                await ratelimit.add_judgments(redis, tenant, len(created) * each, None)
    rows = [row for _, row in created]
    await attempts.enqueue_first_stages(rows)
    for row in rows:
        telemetry.mutants_created.labels(language, row.arm or "none").inc()
    for ordinal in confirmations:
        assert params.confirm_job_id is not None
        await queue.enqueue(Task.SCORE_PAIR, pair_subject(params.confirm_job_id, ordinal), tenant=tenant)
    if not complete:
        log.info("seed %s of job %s: %d mutant(s) created, the rest wait (%s)", seed_id, job_id, len(rows), room.limit)
        await ratelimit.wait_at_cap(ctx, room.wait_s)
    _GENERATED.pop((job_id, seed_id), None)
    if params.judges:
        # The seed is judged under the job's conditions too: the perturbation report compares each mutant's
        # score with its seed's (paper 001 VI-B). The judge worker counts this unit once.
        await queue.enqueue(Task.JUDGE_ATTEMPT, job_subject(seed_id, job_id), tenant=tenant)


async def _add_confirmations(
    session: AsyncSession,
    params: PerturbPlan,
    seed: Attempt,
    mutants: Sequence[tuple[int, Attempt]],
    *,
    complete: bool,
) -> list[int]:
    """With `confirm`: one pair (seed, mutant) per new mutant in the confirmation job, in the transaction that
    creates the mutants, then, once the seed's mutants are all created (`complete`), the seed's unit there (so
    that job cannot end before every seed is in). Ordinals are the seed's position times MAX_MUTANTS_PER_SEED
    plus the mutant's position among the seed's mutants: unique without coordination, however many tries it took
    to create them."""
    # The confirmation job's total grows first: one that was cancelled gets no pairs (they would never be scored).
    if params.confirm_job_id is None or not await jobs.add_total(session, params.confirm_job_id, len(mutants)):
        return []
    problem = await session.get(Problem, seed.problem_pk)
    assert problem is not None
    base = params.attempt_ids.index(seed.attempt_id) * MAX_MUTANTS_PER_SEED
    ordinals = []
    for position, mutant in mutants:
        session.add(
            SimilarityPair(
                job_id=params.confirm_job_id,
                ordinal=base + position,
                pair_key=mutant.attempt_id,
                problem_pk=problem.id,
                mode=problem.mode,
                entry_point=problem.entry_point,
                reference_language=seed.language,
                reference_source=seed.source_code,
                candidate_language=mutant.language,
                candidate_source=mutant.source_code,
                labels={"operator": mutant.operator, "arm": mutant.arm},
            )
        )
        ordinals.append(base + position)
    await session.flush()
    if complete:
        await jobs.count_unit_once(session, params.confirm_job_id, confirmation_seed_unit(seed.attempt_id))
    return ordinals
