"""The judge panel (co-creation paper, VI-A10): the unweighted mean, across judges, of each judge's percentile rank.

A judge's percentile rank of an attempt is its average rank among every ok score that judge gave under the same
condition (repeat 0) in the same tenant, divided by their number: ties share the mean of their ranks, so the
value is in (0, 1]. Ranks are scale-free, which is what lets judges on different scales be averaged.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.models import Attempt, Judgment


async def percentile_rank(session: AsyncSession, tenant: str, judge: str, condition: str, score: float) -> float:
    less, equal, total = (
        await session.execute(
            select(
                func.sum(case((Judgment.score < score, 1), else_=0)),
                func.sum(case((Judgment.score == score, 1), else_=0)),
                func.count(),
            )
            .join(Attempt, Attempt.attempt_id == Judgment.attempt_id)
            .where(
                Attempt.tenant == tenant,
                Judgment.judge == judge,
                Judgment.condition == condition,
                Judgment.repeat == 0,
                Judgment.status == "ok",
                Judgment.score.is_not(None),
            )
        )
    ).one()
    less, equal, total = int(less or 0), int(equal or 0), int(total or 0)
    return (less + (equal + 1) / 2) / total


async def panel(session: AsyncSession, tenant: str, judgments: list[Judgment]) -> dict[str, Any] | None:
    """{condition: {"consensus", "judges"}} over the attempt's ok repeat-0 judgments; None if it has none."""
    by_condition: dict[str, list[float]] = {}
    for row in judgments:
        if row.status != "ok" or row.repeat != 0 or row.score is None:
            continue
        rank = await percentile_rank(session, tenant, row.judge, row.condition, row.score)
        by_condition.setdefault(row.condition, []).append(rank)
    if not by_condition:
        return None
    return {
        condition: {"consensus": sum(ranks) / len(ranks), "judges": len(ranks)}
        for condition, ranks in sorted(by_condition.items())
    }
