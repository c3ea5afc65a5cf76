"""The tidy judgment table: one row per judgment with its attempt's facts and execution (run 0), as the reports
worker (services/reports/worker.py) and the gateway's trust cards (GET /v1/judges/{name}/trust) read it; the keys are
those of :mod:`metrics.reports`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from services.kernel.contracts import Verdict
from services.kernel.db import session_scope
from services.kernel.models import Attempt, Execution, Judgment, Problem

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


async def load_rows(tenant: str, flt: dict[str, Any]) -> list[dict[str, Any]]:
    """The tidy judgment table of a tenant (api filter: problem_ids, participants, attempt_ids; and judges), one row per
    judgment, with its attempt's facts and execution (run 0); see :mod:`metrics.reports` for the keys."""
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
    return rows
