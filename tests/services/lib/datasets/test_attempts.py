"""The attempts loader (paper 001's shape): participant, turn, context and labels carried onto attempt bodies."""

from __future__ import annotations

import pytest

from services.lib.datasets import RecordError, load
from tests.services.lib.datasets.helpers import records

ROWS = records("attempts")


def test_a_study_attempt_keeps_participant_turn_context_and_labels() -> None:
    (attempt,) = load("attempts", ROWS[0], 1).attempts
    assert attempt == {
        "problem_id": "MBPP/17",
        "language": "python",
        "source_code": ROWS[0]["source_code"],
        "participant": "p01",
        "context": "first try",
        "turn": 0,
        "label": {"verdict": "WA", "score": 1},
        "attempt_uid": attempt["attempt_uid"],
    }
    assert load("attempts", ROWS[0], 1).attempts[0]["attempt_uid"] == attempt["attempt_uid"]
    assert load("attempts", ROWS[0], 2).attempts[0]["attempt_uid"] != attempt["attempt_uid"]


def test_code_is_source_code_and_a_given_uid_is_kept() -> None:
    (second,) = load("attempts", ROWS[1], 2).attempts
    assert second["source_code"] == ROWS[1]["code"] and second["submitted_at"] == "2024-05-01T10:00:00Z"
    assert second["label"] == {"verdict": "AC", "score": 5} and second["turn"] == 1
    assert load("attempts", ROWS[2], 3).attempts[0]["attempt_uid"] == "study-7"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"problem_id": None}, "problem_id"),
        ({"source_code": ""}, "source_code"),
        ({"turn": -1}, "turn"),
        ({"turn": "1"}, "turn"),
        ({"labels": {"verdict": "OK"}}, "labels.verdict"),
        ({"labels": {"score": "high"}}, "labels.score"),
        ({"labels": {"grade": 3}}, "labels.grade"),
        ({"labels": 5}, "labels"),
        ({"language": "cobol"}, "language"),
        ({"participant": 7}, "participant"),
    ],
)
def test_a_bad_attempt_names_its_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as caught:
        load("attempts", {**ROWS[0], **change}, 1)
    assert caught.value.field == field
