"""Metrics: stateless computation over arrays the client sends (the pure metrics library, run off the event loop)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter
from pydantic import Field

from gateway.deps import ReadKey
from gateway.errors import ApiError
from gateway.schemas import _In
from metrics import MetricInputError, compute

router = APIRouter(tags=["metrics"])

# The library's messages name the argument; the first one named is the field reported.
_ARGUMENT = re.compile(r"\b(params\.\w+|y_true|y_score|groups|ratings|cluster|metrics|bootstrap|seed)\b")


class MetricsIn(_In):
    metrics: list[str] = Field(min_length=1, max_length=64)
    y_true: list[Any] | None = None
    y_score: list[Any] | None = None
    groups: list[Any] | None = None
    ratings: list[list[Any]] | None = None
    params: dict[str, Any] | None = None
    bootstrap: int = Field(default=0, ge=0, le=20_000)
    cluster: list[Any] | None = None
    seed: int = 0


@router.post("/v1/metrics:compute")
async def compute_metrics(body: MetricsIn, _: ReadKey) -> dict[str, Any]:
    """Every requested metric with its cluster-bootstrap interval; a metric that cannot be computed on this input
    is in `errors` with the reason, never a number."""
    try:
        return await asyncio.to_thread(
            compute,
            body.metrics,
            y_true=body.y_true,
            y_score=body.y_score,
            groups=body.groups,
            ratings=body.ratings,
            params=body.params,
            bootstrap=body.bootstrap,
            cluster=body.cluster,
            seed=body.seed,
        )
    except MetricInputError as exc:
        message = str(exc)
        match = _ARGUMENT.search(message)
        loc: list[str | int] = ["body", *match.group(1).split(".")] if match else ["body"]
        raise ApiError(422, message, [{"loc": loc, "msg": message}]) from None
