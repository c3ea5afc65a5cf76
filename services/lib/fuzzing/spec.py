"""The typed ``input_spec`` of a problem: what differential fuzzing may feed a reference and a candidate.

Two kinds (docs/input-spec.md): ``function`` (positional arguments of one Python function, typed values with
relations between arguments) and ``stdin`` (a template of lines of typed tokens, rendered to stdin text). Pydantic v2
models, ``extra="forbid"``, strict types, discriminated on ``type`` (values and tokens) and ``kind`` (specs,
relations, line items). Hard caps keep every input small; a spec beyond them is rejected with a `SpecError` naming
the field path (``args[0].type.elements.max_len: ...``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, TypeAdapter, ValidationError, model_validator

from services.lib.fuzzing.relations import LengthOf, Relation, RelationPlan
from services.lib.fuzzing.values import (
    DEFAULT_FLOAT_MAX,
    DEFAULT_FLOAT_MIN,
    DEFAULT_INT_MAX,
    DEFAULT_INT_MIN,
    INT_BOUND,
    MAX_ARGS,
    MAX_DECIMALS,
    MAX_DEPTH,
    MAX_INPUT_BYTES,
    MAX_LEN,
    MAX_LINES,
    MAX_TOKENS,
    STDIN_FLOAT_BOUND,
    Alphabet,
    Arg,
    Chars,
    DictType,
    FloatType,
    Identifier,
    IntType,
    ListType,
    SetType,
    SpecError,
    SpecModel,
    StrType,
    TupleType,
    alphabet_chars,
    check_value_type,
    field_error,
    spec_error_from,
    worst_case_bytes,
)


class FunctionSpec(SpecModel):
    """Positional arguments of one function: ``{"kind": "function", "args": [...], "relations": [...]}``."""

    kind: Literal["function"] = "function"
    args: list[Arg] = Field(max_length=MAX_ARGS)
    relations: list[Relation] = Field(default_factory=list, max_length=MAX_ARGS * 2)

    @model_validator(mode="after")
    def _semantics(self) -> FunctionSpec:
        check_function_spec(self)
        return self


# ---- stdin spec ---------------------------------------------------------------------------------------------------

Count = Annotated[int, Field(ge=0, le=MAX_LEN)] | Identifier


class IntToken(SpecModel):
    type: Literal["int"] = "int"
    name: Identifier | None = None
    min: int = Field(default=DEFAULT_INT_MIN, ge=-INT_BOUND, le=INT_BOUND)
    max: int = Field(default=DEFAULT_INT_MAX, ge=-INT_BOUND, le=INT_BOUND)
    count: Count = 1


class FloatToken(SpecModel):
    type: Literal["float"] = "float"
    name: Identifier | None = None
    min: float = Field(default=DEFAULT_FLOAT_MIN, ge=-STDIN_FLOAT_BOUND, le=STDIN_FLOAT_BOUND)
    max: float = Field(default=DEFAULT_FLOAT_MAX, ge=-STDIN_FLOAT_BOUND, le=STDIN_FLOAT_BOUND)
    decimals: int = Field(default=6, ge=0, le=MAX_DECIMALS)  # rendered as f"{x:.{decimals}f}"
    count: Count = 1


class StrToken(SpecModel):
    type: Literal["str"] = "str"
    name: Identifier | None = None
    min_len: int = Field(default=1, ge=1, le=MAX_LEN)
    max_len: int = Field(default=10, ge=1, le=MAX_LEN)
    alphabet: Alphabet = "lowercase"  # whitespace is never part of a token
    count: Count = 1


Token = Annotated[IntToken | FloatToken | StrToken, Field(discriminator="type")]


class Line(SpecModel):
    """One line of tokens separated by single spaces, repeated ``count`` times."""

    kind: Literal["line"] = "line"
    tokens: list[Token] = Field(max_length=MAX_TOKENS)
    count: Count = 1


class Block(SpecModel):
    """A group of lines repeated ``count`` times (e.g. ``t`` test cases)."""

    kind: Literal["block"] = "block"
    count: Count
    lines: list[LineItem] = Field(min_length=1, max_length=MAX_LINES)


def _line_item_tag(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("kind", "line"))
    return str(getattr(value, "kind", "line"))


LineItem = Annotated[Annotated[Line, Tag("line")] | Annotated[Block, Tag("block")], Discriminator(_line_item_tag)]
Block.model_rebuild()


class StdinSpec(SpecModel):
    """A stdin template: ``{"kind": "stdin", "lines": [...]}``."""

    kind: Literal["stdin"] = "stdin"
    lines: list[LineItem] = Field(max_length=MAX_LINES)

    @model_validator(mode="after")
    def _semantics(self) -> StdinSpec:
        check_stdin_spec(self)
        return self


InputSpec = Annotated[FunctionSpec | StdinSpec, Field(discriminator="kind")]
_INPUT_SPEC: TypeAdapter[FunctionSpec | StdinSpec] = TypeAdapter(InputSpec)


def parse_spec(spec: FunctionSpec | StdinSpec | Mapping[str, Any] | str | bytes) -> FunctionSpec | StdinSpec:
    """A validated spec from a model, a JSON-like mapping or JSON text; `SpecError` (field path named) otherwise."""
    if isinstance(spec, FunctionSpec | StdinSpec):
        return spec
    try:
        if isinstance(spec, str | bytes):
            data = json.loads(spec)
        else:
            data = spec
        return _INPUT_SPEC.validate_python(data)
    except ValidationError as err:
        raise spec_error_from(err) from None
    except json.JSONDecodeError as err:
        raise SpecError(f"input_spec is not JSON: {err}") from None
    except RecursionError:
        raise SpecError(f"input_spec is nested too deeply (the cap is {MAX_DEPTH})") from None


def check_function_spec(spec: FunctionSpec) -> None:
    names: dict[str, int] = {}
    for i, arg in enumerate(spec.args):
        if arg.name in names:
            raise field_error(f"args[{i}].name", f"{arg.name!r} is already the name of args[{names[arg.name]}]")
        names[arg.name] = i
        check_value_type(arg.type, f"args[{i}].type")
    lengths: dict[str, str] = {}
    for j, rel in enumerate(spec.relations):
        path = f"relations[{j}]"
        for field in ("arg", "of") if isinstance(rel, LengthOf) else ("left", "right"):
            if getattr(rel, field) not in names:
                raise field_error(f"{path}.{field}", f"no argument named {getattr(rel, field)!r}")
        if isinstance(rel, LengthOf):
            int_t = spec.args[names[rel.arg]].type
            of_t = spec.args[names[rel.of]].type
            if not isinstance(int_t, IntType):
                raise field_error(f"{path}.arg", f"{rel.arg!r} must be an int argument")
            if not isinstance(of_t, StrType | ListType | TupleType | DictType | SetType):
                raise field_error(f"{path}.of", f"{rel.of!r} must be a str, list, tuple, dict or set argument")
            if rel.arg in lengths:
                raise field_error(f"{path}.arg", f"{rel.arg!r} is already the length of {lengths[rel.arg]!r}")
            lengths[rel.arg] = rel.of
        else:
            for field in ("left", "right"):
                t = spec.args[names[getattr(rel, field)]].type
                if not isinstance(t, IntType | FloatType):
                    raise field_error(f"{path}.{field}", f"{getattr(rel, field)!r} must be an int or float argument")
                if isinstance(t, FloatType) and (t.allow_nan or t.allow_infinity):
                    raise field_error(f"{path}.{field}", f"{getattr(rel, field)!r} may not allow NaN or infinity")
            if rel.left == rel.right:
                raise field_error(path, f"{rel.left!r} compared with itself")
    # The relation graph must be satisfiable: this builds and propagates its bounds (raises SpecError otherwise).

    RelationPlan.build(spec.args, spec.relations)
    size = 2 + sum(worst_case_bytes(a.type) + 2 for a in spec.args)
    if size > MAX_INPUT_BYTES:
        raise field_error("args", f"one input could be {size:,} bytes; the cap is {MAX_INPUT_BYTES:,} (lower max_len "
                          "or value ranges)")  # fmt: skip


# ---- stdin checks -------------------------------------------------------------------------------------------------


def float_grid(tok: FloatToken) -> tuple[int, int]:
    """A stdin float token's values as integers k, the number being k / 10**decimals: k's range."""
    scale = 10**tok.decimals
    return math.ceil(Fraction(repr(tok.min)) * scale), math.floor(Fraction(repr(tok.max)) * scale)


def token_chars(alphabet: Alphabet) -> str:
    """A stdin str token's characters: the alphabet without whitespace."""
    return "".join(c for c in alphabet_chars(alphabet) if not c.isspace())


def _token_bytes(tok: IntToken | FloatToken | StrToken) -> int:
    if isinstance(tok, IntToken):
        return max(len(str(tok.min)), len(str(tok.max)))
    if isinstance(tok, FloatToken):
        return 2 + len(str(int(max(abs(tok.min), abs(tok.max))))) + tok.decimals
    return tok.max_len * max(len(c.encode()) for c in token_chars(tok.alphabet))


def check_stdin_spec(spec: StdinSpec) -> None:
    size = _check_items(spec.lines, "lines", {})
    if size > MAX_INPUT_BYTES:
        raise field_error("lines", f"one input could be {size:,} bytes; the cap is {MAX_INPUT_BYTES:,} (lower the "
                          "counts' max or the value ranges)")  # fmt: skip


Scope = dict[str, IntToken | None]  # named tokens visible so far (None: a named token that is not an int)


def _count_max(count: int | str, path: str, scope: Scope) -> int:
    if isinstance(count, int):
        return count
    if count not in scope:
        raise field_error(path, f"{count!r} is not an earlier named int token in scope")
    tok = scope[count]
    if tok is None:
        raise field_error(path, f"{count!r} is not an int token")
    if tok.min < 0 or tok.max > MAX_LEN:
        raise field_error(path, f"{count!r} is used as a count, so its range must lie within [0, {MAX_LEN}] "
                          f"(it is [{tok.min}, {tok.max}])")  # fmt: skip
    return tok.max


def _check_items(items: list[Line | Block], path: str, scope: Scope) -> int:
    """Check line items in ``scope`` (names defined so far, extended in place); the worst-case byte size."""
    total = 0
    for i, item in enumerate(items):
        ipath = f"{path}[{i}]"
        repeat = _count_max(item.count, f"{ipath}.count", scope)
        if isinstance(item, Block):
            inner = dict(scope)
            size = _check_items(item.lines, f"{ipath}.lines", inner)
        else:
            inner = dict(scope) if item.count != 1 else scope
            size = _check_tokens(item, ipath, inner) + 1
        total += repeat * size
        if total > MAX_INPUT_BYTES * 16:
            break  # already far beyond: the caller reports it
    return total


def _check_tokens(line: Line, path: str, scope: Scope) -> int:
    size = 0
    for j, tok in enumerate(line.tokens):
        tpath = f"{path}.tokens[{j}]"
        if isinstance(tok, IntToken | FloatToken) and tok.min > tok.max:
            raise field_error(f"{tpath}.min", f"{tok.min} is above max {tok.max}")
        if isinstance(tok, FloatToken):
            if math.isnan(tok.min) or math.isnan(tok.max):
                raise field_error(tpath, "min and max must be numbers")
            lo, hi = float_grid(tok)
            if lo > hi:
                raise field_error(tpath, f"no number with {tok.decimals} decimals lies in [{tok.min}, {tok.max}]")
        if isinstance(tok, StrToken):
            if tok.min_len > tok.max_len:
                raise field_error(f"{tpath}.min_len", f"{tok.min_len} is above max_len {tok.max_len}")
            if isinstance(tok.alphabet, Chars) and any(c.isspace() for c in tok.alphabet.chars):
                raise field_error(f"{tpath}.alphabet", "a token cannot contain whitespace")
            if not token_chars(tok.alphabet):
                raise field_error(f"{tpath}.alphabet", "has no non-whitespace character")
        repeat = _count_max(tok.count, f"{tpath}.count", scope)
        size += repeat * (_token_bytes(tok) + 1)
        if tok.name is not None:
            if tok.count != 1:
                raise field_error(f"{tpath}.name", "a repeated token cannot be named")
            if tok.name in scope:
                raise field_error(f"{tpath}.name", f"{tok.name!r} is already defined")
            scope[tok.name] = tok if isinstance(tok, IntToken) else None
    return size
