"""Tribunal's own bodies, one a line: a problem (`problem_id` and `tests`: a `POST /v1/problems` body) or an
attempt (`source_code`: an item of `POST /v1/attempts:batch`). Checked lightly; the API validates fully."""

from __future__ import annotations

from typing import Any

from services.lib.datasets.records import Bodies, RecordError, attempt_uid, optional_text, text


def load(record: dict[str, Any], line: int) -> Bodies:
    """A problem or an attempt body, as it is; an attempt without `attempt_uid` gets one derived from its line and
    content, so that importing the file again creates nothing twice.

    Raises:
        RecordError: the line is neither, or a field the API needs first is missing or of the wrong type.
    """
    if "source_code" in record:
        text(record, "source_code")
        text(record, "language")
        if (record.get("problem_id") is None) == (record.get("problem") is None):
            raise RecordError("problem_id", "an attempt names exactly one of problem_id and problem")
        if record.get("problem") is not None and not isinstance(record["problem"], dict):
            raise RecordError("problem", "expected a problem object")
        if optional_text(record, "attempt_uid") is None:
            record = {**record, "attempt_uid": attempt_uid("tribunal", line, record)}
        return Bodies(attempts=[record])
    if "problem_id" in record and "tests" in record:
        text(record, "problem_id")
        text(record, "statement")
        if not isinstance(record["tests"], list):
            raise RecordError("tests", f"expected a list of tests, got {type(record['tests']).__name__}")
        for index, test in enumerate(record["tests"]):
            if not isinstance(test, dict):
                raise RecordError(f"tests[{index}]", f"expected a test object, got {type(test).__name__}")
        return Bodies(problems=[record])
    raise RecordError("source_code", "neither a problem (problem_id and tests) nor an attempt (source_code)")
