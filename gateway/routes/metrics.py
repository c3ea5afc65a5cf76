"""Metrics: stateless computation over arrays the client sends (the pure metrics library, run off the event loop).

The bootstrap is CPU-bound and runs in the gateway process, so one request's work is capped before it starts:
items x resamples may not exceed `TRIBUNAL_METRICS_COMPUTE_MAX_WORK` (`compute_work`); the computation itself runs
in a worker thread, so the event loop keeps serving other requests meanwhile."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter

from gateway.deps import ReadKey
from gateway.errors import ApiError, field_error
from gateway.schemas import MetricsIn
from metrics import MetricInputError, compute
from services.kernel.settings import get_settings

router = APIRouter(tags=["metrics"])

# The library's messages name the argument; the first one named is the field reported.
_ARGUMENT = re.compile(
    r"\b(params\.\w+|metric_scores(?:\.[\w-]+)?|surface_sim|y_true|y_score|groups|ratings|cluster|metrics|bootstrap|seed)\b"
)


def _size(value: Any) -> int:
    """Entries of a per-item array; cells of a matrix or of a mapping of arrays (e.g. `params.metric_scores`)."""
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    if isinstance(value, list):
        return sum(len(v) if isinstance(v, list) else 1 for v in value)
    return 0


def compute_items(body: MetricsIn) -> int:
    """The number of items one resample weighs: the largest per-item input (`y_true`, `y_score`, `groups`,
    `cluster`, `surface_sim`, an array in `params`), or every cell of `ratings` (raters x items). `metric_scores`
    is left out: only `local_thresholds` reads it, and it is never resampled."""
    arrays: list[Any] = [body.y_true, body.y_score, body.groups, body.cluster, body.ratings, body.surface_sim]
    arrays += list((body.params or {}).values())
    return max((_size(a) for a in arrays), default=0)


def compute_work(body: MetricsIn) -> int:
    """items x bootstrap resamples: what the cap bounds (no resample, no bootstrap work)."""
    return compute_items(body) * body.bootstrap


@router.post("/v1/metrics:compute")
async def compute_metrics(body: MetricsIn, _: ReadKey) -> dict[str, Any]:
    """Every requested metric with its cluster-bootstrap interval; a metric that cannot be computed on this input
    is in `errors` with the reason, never a number. 422 naming `bootstrap` when items x resamples exceeds the
    deployment's cap (`TRIBUNAL_METRICS_COMPUTE_MAX_WORK`, 2,000,000 by default)."""
    cap = get_settings().metrics_compute_max_work
    work = compute_work(body)
    if work > cap:
        items = compute_items(body)
        raise field_error(
            ["body", "bootstrap"],
            f"{items} items x {body.bootstrap} resamples = {work:,} exceeds this deployment's limit of {cap:,} "
            f"(TRIBUNAL_METRICS_COMPUTE_MAX_WORK); use at most {cap // max(items, 1)} resamples for {items} items",
        )
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
            surface_sim=body.surface_sim,
            metric_scores=body.metric_scores,
        )
    except MetricInputError as exc:
        message = str(exc)
        match = _ARGUMENT.search(message)
        loc: list[str | int] = ["body", *match.group(1).split(".")] if match else ["body"]
        raise ApiError(422, message, [{"loc": loc, "msg": message}]) from None
