"""The end of an AXIOM synthesis job (paper 000 III-B4, III-C): the benchmark it makes, once every slot is counted.

- `finish_synthesis` (`job`): context disruption (III-B4: 0-point pairs, created as attempts too), representative
  selection (III-C1) and the job's result.
- `prepare_calibration` (`attempt@job`): the III-C2 multisource report of one representative, stored in the
  attempt's `mutation` record for `GET /v1/benchmarks/{job}/programs/{attempt}/calibration`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel import attempts, cancel, jobs, queue, ratelimit
from services.kernel.attempts import NewMutant
from services.kernel.contracts import Arm, JudgmentStatus
from services.kernel.db import session_scope
from services.kernel.jobs import job_units
from services.kernel.models import Attempt, Execution, Job, Judgment, Problem
from services.kernel.pending import synthesis_draws, synthesis_tally
from services.kernel.plans import SynthesisPlan
from services.kernel.registry import Task
from services.kernel.subjects import (
    DRAW_KEPT,
    SYNTHESIS_FINAL,
    context_pair_ref,
    report_unit,
    slot_unit,
    synthesis_slot,
)
from services.lib.mutation.axiom_records import benchmark_entry, with_benchmark_entry
from services.perturb import llms
from services.perturb.axiom.calibration import StaticAnalysis, build_calibration_report
from services.perturb.axiom.disruption import ProgramRef, RequirementPrograms, ZeroPair, context_disruption
from services.perturb.axiom.embedding import EmbeddingModelUnavailable, shared_embedder
from services.perturb.axiom.selection import ScoredProgram, select_representatives
from services.perturb.axiom.sequences import derive_seed
from services.perturb.axiom.synthesis import KIND_CONTEXT, KIND_DETERIORATIVE, KIND_EXEMPLAR, score_entropy
from services.perturb.shared import judgments_each, parse_subject, worker_redis
from services.perturb.synthesis import RULES, advance, live_synthesis

log = logging.getLogger("tribunal.perturb")

CONTEXT_OPERATOR = "axiom:context"  # the `operator` of a 0-point pair (III-B4): no rule made it


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
        job = await live_synthesis(session, job_id)
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
    redis = await worker_redis(ctx)
    each = judgments_each(params.judges, params.conditions)
    wait_s: float | None = None
    created: list[Attempt] = []
    async with ratelimit.growth_lock(redis, tenant) as locked, session_scope() as session:
        live = await live_synthesis(session, job_id)
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
    await advance(job_id)


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
    """The offline `lint` judge's findings for the program, if it was judged with it (the judge/offline/ package,
    `lint` in judge/offline/dispatch.py)."""
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
        job = await live_synthesis(session, job_id)
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
        budget = await ratelimit.job_token_budget(session, await worker_redis(ctx), job) if target > 0 else None
        if budget is not None and await budget.exhausted():
            wait_s: float | None = ratelimit.next_day_wait_s()
        else:
            wait_s = None
    if wait_s is not None:
        await ratelimit.wait_at_cap(ctx, wait_s)
    rules = [RULES.get(rule_id) for rule_id in entry.get("rules", []) if rule_id in {r.id for r in RULES.rules}]
    runners = llms.runners(ctx, params.llms)
    metered = [llms.MeteredRunner(runners[0])] if isinstance(runners, list) and runners and target > 0 else []
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
        await llms.spend(budget, metered)
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
