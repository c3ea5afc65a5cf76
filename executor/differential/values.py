"""Comparing two sides' outcomes on decoded plain data (executor/differential/__init__.py's matching rules):
what one input's outcome is (`Outcome`), the host's decoder of the harness's tagged values, and `==` with the
platform's exceptions. Nothing a program returned is ever called."""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import Any

from executor.checkers import mismatch
from executor.harness import function_runner as harness
from services.kernel.contracts import Checker

# Outcome codes (crash kinds) shown in counterexamples; markers from the harness (function_runner.FUZZ_*).
MEMORY, LOAD_FAILED, DIED, UNREADABLE = 3, 9, 11, 12
# A set's elements or a dict's keys of which more than this many share one hash value: crafted to make building
# the set (and comparing it) quadratic, never what a program's data holds. Refused before anything is built.
_MAX_SAME_HASH = 16


class Iterated(tuple):  # type: ignore[type-arg]
    """The items of an iterator a function returned: equal only to another iterator's same items."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is Iterated and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return "<iterator of " + tuple.__repr__(self) + ">"


@dataclass(frozen=True)
class Outcome:
    """One side's result on one input, decided here from its frame."""

    kind: str  # value | raised | timeout | crash | bad | exited | signaled | overflow
    value: Any = None
    code: int | None = None


_CONTAINERS: dict[str, Any] = {"tuple": tuple, "set": set, "frozenset": frozenset, "deque": collections.deque}


def decode(node: Any, depth: int = 0) -> Any:
    """A value from function_runner's tagged encoding (host side): built-in data only, iterators as Iterated."""
    if depth > harness.MAX_DEPTH + 1:
        raise ValueError("nested too deeply")
    if type(node) is dict and len(node) == 1 and "iter" in node:
        items = node["iter"]
        if type(items) is not list:
            raise ValueError("malformed iter")
        return Iterated(decode(item, depth + 1) for item in items)
    if type(node) is list:
        return [decode(item, depth + 1) for item in node]
    if type(node) is dict and len(node) == 1:
        ((tag, payload),) = node.items()
        if tag in ("tuple", "set", "frozenset", "deque") and type(payload) is list:
            items = [decode(item, depth + 1) for item in payload]
            try:
                if tag in ("set", "frozenset"):
                    _check_hashes(items)
                return _CONTAINERS[tag](items)
            except TypeError as exc:
                raise ValueError(str(exc)) from None
        if tag in ("dict", "odict") and type(payload) is list:
            pairs = []
            for pair in payload:
                if type(pair) is not list or len(pair) != 2:
                    raise ValueError("malformed dict item")
                pairs.append((decode(pair[0], depth + 1), decode(pair[1], depth + 1)))
            try:
                _check_hashes([key for key, _ in pairs])
                return collections.OrderedDict(pairs) if tag == "odict" else dict(pairs)
            except TypeError as exc:
                raise ValueError(str(exc)) from None
    return harness.decode_value(node, 0, 2)


def _check_hashes(keys: list[Any]) -> None:
    """ValueError if more than _MAX_SAME_HASH of `keys` share a hash value (hash flooding: each would probe past
    all the others); TypeError for an unhashable one."""
    if len(keys) > _MAX_SAME_HASH:
        same = collections.Counter(map(hash, keys))
        if max(same.values()) > _MAX_SAME_HASH:
            raise ValueError("a set or dict whose keys are crafted to share hash values")


def values_same(a: Any, b: Any, tolerance: float | None, depth: int = 0) -> bool:
    """Python's `==` on decoded data, except: NaN equals NaN, floats within `tolerance` (math.isclose with it as
    both rel_tol and abs_tol), and containers compared element by element with these rules."""
    if depth > 2 * harness.MAX_DEPTH:
        return False
    ta, tb = type(a), type(b)
    if ta is float or tb is float:
        if ta in (int, float, bool) and tb in (int, float, bool):
            try:
                fa, fb = float(a), float(b)
            except OverflowError:
                return bool(a == b)
            if math.isnan(fa) or math.isnan(fb):
                return math.isnan(fa) and math.isnan(fb)
            if tolerance is None or math.isinf(fa) or math.isinf(fb):
                return bool(a == b)
            return math.isclose(fa, fb, rel_tol=tolerance, abs_tol=tolerance)
        return bool(a == b)
    if ta in (list, tuple, Iterated, collections.deque) and ta is tb:
        return len(a) == len(b) and all(values_same(x, y, tolerance, depth + 1) for x, y in zip(a, b, strict=True))
    if ta in (dict, collections.OrderedDict) and tb in (dict, collections.OrderedDict):
        if a.keys() != b.keys():
            return False
        if ta is tb is collections.OrderedDict and list(a) != list(b):
            return False
        return all(values_same(a[key], b[key], tolerance, depth + 1) for key in a)
    return bool(a == b)


def outcomes_match(ref: Outcome, cand: Outcome, tolerance: float | None, checker: Checker) -> bool:
    if ref.kind != cand.kind:
        return False
    if ref.kind == "value":
        return values_same(ref.value, cand.value, tolerance)
    if ref.kind == "raised":
        return bool(ref.value == cand.value)
    if ref.kind == "exited":
        if ref.code != cand.code:
            return False
        return mismatch(checker.kind, ref.value, cand.value, checker.abs_tol, checker.rel_tol) is None
    return False  # timeouts, crashes, signals, unreadable replies never match
