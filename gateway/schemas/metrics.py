"""Metrics: the arrays a stateless metric computation is given (gateway/routes/metrics.py)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.schemas.common import RequestBody, Seed


class MetricsIn(RequestBody):
    metrics: list[str] = Field(min_length=1, max_length=64)
    y_true: list[Any] | None = None
    y_score: list[Any] | None = None
    groups: list[Any] | None = None
    ratings: list[list[Any]] | None = None
    params: dict[str, Any] | None = None
    bootstrap: int = Field(default=0, ge=0, le=20_000)
    cluster: list[Any] | None = None
    seed: Seed = 0
    # local_thresholds (LoCaL Algorithm 2): SurfaceSim per pair, and each metric's score per pair.
    surface_sim: list[Any] | None = None
    metric_scores: dict[str, list[Any]] | None = Field(default=None, max_length=64)
