"""Generation: inputs always satisfy their spec, relations hold, and the same seed gives the same inputs anywhere."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.lib.fuzzing import (
    FunctionSpec,
    SpecError,
    StdinSpec,
    generate_inputs,
    generate_repetitions,
    parse_spec,
    repetition_seed,
    strategy_for,
    violations,
)
from tests.services.lib.fuzzing.specs import function_specs, stdin_specs

ROOT = Path(__file__).resolve().parents[4]
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HUMANEVAL_LIKE = {
    "kind": "function",
    "args": [
        {"name": "xs", "type": {"type": "list", "elements": {"type": "int"}}},
        {"name": "k", "type": {"type": "int"}},
    ],
}
SORTED_WITH_SIZE = {
    "kind": "function",
    "args": [
        {"name": "arr", "type": {"type": "list", "elements": {"type": "int", "min": -50, "max": 50}, "sorted": True}},
        {"name": "n", "type": {"type": "int", "min": 0, "max": 100}},
        {"name": "x", "type": {"type": "int", "min": -50, "max": 50}},
    ],
    "relations": [{"kind": "length_of", "arg": "n", "of": "arr"}],
}
STDIN_COUNTED = {
    "kind": "stdin",
    "lines": [
        {
            "tokens": [
                {"type": "int", "name": "n", "min": 1, "max": 8},
                {"type": "int", "name": "q", "min": 0, "max": 3},
            ]
        },
        {"tokens": [{"type": "int", "min": -100, "max": 100, "count": "n"}]},
        {"count": "q", "tokens": [{"type": "int", "min": 1, "max": 8}, {"type": "float", "min": 0, "max": 1}]},
    ],
}


def _canonical(inputs: list[Any]) -> str:
    """A text form independent of set iteration order (sets sorted by repr) and NaN identity."""

    def enc(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, set):
            return {"set": sorted((enc(x) for x in v), key=repr)}
        if isinstance(v, tuple):
            return {"tuple": [enc(x) for x in v]}
        if isinstance(v, list):
            return [enc(x) for x in v]
        if isinstance(v, dict):
            return {"dict": [[enc(k), enc(x)] for k, x in v.items()]}
        return v

    return json.dumps([enc(i) for i in inputs], sort_keys=True, default=repr)


@PROPERTY
@given(spec=function_specs(), seed=st.integers(0, 2**64))
def test_function_inputs_satisfy_their_spec(spec: dict[str, Any], seed: int) -> None:
    try:
        parsed = parse_spec(spec)
    except SpecError:
        return  # e.g. a random spec whose relations cannot hold; rejection is tested elsewhere
    for value in generate_inputs(parsed, 40, seed):
        assert violations(parsed, value) == [], (spec, value)


@PROPERTY
@given(spec=stdin_specs(), seed=st.integers(0, 2**64))
def test_stdin_inputs_satisfy_their_spec(spec: dict[str, Any], seed: int) -> None:
    parsed = parse_spec(spec)
    assert isinstance(parsed, StdinSpec)
    for text in generate_inputs(parsed, 20, seed):
        assert isinstance(text, str) and text.endswith("\n")
        assert violations(parsed, text) == [], (spec, text)


@PROPERTY
@given(data=st.data())
def test_the_strategy_draws_valid_inputs_too(data: st.DataObject) -> None:
    spec = parse_spec(data.draw(function_specs()))
    value = data.draw(strategy_for(spec))
    assert violations(spec, value) == []


@given(strategy_for(SORTED_WITH_SIZE))
@settings(max_examples=50, deadline=None)
def test_strategy_for_works_with_given(value: list[Any]) -> None:
    arr, n, _ = value
    assert n == len(arr) and arr == sorted(arr)


def test_relations_hold_in_every_input() -> None:
    spec = {
        "kind": "function",
        "args": [
            {"name": "k", "type": {"type": "int", "min": 0, "max": 30}},
            {"name": "s", "type": {"type": "str", "min_len": 0, "max_len": 12, "alphabet": "lowercase"}},
            {"name": "n", "type": {"type": "int", "min": 1, "max": 1000}},
            {"name": "lo", "type": {"type": "float", "min": -10.0, "max": 10.0}},
            {"name": "hi", "type": {"type": "float", "min": -10.0, "max": 10.0}},
            {"name": "m", "type": {"type": "int", "min": -10, "max": 10}},
        ],
        "relations": [
            {"kind": "length_of", "arg": "n", "of": "s"},
            {"kind": "le", "left": "k", "right": "n"},
            {"kind": "lt", "left": "lo", "right": "hi"},
            {"kind": "lt", "left": "hi", "right": "m"},
        ],
    }
    for k, s, n, lo, hi, m in generate_inputs(spec, 2000, 7):
        assert n == len(s) >= 1 and 0 <= k <= n
        assert lo < hi < m
    assert not any(violations(spec, x) for x in generate_inputs(spec, 500, 8))


def test_sorted_array_and_its_size() -> None:
    inputs = generate_inputs(SORTED_WITH_SIZE, 1000, 3)
    assert all(n == len(arr) and arr == sorted(arr) for arr, n, _ in inputs)
    assert any(not arr for arr, _, _ in inputs), "the empty list, an edge value, shows up"


def test_edge_values_are_mixed_in() -> None:
    inputs = generate_inputs(HUMANEVAL_LIKE, 2000, 11)
    ks = [k for _, k in inputs]
    assert {0, -1000, 1000} <= set(ks)
    assert any(not xs for xs, _ in inputs) and any(len(xs) == 20 for xs, _ in inputs)


def test_same_seed_same_inputs_and_other_seed_other_inputs() -> None:
    for spec in (HUMANEVAL_LIKE, SORTED_WITH_SIZE, STDIN_COUNTED):
        a = generate_inputs(spec, 300, 42)
        assert _canonical(a) == _canonical(generate_inputs(spec, 300, 42))
        assert _canonical(a) != _canonical(generate_inputs(spec, 300, 43))
        assert _canonical(generate_inputs(spec, 10, 42)) == _canonical(a[:10])


SUBPROCESS = """
import json, sys
sys.path.insert(0, {root!r})
from tests.services.lib.fuzzing.test_generate import _canonical, SPECS
from services.lib.fuzzing import generate_inputs
print(json.dumps([_canonical(generate_inputs(s, 200, 5)) for s in SPECS]))
"""

SETS_AND_STRINGS = {
    "kind": "function",
    "args": [
        {"name": "words", "type": {"type": "set", "elements": {"type": "str", "alphabet": "lowercase", "max_len": 4}}},
        {"name": "d", "type": {"type": "dict", "keys": {"type": "str", "max_len": 3}, "values": {"type": "float"}}},
        {
            "name": "u",
            "type": {
                "type": "list",
                "elements": {"type": "tuple", "items": [{"type": "str"}, {"type": "bool"}]},
                "unique": True,
            },
        },  # fmt: skip
    ],
}
SPECS = [HUMANEVAL_LIKE, SORTED_WITH_SIZE, STDIN_COUNTED, SETS_AND_STRINGS]


def test_determinism_across_processes_and_hash_seeds() -> None:
    here = json.dumps([_canonical(generate_inputs(s, 200, 5)) for s in SPECS])
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", SUBPROCESS.format(root=str(ROOT))],
            env=env, capture_output=True, text=True, check=True, cwd=ROOT, timeout=60,
        )  # fmt: skip
        assert out.stdout.strip() == here


def test_generate_repetitions_uses_repetition_seeds() -> None:
    reps = generate_repetitions(HUMANEVAL_LIKE, 50, 3, seed=9)
    assert len(reps) == 3
    for i, rep in enumerate(reps):
        assert rep == generate_inputs(HUMANEVAL_LIKE, 50, repetition_seed(9, i))
    assert reps[0] != reps[1]


def test_stdin_rendering() -> None:
    for text in generate_inputs(STDIN_COUNTED, 200, 1):
        lines = text.split("\n")
        assert lines[-1] == "" and "" not in lines[:1]
        n, q = map(int, lines[0].split(" "))
        assert len(lines[1].split(" ")) == n and len(lines) == 2 + q + 1
        assert "  " not in text
    assert violations(STDIN_COUNTED, "2 0\n1 2\n") == []
    assert violations(STDIN_COUNTED, "2 0\n1 2 3\n")
    assert violations(STDIN_COUNTED, "2 1\n1 2\n") != []
    assert violations(STDIN_COUNTED, "2 0\n1 2") == ["input: stdin must end with a newline"]


def test_n_and_seed_are_checked() -> None:
    with pytest.raises(SpecError):
        generate_inputs(HUMANEVAL_LIKE, -1, 0)
    with pytest.raises(SpecError):
        generate_inputs(HUMANEVAL_LIKE, 10**7, 0)
    assert generate_inputs(HUMANEVAL_LIKE, 0, 0) == []
    assert isinstance(parse_spec(HUMANEVAL_LIKE), FunctionSpec)


def test_plain_data_only() -> None:
    allowed = (int, float, str, bool, type(None), list, tuple, dict, set)

    def walk(v: Any) -> None:
        assert type(v) in allowed
        if isinstance(v, list | tuple | set):
            for x in v:
                walk(x)
        if isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)

    for value in generate_inputs(SETS_AND_STRINGS, 300, 2):
        walk(value)
        assert violations(SETS_AND_STRINGS, value) == []
