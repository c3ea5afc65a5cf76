"""The tidy judgment table: one row per judgment with its attempt's facts and execution (run 0), as the reports
worker (services/reports/worker.py), its calibrations (services/reports/calibrate.py) and the gateway's trust cards
(GET /v1/judges/{name}/trust) read it; the keys are those of :mod:`metrics.reports`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.contracts import JobKind, Verdict
from services.kernel.db import session_scope
from services.kernel.models import Attempt, Execution, Job, Judgment, Problem, SimilarityPair

# Judges of the offline kind record their method as the prompt version "offline:<method>" (judge/worker.py).
OFFLINE_PREFIX = "offline:"


def label_ac(attempt: Attempt, verdict: str | None) -> int | None:
    """Ground truth for acceptance: the client's label when it gave one, else the execution verdict (IE: none)."""
    label = attempt.label or {}
    chosen = label.get("verdict") or verdict
    if chosen is None or chosen == Verdict.IE:
        return None
    return 1 if chosen == Verdict.AC else 0


def offline_method(prompt_version: str | None) -> str | None:
    """The offline judge method a judgment row was made by, None for an LLM judge."""
    if prompt_version and prompt_version.startswith(OFFLINE_PREFIX):
        return prompt_version.removeprefix(OFFLINE_PREFIX)
    return None


async def confirmation_scores(session: AsyncSession, tenant: str, mutant_ids: list[str]) -> dict[str, float]:
    """``{mutant attempt_id: df_score}`` from the tenant's similarity jobs: a perturbation job with ``confirm``
    makes one pair (seed, mutant) per mutant keyed by the mutant's attempt_id (services/perturb/perturbation.py).
    Only scored pairs with a df_score of at least 0 count (-1: every repetition timed out); the latest scored wins."""
    if not mutant_ids:
        return {}
    query = (
        select(SimilarityPair.pair_key, SimilarityPair.result)
        .join(Job, Job.job_id == SimilarityPair.job_id)
        .where(
            Job.tenant == tenant,
            Job.kind == JobKind.SIMILARITY,
            SimilarityPair.status == "scored",
            SimilarityPair.pair_key.in_(sorted(set(mutant_ids))),
        )
        .order_by(SimilarityPair.finished_at, SimilarityPair.job_id, SimilarityPair.ordinal)
    )
    scores: dict[str, float] = {}
    for key, result in (await session.execute(query)).tuples():
        df = (result or {}).get("df_score")
        if isinstance(df, int | float) and not isinstance(df, bool) and df >= 0:
            scores[key] = float(df)
    return scores


async def load_rows(tenant: str, flt: dict[str, Any]) -> list[dict[str, Any]]:
    """The tidy judgment table of a tenant (api filter: problem_ids, participants, attempt_ids; and judges), one row per
    judgment, with its attempt's facts and execution (run 0); see :mod:`metrics.reports` for the keys. A mutant's
    row carries ``df_score`` from its confirmation pair (:func:`confirmation_scores`), None without one."""
    async with session_scope() as session:
        query = (
            select(
                Attempt,
                Problem.problem_id,
                Execution.verdict,
                Execution.passed,
                Execution.total,
                Judgment,
            )
            .join(Problem, Problem.id == Attempt.problem_pk)
            .outerjoin(Execution, (Execution.attempt_id == Attempt.attempt_id) & (Execution.run == 0))
            .join(Judgment, Judgment.attempt_id == Attempt.attempt_id)
            .where(Attempt.tenant == tenant)
        )
        if flt.get("problem_ids"):
            query = query.where(Problem.problem_id.in_(list(flt["problem_ids"])))
        if flt.get("participants"):
            query = query.where(Attempt.participant.in_(list(flt["participants"])))
        if flt.get("judges"):
            query = query.where(Judgment.judge.in_(list(flt["judges"])))
        if flt.get("attempt_ids"):
            query = query.where(Attempt.attempt_id.in_(list(flt["attempt_ids"])))
        rows = []
        for attempt, problem_id, verdict, passed, total, judgment in (await session.execute(query)).all():
            label = attempt.label or {}
            rows.append(
                {
                    "attempt_id": attempt.attempt_id,
                    "problem_id": problem_id,
                    "participant": attempt.participant,
                    "turn": attempt.turn,
                    "trajectory": f"{attempt.participant}|{problem_id}" if attempt.participant else attempt.attempt_id,
                    "label_ac": label_ac(attempt, verdict),
                    "label_score": label.get("score"),
                    "judge": judgment.judge,
                    "method": offline_method(judgment.prompt_version),
                    "condition": judgment.condition,
                    "repeat": judgment.repeat,
                    "status": judgment.status,
                    "error": judgment.error,
                    "p_ac": judgment.p_ac,
                    "score": judgment.score,
                    "weighted_p_ac": judgment.weighted_p_ac,
                    "weighted_score": judgment.weighted_score,
                    "parent_attempt_id": attempt.parent_attempt_id,
                    "operator": attempt.operator,
                    "arm": attempt.arm,
                    "severity": attempt.severity,
                    "guard_context": attempt.guard_context,
                    "verdict": verdict,
                    "passed": passed,
                    "total": total,
                    "created_at": attempt.created_at.isoformat() if attempt.created_at else None,
                }
            )
        mutants = [str(row["attempt_id"]) for row in rows if row["parent_attempt_id"]]
        confirmed = await confirmation_scores(session, tenant, mutants)
    for row in rows:
        row["df_score"] = confirmed.get(str(row["attempt_id"])) if row["parent_attempt_id"] else None
    return rows
