"""Benchmarks: AXIOM's rule-based synthesis of graded programs (paper 000 III-B, III-C; docs/axiom.md).

`POST /v1/benchmarks:synthesize` plans a synthesis job (its slots: M programs per target score per requirement,
exemplars first) and enqueues its first steps; the perturb worker synthesises with an LLM, every program becomes an
attempt that the executor runs and the verify stage keeps or drops, and the job ends with 0-point pairs, the
representatives and their calibration reports. The gateway validates, plans, reads and records calibrated scores;
it never imports the service (the plan is the kernel's, services/kernel/plans.py `SynthesisPlan`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from gateway import quotas
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.errors import ApiError, field_error
from gateway.schemas import MAX_SEED_BYTES, SynthesizeIn
from gateway.submissions import not_found
from metrics.agreement import normalised_entropy
from services.kernel import attempts, jobs, queue
from services.kernel.contracts import AttemptStatus, Condition, JobKind, Verdict
from services.kernel.judges import LLMJudge, configured_judges
from services.kernel.models import Attempt, Job, Problem
from services.kernel.pending import synthesis_tally, synthesis_work
from services.kernel.plans import SynthesisPlan, SynthesisRequirement, SynthesisSlot
from services.kernel.settings import get_settings
from services.kernel.subjects import SYNTHESIS_FINAL, slot_unit, synthesis_slot
from services.lib.mutation.axiom_records import (
    AxiomRecord,
    CalibratedScore,
    RecordKind,
    benchmark_entry,
    check_calibration,
    export_record,
    to_jsonl,
    with_benchmark_entry,
)

router = APIRouter(prefix="/v1/benchmarks", tags=["benchmarks"])

SYNTHESIS_TARGETS = (0, 1, 2, 3, 4)  # 5-point programs are the pool: the seeds plus exemplars (III-B2)
MAX_SLOTS_PER_SEED_LIMIT = 10  # a job plans at most this many times TRIBUNAL_MAX_BATCH_SIZE slots


def _llm_names(body: SynthesizeIn) -> list[str]:
    """The named LLM judges, each checked against the judges file: 422 naming `llm` (or `llm[i]`)."""
    names = [body.llm] if isinstance(body.llm, str) else list(dict.fromkeys(body.llm))
    if not names:
        raise field_error(["body", "llm"], "name a configured LLM judge; see GET /v1/judges")
    settings = get_settings()
    configured = configured_judges(str(settings.judges_file) if settings.judges_file else None)
    llms = sorted(j.name for j in configured if isinstance(j, LLMJudge))
    known = {j.name: j for j in configured}
    for position, name in enumerate(names):
        if not isinstance(known.get(name), LLMJudge):
            loc: list[str | int] = ["body", "llm"] if isinstance(body.llm, str) else ["body", "llm", position]
            what = "is not an LLM judge" if name in known else "is not a configured judge"
            choices = ", ".join(llms) if llms else "none is configured (judges file)"
            raise field_error(loc, f"{name!r} {what}; the LLM judges here: {choices}")
    return names


def _check_seed_size(seed: Attempt, loc: list[str | int]) -> None:
    size = len(seed.source_code.encode("utf-8", "surrogatepass"))
    if size > MAX_SEED_BYTES:
        raise field_error(
            loc, f"the seed {seed.attempt_id!r} is {size} bytes; synthesis takes seeds up to {MAX_SEED_BYTES}"
        )


async def _seeds(session: AsyncSession, tenant: str, body: SynthesizeIn) -> list[tuple[Problem, list[str]]]:
    """The requirements (problems) in the order they are named, each with its 5-point seeds."""
    by_problem: dict[int, list[str]] = {}
    if body.attempt_ids:
        accepted = await attempts.accepted_seeds(session, tenant, body.attempt_ids, ["body", "attempt_ids"])
        for index, seed in enumerate(accepted):
            _check_seed_size(seed, ["body", "attempt_ids", index])
            by_problem.setdefault(seed.problem_pk, []).append(seed.attempt_id)
    for index, problem_id in enumerate(body.problem_ids):
        problem = await attempts.find_problem(session, tenant, problem_id)
        if problem is None:
            raise field_error(["body", "problem_ids", index], f"no problem {problem_id!r}", 404)
        reference_row = await session.scalar(
            select(Attempt)
            .where(
                Attempt.tenant == tenant,
                Attempt.problem_pk == problem.id,
                Attempt.status == AttemptStatus.DONE,
                Attempt.verdict == Verdict.AC,
                Attempt.parent_attempt_id.is_(None),
            )
            .order_by(Attempt.created_at, Attempt.attempt_id)
            .limit(1)
        )
        if reference_row is None:
            raise field_error(
                ["body", "problem_ids", index],
                f"problem {problem_id!r} has no accepted attempt to start from; submit its reference solution first",
            )
        _check_seed_size(reference_row, ["body", "problem_ids", index])
        reference = reference_row.attempt_id
        seeds = by_problem.setdefault(problem.id, [])
        if reference not in seeds:
            seeds.append(reference)
    if not by_problem:
        raise field_error(["body", "attempt_ids"], "name accepted seeds (attempt_ids) or problems (problem_ids)")
    problems = {p.id: p for p in (await session.scalars(select(Problem).where(Problem.id.in_(by_problem)))).all()}
    return [(problems[pk], seeds) for pk, seeds in by_problem.items()]


def plan_slots(seed_counts: Sequence[int], targets: Sequence[int], m: int) -> list[SynthesisSlot]:
    """The job's slots: for each requirement, exemplars until its 5-point pool has m programs (III-B2), one after
    the other, then m programs of each target 1..4 (III-B3), which wait for the exemplars (they perturb the pool)."""
    slots: list[SynthesisSlot] = []
    for requirement, seeds in enumerate(seed_counts):
        exemplars = [synthesis_slot(requirement, 5, k) for k in range(max(0, m - seeds))]
        slots += [SynthesisSlot(slot=slot, after=exemplars[k - 1 : k] if k else []) for k, slot in enumerate(exemplars)]
        slots += [
            SynthesisSlot(slot=synthesis_slot(requirement, target, k), after=exemplars)
            for target in targets
            if 1 <= target <= 4
            for k in range(m)
        ]
    return slots


@router.post(":synthesize", status_code=202)
async def synthesize(body: SynthesizeIn, principal: SubmitKey, session: SessionDep) -> dict[str, Any]:
    """Synthesise a graded benchmark from accepted programs (AXIOM III-B, III-C), as one job (kind `synthesize`)."""
    llms = _llm_names(body)
    requirements = await _seeds(session, principal.tenant, body)
    if body.targets is None:
        targets = [t for t in sorted(SYNTHESIS_TARGETS, reverse=True) if t > 0 or len(requirements) > 1]
    else:
        targets = list(body.targets)
        if 0 in targets and len(requirements) < 2:
            raise field_error(
                ["body", "targets"],
                "target 0 pairs programs with other requirements (context disruption, III-B4): name at least two "
                "problems",
            )
    slots = plan_slots([len(seeds) for _, seeds in requirements], targets, body.m)
    limit = get_settings().max_batch_size * MAX_SLOTS_PER_SEED_LIMIT
    if len(slots) > limit:
        raise field_error(["body", "m"], f"{len(slots)} programs to synthesise; the limit is {limit} per job")
    judges: list[str] = []
    if body.judge:
        judges, _ = attempts.resolve_judging(body.judges, [Condition.BLIND], ["body", "judges"])
    seed_ids = [attempt_id for _, seeds in requirements for attempt_id in seeds]
    # The most programs the job may have judged: one kept program per slot, M 0-point pairs per requirement, and
    # the seeds (each under blind, once). The programs are attempts: the worker creates them as the tenant's
    # queued_attempts (and, judged, judgments_per_day) leave room, and waits at the cap otherwise.
    pairs = 0
    if 0 in targets:  # III-B4 pairs programs within each language: M per requirement and language
        languages = set((await session.scalars(select(Attempt.language).where(Attempt.attempt_id.in_(seed_ids)))).all())
        pairs = body.m * len(requirements) * max(1, len(languages))
    most_judged = (len(slots) + pairs + len(seed_ids)) * len(judges)
    plan = SynthesisPlan(
        owner_key_id=principal.key_id,
        requirements=[
            SynthesisRequirement(problem_id=problem.problem_id, problem_pk=problem.id, seed_ids=seeds)
            for problem, seeds in requirements
        ],
        seed_ids=seed_ids,
        targets=targets,
        m=body.m,
        select=body.select,
        max_draws=body.max_draws,
        seed=body.seed,
        llms=llms,
        slots=slots,
        judges=judges,
        conditions=[Condition.BLIND],
        repeats=1,
    )
    # Units: every slot, the final step, and each seed judged; programs are added as they are made, and the
    # representatives' calibration reports once they are chosen.
    total = len(slots) + 1 + (len(seed_ids) if judges else 0)
    job = jobs.create_job(session, tenant=principal.tenant, kind=JobKind.SYNTHESIZE, total=total, plan=plan)
    async with quotas.judgments_counted(session, principal, len(seed_ids) * len(judges), per_request=most_judged):
        await session.commit()
    try:
        for task, subject, tenant in synthesis_work(job, set()):
            await queue.enqueue(task, subject, tenant=tenant)
    except Exception:  # noqa: BLE001 - the reconciler enqueues what the database holds
        pass
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "status": job.status,
        "requirements": [problem.problem_id for problem, _ in requirements],
        "seeds": seed_ids,
        "targets": targets,
        "slots": len(slots),
        "llm": llms,
        "judges": judges,
    }


# ---- reading ----------------------------------------------------------------------------------------------------


async def _synthesis_job(session: AsyncSession, tenant: str, job_id: str) -> Job:
    job = await jobs.get_job(session, job_id)
    if job is None or job.tenant != tenant or job.kind != JobKind.SYNTHESIZE:
        raise not_found("synthesis job", job_id)
    return job


class _Program:
    """One program of a benchmark job: a reference (a seed) or a program the job made, with what the job stored."""

    def __init__(self, attempt: Attempt, job_id: str, problem: Problem | None, selected: set[str]) -> None:
        self.attempt = attempt
        self.entry = benchmark_entry(attempt.mutation, job_id)
        self.own = self.entry.get("job_id") == job_id
        self.problem = problem
        self.selected = attempt.attempt_id in selected

    @property
    def kind(self) -> RecordKind:
        kinds: dict[Any, RecordKind] = {
            "exemplar": "exemplar",
            "deteriorative": "deteriorative",
            "context_disruption": "context_disruption",
        }
        return kinds.get(self.entry.get("kind"), "reference") if self.own else "reference"

    @property
    def target(self) -> int:
        return int(self.entry.get("target_score", 5)) if self.own else 5

    @property
    def kept(self) -> bool | None:
        return self.entry.get("kept") if self.own else True

    @property
    def calibrated(self) -> int | None:
        calibration = self.entry.get("calibration") or {}
        return calibration.get("score")

    @property
    def parent(self) -> str | None:
        if not self.own:
            return None
        if self.kind == "context_disruption":
            return str(self.entry.get("source_attempt_id"))
        return self.attempt.parent_attempt_id

    def record(self) -> AxiomRecord:
        return export_record(
            inst=self.problem.statement if self.problem is not None else "",
            code=self.attempt.source_code,
            lang=self.attempt.language,
            target_score=self.target,
            rules=self.entry.get("rules", []) if self.own else [],
            parent=self.parent,
            kind=self.kind,
            calibrated_score=self.calibrated,
        )

    def view(self) -> dict[str, Any]:
        attempt, entry = self.attempt, self.entry
        return {
            "attempt_id": attempt.attempt_id,
            "problem_id": self.problem.problem_id if self.problem is not None else None,
            "kind": self.kind,
            "target_score": self.target,
            "score": self.calibrated if self.calibrated is not None else self.target,
            "calibrated_score": self.calibrated,
            "kept": self.kept,
            "selected": self.selected,
            "operator": attempt.operator,
            "rules": entry.get("rules", []) if self.own else [],
            "parent_attempt_id": attempt.parent_attempt_id,
            "source_attempt_id": entry.get("source_attempt_id"),
            "slot": entry.get("slot"),
            "draw": entry.get("draw"),
            "language": attempt.language,
            "status": attempt.status,
            "verdict": attempt.verdict,
            "passed": attempt.passed,
            "total": attempt.total,
            "syntax": (entry.get("syntax") or {}).get("ok"),
            "has_calibration_report": "calibration_report" in entry,
        }


async def _programs(session: AsyncSession, job: Job) -> list[_Program]:
    """Every program of the job (references first, then what it made, by slot), with its problem."""
    selected = {i for ids in ((job.result or {}).get("selected") or {}).values() for i in ids}
    seed_ids = list(job.plan(SynthesisPlan).seed_ids)
    rows = list((await session.scalars(select(Attempt).where(Attempt.attempt_id.in_(seed_ids)))).all())
    seeds = {a.attempt_id: a for a in rows}
    made = (
        await session.scalars(
            select(Attempt).where(Attempt.job_id == job.job_id, Attempt.parent_attempt_id.is_not(None))
        )
    ).all()
    attempts_ = [seeds[i] for i in seed_ids if i in seeds] + list(made)
    pks = {a.problem_pk for a in attempts_}
    problems = {p.id: p for p in (await session.scalars(select(Problem).where(Problem.id.in_(pks)))).all()}
    programs = [_Program(a, job.job_id, problems.get(a.problem_pk), selected) for a in attempts_]
    references = [p for p in programs if not p.own]
    own = sorted((p for p in programs if p.own), key=lambda p: (str(p.entry.get("slot")), p.entry.get("draw") or 0))
    return references + own


def _entropy(scores: list[int], scale: tuple[int, int]) -> float | None:
    return normalised_entropy(scores, list(scale), "score") if scores else None


@router.get("/{job_id}")
async def get(job_id: str, principal: ReadKey, session: SessionDep) -> dict[str, Any]:
    """A synthesis job: progress, how its draws ended, its kept programs (and the dropped ones), the entropy."""
    job = await _synthesis_job(session, principal.tenant, job_id)
    rows = await jobs.job_units(session, job_id)
    plan = job.plan(SynthesisPlan)
    stored = plan.model_dump(mode="json")
    programs = await _programs(session, job)
    kept = [p for p in programs if p.kept is True]
    finished = SYNTHESIS_FINAL in rows
    benchmark = [p for p in kept if p.selected] if finished else kept
    scores = [p.calibrated if p.calibrated is not None else p.target for p in benchmark]
    slots = [entry.slot for entry in plan.slots]
    return {
        **jobs.job_view(job),
        "params": {
            key: stored[key] for key in ("targets", "m", "select", "max_draws", "seed", "llms", "judges", "seed_ids")
        },
        "requirements": [r.problem_id for r in plan.requirements],
        "slots": {"total": len(slots), "counted": sum(1 for slot in slots if slot_unit(slot) in rows)},
        "outcomes": synthesis_tally(rows),
        "selection_done": finished,
        "programs": [p.view() for p in kept],
        "dropped": [p.view() for p in programs if p.kept is False],
        "pending": [p.view() for p in programs if p.own and p.kept is None],
        # IV-B: over the representatives once selected (the kept programs before), calibrated scores first.
        "score_entropy": {
            "over": "selected" if finished else "kept",
            "n": len(scores),
            "all": _entropy(scores, (0, 5)),
            "rectifiable": _entropy([s for s in scores if s >= 1], (1, 5)),
        },
    }


@router.get("/{job_id}/export.jsonl")
async def export(
    job_id: str,
    principal: ReadKey,
    session: SessionDep,
    programs: Annotated[
        Literal["selected", "kept"], Query(description="The representatives, or every kept program.")
    ] = "selected",
) -> Response:
    """The benchmark as JSON Lines in AXIOM's record shape (`inst`, `code`, `lang`, `score`, then `target_score`,
    `rules`, `parent`, `calibrated_score`, `kind`), once the job has selected its representatives."""
    job = await _synthesis_job(session, principal.tenant, job_id)
    if SYNTHESIS_FINAL not in await jobs.job_units(session, job_id):
        raise ApiError(409, f"synthesis job {job_id!r} has not selected its programs yet (status {job.status})")
    chosen = [p for p in await _programs(session, job) if p.kept is True and (programs == "kept" or p.selected)]
    chosen.sort(key=lambda p: (-p.target, p.problem.problem_id if p.problem else "", p.attempt.attempt_id))
    return Response(
        to_jsonl(p.record() for p in chosen),
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="{job_id}.jsonl"'},
    )


async def _program(session: AsyncSession, job: Job, attempt_id: str) -> _Program:
    """A program of the benchmark: one of its references, or a program the job made and kept."""
    attempt = await session.get(Attempt, attempt_id)
    seed_ids = job.plan(SynthesisPlan).seed_ids
    if attempt is None or attempt.tenant != job.tenant or (attempt.job_id != job.job_id and attempt_id not in seed_ids):
        raise not_found(f"program of synthesis job {job.job_id!r}", attempt_id)
    problem = await session.get(Problem, attempt.problem_pk)
    selected = {i for ids in ((job.result or {}).get("selected") or {}).values() for i in ids}
    program = _Program(attempt, job.job_id, problem, selected)
    if not program.own and attempt_id not in seed_ids:
        raise not_found(f"program of synthesis job {job.job_id!r}", attempt_id)
    if program.kept is not True:
        state = "was dropped: its test outcome did not match its target" if program.kept is False else "is unverified"
        raise ApiError(409, f"program {attempt_id!r} {state}; only kept programs are calibrated")
    return program


@router.get("/{job_id}/programs/{attempt_id}/calibration")
async def get_calibration(job_id: str, attempt_id: str, principal: ReadKey, session: SessionDep) -> dict[str, Any]:
    """III-C2's multisource report for one representative: the diff to its 5-point parent, its rule sequence,
    static analysis, its test report, an LLM quality report, the allowed scores, and the calibration if recorded."""
    job = await _synthesis_job(session, principal.tenant, job_id)
    program = await _program(session, job, attempt_id)
    report = program.entry.get("calibration_report")
    if report is None:
        if program.entry.get("calibration_report_error"):
            why = f"preparing it failed ({program.entry['calibration_report_error']})"
        elif program.target == 0:
            why = "a 0-point pair's score is absolute and is not calibrated (III-B4)"
        elif program.selected or SYNTHESIS_FINAL not in await jobs.job_units(session, job_id):
            why = "its report is being prepared; retry shortly"
        else:
            why = "reports are prepared for the representatives only (III-C1), and it was not selected"
        raise ApiError(409, f"no calibration report for {attempt_id!r}: {why}")
    return {
        **report,
        "calibrated_score": program.calibrated,
        "calibration": program.entry.get("calibration"),
    }


@router.put("/{job_id}/programs/{attempt_id}/calibration")
async def put_calibration(
    job_id: str, attempt_id: str, body: CalibratedScore, principal: SubmitKey, session: SessionDep
) -> dict[str, Any]:
    """Record the annotator's final score for a program (III-C2): within its target's band (1-2 for a program that
    fails a test, 3-5 for one that passes every test; 0-point pairs stay 0), else 422 naming `score`."""
    job = await _synthesis_job(session, principal.tenant, job_id)
    program = await _program(session, job, attempt_id)
    refused = check_calibration(program.target, body.score)
    if refused is not None:
        raise field_error(["body", "score"], refused)
    calibration = {**body.model_dump(), "recorded_at": datetime.now(UTC).isoformat()}
    row = await session.get(Attempt, attempt_id, with_for_update=True, populate_existing=True)
    assert row is not None
    row.mutation = with_benchmark_entry(row.mutation, job_id, calibration=calibration)
    if program.own:  # the ground-truth score the `axiom` report reads (`label_score`)
        row.label = {**(row.label or {}), "score": body.score}
    await session.commit()
    program.entry = benchmark_entry(row.mutation, job_id)
    return {
        "attempt_id": attempt_id,
        "target_score": program.target,
        "calibrated_score": body.score,
        "calibration": calibration,
        "record": program.record().model_dump(mode="json"),
    }
