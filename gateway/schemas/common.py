"""What every request body of the public API (api.md) shares: the base model `RequestBody`, which bounds every
JSON value it is given, and the field types and checks several resources use. Limits that depend on settings are
checked here, when a body is read."""

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
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from services.kernel.contracts import Mode, TestCase
from services.kernel.settings import get_settings
from services.kernel.text import first_unclean


def check_source_size(value: str) -> str:
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


class RequestBody(BaseModel):
    # The base of every request body. Unknown fields are ignored so that clients written against a later minor
    # version keep working.
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


def python_identifier(value: str | None) -> str | None:
    """A field validator: the value (an entry point) is a Python identifier and not a keyword."""
    if value is not None and (not value.isidentifier() or keyword.iskeyword(value)):
        raise ValueError("must be a Python identifier")
    return value


def check_tests_fit_mode(mode: str, tests: list[TestCase]) -> None:
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


# Cross-field rules the validators enforce, stated in the JSON schema too (OpenAPI 3.1 `if`/`then`).
def schema_present(field: str, json_type: str) -> dict[str, Any]:
    """JSON schema: `field` is given, and not null."""
    return {"required": [field], "properties": {field: {"type": json_type}}}


SCHEMA_FUNCTION_MODE: dict[str, Any] = {"properties": {"mode": {"const": Mode.FUNCTION.value}}, "required": ["mode"]}
