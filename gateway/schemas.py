"""Request and response bodies of the public API (api.md); limits that depend on settings are checked here."""

from __future__ import annotations

import keyword
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from services.kernel.contracts import Checker, Condition, Language, Limits, Mode, TestCase, Verdict
from services.kernel.keys import Scope
from services.kernel.settings import get_settings


def _check_source_size(value: str) -> str:
    limit = get_settings().max_source_bytes
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"source is {size} bytes; the limit is {limit}")
    if not value.strip():
        raise ValueError("source is empty")
    return value


def within_limit(items: list[Any], limit: int, noun: str, per: str) -> list[Any]:
    """Refuse a list longer than a configured limit, before any work starts."""
    if len(items) > limit:
        raise ValueError(f"{len(items)} {noun}; the limit is {limit} per {per}")
    return items


class _In(BaseModel):
    # Unknown fields are ignored so that clients written against a later minor version keep working.
    model_config = ConfigDict(extra="ignore")


# ---- keys -------------------------------------------------------------------------------------------------


class KeyCreate(_In):
    tenant: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    scopes: list[Scope] = Field(min_length=1)
    name: str = Field(default="", max_length=200)


class KeyCreated(BaseModel):
    key_id: str
    key: str
    tenant: str
    scopes: list[str]
    name: str


class KeyInfo(BaseModel):
    key_id: str
    tenant: str
    scopes: list[str]
    name: str
    created_at: datetime
    revoked_at: datetime | None


# ---- problems ---------------------------------------------------------------------------------------------


class ReferenceIn(_In):
    language: Language
    source_code: str

    _size = field_validator("source_code")(_check_source_size)


def _identifier(value: str | None) -> str | None:
    if value is not None and (not value.isidentifier() or keyword.iskeyword(value)):
        raise ValueError("must be a Python identifier")
    return value


def _check_tests_fit_mode(mode: str, tests: list[TestCase]) -> None:
    """Function-mode tests are argument lists or test code; stdio tests are text in, text out."""
    errors: list[str] = []
    for index, test in enumerate(tests):
        if mode == Mode.FUNCTION:
            if test.code is None and not isinstance(test.input, list):
                errors.append(f"tests[{index}]: function mode needs `code` or `input` as a list of arguments")
        else:
            if test.code is not None:
                errors.append(f"tests[{index}].code: test code is only for function mode")
            if isinstance(test.input, list):
                errors.append(f"tests[{index}].input: stdin must be a string in stdio mode")
            if test.expected is not None and not isinstance(test.expected, str):
                errors.append(f"tests[{index}].expected: expected output must be a string in stdio mode")
    if errors:
        raise ValueError("; ".join(errors))


class ProblemIn(_In):
    problem_id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][\w.:/-]*$")
    title: str = Field(default="", max_length=1000)
    statement: str = Field(min_length=1, max_length=1_000_000)
    mode: Mode = Mode.STDIO
    entry_point: str | None = None
    tests: list[TestCase] = Field(default_factory=list)
    checker: Checker = Field(default_factory=Checker)
    limits: Limits = Field(default_factory=Limits)
    references: list[ReferenceIn] = Field(default_factory=list)
    input_spec: dict[str, Any] | None = None

    _entry = field_validator("entry_point")(_identifier)

    @field_validator("tests")
    @classmethod
    def _tests_within_limit(cls, tests: list[TestCase]) -> list[TestCase]:
        return within_limit(tests, get_settings().max_tests_per_problem, "tests", "problem")

    @model_validator(mode="after")
    def _tests_fit_mode(self) -> ProblemIn:
        if self.mode == Mode.FUNCTION and not self.entry_point:
            raise ValueError("entry_point is required in function mode")
        _check_tests_fit_mode(self.mode, self.tests)
        return self


class ProblemOut(BaseModel):
    problem_id: str
    title: str
    statement: str
    mode: str
    entry_point: str | None
    # Every test for admin and author keys; only the public ones otherwise.
    tests: list[dict[str, Any]]
    # How many tests are hidden (public false), listed in `tests` or not.
    hidden_tests: int = 0
    checker: dict[str, Any]
    limits: dict[str, Any]
    references: list[dict[str, Any]]
    input_spec: dict[str, Any] | None
    created_at: datetime


# ---- attempts ---------------------------------------------------------------------------------------------


class LabelIn(_In):
    verdict: Verdict | None = None
    score: float | None = None


class AttemptIn(_In):
    attempt_uid: str | None = Field(default=None, min_length=1, max_length=200)
    problem_id: str | None = Field(default=None, min_length=1, max_length=200)
    problem: ProblemIn | None = None
    language: Language
    source_code: str
    participant: str | None = Field(default=None, max_length=200)
    turn: int | None = Field(default=None, ge=0)
    submitted_at: datetime | None = None
    context: str | None = Field(default=None, max_length=2_000_000)
    judges: list[str] | None = None
    conditions: list[Condition] | None = None
    repeats: int = Field(default=1, ge=1, le=100)
    label: LabelIn | None = None

    _size = field_validator("source_code")(_check_source_size)

    @model_validator(mode="after")
    def _one_problem(self) -> AttemptIn:
        if (self.problem_id is None) == (self.problem is None):
            raise ValueError("give exactly one of problem_id and problem")
        return self


class AttemptAccepted(BaseModel):
    attempt_id: str
    job_id: str
    status: str


class BatchIn(_In):
    attempts: list[AttemptIn] = Field(min_length=1)

    @field_validator("attempts")
    @classmethod
    def _batch_within_limit(cls, attempts: list[AttemptIn]) -> list[AttemptIn]:
        return within_limit(attempts, get_settings().max_batch_size, "attempts", "batch")


class BatchAccepted(BaseModel):
    job_id: str
    attempt_ids: list[str]


class TestResultOut(BaseModel):
    index: int
    status: Verdict
    time_ms: int = Field(description="CPU time (user + system) of the run in ms, what the CPU limit bounds.")
    cpu_time_ms: int = Field(description="The same CPU time, named for what it is.")
    wall_time_ms: int = Field(default=0, description="Elapsed time of the run in ms (0 in results stored before).")
    memory_kb: int
    public: bool


class AttemptOut(BaseModel):
    attempt_id: str
    attempt_uid: str | None
    problem_id: str
    language: str
    status: str
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


# ---- jobs and direct executions ---------------------------------------------------------------------------


class JobOut(BaseModel):
    job_id: str
    kind: str
    status: str
    progress: dict[str, int]
    error: str | None
    result: dict[str, Any] | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class ExecutionIn(_In):
    language: Language
    source_code: str
    stdin: str | None = None
    tests: list[TestCase] | None = None
    mode: Mode = Mode.STDIO
    entry_point: str | None = None
    checker: Checker = Field(default_factory=Checker)
    limits: Limits = Field(default_factory=Limits)
    wait: bool = False

    _size = field_validator("source_code")(_check_source_size)
    _entry = field_validator("entry_point")(_identifier)

    @field_validator("stdin")
    @classmethod
    def _stdin_size(cls, value: str | None) -> str | None:
        limit = get_settings().max_stdin_bytes
        if value is not None and len(value.encode("utf-8", "surrogatepass")) > limit:
            raise ValueError(f"stdin is larger than {limit} bytes")
        return value

    @model_validator(mode="after")
    def _stdin_or_tests(self) -> ExecutionIn:
        if self.stdin is not None and self.tests is not None:
            raise ValueError("give stdin or tests, not both")
        within_limit(self.tests or [], get_settings().max_tests_per_problem, "tests", "execution")
        if self.mode == Mode.FUNCTION:
            if self.language != Language.PYTHON:
                raise ValueError("function mode is Python-only")
            if not self.entry_point and any(t.code is None for t in self.tests or []):
                raise ValueError("entry_point is required in function mode")
        _check_tests_fit_mode(self.mode, self.tests or [])
        return self


class LanguageOut(BaseModel):
    id: str
    name: str
    version: str | None = None
    compiler: str | None = None
    runtime: str | None = None
