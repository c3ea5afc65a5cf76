"""Reports: what a report is computed over (its kind, the judgments' filter, folds, bootstrap and its unit), and
a report as listed."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from gateway.schemas.common import RequestBody, Seed
from metrics.reports import Cluster, ReportKind
from services.kernel.contracts import Condition, JobStatus


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
    calibration: Literal["isotonic", "platt"] | None = Field(
        default=None, description="judge_quality: ECE, Brier and LogLoss before and after an out-of-fold map"
    )
    k: list[Annotated[int, Field(ge=1, le=100_000)]] | None = Field(
        default=None,
        min_length=1,
        max_length=32,
        description="pass_at_k: the k values; default 1, and 10 and 100 where every task has that many samples; "
        "panels: the selected panels' budgets (at most k judges each), default 2",
    )
    mutants: bool | None = Field(
        default=None,
        description="judge_quality: count perturbation mutants as attempts too, each labelled by its verdict",
    )
    min_items: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="figures from fewer items are too few to judge (TRIBUNAL_MIN_ITEMS)",
    )
    min_clusters: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="figures from fewer bootstrap clusters are too few to judge (TRIBUNAL_MIN_CLUSTERS)",
    )


class ReportSummary(BaseModel):
    """A report as `GET /v1/reports` lists it: `GET /v1/reports/{id}` without its `result` (which can be large)."""

    report_id: str
    kind: str
    params: dict[str, Any]
    status: JobStatus
    job_id: str
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    # Paths on the API's own origin, as `GET /v1/reports/{id}` links them.
    plots: dict[str, str]
    html: str | None


class ReportPage(BaseModel):
    items: list[ReportSummary]
    next_cursor: str | None
