"""The problem's own tests among the fuzzing inputs (a departure from LoCaL's Algorithm 1, docs/similarity.md).

A program being fuzzed runs exactly as it runs for a test (executor/differential/), so nothing in its process
tells the two apart; what is left to tell them apart is the inputs themselves. A program that recognised its
tests' inputs (their values, their sizes) could answer them one way and generated inputs another, and have
df_score say it behaves like the reference while its tests fail. So wherever df_score grades a program against a
fixed reference of a problem that has tests, every repetition holds the tests' inputs beside its N generated ones,
at positions drawn from the repetition's seed: on those inputs the program answers as it does in its tests, and
any difference from the reference there counts.

- `inputs_of_tests(mode, entry_point, tests)`: the tests' inputs (an argument test's arguments; the literal calls of
  the entry point, or of `candidate`, in a code test, read with `ast` and never executed; a stdio test's stdin),
  each once, at most MAX_TEST_INPUTS of them.
- `mix_tests(repetitions, inputs, seed)`: the repetitions with the inputs placed among them, and where.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from services.kernel.contracts import Mode, TestCase
from services.lib.fuzzing.literals import literal_calls
from services.lib.fuzzing.score import repetition_seed

# At most this many test inputs join each repetition (a problem with more tests contributes its first ones).
MAX_TEST_INPUTS = 64


def inputs_of_tests(mode: Mode, entry_point: str | None, tests: Sequence[TestCase]) -> list[Any]:
    """The inputs of a problem's tests, as fuzzing inputs of `mode` (positional argument lists, or stdin texts),
    each once and in test order."""
    found: list[Any] = []
    if Mode(mode) is Mode.STDIO:
        found = [test.input for test in tests if isinstance(test.input, str)]
    else:
        callees = {"candidate"} | ({entry_point} if entry_point else set())
        for test in tests:
            if test.code is not None:
                found.extend(literal_calls(test.code, callees))
            elif isinstance(test.input, list):
                found.append(list(test.input))
    unique: list[Any] = []
    seen: set[str] = set()
    for item in found:
        key = _key(item)
        if key is not None and key not in seen:
            seen.add(key)
            unique.append(item)
        if len(unique) >= MAX_TEST_INPUTS:
            break
    return unique


def _key(item: Any) -> str | None:
    """A value's identity for de-duplication: its repr with its types (1 and 1.0 and True are different inputs)."""
    try:
        return json.dumps(_typed(item), sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None


def _typed(value: Any) -> Any:
    if isinstance(value, list | tuple | set | frozenset):
        items = [_typed(item) for item in value]
        return [type(value).__name__, sorted(items, key=repr) if isinstance(value, set | frozenset) else items]
    if isinstance(value, dict):
        return ["dict", [[_typed(k), _typed(v)] for k, v in value.items()]]
    return [type(value).__name__, repr(value)]


def mix_tests(
    repetitions: Sequence[Sequence[Any]], inputs: Sequence[Any], seed: int
) -> tuple[list[list[Any]], list[list[int]]]:
    """Each repetition with every one of `inputs` placed among its own, at positions (and in an order) drawn from
    the repetition's seed: the same for the same seed in any process. Returns the repetitions and, per repetition,
    the sorted positions of the test inputs."""
    mixed: list[list[Any]] = []
    positions: list[list[int]] = []
    for index, generated in enumerate(repetitions):
        draw = random.Random(repetition_seed(seed, index) ^ 0x7E57)
        total = len(generated) + len(inputs)
        chosen = sorted(draw.sample(range(total), len(inputs)))
        order = list(inputs)
        draw.shuffle(order)
        tests = iter(order)
        rest = iter(generated)
        marked = set(chosen)
        mixed.append([next(tests) if position in marked else next(rest) for position in range(total)])
        positions.append(chosen)
    return mixed, positions


__all__ = ["MAX_TEST_INPUTS", "inputs_of_tests", "mix_tests"]
