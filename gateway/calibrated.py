"""The calibrated probability of a judgment, on read: the tenant's newest applied calibration of the judgment's
judge x condition (services/reports/calibrate.py stores them) applied to its raw probability
(metrics/recalibration.py `raw_probability`, `apply_map`); stored rows are never rewritten."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from metrics import recalibration
from services.kernel.models import Calibration, Judgment

# (judge, condition) -> the calibration served for it.
Served = dict[tuple[str, str], Calibration]


async def served_calibrations(session: AsyncSession, tenant: str, judges: Iterable[str]) -> Served:
    """The newest applied calibration of each judge x condition of these judges, in one statement."""
    names = sorted(set(judges))
    if not names:
        return {}
    rows = await session.scalars(
        select(Calibration)
        .where(Calibration.tenant == tenant, Calibration.applied.is_(True), Calibration.judge.in_(names))
        .order_by(Calibration.created_at, Calibration.version)
    )
    return {(row.judge, row.condition): row for row in rows}


def calibrated_fields(row: Judgment, served: Served) -> dict[str, Any]:
    """`p_ac_calibrated` and `calibration_id` of a judgment: null unless an applied calibration covers it and the
    judgment has a raw probability."""
    calibration = served.get((row.judge, row.condition))
    raw = recalibration.raw_probability(row.p_ac, row.score, row.weighted_p_ac, row.weighted_score)
    if calibration is None or raw is None or row.status != "ok":
        return {"p_ac_calibrated": None, "calibration_id": None}
    value = float(recalibration.apply_map(calibration.fitted_map, [min(1.0, max(0.0, raw))])[0])
    return {"p_ac_calibrated": value, "calibration_id": calibration.calibration_id}
