"""The axiom loader: a problem from the instruction (shared by its records) and an attempt labelled with the score."""

from __future__ import annotations

import pytest

from services.lib.datasets import RecordError, load
from tests.services.lib.datasets.helpers import records

ROWS = records("axiom")


def test_a_record_is_a_testless_problem_and_a_scored_attempt() -> None:
    bodies = load("axiom", ROWS[0], 1)
    (problem,) = bodies.problems
    (attempt,) = bodies.attempts
    assert problem["statement"] == ROWS[0]["inst"] and "tests" not in problem
    assert problem["problem_id"].startswith("AXIOM/")
    assert attempt["problem_id"] == problem["problem_id"]
    assert attempt["source_code"] == ROWS[0]["code"] and attempt["language"] == "python"
    assert attempt["label"] == {"score": 5}


def test_one_instruction_is_one_problem_and_the_language_is_spelled_tribunals_way() -> None:
    first, second, third = (load("axiom", row, n) for n, row in enumerate(ROWS, start=1))
    assert first.problems == second.problems and first.problems != third.problems
    assert first.attempts[0]["attempt_uid"] != second.attempts[0]["attempt_uid"]
    assert third.attempts[0]["language"] == "cpp"
    assert load("axiom", ROWS[0], 1) == first  # deterministic: a re-import names the same attempt


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"inst": ""}, "inst"),
        ({"code": None}, "code"),
        ({"lang": "cobol"}, "lang"),
        ({"score": 6}, "score"),
        ({"score": "5"}, "score"),
        ({"score": True}, "score"),
    ],
)
def test_a_bad_record_names_its_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as caught:
        load("axiom", {**ROWS[0], **change}, 1)
    assert caught.value.field == field
