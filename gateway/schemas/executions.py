"""Direct executions: a program run on stdin or on tests, outside any problem, without judging."""

from __future__ import annotations

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

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
from services.kernel.contracts import Checker, Language, Limits, Mode, TestCase
from services.kernel.settings import get_settings


class ExecutionIn(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "not": {"allOf": [schema_present("stdin", "string"), schema_present("tests", "array")]},
            "if": SCHEMA_FUNCTION_MODE,
            "then": {
                "allOf": [schema_present("entry_point", "string"), schema_present("tests", "array")],
                "properties": {"language": {"const": Language.PYTHON.value}, "tests": {"minItems": 1}},
                "not": schema_present("stdin", "string"),
            },
        }
    )

    language: Language
    source_code: SourceCode
    stdin: str | None = None
    tests: list[TestCase] | None = None
    mode: Mode = Mode.STDIO
    entry_point: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[^\W\d]\w*$")
    checker: Checker = Field(default_factory=Checker)
    limits: Limits = Field(default_factory=Limits)
    wait: bool = False

    _size = field_validator("source_code")(check_source_size)
    _entry = field_validator("entry_point")(python_identifier)

    @field_validator("stdin")
    @classmethod
    def _stdin_size(cls, value: str | None) -> str | None:
        limit = get_settings().max_stdin_bytes
        if value is not None and len(value.encode("utf-8", "surrogatepass")) > limit:
            raise ValueError(f"stdin is larger than {limit} bytes")
        return value

    @model_validator(mode="after")
    def _stdin_or_tests(self) -> ExecutionIn:
        # Everything the executor would refuse (executor/run.py `_validate`) is refused here, naming the field:
        # a job the executor refuses would only end as failed, long after the client was told 202.
        def refuse(field: str, msg: str) -> ValidationError:
            return fail_at("ExecutionIn", (field,), msg, getattr(self, field))

        if self.stdin is not None and self.tests is not None:
            raise refuse("stdin", "give stdin or tests, not both")
        within_limit(self.tests or [], get_settings().max_tests_per_problem, "tests", "execution")
        if self.mode == Mode.FUNCTION:
            if self.language != Language.PYTHON:
                raise refuse("mode", "function mode is Python-only")
            if not self.entry_point:
                raise refuse("entry_point", "entry_point is required in function mode")
            if self.stdin is not None:
                raise refuse("stdin", "function mode runs tests (arguments or test code), not stdin")
            if not self.tests:
                raise refuse("tests", "function mode needs tests (arguments or test code)")
        try:
            check_tests_fit_mode(self.mode, self.tests or [])
        except ValueError as exc:
            raise refuse("tests", str(exc)) from None
        return self
