"""Perturbations: the operator catalogue, perturbing accepted attempts into verified mutants (optionally judged),
and reading a perturbation job's mutants. The generator runs in the perturb worker; the gateway only validates,
records the job and enqueues."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from gateway import quotas
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.errors import field_error
from gateway.principal import Principal
from gateway.schemas import PerturbationsIn
from gateway.submissions import not_found
from services.kernel import attempts, jobs, queue
from services.kernel.contracts import Arm, Condition, JobKind
from services.kernel.models import Attempt, SimilarityPair, new_id
from services.kernel.plans import PerturbPlan, SimilarityPlan
from services.kernel.ratelimit import MAX_MUTANTS_PER_SEED
from services.kernel.registry import Task
from services.kernel.subjects import job_subject
from services.lib.mutation import CATALOGUE, operators_for
from services.lib.mutation.axiom_rules import catalogue as axiom_catalogue

router = APIRouter(prefix="/v1/perturbations", tags=["perturbations"])


def confirmation_plan(body: PerturbationsIn, perturbation_job_id: str) -> SimilarityPlan:
    """A confirmation job's plan: a similarity job's (gateway/routes/similarity.py), Algorithm 1's rule."""
    return SimilarityPlan(
        n_inputs=body.confirm_inputs,
        repeats=body.confirm_repeats,
        time_budget_s=60.0,
        per_input_timeout_s=2.0,
        float_tolerance=None,
        seed=body.seed,
        timeout_rule="paper",
        single=False,
        crystal_k=0,
        crystal_ignore={},
        thresholds=None,
        protocol="pseudocode",
        perturbation_job_id=perturbation_job_id,
    )


def operator_view(operator: Any) -> dict[str, Any]:
    return {
        "name": operator.name,
        "arm": operator.arm,
        "severity": operator.severity,
        "languages": list(operator.languages),
        "description": operator.description,
        "example": {"before": operator.example_before, "after": operator.example_after},
        "source": operator.source,
    }


@router.get("/operators")
async def list_operators(_: ReadKey) -> list[dict[str, Any]]:
    """The catalogue: every operator with its arm, severity, languages and a before/after example (`kind`
    `operator`), then AXIOM's perturbation rules with their score ceilings (`kind` `axiom_rule`, docs/axiom.md)."""
    return [{"kind": "operator", **operator_view(operator)} for operator in CATALOGUE] + axiom_catalogue()


@router.post("", status_code=202)
async def perturb(body: PerturbationsIn, principal: SubmitKey, session: SessionDep) -> dict[str, Any]:
    """Perturb accepted attempts: each becomes a seed whose mutants are attempts (execute -> verify -> judge)."""
    return await create_perturbation(body, principal, session)


async def create_perturbation(
    body: PerturbationsIn, principal: Principal, session: AsyncSession, recorded: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Validate, record the perturbation job and enqueue its seeds. `recorded(job_id)` runs in the transaction
    that creates the job (a study records it there, so that a resumed run never makes it twice)."""
    catalogue = {operator.name for operator in CATALOGUE}
    for position, name in enumerate(body.operators or []):
        if name not in catalogue:
            raise field_error(
                ["body", "operators", position], f"unknown operator {name!r}; see GET /v1/perturbations/operators"
            )
    most_mutants = 0  # the most mutants the job may make: what its judging is bounded by
    for seed in await attempts.accepted_seeds(session, principal.tenant, body.attempt_ids, ["body", "attempt_ids"]):
        attempt_id = seed.attempt_id
        applicable = {o.name for o in operators_for(seed.language)}
        if body.operators and not applicable & set(body.operators):
            raise field_error(
                ["body", "operators"], f"none of these operators applies to {seed.language} (seed {attempt_id!r})"
            )
        # One mutant per operator (paper 001), or every site of each with all_sites; at most MAX_MUTANTS_PER_SEED.
        operators = len(applicable & set(body.operators)) if body.operators else len(applicable)
        most_mutants += MAX_MUTANTS_PER_SEED if body.all_sites else min(operators, MAX_MUTANTS_PER_SEED)
    judges: list[str] = []
    if body.judge:
        judges, _ = attempts.resolve_judging(body.judges, [Condition.BLIND], ["body", "judges"])
    job_id = new_id("job")
    confirm_job_id = None
    if body.confirm:
        # The similarity job counts one unit per seed (its mutants' pairs added) and one per pair (scored), so it
        # cannot end before every seed is perturbed; cancelling the perturbation job cancels it too.
        confirm = jobs.create_job(
            session,
            tenant=principal.tenant,
            kind=JobKind.SIMILARITY,
            total=len(body.attempt_ids),
            plan=confirmation_plan(body, job_id),
        )
        confirm_job_id = confirm.job_id
    plan = PerturbPlan(
        owner_key_id=principal.key_id,
        attempt_ids=body.attempt_ids,
        operators=body.operators,
        seed=body.seed,
        all_sites=body.all_sites,
        judges=judges,
        conditions=[Condition.BLIND],
        repeats=1,
        confirm_job_id=confirm_job_id,
    )
    # One unit per seed perturbed, one per seed judged; each seed's mutants are added as they are created.
    total = len(body.attempt_ids) * (2 if judges else 1)
    job = jobs.create_job(session, tenant=principal.tenant, kind=JobKind.PERTURB, total=total, plan=plan, job_id=job_id)
    # The seeds' judging is asked for now; each mutant's when the worker creates it (it waits at the caps there).
    seeds_judged = len(body.attempt_ids) * len(judges)
    async with quotas.judgments_counted(
        session, principal, seeds_judged, per_request=seeds_judged + most_mutants * len(judges)
    ):
        if recorded is not None:
            recorded(job.job_id)
        await session.commit()
    try:
        for attempt_id in body.attempt_ids:
            await queue.enqueue(Task.PERTURB_ATTEMPT, job_subject(attempt_id, job.job_id), tenant=principal.tenant)
    except Exception:  # noqa: BLE001 - the reconciler enqueues what the database holds
        pass
    return {"job_id": job.job_id, "status": job.status, "judges": judges, "confirm_job_id": confirm_job_id}


def fuzzing_view(mutant: Attempt, pair: SimilarityPair | None) -> dict[str, Any] | None:
    """What differential fuzzing against the seed found (a job with `confirm`): df_score, and whether it confirms
    the mutant's arm (a control behaves as its seed on every input; a semantic mutant does not)."""
    if pair is None:
        return None
    result = pair.result or {}
    df = result.get("df_score") if pair.status == "scored" else None
    confirms = None
    if df is not None and df >= 0:
        confirms = df == 1.0 if mutant.arm == Arm.CONTROL else df < 1.0
    return {"status": pair.status, "df_score": df, "confirms": confirms, "error": pair.error}


def mutant_view(mutant: Attempt, pair: SimilarityPair | None = None) -> dict[str, Any]:
    """One mutant as a perturbation job lists it: how it was made, and what verification (and, with `confirm`,
    differential fuzzing) found."""
    record = mutant.mutation or {}
    return {
        "attempt_id": mutant.attempt_id,
        "parent_attempt_id": mutant.parent_attempt_id,
        "operator": mutant.operator,
        "arm": mutant.arm,
        "severity": mutant.severity,
        "guard_context": mutant.guard_context,
        "line": record.get("line"),
        "column": record.get("column"),
        "diff": record.get("diff"),
        "status": mutant.status,
        "verdict": mutant.verdict,
        "passed": mutant.passed,
        "total": mutant.total,
        "verification": record.get("verification"),
        "fuzzing": fuzzing_view(mutant, pair),
    }


@router.get("/{job_id}")
async def get(job_id: str, principal: ReadKey, session: SessionDep) -> dict[str, Any]:
    """A perturbation job: its progress, and every mutant it created with its verification."""
    job = await jobs.get_job(session, job_id)
    if job is None or job.tenant != principal.tenant or job.kind != JobKind.PERTURB:
        raise not_found("perturbation job", job_id)
    mutants = (
        await session.scalars(
            select(Attempt)
            .where(Attempt.job_id == job_id, Attempt.parent_attempt_id.is_not(None))
            .order_by(Attempt.parent_attempt_id, Attempt.operator, Attempt.attempt_id)
        )
    ).all()
    pairs: dict[str, SimilarityPair] = {}
    confirm_job_id = job.plan(PerturbPlan).confirm_job_id
    if confirm_job_id:
        rows = await session.scalars(select(SimilarityPair).where(SimilarityPair.job_id == confirm_job_id))
        pairs = {pair.pair_key: pair for pair in rows}
    return {
        **jobs.job_view(job),
        "confirm_job_id": confirm_job_id,
        "mutants": [mutant_view(m, pairs.get(m.attempt_id)) for m in mutants],
    }
