"""Functional similarity (paper 002, LoCaL): one code pair, or a dataset of pairs (LoCaL's record shape), and how
differential fuzzing (Algorithm 1) and the reference-based metrics score them."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from gateway.schemas.common import RequestBody, SourceCode, check_source_size, json_problem, python_identifier
from metrics.reports import similarity as similarity_report
from services.kernel.contracts import Language, Mode
from services.lib.fuzzing import DEFAULT_REPEATS, TimeoutRule
from services.lib.fuzzing import MAX_INPUTS as MAX_GENERATED_INPUTS

# One request's work is bounded: inputs per repetition, repetitions, time per repetition, pairs per dataset.
MAX_INPUTS = 10_000
MAX_REPEATS = 20
MAX_TIME_BUDGET_S = 600.0
MAX_INPUT_TIMEOUT_S = 10.0
MAX_PAIRS_PER_DATASET = 5_000
MAX_LABELS_BYTES = 4096
CRYSTAL_K_DEFAULT = 50  # LoCaL's k for CrystalBLEU (following Naik 2024)
# Fields of a LoCaL record the job reads; any other field is kept as a label and shown beside the scores.
_RECORD_FIELDS = {"id", "golden_code", "generated_code", "language", "mode", "entry_point", "problem_id", "input_spec"}


class ProgramIn(RequestBody):
    language: Language
    source_code: SourceCode

    _size = field_validator("source_code")(check_source_size)


class FuzzingParams(RequestBody):
    """How Algorithm 1 runs: N inputs, R repetitions, a time budget T per repetition, a seed."""

    n_inputs: int | None = Field(
        default=None, ge=1, le=MAX_INPUTS, description="N; default 2,000 for function pairs, 1,000 for programs."
    )
    repeats: int = Field(default=DEFAULT_REPEATS, ge=1, le=MAX_REPEATS, description="R repetitions.")
    time_budget_s: float = Field(default=60.0, gt=0, le=MAX_TIME_BUDGET_S, description="T per repetition.")
    per_input_timeout_s: float = Field(default=2.0, gt=0, le=MAX_INPUT_TIMEOUT_S)
    float_tolerance: float | None = Field(default=None, ge=0, le=1, description="Floats equal within it.")
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    timeout_rule: TimeoutRule = Field(
        default="paper",
        description="paper: a repetition either program ran out of time on is excluded (Algorithm 1); strict: "
        "only the reference's running out excludes one, the candidate's unanswered inputs count as mismatches.",
    )

    @model_validator(mode="after")
    def _within_generation_cap(self) -> FuzzingParams:
        if self.n_inputs is not None and self.n_inputs * self.repeats > MAX_GENERATED_INPUTS:
            raise ValueError(
                f"n_inputs x repeats is {self.n_inputs * self.repeats}; the limit is {MAX_GENERATED_INPUTS} inputs"
            )
        return self


class MetricParams(RequestBody):
    """How the reference-based metrics are computed."""

    crystal_k: int = Field(default=CRYSTAL_K_DEFAULT, ge=0, le=10_000, description="CrystalBLEU's k.")
    crystal_corpus: list[str] | None = Field(
        default=None,
        max_length=MAX_PAIRS_PER_DATASET * 2,
        description="Programs whose k most frequent n-grams CrystalBLEU ignores; default the pair's or dataset's own.",
    )


class PairIn(FuzzingParams, MetricParams):
    reference: ProgramIn
    candidate: ProgramIn
    mode: Mode | None = Field(default=None, description="function or stdio; default the problem's, else function.")
    entry_point: str | None = Field(default=None, max_length=200)
    problem_id: str | None = Field(default=None, max_length=200)
    input_spec: dict[str, Any] | None = None

    _entry = field_validator("entry_point")(python_identifier)


class RecordIn(BaseModel):
    """One line of a LoCaL-style JSONL: `id`, `golden_code`, `generated_code`, and `problem_id` or `input_spec`."""

    model_config = {"extra": "allow"}

    id: str = Field(min_length=1, max_length=200)
    golden_code: SourceCode
    generated_code: SourceCode
    language: Language = Language.PYTHON
    mode: Mode | None = None
    entry_point: str | None = Field(default=None, max_length=200)
    problem_id: str | None = Field(default=None, max_length=200)
    input_spec: dict[str, Any] | None = None

    _size = field_validator("golden_code", "generated_code")(check_source_size)
    _entry = field_validator("entry_point")(python_identifier)

    @model_validator(mode="before")
    @classmethod
    def _json_within_bounds(cls, value: Any) -> Any:
        # The record's own extra fields (its labels) are JSON too: as deep and as finite as any request body.
        if (problem := json_problem(value)) is not None:
            raise ValueError(problem)
        return value

    def labels(self) -> dict[str, Any] | None:
        extra = {k: v for k, v in (self.model_extra or {}).items() if k not in _RECORD_FIELDS}
        if not extra:
            return None
        try:
            size = len(json.dumps(extra, allow_nan=False))
        except ValueError:
            raise ValueError("the record's extra fields hold NaN or Infinity, which JSON does not") from None
        if size > MAX_LABELS_BYTES:
            raise ValueError(f"the record's extra fields are over {MAX_LABELS_BYTES} bytes of JSON")
        return extra


class Thresholds(BaseModel):
    x_lo: float = Field(ge=0, le=1)
    x_hi: float = Field(ge=0, le=1)
    y_lo: float = Field(ge=0, le=1)
    y_hi: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if not (self.x_lo < self.x_hi and self.y_lo < self.y_hi):
            raise ValueError("thresholds need x_lo < x_hi and y_lo < y_hi")
        return self


class DatasetIn(FuzzingParams, MetricParams):
    pairs: list[RecordIn] = Field(min_length=1, max_length=MAX_PAIRS_PER_DATASET)
    thresholds: Thresholds | None = Field(default=None, description="SFD/DFS thresholds; default Algorithm 2.")
    protocol: similarity_report.Protocol = Field(default="local_rq3", description="Algorithm 2's protocol.")
