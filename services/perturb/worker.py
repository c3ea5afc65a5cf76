"""The perturbation worker: the only place the perturbation generator meets the queue and the database.

Two tasks (services/kernel/registry.py), on a perturbation job's plan (services/kernel/plans.py `PerturbPlan`):
- `perturb_attempt` (`seed@job`): parse one accepted seed program, generate its mutants (services.lib.mutation), and
  create each as an attempt linked to its seed through the kernel's lifecycle (`attempts.create_mutant`), whose
  pipeline is execute -> verify (-> judge when the job judges). The job's total grows by the mutants created, in
  the same transaction that counts the seed as perturbed, so a retry never creates or counts anything twice.
- `verify_mutant` (the `verify` stage of a mutant): read its execution and record what it says against the arm
  (services/perturb/verification.py); a mutant that did not build or run to a verdict ends there, unjudged. A
  program synthesised by AXIOM is kept only if its test outcome matches its target score (`axiom_kept`); one that
  does not is marked not kept and ends there, unjudged, and its slot draws again.

And AXIOM's rule-based synthesis (paper 000 III-B, III-C; `POST /v1/benchmarks:synthesize`, docs/axiom.md), whose
plan is the job's (services/kernel/plans.py `SynthesisPlan`) and whose state is its job_unit rows
(services/kernel/subjects.py names them, services/kernel/pending.py `synthesis_work` reads what comes next):
- `synthesize_program` (`<slot>:<draw>@job`): one draw of one slot (a program of one target score for one
  requirement): an LLM perturbation of a random 5-point program of the requirement's pool (III-B2 for target 5,
  III-B3 for 1-4). A candidate becomes a mutant attempt (execute -> verify (-> judge)), and the verify stage keeps
  it or sends the slot to its next draw; an LLM failure is recorded as the draw's outcome, classified, and the
  slot draws again. A slot whose draws run out (`max_draws`) is given up: the job always ends.
- `finish_synthesis` (`job`): once every slot is counted, context disruption (III-B4: 0-point pairs, created as
  attempts too), representative selection (III-C1) and the job's result.
- `prepare_calibration` (`attempt@job`): the III-C2 multisource report of one representative, stored in the
  attempt's `mutation` record for `GET /v1/benchmarks/{job}/programs/{attempt}/calibration`.
Every step is idempotent: draws and counted units are job_unit rows written in the transaction that does the step.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel import attempts, cancel, jobs, queue, ratelimit, telemetry, worker
from services.kernel.attempts import NewMutant
from services.kernel.contracts import LIVE_JOB_STATUSES, Arm, JobKind, JudgmentStatus, Language, Stage
from services.kernel.db import session_scope
from services.kernel.jobs import job_units
from services.kernel.judges import Endpoint, LLMJudge, configured_judges
from services.kernel.models import Attempt, Execution, Job, JobUnit, Judgment, Problem, SimilarityPair
from services.kernel.pending import synthesis_draws, synthesis_tally, synthesis_work
from services.kernel.plans import PerturbPlan, SynthesisPlan, SynthesisRequirement
from services.kernel.ratelimit import MAX_MUTANTS_PER_SEED, JudgeTokenBudget
from services.kernel.registry import Task
from services.kernel.settings import get_settings
from services.kernel.subjects import (
    DRAW_CANDIDATE,
    DRAW_DUPLICATE,
    DRAW_ERROR,
    DRAW_KEPT,
    DRAW_MISMATCH,
    SYNTHESIS_FINAL,
    Subject,
    confirmation_seed_unit,
    context_pair_ref,
    draw_unit,
    job_subject,
    pair_subject,
    parse_draw_subject,
    parse_synthesis_slot,
    perturbed_unit,
    report_unit,
    slot_unit,
    synthesis_slot,
)
from services.lib.llm import Answer, DbResponseCache, Failure, LLMRequest, Runner
from services.lib.mutation import Mutant, operators_for
from services.lib.mutation.axiom_records import benchmark_entry, with_benchmark_entry
from services.lib.mutation.axiom_rules import load_rules
from services.perturb.axiom.calibration import StaticAnalysis, build_calibration_report
from services.perturb.axiom.embedding import EmbeddingModelUnavailable, shared_embedder
from services.perturb.axiom.sequences import derive_seed
from services.perturb.axiom.synthesis import (
    KIND_CONTEXT,
    KIND_DETERIORATIVE,
    KIND_EXEMPLAR,
    PAPER_LLM_TEMPERATURE,
    PAPER_MAX_OUTPUT_TOKENS,
    Candidate,
    FailureKind,
    ProgramRef,
    Rejection,
    RequirementPrograms,
    ScoredProgram,
    SeedProgram,
    ZeroPair,
    context_disruption,
    pick_parent,
    score_entropy,
    select_representatives,
    synthesize,
    to_new_mutant,
)
from services.perturb.isolation import NotPerturbable, generate_isolated
from services.perturb.verification import Verification, axiom_kept, verify

log = logging.getLogger("tribunal.perturb")

SERVICE = "perturb"
# A seed yields at most MAX_MUTANTS_PER_SEED mutants (services/kernel/ratelimit.py: all_sites on a large program can
# yield thousands, each a sandbox run); the first ones in the generator's order (catalogue order, then position)
# are kept.


def parse_subject(subject: str) -> tuple[str, str]:
    """(item, job) of an `<item>@<job>` subject; a bare id names no job (`""`)."""
    parsed = Subject.parse(subject)
    return (subject, "") if parsed is None else (parsed.item, parsed.job_id)


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


class MeteredRunner(Runner):
    """A runner that adds up the tokens of the answers it got from the provider (not those from the cache): what a
    synthesis step spends of its tenant's judge_tokens_per_day."""

    def __init__(self, runner: Runner) -> None:  # a view of `runner`: its endpoint, cache and bounds are the inner's
        self.inner = runner
        self.tokens = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run(self, request: LLMRequest) -> Answer | Failure:
        answer = await self.inner.run(request)
        if isinstance(answer, Answer) and not answer.from_cache:
            self.tokens += (answer.tokens_in or 0) + (answer.tokens_out or 0)
        return answer


async def _spend(budget: JudgeTokenBudget | None, runners: Sequence[MeteredRunner]) -> None:
    tokens = sum(runner.tokens for runner in runners)
    if budget is None or tokens <= 0:
        return
    try:
        await budget.spend(tokens)
    except Exception:  # noqa: BLE001 - a count missed is logged; the judge worker's own checks stand
        log.warning("could not count %d LLM tokens of tenant %s", tokens, budget.tenant, exc_info=True)


async def _redis(ctx: dict[str, Any]) -> Any:
    """The worker's Redis (arq's pool); None for a step run outside a worker with no Redis configured."""
    if ctx.get("redis") is not None:
        return ctx["redis"]
    try:
        return await queue.get_pool()
    except RuntimeError:  # TRIBUNAL_REDIS_URL unset: no queue, so no other worker to count against
        return None


def _judgments_each(judges: Sequence[str], conditions: Sequence[str], repeats: int = 1) -> int:
    """The judgment rows one program of a job asks for: judges x conditions x repeats."""
    return len(judges) * len(conditions) * max(1, repeats)


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
    redis = await _redis(ctx)
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
        each = _judgments_each(params.judges, params.conditions)
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


@queue.task(Task.VERIFY_MUTANT)
async def verify_mutant(ctx: dict[str, Any], attempt_id: str) -> None:
    """The verify stage of a mutant: its execution checked against its arm; unbuilt or unrun mutants end here.
    A synthesised program (an `axiom` record) is kept only if its test outcome matches its target score; if not, it
    ends here unjudged, marked not kept, and its slot draws again."""
    advance: str | None = None
    async with session_scope() as session:
        mutant = await attempts.claim(session, attempt_id, Stage.VERIFY)
        if mutant is None:
            return
        verdict = await session.scalar(
            select(Execution.verdict).where(Execution.attempt_id == attempt_id, Execution.run == 0)
        )
        findings = verify(mutant.arm, verdict)
        arm = mutant.arm or "none"
        mutation = {**(mutant.mutation or {}), "verification": findings.as_json()}
        record = mutation.get("axiom")
        values: dict[str, Any] = {}
        if isinstance(record, dict):
            kept = axiom_kept(record, verdict)
            mutation["axiom"] = {**record, "kept": kept}
            last = not kept
            if kept:  # the ground-truth score the `axiom` report reads (`label_score`)
                values["label"] = {**(mutant.label or {}), "score": int(record["target_score"])}
        else:
            last = not findings.verified
        moved, following = await attempts.finish_stage(
            session, attempt_id, Stage.VERIFY, last=last, mutation=mutation, **values
        )
        # A program drawn for a slot settles its draw (0-point pairs are not drawn: they fill no slot).
        if moved and isinstance(record, dict) and record.get("draw") is not None and mutant.job_id is not None:
            advance = mutant.job_id
            await _settle_draw(session, advance, str(record["slot"]), int(record["draw"]), kept=not last)
    await attempts.after_stage(attempt_id, moved, following, tenant=mutant.tenant)
    if moved:
        telemetry.mutants_verified.labels(arm, _verification_outcome(findings)).inc()
    if advance is not None:
        await _advance(advance)


def _verification_outcome(findings: Verification) -> str:
    """One bounded word for a mutant's verification (telemetry): did it run, and did its arm hold."""
    if not findings.verified:
        return "unbuilt" if not findings.compiles else "internal_error"
    if findings.equivalent_suspect:
        return "equivalent_suspect"
    if findings.operator_bug:
        return "operator_bug"
    return "confirmed"


# ---- AXIOM synthesis ----------------------------------------------------------------------------------------------

RULES = load_rules()
CONTEXT_OPERATOR = "axiom:context"  # the `operator` of a 0-point pair (III-B4): no rule made it


async def _settle_draw(session: AsyncSession, job_id: str, slot: str, draw: int, *, kept: bool) -> None:
    """A verified candidate: its slot is filled (counted), or the draw did not match its target."""
    await jobs.record_unit(session, job_id, draw_unit(slot, draw, DRAW_KEPT if kept else DRAW_MISMATCH))
    if kept:
        await jobs.count_unit_once(session, job_id, slot_unit(slot))


async def _live_synthesis(session: AsyncSession, job_id: str) -> Job | None:
    job = await jobs.get_job(session, job_id)
    if job is None or job.kind != JobKind.SYNTHESIZE or job.status not in LIVE_JOB_STATUSES:
        return None
    return job


async def _advance(job_id: str) -> None:
    """Enqueue what the job needs next (registry.synthesis_work); the reconciler does it if Redis is down."""
    async with session_scope() as session:
        job = await _live_synthesis(session, job_id)
        if job is None:
            return
        work = synthesis_work(job, await job_units(session, job_id))
    try:
        for task, subject, tenant in work:
            await queue.enqueue(task, subject, tenant=tenant)
    except Exception:  # noqa: BLE001 - the database holds the work; the reconciler retries
        log.warning("could not enqueue the next steps of synthesis job %s; the reconciler will", job_id)


def axiom_endpoint(judge: LLMJudge) -> Endpoint:
    """The endpoint of a configured LLM judge (its URL, model, key variable and bounds), with paper 000 IV-A's
    generation settings: temperature 0.3, 8192 output tokens."""
    config = judge.model_dump(exclude={"kind", "enabled", "rubric"})
    return Endpoint.model_validate(
        {**config, "temperature": PAPER_LLM_TEMPERATURE, "max_tokens": PAPER_MAX_OUTPUT_TOKENS}
    )


def _runners(ctx: dict[str, Any], names: Sequence[str]) -> list[Runner] | str:
    """One runner per named LLM judge (created once per process), or why there is none."""
    settings = get_settings()
    configured = {j.name: j for j in configured_judges(str(settings.judges_file) if settings.judges_file else None)}
    cache: dict[str, Runner] = ctx.setdefault("axiom_runners", {})
    runners = []
    for name in names:
        judge = configured.get(name)
        if not isinstance(judge, LLMJudge):
            return f"no LLM judge named {name!r} is configured here"
        if name not in cache:
            cache[name] = Runner(axiom_endpoint(judge), cache=DbResponseCache())
        runners.append(cache[name])
    return runners


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
    redis = await _redis(ctx)
    wait_s: float | None = None
    budget: JudgeTokenBudget | None = None
    async with session_scope() as session:
        job = await _live_synthesis(session, job_id)
        if job is None:
            return
        rows = await job_units(session, job_id)
        if slot_unit(slot) in rows:
            return  # filled or given up
        made = synthesis_draws(rows).get(slot, {}).get(draw)
        params = job.plan(SynthesisPlan)
        requirement = params.requirements[requirement_index]
        tenant = job.tenant
        each = _judgments_each(params.judges, params.conditions)  # a program is judged once per judge, condition
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
        await _advance(job_id)
        return
    seed = derive_seed("axiom", params.seed, requirement.problem_id, target, index, draw)
    programs = [
        SeedProgram(problem.statement, attempt.source_code, attempt.language, 5, attempt.attempt_id) for attempt in pool
    ]
    parent = pick_parent(programs, seed)
    outcome: Candidate | Rejection | None = None
    runners = _runners(ctx, params.llms)
    try:
        if isinstance(runners, str):
            outcome = Rejection(FailureKind.PROVIDER, runners)
        else:
            metered = [MeteredRunner(runner) for runner in runners]
            try:
                drawn = await cancel.watch_of(ctx).run(job_id, synthesize(metered, parent, target, RULES, seed))
            finally:
                await _spend(budget, metered)
            if isinstance(drawn, cancel.Stopped):
                return  # the job was cancelled: its provider call ended with it
            outcome = drawn
    except Exception:  # noqa: BLE001 - recorded as the draw's outcome; the slot draws again
        log.exception("synthesis draw %s of job %s failed", f"{slot}:{draw}", job_id)
    created: list[Attempt] = []
    async with ratelimit.growth_lock(redis, tenant) as locked, session_scope() as session:
        live = await _live_synthesis(session, job_id)
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
    await _advance(job_id)


@dataclass(frozen=True)
class _Program:
    """A program of the benchmark as the final step sees it."""

    attempt_id: str
    requirement: int
    code: str
    language: str
    target: int
    kind: str


@dataclass(frozen=True)
class _Pair:
    """A 0-point pair to create: `pair.program` for requirement `requirement`, as the `index`-th of its pairs."""

    requirement: int
    index: int
    parent_id: str
    pair: ZeroPair
    language: str

    @property
    def slot(self) -> str:
        return synthesis_slot(self.requirement, 0, self.index)


# A final step's plan: context disruption's outcome and pairs, representative selection's outcome and choice.
_FinalPlan = tuple[dict[str, Any], list[_Pair], dict[str, Any], dict[int, list[str]]]


async def _benchmark_programs(
    session: AsyncSession, job_id: str, params: SynthesisPlan
) -> tuple[list[str], list[_Program]]:
    """The requirements' texts and every program the benchmark has: the references (the seeds) and the programs
    the job kept, in a stable order."""
    statements = []
    programs: list[_Program] = []
    kept: list[tuple[str, _Program]] = []
    job_programs = (await session.scalars(select(Attempt).where(Attempt.job_id == job_id))).all()
    by_pk = {requirement.problem_pk: i for i, requirement in enumerate(params.requirements)}
    for attempt in job_programs:
        record = benchmark_entry(attempt.mutation, job_id)
        if record.get("kept") is not True or record.get("kind") not in (KIND_EXEMPLAR, KIND_DETERIORATIVE):
            continue
        owner = by_pk.get(attempt.problem_pk)
        if owner is not None:
            target = int(record["target_score"])
            kept.append(
                (
                    str(record["slot"]),
                    _Program(
                        attempt.attempt_id,
                        owner,
                        attempt.source_code,
                        attempt.language,
                        target,
                        str(record["kind"]),
                    ),
                )
            )
    for i, requirement in enumerate(params.requirements):
        problem = await session.get(Problem, requirement.problem_pk)
        statements.append(problem.statement if problem is not None else "")
        seeds = {
            a.attempt_id: a
            for a in (await session.scalars(select(Attempt).where(Attempt.attempt_id.in_(requirement.seed_ids)))).all()
        }
        programs += [
            _Program(seed.attempt_id, i, seed.source_code, seed.language, 5, "reference")
            for seed in (seeds.get(attempt_id) for attempt_id in requirement.seed_ids)
            if seed is not None
        ]
    programs += [
        program for _, program in sorted(kept, key=lambda item: (item[1].requirement, -item[1].target, item[0]))
    ]
    return statements, programs


def _plan_pairs(statements: list[str], programs: list[_Program], m: int, seed: int) -> list[_Pair]:
    """III-B4 within each language: for each requirement, M distinct distant requirements (softmax over cosine
    distances of MiniLM embeddings, tau 0.03), one of whose programs becomes a 0-point program for it. Raises
    EmbeddingModelUnavailable without the model."""
    embed = shared_embedder()
    planned: list[_Pair] = []
    counts: dict[int, int] = {}
    for language in sorted({program.language for program in programs}):
        requirements = []
        first_program: dict[int, str] = {}
        for i, text in enumerate(statements):
            own = [p for p in programs if p.requirement == i and p.language == language]
            if own:
                first_program[i] = own[0].attempt_id
                requirements.append(
                    RequirementPrograms(str(i), text, tuple(ProgramRef(p.attempt_id, p.code, p.language) for p in own))
                )
        if len(requirements) < 2:
            continue
        for pair in context_disruption(requirements, embed, m, derive_seed("axiom-context", seed, language)):
            i = int(pair.requirement_id)
            planned.append(_Pair(i, counts.get(i, 0), first_program[i], pair, language))
            counts[i] = counts.get(i, 0) + 1
    return planned


def _select(programs: list[_Program], pairs: list[_Pair], select: int, seed: int) -> dict[int, list[str]]:
    """III-C1: `select` representatives per target score by farthest-point selection over normalised token edit
    distance (pairs named by their slot until they are attempts)."""
    scored = [ScoredProgram(ProgramRef(p.attempt_id, p.code, p.language), p.target) for p in programs]
    scored += [
        ScoredProgram(ProgramRef(context_pair_ref(pair.slot), pair.pair.program.code, pair.language), 0)
        for pair in pairs
    ]
    chosen = select_representatives(scored, select, derive_seed("axiom-select", seed))
    return {score: [item.program.program_id for item in items] for (_, score), items in chosen.items()}


@queue.task(Task.FINISH_SYNTHESIS)
async def finish_synthesis(ctx: dict[str, Any], job_id: str) -> None:
    """Once every slot is counted: context disruption (III-B4), representative selection (III-C1), the result. The
    0-point pairs are attempts of the tenant's: as many are created as its caps leave room for, and the step waits
    for room to create the rest (its plan kept meanwhile) before it writes the result."""
    async with session_scope() as session:
        job = await _live_synthesis(session, job_id)
        if job is None:
            return
        rows = await job_units(session, job_id)
        params = job.plan(SynthesisPlan)
        if SYNTHESIS_FINAL in rows or any(slot_unit(entry.slot) not in rows for entry in params.slots):
            return
        await jobs.mark_running(session, job_id)
        tenant = job.tenant
        statements, programs = await _benchmark_programs(session, job_id, params)
    plan = _FINAL_PLANS.pop(job_id, None) or await _final_plan(job_id, params, statements, programs)
    pairs = plan[1]
    redis = await _redis(ctx)
    each = _judgments_each(params.judges, params.conditions)
    wait_s: float | None = None
    created: list[Attempt] = []
    async with ratelimit.growth_lock(redis, tenant) as locked, session_scope() as session:
        live = await _live_synthesis(session, job_id)
        if live is None or SYNTHESIS_FINAL in await job_units(session, job_id):
            return
        room = await ratelimit.growth_room(session, redis, live, judgments_each=each) if locked else None
        stored = set(
            (
                await session.execute(
                    select(Attempt.parent_attempt_id, Attempt.source_hash).where(
                        Attempt.job_id == job_id, Attempt.operator == CONTEXT_OPERATOR
                    )
                )
            ).tuples()
        )
        pair_ids: dict[str, str] = {}
        for planned in pairs:
            if (planned.parent_id, attempts.source_hash(planned.pair.program.code)) not in stored and (
                room is None or len(created) >= room.count
            ):
                wait_s = room.wait_s if room is not None else ratelimit.WAIT_AT_CAP_S
                break
            parent = await session.get(Attempt, planned.parent_id)
            assert parent is not None
            record = {
                "kind": KIND_CONTEXT,
                "target_score": 0,
                "parent_score": None,
                "rules": [],
                "job_id": job_id,
                "slot": planned.slot,
                "problem_id": params.requirements[planned.requirement].problem_id,
                "source_problem_id": params.requirements[int(planned.pair.source_requirement_id)].problem_id,
                "source_attempt_id": planned.pair.program.program_id,
                "distance": planned.pair.distance,
                "probability": planned.pair.probability,
                "language": planned.language,
                "kept": True,  # III-B4: incorrect by definition, never tested; verification records its execution
            }
            spec = NewMutant(
                source_code=planned.pair.program.code,
                operator=CONTEXT_OPERATOR,
                arm=Arm.SEMANTIC,
                judges=params.judges,
                conditions=params.conditions,
                mutation={"axiom": record},
            )
            row, new = await attempts.create_mutant(session, parent, spec, job_id)
            pair_ids[context_pair_ref(planned.slot)] = row.attempt_id
            if new:
                created.append(row)
        await jobs.add_total(session, job_id, len(created))
        if created and each and room is not None and not room.exempt and redis is not None:
            await ratelimit.add_judgments(redis, tenant, len(created) * each, None)
        if wait_s is None:
            await _write_result(session, job_id, params, rows, programs, plan, pair_ids)
    await attempts.enqueue_first_stages(created)
    if wait_s is not None:
        _FINAL_PLANS[job_id] = plan
        while len(_FINAL_PLANS) > _FINAL_PLANS_KEPT:
            _FINAL_PLANS.popitem(last=False)
        await ratelimit.wait_at_cap(ctx, wait_s)
    await _advance(job_id)


# The plans of final steps waiting for room to create their 0-point pairs (by job): planned once per process, not
# again each time the step looks (the plan is deterministic, so another process plans the same again).
_FINAL_PLANS: OrderedDict[str, _FinalPlan] = OrderedDict()
_FINAL_PLANS_KEPT = 16


async def _final_plan(
    job_id: str, params: SynthesisPlan, statements: list[str], programs: list[_Program]
) -> _FinalPlan:
    """Context disruption's pairs (III-B4) and the representatives (III-C1), with how each went."""
    context: dict[str, Any] = {"status": "not_requested", "pairs": 0}
    pairs: list[_Pair] = []
    if 0 in params.targets:
        try:
            pairs = await asyncio.to_thread(_plan_pairs, statements, programs, params.m, params.seed)
            context = {"status": "ok", "pairs": len(pairs)}
        except EmbeddingModelUnavailable as exc:
            log.warning("context disruption unavailable for job %s: %s", job_id, exc)
            context = {"status": "unavailable", "pairs": 0, "reason": "the embedding model is not installed"}
        except Exception as exc:  # noqa: BLE001 - recorded in the result: the job still ends
            log.exception("context disruption failed for job %s", job_id)
            context = {"status": "failed", "pairs": 0, "reason": f"internal error ({type(exc).__name__})"}
    selection: dict[str, Any] = {"status": "ok"}
    try:
        selected = await asyncio.to_thread(_select, programs, pairs, params.select, params.seed)
    except Exception as exc:  # noqa: BLE001 - every program stays a representative: the job still ends
        log.exception("representative selection failed for job %s", job_id)
        selection = {"status": "failed", "reason": f"internal error ({type(exc).__name__})"}
        selected = {}
        for program in programs:
            selected.setdefault(program.target, []).append(program.attempt_id)
        if pairs:
            selected[0] = [context_pair_ref(pair.slot) for pair in pairs]
    return context, pairs, selection, selected


async def _write_result(
    session: AsyncSession,
    job_id: str,
    params: SynthesisPlan,
    rows: set[str],
    programs: list[_Program],
    plan: _FinalPlan,
    pair_ids: dict[str, str],
) -> None:
    """The job's result, its calibration reports asked for, and the final unit counted (every pair is created)."""
    context, pairs, selection, selected = plan
    chosen = {score: [pair_ids.get(i, i) for i in ids] for score, ids in sorted(selected.items(), reverse=True)}
    # A calibration report for every representative but the 0-point pairs, whose score is absolute (III-B4).
    reports = [attempt_id for score, ids in chosen.items() if score > 0 for attempt_id in ids]
    counted_slots = [entry.slot for entry in params.slots]
    filled = {
        slot for slot, draws in synthesis_draws(rows).items() for outcomes in draws.values() if DRAW_KEPT in outcomes
    }
    scores = [score for score, ids in chosen.items() for _ in ids]
    result = {
        "requirements": len(params.requirements),
        "targets": params.targets,
        "m": params.m,
        "slots": len(counted_slots),
        "filled": len(filled),
        "unfilled": [slot for slot in counted_slots if slot not in filled],
        "outcomes": synthesis_tally(rows),
        "programs": _count_by_score([p.target for p in programs] + [0] * len(pairs)),
        "context_disruption": context,
        "select": params.select,
        "selection": selection,
        "selected": {str(score): ids for score, ids in chosen.items()},
        "reports": reports,
        "score_entropy": _entropies(scores),
    }
    await session.execute(update(Job).where(Job.job_id == job_id).values(result=result))
    await jobs.add_total(session, job_id, len(reports))
    await jobs.count_unit_once(session, job_id, SYNTHESIS_FINAL)


def _count_by_score(scores: Sequence[int]) -> dict[str, int]:
    return {str(score): sum(1 for s in scores if s == score) for score in sorted(set(scores), reverse=True)}


def _entropies(scores: Sequence[int]) -> dict[str, float | None]:
    """IV-B's normalised score entropy over 0..5, and over 1..5 for the Rectifiable subset (no 0-point pairs)."""
    rectifiable = [score for score in scores if score >= 1]
    return {
        "all": score_entropy(scores) if scores else None,
        "rectifiable": score_entropy(rectifiable, (1, 5)) if rectifiable else None,
    }


async def _static_analysis(session: AsyncSession, attempt_id: str) -> StaticAnalysis | None:
    """The offline `lint` judge's findings for the program, if it was judged with it (judge/offline.py)."""
    fields = await session.scalar(
        select(Judgment.fields).where(
            Judgment.attempt_id == attempt_id,
            Judgment.prompt_version == "offline:lint",
            Judgment.status == JudgmentStatus.OK,
        )
    )
    return StaticAnalysis.from_lint_fields(fields) if isinstance(fields, dict) else None


@queue.task(Task.PREPARE_CALIBRATION)
async def prepare_calibration(ctx: dict[str, Any], subject: str) -> None:
    """III-C2's multisource report of one representative, stored with the program (its `mutation` record)."""
    attempt_id, job_id = parse_subject(subject)
    async with session_scope() as session:
        job = await _live_synthesis(session, job_id)
        if job is None or report_unit(attempt_id) in await job_units(session, job_id):
            return
        params = job.plan(SynthesisPlan)
        program = await session.get(Attempt, attempt_id)
        problem = await session.get(Problem, program.problem_pk) if program is not None else None
        if program is None or problem is None:
            await jobs.count_unit_once(session, job_id, report_unit(attempt_id))
            return
        entry = benchmark_entry(program.mutation, job_id)
        own = entry.get("job_id") == job_id
        target = int(entry["target_score"]) if own else 5
        parent_code = None
        if own and entry.get("kind") != KIND_CONTEXT and program.parent_attempt_id:
            parent_code = await session.scalar(
                select(Attempt.source_code).where(Attempt.attempt_id == program.parent_attempt_id)
            )
        execution = await session.scalar(
            select(Execution).where(Execution.attempt_id == attempt_id, Execution.run == 0)
        )
        stored_execution = (
            {
                "verdict": execution.verdict,
                "passed": execution.passed,
                "total": execution.total,
                "compile_output": execution.compile_output,
                "tests": execution.tests,
                "toolchain": execution.toolchain,
            }
            if execution is not None
            else None
        )
        static = await _static_analysis(session, attempt_id)
        inputs = (problem.statement, program.source_code, program.language, program.parent_attempt_id if own else None)
        calibrated = (entry.get("calibration") or {}).get("score")
        # Its LLM quality report spends the tenant's judge tokens: with the day's spent, it waits for the next.
        budget = await ratelimit.job_token_budget(session, await _redis(ctx), job) if target > 0 else None
        if budget is not None and await budget.exhausted():
            wait_s: float | None = ratelimit.next_day_wait_s()
        else:
            wait_s = None
    if wait_s is not None:
        await ratelimit.wait_at_cap(ctx, wait_s)
    rules = [RULES.get(rule_id) for rule_id in entry.get("rules", []) if rule_id in {r.id for r in RULES.rules}]
    runners = _runners(ctx, params.llms)
    metered = [MeteredRunner(runners[0])] if isinstance(runners, list) and runners and target > 0 else []
    stored: dict[str, Any]
    try:
        built = await cancel.watch_of(ctx).run(
            job_id,
            build_calibration_report(
                program_id=attempt_id,
                requirement=inputs[0],
                code=inputs[1],
                language=inputs[2],
                target_score=target,
                parent_id=inputs[3],
                parent_code=parent_code,
                rules=rules,
                execution=stored_execution,
                runner=metered[0] if metered else None,
                static_analysis=static,
                calibrated_score=calibrated,
            ),
        )
        await _spend(budget, metered)
        if isinstance(built, cancel.Stopped):
            return  # the job was cancelled: its provider call ended with it
        stored = {"calibration_report": built.model_dump(mode="json", exclude={"calibrated_score"})}
    except Exception as exc:  # noqa: BLE001 - recorded (GET .../calibration says why): the job still ends
        log.exception("calibration report of %s for job %s failed", attempt_id, job_id)
        stored = {"calibration_report_error": type(exc).__name__}
    async with session_scope() as session:
        row = await session.get(Attempt, attempt_id, with_for_update=True)
        if row is not None:
            row.mutation = with_benchmark_entry(row.mutation, job_id, **stored)
        await jobs.count_unit_once(session, job_id, report_unit(attempt_id))


async def _shutdown(ctx: dict[str, Any]) -> None:
    for runner in ctx.get("axiom_runners", {}).values():
        await runner.close()


async def _startup(ctx: dict[str, Any]) -> None:
    telemetry.start_mutant_series(language.value for language in Language)


def run_worker() -> None:
    """Run the perturbation worker until SIGTERM/SIGINT."""
    worker.run(
        worker.build_worker(
            SERVICE,
            functions=[perturb_attempt, verify_mutant, synthesize_program, finish_synthesis, prepare_calibration],
            on_startup=_startup,
            on_shutdown=_shutdown,
        )
    )
