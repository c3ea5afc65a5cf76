"""Studies: one file that names the datasets, the judges, conditions, repeats, perturbations and reports of an
evaluation (docs/studies.md), stored as `POST /v1/studies` takes it, and the stages' records.

A study file is configuration: a misspelt key is an error naming it (`extra="forbid"`), unlike the API's other
bodies, which ignore unknown fields for forward compatibility.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from gateway.schemas.common import RequestBody, Seed
from metrics.reports import Cluster, ReportKind
from services.kernel.contracts import Condition

# The formats `tribunal import` reads (services/lib/datasets.FORMATS; checked equal by the study tests).
DatasetFormat = Literal["tribunal", "humaneval", "human-eval-samples", "mbpp", "apps", "local", "axiom", "attempts"]

# The most problems a study may hold: its scope is one IN list, under PostgreSQL's 32,767 bound parameters.
MAX_STUDY_PROBLEMS = 30_000
# The stages of a run, in order (docs/studies.md).
STAGES = ("import", "references", "execute", "perturb", "judge", "report")
StageName = Literal["import", "references", "execute", "perturb", "judge", "report"]
StudyName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]


class _StudyPart(RequestBody):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class DatasetSpec(_StudyPart):
    path: str = Field(min_length=1, max_length=4096, description="A JSON Lines file (or .gz), relative to the study")
    format: DatasetFormat
    limit: int | None = Field(default=None, ge=1, description="only the file's first `limit` lines (a first run)")


class JudgingSpec(_StudyPart):
    judges: list[str] | None = Field(default=None, min_length=1, description="default: every enabled judge")
    conditions: list[Condition] | None = Field(default=None, min_length=1, description="default: blind")
    repeats: int = Field(default=1, ge=1, le=100)


class PerturbationSpec(_StudyPart):
    operators: list[str] | None = Field(default=None, min_length=1, description="default: every one that applies")
    seed: Seed = 0
    all_sites: bool = False


class ReportSpec(_StudyPart):
    kind: ReportKind
    judges: list[str] | None = None
    conditions: list[Condition] | None = None
    folds: int | None = Field(default=None, ge=2, le=50)
    bootstrap: int | None = Field(default=None, ge=0, le=20_000, description="default: the study's bootstrap")
    cluster: Cluster | None = None
    seed: Seed | None = Field(default=None, description="default: the study's seed")
    k: list[Annotated[int, Field(ge=1, le=100_000)]] | None = Field(default=None, min_length=1, max_length=32)
    mutants: bool | None = Field(default=None, description="judge_quality: the perturbation mutants as attempts")
    min_items: int | None = Field(default=None, ge=1, le=1_000_000, description="default: the study's")
    min_clusters: int | None = Field(default=None, ge=1, le=1_000_000, description="default: the study's")


class StudySpec(_StudyPart):
    """A study file (TOML) as validated: what `tribunal study run` does, and what `POST /v1/studies` stores."""

    name: StudyName
    description: str = Field(default="", max_length=4000)
    dataset: list[DatasetSpec] = Field(min_length=1, max_length=32)
    references: bool = Field(
        default=True,
        description="Submit each imported problem's reference solution as an attempt (participant `reference`): "
        "the accepted seeds the perturbations start from",
    )
    judging: JudgingSpec = Field(default_factory=JudgingSpec)
    perturbations: PerturbationSpec | None = None
    report: list[ReportSpec] = Field(default_factory=list, max_length=32)
    bootstrap: int = Field(default=2000, ge=0, le=20_000)
    seed: Seed = 0
    # The reports' "too few to judge" minimums (docs/metrics.md); default the deployment's TRIBUNAL_MIN_*.
    min_items: int | None = Field(default=None, ge=1, le=1_000_000)
    min_clusters: int | None = Field(default=None, ge=1, le=1_000_000)

    @field_validator("dataset")
    @classmethod
    def _distinct_paths(cls, datasets: list[DatasetSpec]) -> list[DatasetSpec]:
        paths = [d.path for d in datasets]
        for index, path in enumerate(paths):
            if path in paths[:index]:
                raise ValueError(f"dataset[{index}].path {path!r} is listed twice")
        return datasets


class StudyIn(RequestBody):
    spec: StudySpec


class StageIn(RequestBody):
    """What `tribunal study run` records of a stage it ran: its status and a summary (counts, never file text)."""

    status: Literal["running", "done", "failed"]
    summary: dict[str, Any] = Field(default_factory=dict, description="counts and notes, at most 64 KiB")
    problem_ids: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None,
        max_length=MAX_STUDY_PROBLEMS,
        description="import: the problems the study's files made (its scope)",
    )

    @field_validator("summary")
    @classmethod
    def _small(cls, summary: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(summary)) > 65_536:
            raise ValueError("larger than 64 KiB")
        return summary


class StudyReportIn(RequestBody):
    """One of the study's reports, by its position in the study's `report` list."""

    index: int = Field(ge=0, lt=32)
