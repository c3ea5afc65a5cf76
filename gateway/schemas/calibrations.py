"""Calibrations: which judge x condition to calibrate, how (isotonic or Platt), on which folds and bootstrap."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.schemas.common import RequestBody, Seed
from services.kernel.contracts import Condition


class CalibrationIn(RequestBody):
    judge: str = Field(min_length=1, max_length=100, description="a configured judge's name")
    condition: Condition = Condition.BLIND
    method: Literal["isotonic", "platt"] = "isotonic"
    cluster: Literal["problem", "trajectory"] = Field(
        default="trajectory", description="the CV folds' groups and the bootstrap's unit"
    )
    bootstrap: int = Field(default=2000, ge=0, le=20_000)
    folds: int = Field(default=10, ge=2, le=50)
    seed: Seed = 0
