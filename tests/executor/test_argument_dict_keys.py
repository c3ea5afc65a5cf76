"""An argument test compares the return value as JSON data (executor/checkers.py values_equal on what
function_runner.json_data made of it). A JSON object's keys are strings: a dict with any other key is not JSON data,
so it is WA (as a set is), never turned into text that could equal an expected key or collide with another key."""

from __future__ import annotations

import pytest

from executor.run import Executor
from services.kernel.contracts import TestCase
from tests.executor.conftest import run

# Each case: what the function returns (source), and the verdict against its expected value.
EXPECTED = {"1": "a"}
CASES: list[tuple[str, object, str]] = [
    ("{'1': 'a'}", EXPECTED, "AC"),
    ("{1: 'a'}", EXPECTED, "WA"),
    ("{True: 'a'}", EXPECTED, "WA"),
    ("{True: 'a'}", {"true": "a"}, "WA"),
    ("{1.0: 'a'}", EXPECTED, "WA"),
    ("{None: 'a'}", {"null": "a"}, "WA"),
    ("{(1,): 'a'}", {"[1]": "a"}, "WA"),
    ("{frozenset(): 'a'}", {"[]": "a"}, "WA"),
    # Keys that would collide once made text: one of them is not a str, so the value is not JSON data.
    ("{1: 'a', '1': 'a'}", EXPECTED, "WA"),
    ("{'1': 'a', 1: 'b'}", EXPECTED, "WA"),
    ("{1: 'b', '1': 'a'}", EXPECTED, "WA"),
    # Nested: in a dict's value, in a list, in a tuple, and deep.
    ("{'k': {1: 'a'}}", {"k": EXPECTED}, "WA"),
    ("{'k': {'1': 'a'}}", {"k": EXPECTED}, "AC"),
    ("[{1: 'a'}]", [EXPECTED], "WA"),
    ("[{'1': 'a'}]", [EXPECTED], "AC"),
    ("({1: 'a'},)", [EXPECTED], "WA"),
    ("[[[{'x': {2: 'a'}}]]]", [[[{"x": {"2": "a"}}]]], "WA"),
    ("[[[{'x': {'2': 'a'}}]]]", [[[{"x": {"2": "a"}}]]], "AC"),
    # An OrderedDict and a defaultdict are dicts: the same rule for their keys.
    ("__import__('collections').OrderedDict([('1', 'a')])", EXPECTED, "AC"),
    ("__import__('collections').OrderedDict([(1, 'a')])", EXPECTED, "WA"),
    ("__import__('collections').defaultdict(str, {1: 'a'})", EXPECTED, "WA"),
    # A str subclass key crosses as its str value: it is the text "1".
    ("{type('K', (str,), {})('1'): 'a'}", EXPECTED, "AC"),
    # Tuples against lists, unchanged: a tuple is a JSON array, a list inside a dict too.
    ("(1, 2)", [1, 2], "AC"),
    ("{'k': (1, [2, (3,)])}", {"k": [1, [2, [3]]]}, "AC"),
    ("[1, 2]", [1, 2], "AC"),
    ("(1, 2)", [2, 1], "WA"),
]


@pytest.fixture(scope="module")
async def verdicts(executor: Executor) -> list[tuple[str, str]]:
    """Every case in one execute: (verdict, message) per case."""
    source = "CASES = [\n" + "".join(f"    lambda: {value},\n" for value, _, _ in CASES) + "]\n"
    source += "def f(i):\n    return CASES[i]()\n"
    tests = [TestCase(input=[i], expected=expected) for i, (_, expected, _) in enumerate(CASES)]
    outcome = await run(executor, "python", source, tests, mode="function", entry_point="f")  # type: ignore[arg-type]
    return [(t.status, t.message) for t in outcome.tests]


@pytest.mark.parametrize("index", range(len(CASES)), ids=[value for value, _, _ in CASES])
async def test_only_str_keys_are_json_object_keys(verdicts: list[tuple[str, str]], index: int) -> None:
    value, expected, verdict = CASES[index]
    status, message = verdicts[index]
    assert status == verdict, (value, expected, message)
    if verdict == "WA" and value != "(1, 2)":
        # Refused as not JSON data, with the key's type named, not compared as a value that merely differs.
        assert "key of type" in message, message


async def test_code_tests_still_compare_any_keys(executor: Executor) -> None:
    # A code test compares Python values itself: dicts with int keys, and keys that are equal as text, are its own
    # business (the rule is only about what an argument test's JSON can hold).
    source = "def f():\n    return {1: 'a', '1': 'b', (2,): 'c'}\n"
    code = "def check(candidate):\n    assert candidate() == {1: 'a', '1': 'b', (2,): 'c'}\n"
    wrong = "def check(candidate):\n    assert candidate() == {'1': 'a'}\n"
    outcome = await run(
        executor,
        "python",
        source,
        [TestCase(code=code), TestCase(code=wrong)],
        mode="function",  # type: ignore[arg-type]
        entry_point="f",
    )
    assert [t.status for t in outcome.tests] == ["AC", "WA"], outcome.tests
