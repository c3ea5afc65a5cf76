"""The apps loader: stdio problems from input/output lists, function problems when there is an fn_name."""

from __future__ import annotations

import json

import pytest

from services.lib.datasets import RecordError, load
from tests.services.lib.datasets.helpers import records

ROWS = records("apps")


def test_a_stdio_problem_with_its_solutions_as_references() -> None:
    (problem,) = load("apps", ROWS[0], 1).problems
    assert problem["problem_id"] == "APPS/4001" and problem["mode"] == "stdio"
    assert problem["statement"] == ROWS[0]["question"]
    assert problem["tests"] == [{"input": "1 2\n", "expected": "3\n"}, {"input": "10 -3\n", "expected": "7\n"}]
    assert problem["references"] == [
        {"language": "python", "source_code": "a, b = map(int, input().split())\nprint(a + b)\n"}
    ]


def test_an_fn_name_makes_a_function_problem_with_unwrapped_outputs() -> None:
    (problem,) = load("apps", ROWS[1], 2).problems
    assert problem["mode"] == "function" and problem["entry_point"] == "largest"
    assert problem["tests"] == [{"input": [[1, 5, 2]], "expected": 5}, {"input": [[-1, -7]], "expected": -1}]


def test_lines_given_as_lists_are_joined_and_no_solutions_is_no_reference() -> None:
    (problem,) = load("apps", ROWS[2], 3).problems
    assert problem["tests"] == [{"input": "ab\ncd", "expected": "ba\ndc"}]
    assert problem["references"] == []


def test_objects_are_taken_as_well_as_their_json_text() -> None:
    row = {
        **ROWS[0],
        "input_output": json.loads(ROWS[0]["input_output"]),
        "solutions": json.loads(ROWS[0]["solutions"]),
    }
    assert load("apps", row, 1) == load("apps", ROWS[0], 1)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"input_output": "{not json"}, "input_output"),
        ({"input_output": json.dumps({"inputs": ["1"], "outputs": []})}, "input_output"),
        ({"input_output": json.dumps({"inputs": ["1"]})}, "input_output"),
        ({"input_output": json.dumps({"inputs": [3], "outputs": ["3"]})}, "input_output.inputs[0]"),
        ({"solutions": "[1]"}, "solutions[0]"),
        ({"fn_name": "not a name"}, "fn_name"),
        ({"question": None}, "question"),
    ],
)
def test_a_bad_row_names_its_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as caught:
        load("apps", {**ROWS[0], **change}, 1)
    assert caught.value.field == field
