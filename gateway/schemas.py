"""Request and response bodies of the public API (api.md); limits that depend on settings are checked here."""

from __future__ import annotations

import keyword
import math
import types
import typing
from datetime import UTC, datetime
from typing import Annotated, Any, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from services.kernel.contracts import (
    AttemptStatus,
    Checker,
    Condition,
    JobStatus,
    Language,
    Limits,
    Mode,
    TestCase,
    Verdict,
)
from services.kernel.keys import Scope
from services.kernel.ratelimit import MAX_QUOTA
from services.kernel.settings import get_settings
from services.kernel.text import first_unclean


def _check_source_size(value: str) -> str:
    """Within TRIBUNAL_MAX_SOURCE_BYTES (UTF-8 bytes) and not blank."""
    limit = get_settings().max_source_bytes
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"source is {size} bytes; the limit is {limit}")
    if not value.strip():
        raise ValueError("source is empty")
    if "\x00" in value:
        # Stored text holds no NUL (PostgreSQL refuses it), and no language here takes one in a program: Python
        # refuses it, gcc skips it. Refused, so that what runs is always exactly what was sent.
        raise ValueError(f"source holds a NUL character (at character {value.index(chr(0))})")
    return value


# The schema says what the validator checks: not blank (a non-space character), at most the limit in bytes.
SourceCode = Annotated[
    str,
    Field(min_length=1, pattern=r"\S", description="Program text; at most TRIBUNAL_MAX_SOURCE_BYTES UTF-8 bytes."),
]


def within_limit(items: list[Any], limit: int, noun: str, per: str) -> list[Any]:
    """Refuse a list longer than a configured limit, before any work starts."""
    if len(items) > limit:
        raise ValueError(f"{len(items)} {noun}; the limit is {limit} per {per}")
    return items


# Bounds on what any request may hold (docs/api.md, "Errors and bounds"): JSON nested at most this deep, integers
# within the database's columns, finite floats only, dates whose UTC time is within years 1..9999.
MAX_JSON_DEPTH = 32
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

Seed = Annotated[int, Field(ge=0, le=INT64_MAX, description="Makes the run reproducible.")]


# Validation context flag: the values came from a query string, where every scalar is text.
FROM_QUERY_STRING = "from_query_string"


def fail_at(model: str, loc: tuple[str | int, ...], msg: str, value: Any = None) -> ValidationError:
    """A validation error about one field of a model (raised from a model validator so that `loc` names it)."""
    error = InitErrorDetails(type=PydanticCustomError("value_error", msg), loc=loc, input=value)
    return ValidationError.from_exception_data(model, [error])


def json_problem(value: Any) -> str | None:
    """Why a JSON value cannot be accepted (nested deeper than MAX_JSON_DEPTH, NaN or an infinity, text holding a
    lone surrogate such as `"\\ud800"`, which is no Unicode text), else None. Iterative, and it stops at the depth
    limit, so a hostile body costs no more than a legitimate one."""
    problem = _shape_problem(value)
    if problem is None and (unclean := first_unclean(value)) is not None:
        path, msg = unclean
        problem = ".".join(str(part) for part in path) + f": {msg}" if path else msg
    return problem


def _shape_problem(value: Any) -> str | None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth > MAX_JSON_DEPTH:
                return f"nested more than {MAX_JSON_DEPTH} levels deep"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple | float))
        elif isinstance(item, float) and not math.isfinite(item):
            return "NaN and infinities are not JSON numbers"
    return None


def _scalar_mismatch(annotation: Any, value: Any) -> str | None:
    """Where pydantic's lax mode would coerce a JSON value into a type the OpenAPI schema does not allow (`true`
    or `"5"` for an integer, `1` for a boolean), the reason to refuse it; else None. Follows lists, dicts and
    nested models, so the schema's types hold at every level."""
    if annotation is Any:
        return None
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _scalar_mismatch(typing.get_args(annotation)[0], value)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        reasons = [_scalar_mismatch(option, value) for option in options]
        return None if any(reason is None for reason in reasons) else reasons[0]
    if origin is list and isinstance(value, list):
        item = (typing.get_args(annotation) or (Any,))[0]
        return next((r for v in value if (r := _scalar_mismatch(item, v)) is not None), None)
    if origin is dict and isinstance(value, dict):
        item = typing.get_args(annotation)[1] if typing.get_args(annotation) else Any
        return next((r for v in value.values() if (r := _scalar_mismatch(item, v)) is not None), None)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, dict):
        for name, field in annotation.model_fields.items():
            if name in value and (reason := _scalar_mismatch(field.annotation, value[name])) is not None:
                return f"{name}: {reason}"
        return None
    if annotation is bool and not isinstance(value, bool):
        return "must be a JSON boolean (true or false)"
    if annotation is int and (isinstance(value, bool) or not isinstance(value, int | float)):
        return "must be a JSON integer"
    if annotation is float and (isinstance(value, bool) or not isinstance(value, int | float)):
        return "must be a JSON number"
    return None


def _utc_within_range(value: datetime | None) -> datetime | None:
    """A date whose UTC time is within years 1..9999 (the database's and Python's range); naive means UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the date is outside years 1..9999 once converted to UTC") from None


BoundedDatetime = Annotated[datetime, AfterValidator(_utc_within_range)]


class _In(BaseModel):
    # Unknown fields are ignored so that clients written against a later minor version keep working.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _json_within_bounds(cls, value: Any, info: ValidationInfo) -> Any:
        # One check for every field of every request body: the depth and finiteness of any JSON value, and the
        # schema's scalar types (pydantic would otherwise take `true` for 1 and "5" for 5).
        problem = json_problem(value)
        from_text = isinstance(info.context, dict) and info.context.get(FROM_QUERY_STRING, False)
        if problem is None and info.field_name is not None and not from_text:
            problem = _scalar_mismatch(cls.model_fields[info.field_name].annotation, value)
        if problem is not None:
            raise ValueError(problem)
        return value


# ---- keys -------------------------------------------------------------------------------------------------


class KeyCreate(_In):
    tenant: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    scopes: list[Scope] = Field(min_length=1)
    name: str = Field(default="", max_length=200)
    quotas: Quotas | None = None


class KeyCreated(BaseModel):
    key_id: str
    key: str
    tenant: str
    scopes: list[str]
    name: str
    quotas: Quotas


class KeyInfo(BaseModel):
    key_id: str
    tenant: str
    scopes: list[str]
    name: str
    created_at: datetime
    revoked_at: datetime | None
    quotas: Quotas


# ---- problems ---------------------------------------------------------------------------------------------


class ReferenceIn(_In):
    language: Language
    source_code: SourceCode

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


# Cross-field rules the validators below enforce, stated in the JSON schema too (OpenAPI 3.1 `if`/`then`).
def _present(field: str, json_type: str) -> dict[str, Any]:
    """JSON schema: `field` is given, and not null."""
    return {"required": [field], "properties": {field: {"type": json_type}}}


_FUNCTION_MODE: dict[str, Any] = {"properties": {"mode": {"const": Mode.FUNCTION.value}}, "required": ["mode"]}


class ProblemIn(_In):
    model_config = ConfigDict(json_schema_extra={"if": _FUNCTION_MODE, "then": _present("entry_point", "string")})

    problem_id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][\w.:/-]*$")
    title: str = Field(default="", max_length=1000)
    statement: str = Field(min_length=1, max_length=1_000_000)
    mode: Mode = Mode.STDIO
    entry_point: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[^\W\d]\w*$")
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
            raise fail_at("ProblemIn", ("entry_point",), "entry_point is required in function mode")
        try:
            _check_tests_fit_mode(self.mode, self.tests)
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
    created_at: datetime


# ---- attempts ---------------------------------------------------------------------------------------------


class LabelIn(_In):
    verdict: Verdict | None = None
    score: float | None = None


class AttemptIn(_In):
    model_config = ConfigDict(
        json_schema_extra={"oneOf": [_present("problem_id", "string"), _present("problem", "object")]}
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


# ---- jobs and direct executions ---------------------------------------------------------------------------


class JobOut(BaseModel):
    job_id: str
    kind: str
    status: JobStatus
    progress: dict[str, int]
    error: str | None
    result: dict[str, Any] | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class ExecutionIn(_In):
    model_config = ConfigDict(
        json_schema_extra={
            "not": {"allOf": [_present("stdin", "string"), _present("tests", "array")]},
            "if": _FUNCTION_MODE,
            "then": {
                "allOf": [_present("entry_point", "string"), _present("tests", "array")],
                "properties": {"language": {"const": Language.PYTHON.value}, "tests": {"minItems": 1}},
                "not": _present("stdin", "string"),
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
            _check_tests_fit_mode(self.mode, self.tests or [])
        except ValueError as exc:
            raise refuse("tests", str(exc)) from None
        return self


class LanguageOut(BaseModel):
    id: str
    name: str
    version: str | None = None
    compiler: str | None = None
    runtime: str | None = None


# ---- quotas (services/kernel/ratelimit.py) ------------------------------------------------------------------

QuotaValue = Annotated[int | None, Field(default=None, strict=True, ge=1, le=MAX_QUOTA)]


class Quotas(BaseModel):
    """A key's limits; null (or left out): the deployment's default (TRIBUNAL_QUOTA_*). Unlike other bodies, an
    unknown member is refused: a misspelt limit silently left at its default would be a limit nobody set."""

    model_config = ConfigDict(extra="forbid")

    requests_per_minute: Annotated[QuotaValue, Field(description="Requests per minute, per key and per tenant.")] = None
    queued_attempts: Annotated[
        QuotaValue,
        Field(
            description="The tenant's attempts queued or running: submitted ones, perturbation mutants, synthesis "
            "programs. A request over it is refused; a growing job waits at it."
        ),
    ] = None
    running_executions: Annotated[QuotaValue, Field(description="The tenant's direct executions not ended.")] = None
    queued_reports: Annotated[QuotaValue, Field(description="The tenant's reports not yet built.")] = None
    judge_tokens_per_day: Annotated[
        QuotaValue, Field(description="LLM judge tokens the tenant's judgments may spend per UTC day.")
    ] = None
    queued_pairs: Annotated[
        QuotaValue,
        Field(
            description="The tenant's similarity pairs not yet scored, across its jobs (single pairs, datasets, "
            "perturbation confirmations)."
        ),
    ] = None
    judgments_per_request: Annotated[
        QuotaValue,
        Field(
            description="Judgment rows (attempts x judges x conditions x repeats) one request may ask for, counting "
            "the most a perturbation or synthesis job may make."
        ),
    ] = None
    judgments_per_day: Annotated[
        QuotaValue, Field(description="Judgment rows the tenant may ask for per UTC day, by every kind of work.")
    ] = None


KeyCreate.model_rebuild()
KeyCreated.model_rebuild()
KeyInfo.model_rebuild()
