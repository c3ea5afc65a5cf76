"""Attempts: a program submitted against a problem (named or inline), its acceptance, and the attempt as read back
with its test results, judgments and panel."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.schemas.common import (
    INT32_MAX,
    BoundedDatetime,
    RequestBody,
    SourceCode,
    check_source_size,
    schema_present,
)
from gateway.schemas.problems import ProblemIn
from services.kernel.contracts import AttemptStatus, Condition, Language, Verdict


class LabelIn(RequestBody):
    verdict: Verdict | None = None
    score: float | None = None


class AttemptIn(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={"oneOf": [schema_present("problem_id", "string"), schema_present("problem", "object")]}
    )

    attempt_uid: str | None = Field(default=None, min_length=1, max_length=200)
    problem_id: str | None = Field(default=None, min_length=1, max_length=200)
    problem: ProblemIn | None = None
    language: Language
    source_code: SourceCode
    participant: str | None = Field(default=None, max_length=200)
    turn: int | None = Field(default=None, ge=0, le=INT32_MAX)
    submitted_at: BoundedDatetime | None = None
    context: str | None = Field(default=None, max_length=2_000_000)
    judges: list[str] | None = None
    conditions: list[Condition] | None = None
    repeats: int = Field(default=1, ge=1, le=100)
    label: LabelIn | None = None
    parent_attempt_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=40,
        description="The tenant's attempt this one derives from (404 if it has none by that id). An attempt with a "
        "parent is a derived program, as a mutant is: it does not count in the panel.",
    )

    _size = field_validator("source_code")(check_source_size)

    @model_validator(mode="after")
    def _one_problem(self) -> AttemptIn:
        if (self.problem_id is None) == (self.problem is None):
            raise ValueError("give exactly one of problem_id and problem")
        return self


class AttemptAccepted(BaseModel):
    attempt_id: str
    job_id: str
    status: str


class TestResultOut(BaseModel):
    index: int
    status: Verdict
    time_ms: int = Field(description="CPU time (user + system) of the run in ms, what the CPU limit bounds.")
    cpu_time_ms: int = Field(description="The same CPU time, named for what it is.")
    wall_time_ms: int = Field(default=0, description="Elapsed time of the run in ms (0 in results stored before).")
    memory_kb: int
    public: bool
    wait_time_ms: int = Field(default=0, description="How long the run waited for a CPU another process held, in ms.")
    stopped_by: str | None = Field(
        default=None,
        description="The clock that stopped the run: `cpu`, `wall` (its own time reached the wall limit) or "
        "`starved` (the machine's load held it); null if it ended by itself or by a memory or output limit.",
    )
    runs: int = Field(default=1, description="How many times the test ran: a run the load held is run again.")
    retryable: bool = Field(
        default=False, description="True for an IE because the machine was too busy to judge the test: resubmit."
    )


class AttemptOut(BaseModel):
    attempt_id: str
    attempt_uid: str | None
    problem_id: str
    language: str
    status: AttemptStatus = Field(description="`cancelled`: its job was cancelled before it ended (an extension).")
    verdict: str | None
    passed: int | None
    total: int | None
    compile_output: str | None
    tests: list[TestResultOut]
    judgments: list[dict[str, Any]]
    panel: dict[str, Any] | None
    participant: str | None
    turn: int | None
    submitted_at: datetime | None
    parent_attempt_id: str | None
    operator: str | None
    arm: str | None = None
    severity: float | None = None
    guard_context: bool | None = None
    mutation: dict[str, Any] | None = None
    job_id: str | None
    created_at: datetime
    finished_at: datetime | None


class AttemptPage(BaseModel):
    items: list[AttemptOut]
    next_cursor: str | None
