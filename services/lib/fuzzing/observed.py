"""What observed values say about a value type, for deriving a spec (`derive.py`, `derive_stdin.py`): the ranges
"mutated around" what was observed (docs/input-spec.md, "Derivation"), and the shape of a derived spec.

- ints observed in [a, b]: [a - m, b + m] with m = max(3, (b - a) // 2), never below 0 when a >= 0;
- floats observed in [a, b]: [a - m, b + m] with m = max(1.0, (b - a) / 2), never below 0.0 when a >= 0;
- lengths observed in [a, b]: [max(0, a - 1), b + max(2, (b - a) // 2)];
- characters: the observed ones, plus the whole lowercase / uppercase / digit class when at least 3 of its members
  were observed; no character observed: lowercase letters.
"""

from __future__ import annotations

import math
import string
from typing import Any

from pydantic import BaseModel, ConfigDict

from services.lib.fuzzing.spec import FunctionSpec, StdinSpec
from services.lib.fuzzing.values import FLOAT_BOUND, INT_BOUND, MAX_LEN, Chars, IntType, StrType

MAX_INT_MARGIN = 10**6


class DerivedSpec(BaseModel):
    """A derived spec, where each part came from (``sources``: ``args[i]`` or ``lines`` -> ``type_hint``,
    ``test_literals``, ``docstring_examples``, ``type_hint+test_literals``, ``stdio_tests``, ``relation``), and
    notes for a human."""

    model_config = ConfigDict(frozen=True)

    spec: FunctionSpec | StdinSpec
    sources: dict[str, str]
    notes: list[str]


def value_kind(v: Any) -> str:
    """The kind of an observed literal: a value type's tag (``int``, ``list``, ...), or ``other``."""
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "none", list: "list", tuple: "tuple",
            dict: "dict", set: "set", frozenset: "set"}.get(type(v), "other")  # fmt: skip


def int_type(values: list[int], nonneg_floor: bool = True) -> IntType:
    """An int type around the observed ints (never below 0 when none is, unless `nonneg_floor` is off)."""
    a, b = min(values), max(values)
    m = min(MAX_INT_MARGIN, max(3, (b - a) // 2))
    lo, hi = a - m, b + m
    if a >= 0 and nonneg_floor:
        lo = max(lo, 0)
    # Both ends within the cap, even when every observed value is beyond it.
    return IntType(min=min(INT_BOUND, max(-INT_BOUND, lo)), max=max(-INT_BOUND, min(INT_BOUND, hi)))


def float_range(values: list[float]) -> tuple[float, float]:
    """A float range around the observed finite floats ([-1000, 1000] when there is none)."""
    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        return -1000.0, 1000.0
    a, b = min(finite), max(finite)
    m = max(1.0, (b - a) / 2)  # inf when b - a overflows: the clamps below still hold
    lo, hi = a - m, b + m
    if a >= 0:
        lo = max(lo, 0.0)
    return min(FLOAT_BOUND, max(-FLOAT_BOUND, lo)), max(-FLOAT_BOUND, min(FLOAT_BOUND, hi))


def len_range(lengths: list[int]) -> tuple[int, int]:
    """A length range around the observed lengths, within MAX_LEN."""
    a, b = min(lengths), max(lengths)
    return min(MAX_LEN, max(0, a - 1)), min(MAX_LEN, b + max(2, (b - a) // 2))


_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)


def alphabet(observed: set[str]) -> str:
    """The observed characters, with each class of which at least 3 were observed (lowercase when none)."""
    chars = set(observed)
    for cls in _CLASSES:
        if len(chars & set(cls)) >= 3:
            chars |= set(cls)
    return "".join(sorted(chars)) if chars else string.ascii_lowercase


def str_type(values: list[str]) -> StrType:
    """A str type around the observed strings: their lengths' range and alphabet."""
    lo, hi = len_range([len(v) for v in values])
    chars = alphabet({c for v in values for c in v})
    return StrType(min_len=lo, max_len=hi, alphabet=Chars(chars=chars[:1024]))
