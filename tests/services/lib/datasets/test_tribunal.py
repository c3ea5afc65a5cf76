"""The tribunal loader: Tribunal's own problem and attempt bodies, one a line, checked lightly."""

from __future__ import annotations

import pytest

from services.lib.datasets import RecordError, load
from tests.services.lib.datasets.helpers import records

ROWS = records("tribunal")


def test_problems_and_attempts_pass_through() -> None:
    assert load("tribunal", ROWS[0], 1).problems == [ROWS[0]]
    assert load("tribunal", ROWS[1], 2).attempts == [ROWS[1]]


def test_an_attempt_without_uid_gets_a_deterministic_one() -> None:
    (attempt,) = load("tribunal", ROWS[2], 3).attempts
    assert attempt == {**ROWS[2], "attempt_uid": attempt["attempt_uid"]}
    assert load("tribunal", ROWS[2], 3).attempts[0]["attempt_uid"] == attempt["attempt_uid"]
    assert "attempt_uid" not in ROWS[2]  # the record itself is left as it was


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"title": "neither"}, "source_code"),
        ({**ROWS[0], "tests": {}}, "tests"),
        ({**ROWS[0], "tests": [1]}, "tests[0]"),
        ({**ROWS[0], "statement": None}, "statement"),
        ({**ROWS[1], "language": None}, "language"),
        ({**ROWS[1], "problem": {"statement": "x"}}, "problem_id"),
    ],
)
def test_a_bad_line_names_its_field(record: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as caught:
        load("tribunal", record, 1)
    assert caught.value.field == field
