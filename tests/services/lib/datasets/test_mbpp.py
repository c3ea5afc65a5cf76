"""The mbpp loader: a row becomes a function-mode problem whose code test (setup + asserts) the reference passes."""

from __future__ import annotations

import pytest

from services.lib.datasets import RecordError, load
from tests.services.lib.datasets.helpers import passes, records

ROWS = records("mbpp")


def test_a_row_becomes_a_problem_with_its_asserts_as_code_tests_and_its_code_as_reference() -> None:
    (problem,) = load("mbpp", ROWS[0], 1).problems
    assert problem["problem_id"] == "MBPP/11" and problem["mode"] == "function"
    assert problem["entry_point"] == "remove_Occ"
    assert problem["statement"] == ROWS[0]["text"]
    assert problem["references"] == [{"language": "python", "source_code": ROWS[0]["code"]}]
    # The asserts, then the challenge asserts, each group one hidden code test.
    assert [test["code"] for test in problem["tests"]] == [
        "\n".join(ROWS[0]["test_list"]),
        "\n".join(ROWS[0]["challenge_test_list"]),
    ]


def test_the_setup_code_comes_before_the_asserts() -> None:
    (problem,) = load("mbpp", ROWS[2], 3).problems
    assert problem["entry_point"] == "hypot"  # not the helper `_square` the code also defines
    assert problem["tests"] == [{"code": "from math import isclose\n\n" + "\n".join(ROWS[2]["test_list"])}]


@pytest.mark.parametrize("index", range(len(ROWS)))
def test_every_reference_passes_its_own_tests(index: int) -> None:
    (problem,) = load("mbpp", ROWS[index], index + 1).problems
    for test in problem["tests"]:
        assert passes(problem["references"][0]["source_code"], test["code"], problem["entry_point"])
    assert not passes(
        "def square_perimeter(a):\n    return a\n",
        load("mbpp", ROWS[1], 2).problems[0]["tests"][0]["code"],
        "square_perimeter",
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"task_id": None}, "task_id"),
        ({"text": ""}, "text"),
        ({"code": "def f(:"}, "code"),
        ({"test_list": []}, "test_list"),
        ({"test_list": ["assert x ==="]}, "test_list[0]"),
        ({"test_list": ["assert other(1) == 2"]}, "test_list"),
        ({"test_list": "assert f(1)"}, "test_list"),
        ({"challenge_test_list": [3]}, "challenge_test_list[0]"),
    ],
)
def test_a_bad_row_names_its_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as caught:
        load("mbpp", {**ROWS[1], **change}, 2)
    assert caught.value.field == field
