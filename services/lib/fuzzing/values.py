"""The value vocabulary of an input spec: the caps, the value types of function arguments (``int``, ``float``,
``str``, ``bool``, ``none``, ``list``, ``tuple``, ``dict``, ``set``, ``one_of``) and an argument, their semantic
checks and worst-case sizes, and `SpecError`, which names the field path of what is wrong (a pydantic error becomes
one through `spec_error_from`). The specs made of them are `spec.py`'s; the relations between arguments,
`relations.py`'s.
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

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


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def field_error(path: str, message: str) -> SpecError:
    return SpecError(f"{path}: {message}" if path else message)


# ---- value types (function mode) ----------------------------------------------------------------------------------


class Chars(SpecModel):
    """Explicit characters of a string alphabet: ``{"chars": "abc"}``."""

    chars: str = Field(min_length=1, max_length=MAX_ALPHABET)


Alphabet = CharsetName | Chars


def alphabet_chars(alphabet: Alphabet) -> str:
    """The characters of an alphabet, deduplicated, in code-point order (deterministic)."""
    chars = CHARSETS[alphabet] if isinstance(alphabet, str) else alphabet.chars
    return "".join(sorted(set(chars)))


class IntType(SpecModel):
    type: Literal["int"] = "int"
    min: int = Field(default=DEFAULT_INT_MIN, ge=-INT_BOUND, le=INT_BOUND)
    max: int = Field(default=DEFAULT_INT_MAX, ge=-INT_BOUND, le=INT_BOUND)


class FloatType(SpecModel):
    type: Literal["float"] = "float"
    min: float = Field(default=DEFAULT_FLOAT_MIN, ge=-FLOAT_BOUND, le=FLOAT_BOUND)
    max: float = Field(default=DEFAULT_FLOAT_MAX, ge=-FLOAT_BOUND, le=FLOAT_BOUND)
    allow_nan: bool = False
    allow_infinity: bool = False  # +-inf beyond [min, max]


class StrType(SpecModel):
    type: Literal["str"] = "str"
    min_len: int = Field(default=0, ge=0, le=MAX_LEN)
    max_len: int = Field(default=DEFAULT_STR_MAX_LEN, ge=0, le=MAX_LEN)
    alphabet: Alphabet = "printable"


class BoolType(SpecModel):
    type: Literal["bool"] = "bool"


class NoneType(SpecModel):
    type: Literal["none"] = "none"


class ListType(SpecModel):
    type: Literal["list"] = "list"
    elements: ValueType = Field(default_factory=lambda: IntType())
    min_len: int = Field(default=0, ge=0, le=MAX_LEN)
    max_len: int = Field(default=DEFAULT_MAX_LEN, ge=0, le=MAX_LEN)
    sorted: bool = False  # non-decreasing
    unique: bool = False


class TupleType(SpecModel):
    type: Literal["tuple"] = "tuple"
    items: list[ValueType] = Field(max_length=MAX_ITEMS)


class DictType(SpecModel):
    type: Literal["dict"] = "dict"
    keys: ValueType = Field(default_factory=lambda: StrType(alphabet="lowercase", max_len=8))
    values: ValueType = Field(default_factory=lambda: IntType())
    min_len: int = Field(default=0, ge=0, le=MAX_LEN)
    max_len: int = Field(default=DEFAULT_DICT_MAX_LEN, ge=0, le=MAX_LEN)


class SetType(SpecModel):
    type: Literal["set"] = "set"
    elements: ValueType = Field(default_factory=lambda: IntType())
    min_len: int = Field(default=0, ge=0, le=MAX_LEN)
    max_len: int = Field(default=DEFAULT_MAX_LEN, ge=0, le=MAX_LEN)


class OneOfType(SpecModel):
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


Identifier = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]


class Arg(SpecModel):
    name: Identifier
    type: ValueType


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


def spec_error_from(err: ValidationError) -> SpecError:
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


def parse_value_type(value: Any) -> Any:
    """A validated value type (one of the ``*Type`` models) from a mapping; `SpecError` otherwise."""
    try:
        t = _VALUE_TYPE.validate_python(value)
    except ValidationError as err:
        raise spec_error_from(err) from None
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
        raise field_error(f"{path}.min_len", f"{t.min_len} is above max_len {t.max_len}")


def check_value_type(t: Any, path: str) -> None:
    """Raise `SpecError` (with the path) if ``t`` is inconsistent or beyond the caps."""
    if depth(t) > MAX_DEPTH:
        raise field_error(path, f"nesting depth {depth(t)} is above the cap of {MAX_DEPTH}")
    _check(t, path)


def _check(t: Any, path: str) -> None:
    if isinstance(t, IntType | FloatType) and t.min > t.max:
        raise field_error(f"{path}.min", f"{t.min} is above max {t.max}")
    if isinstance(t, FloatType) and (math.isnan(t.min) or math.isnan(t.max)):
        raise field_error(path, "min and max must be numbers")
    if isinstance(t, StrType | ListType | DictType | SetType):
        _check_len(t, path)
    if isinstance(t, ListType):
        if t.sorted and not isinstance(t.elements, ORDERED_LEAVES):
            raise field_error(f"{path}.sorted", "needs elements of type int, float, str or bool")
        if t.sorted and isinstance(t.elements, FloatType) and t.elements.allow_nan:
            raise field_error(f"{path}.sorted", "NaN has no order: set elements.allow_nan to false")
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
        raise field_error(path + suffix, "must be hashable (int, float, str, bool, none, or a tuple/one_of of those)")
    if domain_size(t) < min_len:
        raise field_error(f"{path}.min_len", f"{min_len} distinct values asked, but {path}{suffix} has only "
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
