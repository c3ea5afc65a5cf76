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
import string
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError, model_validator

# ---- caps ---------------------------------------------------------------------------------------------------------

MAX_LEN = 10_000  # any length (list, str, dict, set) and any repetition count
MAX_DEPTH = 8  # nesting depth of a value type (int = 1, list[int] = 2, ...)
INT_BOUND = 10**18  # ints stay within [-INT_BOUND, INT_BOUND]
FLOAT_BOUND = 1e300  # finite float bounds stay within [-FLOAT_BOUND, FLOAT_BOUND]
STDIN_FLOAT_BOUND = 1e15  # stdin floats are rendered in fixed-point notation
MAX_DECIMALS = 12
MAX_ARGS = 32
MAX_ITEMS = 32  # tuple items, one_of options
MAX_ALPHABET = 1024  # explicit characters
MAX_LINES = 256  # line items of a stdin template (per level)
MAX_TOKENS = 256  # tokens of one stdin line template
MAX_INPUT_BYTES = 256 * 1024  # worst-case serialized size of ONE generated input
MAX_INPUTS = 100_000  # inputs per generate_inputs call
# All the inputs of one generate_inputs / generate_repetitions call, measured as they are drawn (their repr): the
# executor takes no more (executor/differential/inputs.py), and a spec's worst case times MAX_INPUTS would be 25 GiB.
MAX_TOTAL_INPUT_BYTES = 64 * 1024 * 1024

DEFAULT_INT_MIN, DEFAULT_INT_MAX = -1000, 1000
DEFAULT_FLOAT_MIN, DEFAULT_FLOAT_MAX = -1000.0, 1000.0
DEFAULT_MAX_LEN = 20
DEFAULT_STR_MAX_LEN = 20
DEFAULT_DICT_MAX_LEN = 10

CHARSETS: dict[str, str] = {
    "lowercase": string.ascii_lowercase,
    "uppercase": string.ascii_uppercase,
    "letters": string.ascii_letters,
    "digits": string.digits,
    "alphanumeric": string.ascii_letters + string.digits,
    "hexdigits": "0123456789abcdef",
    "binary": "01",
    "punctuation": string.punctuation,
    "whitespace": " \t\n",
    "printable": string.printable,  # ASCII letters, digits, punctuation and whitespace (\t\n\r\x0b\x0c included)
}
CharsetName = Literal[
    "lowercase", "uppercase", "letters", "digits", "alphanumeric", "hexdigits", "binary", "punctuation", "whitespace",
    "printable",
]  # fmt: skip


class SpecError(ValueError):
    """An input spec that is malformed, beyond the caps, or inconsistent; or a spec that cannot be derived. The
    message names the field path (``args[1].type.max``) where there is one."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _fail(path: str, message: str) -> SpecError:
    return SpecError(f"{path}: {message}" if path else message)


# ---- value types (function mode) ----------------------------------------------------------------------------------


class Chars(_Spec):
    """Explicit characters of a string alphabet: ``{"chars": "abc"}``."""

    chars: str = Field(min_length=1, max_length=MAX_ALPHABET)


Alphabet = CharsetName | Chars


def alphabet_chars(alphabet: Alphabet) -> str:
    """The characters of an alphabet, deduplicated, in code-point order (deterministic)."""
    chars = CHARSETS[alphabet] if isinstance(alphabet, str) else alphabet.chars
    return "".join(sorted(set(chars)))


class IntType(_Spec):
    type: Literal["int"] = "int"
    min: int = Field(default=DEFAULT_INT_MIN, ge=-INT_BOUND, le=INT_BOUND)
    max: int = Field(default=DEFAULT_INT_MAX, ge=-INT_BOUND, le=INT_BOUND)


class FloatType(_Spec):
    type: Literal["float"] = "float"
    min: float = Field(default=DEFAULT_FLOAT_MIN, ge=-FLOAT_BOUND, le=FLOAT_BOUND)
    max: float = Field(default=DEFAULT_FLOAT_MAX, ge=-FLOAT_BOUND, le=FLOAT_BOUND)
    allow_nan: bool = False
    allow_infinity: bool = False  # +-inf beyond [min, max]


class StrType(_Spec):
    type: Literal["str"] = "str"
    min_len: int = Field(default=0, ge=0, le=MAX_LEN)
    max_len: int = Field(default=DEFAULT_STR_MAX_LEN, ge=0, le=MAX_LEN)
    alphabet: Alphabet = "printable"


class BoolType(_Spec):
    type: Literal["bool"] = "bool"


class NoneType(_Spec):
    type: Literal["none"] = "none"


class ListType(_Spec):
    type: Literal["list"] = "list"
    elements: ValueType = Field(default_factory=lambda: IntType())
    min_len: int = Field(default=0, ge=0, le=MAX_LEN)
    max_len: int = Field(default=DEFAULT_MAX_LEN, ge=0, le=MAX_LEN)
    sorted: bool = False  # non-decreasing
    unique: bool = False


class TupleType(_Spec):
    type: Literal["tuple"] = "tuple"
    items: list[ValueType] = Field(max_length=MAX_ITEMS)


class DictType(_Spec):
    type: Literal["dict"] = "dict"
    keys: ValueType = Field(default_factory=lambda: StrType(alphabet="lowercase", max_len=8))
    values: ValueType = Field(default_factory=lambda: IntType())
    min_len: int = Field(default=0, ge=0, le=MAX_LEN)
    max_len: int = Field(default=DEFAULT_DICT_MAX_LEN, ge=0, le=MAX_LEN)


class SetType(_Spec):
    type: Literal["set"] = "set"
    elements: ValueType = Field(default_factory=lambda: IntType())
    min_len: int = Field(default=0, ge=0, le=MAX_LEN)
    max_len: int = Field(default=DEFAULT_MAX_LEN, ge=0, le=MAX_LEN)


class OneOfType(_Spec):
    type: Literal["one_of"] = "one_of"
    options: list[ValueType] = Field(min_length=1, max_length=MAX_ITEMS)


ValueType = Annotated[
    IntType | FloatType | StrType | BoolType | NoneType | ListType | TupleType | DictType | SetType | OneOfType,
    Field(discriminator="type"),
]
for _model in (ListType, TupleType, DictType, SetType, OneOfType):
    _model.model_rebuild()

Container = StrType | ListType | TupleType | DictType | SetType
HASHABLE_LEAVES = (IntType, FloatType, StrType, BoolType, NoneType)
ORDERED_LEAVES = (IntType, FloatType, StrType, BoolType)


# ---- function spec ------------------------------------------------------------------------------------------------

Identifier = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]


class Arg(_Spec):
    name: Identifier
    type: ValueType


class LengthOf(_Spec):
    """The int argument ``arg`` equals ``len(of)``."""

    kind: Literal["length_of"] = "length_of"
    arg: Identifier
    of: Identifier


class Compare(_Spec):
    """``left <= right`` (``le``) or ``left < right`` (``lt``), both numeric arguments."""

    kind: Literal["le", "lt"]
    left: Identifier
    right: Identifier


Relation = Annotated[LengthOf | Compare, Field(discriminator="kind")]


class FunctionSpec(_Spec):
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


class IntToken(_Spec):
    type: Literal["int"] = "int"
    name: Identifier | None = None
    min: int = Field(default=DEFAULT_INT_MIN, ge=-INT_BOUND, le=INT_BOUND)
    max: int = Field(default=DEFAULT_INT_MAX, ge=-INT_BOUND, le=INT_BOUND)
    count: Count = 1


class FloatToken(_Spec):
    type: Literal["float"] = "float"
    name: Identifier | None = None
    min: float = Field(default=DEFAULT_FLOAT_MIN, ge=-STDIN_FLOAT_BOUND, le=STDIN_FLOAT_BOUND)
    max: float = Field(default=DEFAULT_FLOAT_MAX, ge=-STDIN_FLOAT_BOUND, le=STDIN_FLOAT_BOUND)
    decimals: int = Field(default=6, ge=0, le=MAX_DECIMALS)  # rendered as f"{x:.{decimals}f}"
    count: Count = 1


class StrToken(_Spec):
    type: Literal["str"] = "str"
    name: Identifier | None = None
    min_len: int = Field(default=1, ge=1, le=MAX_LEN)
    max_len: int = Field(default=10, ge=1, le=MAX_LEN)
    alphabet: Alphabet = "lowercase"  # whitespace is never part of a token
    count: Count = 1


Token = Annotated[IntToken | FloatToken | StrToken, Field(discriminator="type")]


class Line(_Spec):
    """One line of tokens separated by single spaces, repeated ``count`` times."""

    kind: Literal["line"] = "line"
    tokens: list[Token] = Field(max_length=MAX_TOKENS)
    count: Count = 1


class Block(_Spec):
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


class StdinSpec(_Spec):
    """A stdin template: ``{"kind": "stdin", "lines": [...]}``."""

    kind: Literal["stdin"] = "stdin"
    lines: list[LineItem] = Field(max_length=MAX_LINES)

    @model_validator(mode="after")
    def _semantics(self) -> StdinSpec:
        check_stdin_spec(self)
        return self


InputSpec = Annotated[FunctionSpec | StdinSpec, Field(discriminator="kind")]
_INPUT_SPEC: TypeAdapter[FunctionSpec | StdinSpec] = TypeAdapter(InputSpec)
_VALUE_TYPE: TypeAdapter[Any] = TypeAdapter(ValueType)

_TAGS = frozenset(
    {"int", "float", "str", "bool", "none", "list", "tuple", "dict", "set", "one_of", "function", "stdin",
     "length_of", "le", "lt", "line", "block", "Chars", "function-after[_semantics(), FunctionSpec]",
     "function-after[_semantics(), StdinSpec]"}
)  # fmt: skip


def _loc_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in _TAGS or part.startswith(("function-", "literal[", "constrained-")):
            continue
        else:
            path += f".{part}" if path else part
    return path


def _from_validation_error(err: ValidationError) -> SpecError:
    messages = []
    for e in err.errors(include_url=False)[:5]:
        ctx_error = (e.get("ctx") or {}).get("error")
        if isinstance(ctx_error, SpecError):
            messages.append(str(ctx_error))
            continue
        path = _loc_path(tuple(e["loc"]))
        messages.append(f"{path}: {e['msg']}" if path else e["msg"])
    more = len(err.errors()) - len(messages)
    return SpecError("; ".join(dict.fromkeys(messages)) + (f" (and {more} more)" if more > 0 else ""))


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
        raise _from_validation_error(err) from None
    except json.JSONDecodeError as err:
        raise SpecError(f"input_spec is not JSON: {err}") from None
    except RecursionError:
        raise SpecError(f"input_spec is nested too deeply (the cap is {MAX_DEPTH})") from None


def parse_value_type(value: Any) -> Any:
    """A validated value type (one of the ``*Type`` models) from a mapping; `SpecError` otherwise."""
    try:
        t = _VALUE_TYPE.validate_python(value)
    except ValidationError as err:
        raise _from_validation_error(err) from None
    check_value_type(t, "type")
    return t


# ---- semantic checks ----------------------------------------------------------------------------------------------


def children(t: Any) -> Iterator[tuple[str, Any]]:
    """The nested value types of ``t`` with their path suffixes."""
    if isinstance(t, ListType | SetType):
        yield ".elements", t.elements
    elif isinstance(t, DictType):
        yield ".keys", t.keys
        yield ".values", t.values
    elif isinstance(t, TupleType):
        for i, item in enumerate(t.items):
            yield f".items[{i}]", item
    elif isinstance(t, OneOfType):
        for i, option in enumerate(t.options):
            yield f".options[{i}]", option


def depth(t: Any) -> int:
    return 1 + max((depth(c) for _, c in children(t)), default=0)


def hashable(t: Any) -> bool:
    if isinstance(t, HASHABLE_LEAVES):
        return True
    if isinstance(t, TupleType | OneOfType):
        return all(hashable(c) for _, c in children(t))
    return False


_BIG = 10**9


def domain_size(t: Any) -> int:
    """How many distinct values ``t`` has, capped at 10**9 (floats count as many unless min == max)."""
    if isinstance(t, IntType):
        return min(_BIG, t.max - t.min + 1)
    if isinstance(t, BoolType):
        return 2
    if isinstance(t, NoneType):
        return 1
    if isinstance(t, FloatType):
        if t.min != t.max:
            return _BIG
        return 1 + (2 if t.allow_infinity else 0)  # NaNs never compare equal: not counted
    if isinstance(t, StrType):
        k = len(alphabet_chars(t.alphabet))
        total = 0
        for n in range(t.min_len, t.max_len + 1):
            total += k**n if k > 1 or n == 0 else 1
            if total >= _BIG or k == 1 and n > t.min_len + _BIG:
                return _BIG
        return min(total, _BIG)
    if isinstance(t, TupleType):
        total = 1
        for _, c in children(t):
            total = min(_BIG, total * domain_size(c))
        return total
    if isinstance(t, OneOfType):
        return min(_BIG, sum(domain_size(c) for _, c in children(t)))
    return _BIG


def _check_len(t: Any, path: str) -> None:
    if t.min_len > t.max_len:
        raise _fail(f"{path}.min_len", f"{t.min_len} is above max_len {t.max_len}")


def check_value_type(t: Any, path: str) -> None:
    """Raise `SpecError` (with the path) if ``t`` is inconsistent or beyond the caps."""
    if depth(t) > MAX_DEPTH:
        raise _fail(path, f"nesting depth {depth(t)} is above the cap of {MAX_DEPTH}")
    _check(t, path)


def _check(t: Any, path: str) -> None:
    if isinstance(t, IntType | FloatType) and t.min > t.max:
        raise _fail(f"{path}.min", f"{t.min} is above max {t.max}")
    if isinstance(t, FloatType) and (math.isnan(t.min) or math.isnan(t.max)):
        raise _fail(path, "min and max must be numbers")
    if isinstance(t, StrType | ListType | DictType | SetType):
        _check_len(t, path)
    if isinstance(t, ListType):
        if t.sorted and not isinstance(t.elements, ORDERED_LEAVES):
            raise _fail(f"{path}.sorted", "needs elements of type int, float, str or bool")
        if t.sorted and isinstance(t.elements, FloatType) and t.elements.allow_nan:
            raise _fail(f"{path}.sorted", "NaN has no order: set elements.allow_nan to false")
        if t.unique:
            _check_distinct(t.elements, t.min_len, path, ".elements")
    if isinstance(t, SetType):
        _check_distinct(t.elements, t.min_len, path, ".elements")
    if isinstance(t, DictType):
        _check_distinct(t.keys, t.min_len, path, ".keys")
    for suffix, child in children(t):
        _check(child, path + suffix)


def _check_distinct(t: Any, min_len: int, path: str, suffix: str) -> None:
    if not hashable(t):
        raise _fail(path + suffix, "must be hashable (int, float, str, bool, none, or a tuple/one_of of those)")
    if domain_size(t) < min_len:
        raise _fail(f"{path}.min_len", f"{min_len} distinct values asked, but {path}{suffix} has only "
                    f"{domain_size(t)}")  # fmt: skip


# Worst-case serialized size (JSON-like, as the executor's codec writes arguments): used to refuse specs whose
# largest possible input exceeds MAX_INPUT_BYTES. Generated inputs are usually far smaller (collection sizes are
# drawn with Hypothesis's small average size), but a spec is judged by its worst case.


def _char_bytes(chars: str) -> int:
    return max(len(json.dumps(c)) - 2 for c in chars) if chars else 0


def worst_case_bytes(t: Any) -> int:
    """An upper bound of the serialized size of one value of type ``t``."""
    if isinstance(t, IntType):
        return max(len(str(t.min)), len(str(t.max)))
    if isinstance(t, FloatType):
        return 24
    if isinstance(t, BoolType):
        return 5
    if isinstance(t, NoneType):
        return 4
    if isinstance(t, StrType):
        return 2 + t.max_len * _char_bytes(alphabet_chars(t.alphabet))
    if isinstance(t, ListType | SetType):
        return 12 + t.max_len * (worst_case_bytes(t.elements) + 2)
    if isinstance(t, DictType):
        return 12 + t.max_len * (worst_case_bytes(t.keys) + worst_case_bytes(t.values) + 8)
    if isinstance(t, TupleType):
        return 12 + sum(worst_case_bytes(c) + 2 for c in t.items)
    if isinstance(t, OneOfType):
        return max(worst_case_bytes(c) for c in t.options)
    raise TypeError(f"not a value type: {t!r}")


def container_length_range(t: Any) -> tuple[int, int]:
    if isinstance(t, TupleType):
        return len(t.items), len(t.items)
    return t.min_len, t.max_len


def check_function_spec(spec: FunctionSpec) -> None:
    names: dict[str, int] = {}
    for i, arg in enumerate(spec.args):
        if arg.name in names:
            raise _fail(f"args[{i}].name", f"{arg.name!r} is already the name of args[{names[arg.name]}]")
        names[arg.name] = i
        check_value_type(arg.type, f"args[{i}].type")
    lengths: dict[str, str] = {}
    for j, rel in enumerate(spec.relations):
        path = f"relations[{j}]"
        for field in ("arg", "of") if isinstance(rel, LengthOf) else ("left", "right"):
            if getattr(rel, field) not in names:
                raise _fail(f"{path}.{field}", f"no argument named {getattr(rel, field)!r}")
        if isinstance(rel, LengthOf):
            int_t = spec.args[names[rel.arg]].type
            of_t = spec.args[names[rel.of]].type
            if not isinstance(int_t, IntType):
                raise _fail(f"{path}.arg", f"{rel.arg!r} must be an int argument")
            if not isinstance(of_t, StrType | ListType | TupleType | DictType | SetType):
                raise _fail(f"{path}.of", f"{rel.of!r} must be a str, list, tuple, dict or set argument")
            if rel.arg in lengths:
                raise _fail(f"{path}.arg", f"{rel.arg!r} is already the length of {lengths[rel.arg]!r}")
            lengths[rel.arg] = rel.of
        else:
            for field in ("left", "right"):
                t = spec.args[names[getattr(rel, field)]].type
                if not isinstance(t, IntType | FloatType):
                    raise _fail(f"{path}.{field}", f"{getattr(rel, field)!r} must be an int or float argument")
                if isinstance(t, FloatType) and (t.allow_nan or t.allow_infinity):
                    raise _fail(f"{path}.{field}", f"{getattr(rel, field)!r} may not allow NaN or infinity")
            if rel.left == rel.right:
                raise _fail(path, f"{rel.left!r} compared with itself")
    # The relation graph must be satisfiable: this builds and propagates its bounds (raises SpecError otherwise).
    from services.lib.fuzzing.relations import RelationPlan

    RelationPlan.build(spec)
    size = 2 + sum(worst_case_bytes(a.type) + 2 for a in spec.args)
    if size > MAX_INPUT_BYTES:
        raise _fail("args", f"one input could be {size:,} bytes; the cap is {MAX_INPUT_BYTES:,} (lower max_len "
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
        raise _fail("lines", f"one input could be {size:,} bytes; the cap is {MAX_INPUT_BYTES:,} (lower the counts' "
                    "max or the value ranges)")  # fmt: skip


Scope = dict[str, IntToken | None]  # named tokens visible so far (None: a named token that is not an int)


def _count_max(count: int | str, path: str, scope: Scope) -> int:
    if isinstance(count, int):
        return count
    if count not in scope:
        raise _fail(path, f"{count!r} is not an earlier named int token in scope")
    tok = scope[count]
    if tok is None:
        raise _fail(path, f"{count!r} is not an int token")
    if tok.min < 0 or tok.max > MAX_LEN:
        raise _fail(path, f"{count!r} is used as a count, so its range must lie within [0, {MAX_LEN}] "
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
            raise _fail(f"{tpath}.min", f"{tok.min} is above max {tok.max}")
        if isinstance(tok, FloatToken):
            if math.isnan(tok.min) or math.isnan(tok.max):
                raise _fail(tpath, "min and max must be numbers")
            lo, hi = float_grid(tok)
            if lo > hi:
                raise _fail(tpath, f"no number with {tok.decimals} decimals lies in [{tok.min}, {tok.max}]")
        if isinstance(tok, StrToken):
            if tok.min_len > tok.max_len:
                raise _fail(f"{tpath}.min_len", f"{tok.min_len} is above max_len {tok.max_len}")
            if isinstance(tok.alphabet, Chars) and any(c.isspace() for c in tok.alphabet.chars):
                raise _fail(f"{tpath}.alphabet", "a token cannot contain whitespace")
            if not token_chars(tok.alphabet):
                raise _fail(f"{tpath}.alphabet", "has no non-whitespace character")
        repeat = _count_max(tok.count, f"{tpath}.count", scope)
        size += repeat * (_token_bytes(tok) + 1)
        if tok.name is not None:
            if tok.count != 1:
                raise _fail(f"{tpath}.name", "a repeated token cannot be named")
            if tok.name in scope:
                raise _fail(f"{tpath}.name", f"{tok.name!r} is already defined")
            scope[tok.name] = tok if isinstance(tok, IntToken) else None
    return size
