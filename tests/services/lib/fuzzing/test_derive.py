"""Deriving a spec from type hints, test literals and stdio tests, without executing anything."""

from __future__ import annotations

import pytest

from services.kernel.contracts import Mode, TestCase
from services.lib.fuzzing import (
    FloatType,
    FunctionSpec,
    IntType,
    ListType,
    OneOfType,
    SpecError,
    StdinSpec,
    StrType,
    TupleType,
    derive_spec,
    generate_inputs,
    violations,
)


def _function(source: str | None, entry: str | None, *tests: TestCase) -> FunctionSpec:
    derived = derive_spec(mode=Mode.FUNCTION, reference_source=source, entry_point=entry, tests=list(tests))
    assert isinstance(derived.spec, FunctionSpec)
    for value in generate_inputs(derived.spec, 300, 1):
        assert violations(derived.spec, value) == []
    return derived.spec


def test_type_hints_alone() -> None:
    source = (
        "from typing import List, Optional, Tuple, Dict\n"
        "def f(xs: List[int], k: int, name: str, t: Tuple[int, str], d: Dict[str, float], o: Optional[bool],"
        " flag: bool = False) -> int:\n    return 0\n"
    )
    derived = derive_spec(mode=Mode.FUNCTION, reference_source=source, entry_point="f", tests=[])
    spec = derived.spec
    assert isinstance(spec, FunctionSpec)
    assert [a.name for a in spec.args] == ["xs", "k", "name", "t", "d", "o"]  # the defaulted one is left out
    assert isinstance(spec.args[0].type, ListType) and isinstance(spec.args[0].type.elements, IntType)
    assert isinstance(spec.args[3].type, TupleType) and isinstance(spec.args[5].type, OneOfType)
    assert derived.sources == {f"args[{i}]": "type_hint" for i in range(6)}


def test_hints_give_types_and_literals_give_ranges() -> None:
    source = "def g(xs: list[float], k: int) -> float:\n    return sum(xs) * k\n"
    code = "def check(candidate):\n    assert candidate([1, 2.5, 3], 4) == 26\n    assert candidate([0.5], 10) == 5\n"
    derived = derive_spec(mode=Mode.FUNCTION, reference_source=source, entry_point="g", tests=[TestCase(code=code)])
    spec = derived.spec
    assert isinstance(spec, FunctionSpec)
    xs, k = spec.args[0].type, spec.args[1].type
    assert isinstance(xs, ListType) and isinstance(xs.elements, FloatType)  # the hint wins over the int literals
    assert xs.elements.min == 0.0 and xs.elements.max >= 3.0  # never negative: none observed
    assert (xs.min_len, xs.max_len) == (0, 5)
    assert isinstance(k, IntType) and (k.min, k.max) == (1, 13)  # [4, 10] widened by max(3, 6 // 2)
    assert derived.sources == {"args[0]": "type_hint+test_literals", "args[1]": "type_hint+test_literals"}


def test_literals_alone_and_mbpp_style_asserts() -> None:
    code = "assert remove_odd([1,2,3]) == [2]\nassert remove_odd([-2,4,6,7]) == [-2,4,6]\nassert remove_odd([]) == []\n"
    spec = _function(None, "remove_odd", TestCase(code=code))
    t = spec.args[0].type
    assert isinstance(t, ListType) and isinstance(t.elements, IntType) and t.elements.min < -2


def test_input_lists_and_a_length_relation() -> None:
    tests = [TestCase(input=[[1, 3, 5], 3, "x"]), TestCase(input=[[2, 4], 2, "yz"]), TestCase(input=[[], 0, ""])]
    derived = derive_spec(mode=Mode.FUNCTION, reference_source=None, entry_point=None, tests=tests)
    spec = derived.spec
    assert isinstance(spec, FunctionSpec)
    assert [r.model_dump() for r in spec.relations] == [{"kind": "length_of", "arg": "arg1", "of": "arg0"}]
    assert derived.sources["args[1]"] == "relation"
    assert isinstance(spec.args[0].type, ListType) and spec.args[0].type.sorted
    assert isinstance(spec.args[2].type, StrType)
    for arr, n, _ in generate_inputs(spec, 200, 3):
        assert n == len(arr) and arr == sorted(arr)


def test_mixed_types_become_one_of() -> None:
    spec = _function(None, "f", TestCase(input=[1]), TestCase(input=["a"]), TestCase(input=[None]))
    assert isinstance(spec.args[0].type, OneOfType) and len(spec.args[0].type.options) == 3


def test_nothing_derivable_says_what_to_send() -> None:
    with pytest.raises(SpecError, match="input_spec"):
        derive_spec(mode=Mode.FUNCTION, reference_source=None, entry_point="f", tests=[TestCase(code="pass")])
    with pytest.raises(SpecError, match="input_spec"):
        derive_spec(mode=Mode.FUNCTION, reference_source="def f(x):\n  return x\n", entry_point="f", tests=[])
    with pytest.raises(SpecError, match="input_spec"):
        derive_spec(mode=Mode.STDIO, reference_source=None, entry_point=None, tests=[])


def test_code_is_never_executed(tmp_path: object) -> None:
    marker = "import os\nos.system('touch /tmp/tribunal-fuzzing-executed')\n"
    source = marker + "def f(x: int) -> int:\n    return x\n"
    code = (
        marker
        + "def check(candidate):\n    assert candidate(__import__('os').getpid()) == 1\n    assert candidate(3)\n"
    )
    spec = _function(source, "f", TestCase(code=code))
    import os

    assert not os.path.exists("/tmp/tribunal-fuzzing-executed")
    assert isinstance(spec.args[0].type, IntType) and spec.args[0].type.max >= 3


def _stdin(*inputs: str) -> StdinSpec:
    derived = derive_spec(mode=Mode.STDIO, reference_source=None, entry_point=None,
                          tests=[TestCase(input=i) for i in inputs])  # fmt: skip
    assert isinstance(derived.spec, StdinSpec) and derived.sources == {"lines": "stdio_tests"}
    for text in inputs:
        assert violations(derived.spec, text) == [], text
    for text in generate_inputs(derived.spec, 200, 4):
        assert violations(derived.spec, text) == []
    return derived.spec


def test_stdin_count_then_values() -> None:
    spec = _stdin("3\n1 2 3\n", "5\n5 -4 3 2 1\n", "1\n7\n")
    for text in generate_inputs(spec, 100, 0):
        first, second = text.split("\n")[:2]
        assert len(second.split()) == int(first) if first != "0" else second == ""


def test_stdin_count_then_lines_and_test_case_blocks() -> None:
    spec = _stdin("2\n1 2\n3 4\n", "3\n1 1\n2 2\n3 3\n")
    assert spec.lines[1].count == spec.lines[0].tokens[0].name  # type: ignore[union-attr]
    blocks = _stdin("2\n3\n1 2 3\n2\n4 5\n", "1\n4\n1 1 1 1\n")
    assert blocks.lines[1].kind == "block"
    _stdin("2\n3 1 2 3\n1 9\n", "1\n2 5 6\n")  # a count followed by that many values


def test_stdin_words_and_floats() -> None:
    spec = _stdin("hello world 0.5\n", "abc de 1.25\n")
    kinds = [t.type for t in spec.lines[0].tokens]  # type: ignore[union-attr]
    assert kinds == ["str", "str", "float"]


def test_stdin_without_structure_is_refused() -> None:
    with pytest.raises(SpecError, match="input_spec"):
        _stdin("1 2\n3\n", "1 2 3\n")
