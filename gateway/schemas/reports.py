"""Reports: what a report is computed over (its kind, the judgments' filter, folds, bootstrap and its unit)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from gateway.schemas.common import RequestBody, Seed
from metrics.reports import Cluster, ReportKind
from services.kernel.contracts import Condition


class ReportIn(RequestBody):
    kind: ReportKind
    filter: dict[str, Any] = Field(default_factory=dict, description="problem_ids, participants, attempt_ids")
    judges: list[str] | None = None
    conditions: list[Condition] | None = None
    folds: int = Field(default=10, ge=2, le=50)
    bootstrap: int = Field(default=2000, ge=0, le=20_000)
    cluster: Cluster | None = Field(
        default=None,
        description="bootstrap unit; default per kind: seed (perturbation), problem (similarity, pass_at_k), else "
        "trajectory",
    )
    seed: Seed = 0
    k: list[Annotated[int, Field(ge=1, le=100_000)]] | None = Field(
        default=None,
        min_length=1,
        max_length=32,
        description="pass_at_k: the k values; default 1, and 10 and 100 where every task has that many samples",
    )
