"""Problems: a problem as submitted (statement, tests, checker, limits, reference solutions) and as read back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.schemas.common import (
    SCHEMA_FUNCTION_MODE,
    RequestBody,
    SourceCode,
    check_source_size,
    check_tests_fit_mode,
    fail_at,
    python_identifier,
    schema_present,
    within_limit,
)
from services.kernel.contracts import MAX_REFERENCES, Checker, Language, Limits, Mode, TestCase
from services.kernel.settings import get_settings


class ReferenceIn(RequestBody):
    language: Language
    source_code: SourceCode

    _size = field_validator("source_code")(check_source_size)


class ProblemIn(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={"if": SCHEMA_FUNCTION_MODE, "then": schema_present("entry_point", "string")}
    )

    problem_id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][\w.:/-]*$")
    title: str = Field(default="", max_length=1000)
    statement: str = Field(min_length=1, max_length=1_000_000)
    mode: Mode = Mode.STDIO
    entry_point: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[^\W\d]\w*$")
    tests: list[TestCase] = Field(default_factory=list)
    checker: Checker = Field(default_factory=Checker)
    limits: Limits = Field(default_factory=Limits)
    references: list[ReferenceIn] = Field(default_factory=list, max_length=MAX_REFERENCES)
    input_spec: dict[str, Any] | None = None

    _entry = field_validator("entry_point")(python_identifier)

    @field_validator("tests")
    @classmethod
    def _tests_within_limit(cls, tests: list[TestCase]) -> list[TestCase]:
        return within_limit(tests, get_settings().max_tests_per_problem, "tests", "problem")

    @model_validator(mode="after")
    def _tests_fit_mode(self) -> ProblemIn:
        if self.mode == Mode.FUNCTION and not self.entry_point:
            raise fail_at("ProblemIn", ("entry_point",), "entry_point is required in function mode")
        try:
            check_tests_fit_mode(self.mode, self.tests)
        except ValueError as exc:
            raise fail_at("ProblemIn", ("tests",), str(exc)) from None
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
    # unchecked | pending | ready | invalid, each reference's run and the tests a reference failed (docs/api.md).
    validation: dict[str, Any] = Field(default_factory=lambda: {"status": "unchecked"})
    created_at: datetime


class ProblemPage(BaseModel):
    items: list[ProblemOut]
    next_cursor: str | None
