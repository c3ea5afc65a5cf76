"""Output checkers: decide whether a program's output matches the expected output, and say why not."""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable, Sequence
from typing import Any

from services.kernel.contracts import CheckerKind

# Decimal notation only: Python's float() would also accept "1_000", "nan" and "infinity", which a
# checker must compare as text.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_EXCERPT = 40


def check(kind: str, expected: str, actual: str, abs_tol: float = 1e-6, rel_tol: float = 1e-6) -> bool:
    """True when `actual` is an accepted answer for `expected` under checker `kind`.

    exact: the texts are identical (the executor decodes output with surrogateescape, so this is byte-exact).
    lines: equal line by line after dropping each line's trailing whitespace and any trailing blank lines.
    tokens: equal whitespace-separated tokens.
    float: tokens; where both tokens are decimal numbers they may differ by abs_tol OR by rel_tol relative
    to the expected value; other tokens must be equal.
    """
    return mismatch(kind, expected, actual, abs_tol, rel_tol) is None


def mismatch(kind: str, expected: str, actual: str, abs_tol: float = 1e-6, rel_tol: float = 1e-6) -> str | None:
    """None when `actual` is accepted, else a short human-readable reason."""
    if kind == CheckerKind.EXACT:
        return _exact(expected, actual)
    if kind == CheckerKind.LINES:
        return _sequence("line", _lines(expected), _lines(actual), _same_text)
    if kind == CheckerKind.TOKENS:
        return _sequence("token", expected.split(), actual.split(), _same_text)
    if kind == CheckerKind.FLOAT:
        return _sequence("token", expected.split(), actual.split(), lambda e, a: _same_token(e, a, abs_tol, rel_tol))
    raise ValueError(f"unknown checker kind {kind!r}; expected one of {', '.join(CheckerKind)}")


def numbers_close(expected: float, actual: float, abs_tol: float, rel_tol: float) -> bool:
    """Equal within abs_tol or within rel_tol of the expected value; NaN equals NaN, infinities by sign."""
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if math.isinf(expected) or math.isinf(actual):
        return expected == actual
    diff = abs(expected - actual)
    return diff <= abs_tol or diff <= rel_tol * abs(expected)


def values_equal(expected: Any, actual: Any, abs_tol: float = 1e-6, rel_tol: float = 1e-6) -> bool:
    """JSON equality for function-mode return values; floats compare within the tolerances.

    Booleans are not numbers here (JSON `true` is not `1`). An expected float accepts an int or a float within
    the tolerances; an expected int accepts only that int (or a float exactly equal to it).
    """
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        if isinstance(expected, int):
            # An integer answer is exact: a float is accepted only if it is that integer (3.0 for 3), never
            # within a tolerance (which would accept 123456689.0 for 123456789 at rel_tol 1e-6).
            return expected == actual
        try:
            return numbers_close(float(expected), float(actual), abs_tol, rel_tol)
        except OverflowError:  # an int too large for a float is not close to any float
            return False
    if isinstance(expected, list | tuple) and isinstance(actual, list | tuple):
        return len(expected) == len(actual) and all(
            values_equal(e, a, abs_tol, rel_tol) for e, a in zip(expected, actual, strict=True)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            values_equal(expected[k], actual[k], abs_tol, rel_tol) for k in expected
        )
    if expected is None or actual is None:
        return expected is None and actual is None
    return type(expected) is type(actual) and bool(expected == actual)


def excerpt(value: Any) -> str:
    """A short repr for messages, so a megabyte of output never ends up in a verdict reason (reprlib looks at a
    bounded part of the value, so a huge value costs no more than a small one)."""
    text = _SHORT_REPR.repr(value)
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 3] + "..."


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 3
_SHORT_REPR.maxlist = _SHORT_REPR.maxtuple = _SHORT_REPR.maxdict = _SHORT_REPR.maxset = 8
_SHORT_REPR.maxstring = _SHORT_REPR.maxlong = _SHORT_REPR.maxother = _EXCERPT


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _same_text(expected: str, actual: str) -> bool:
    return expected == actual


def _same_token(expected: str, actual: str, abs_tol: float, rel_tol: float) -> bool:
    if expected == actual:
        return True
    if _NUMBER.fullmatch(expected) and _NUMBER.fullmatch(actual):
        return numbers_close(float(expected), float(actual), abs_tol, rel_tol)
    return False


def _exact(expected: str, actual: str) -> str | None:
    if expected == actual:
        return None
    for position, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if e != a:
            return f"outputs differ at character {position}: expected {excerpt(e)}, got {excerpt(a)}"
    shorter = "shorter" if len(actual) < len(expected) else "longer"
    return f"output is {shorter} than expected ({len(actual)} vs {len(expected)} characters)"


def _sequence(
    what: str, expected: Sequence[str], actual: Sequence[str], same: Callable[[str, str], bool]
) -> str | None:
    for position, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if not same(e, a):
            return f"{what} {position + 1}: expected {excerpt(e)}, got {excerpt(a)}"
    if len(expected) != len(actual):
        return f"expected {len(expected)} {what}s, got {len(actual)}"
    return None
