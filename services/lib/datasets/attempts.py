"""Study attempts (paper 001's shape): a participant's programs at a problem, turn by turn, with the context they
worked in and their labels, as attempt bodies.

A record: `problem_id`, `source_code` (or `code`), `language` (python by default), optional `participant`, `turn`,
`context`, `submitted_at`, `labels` (or `label`: `{verdict, score}`), `attempt_uid` (or `id`), `judges`,
`conditions`, `repeats`. Without an attempt_uid one is derived from the line and the record.
"""

from __future__ import annotations

from typing import Any

from services.lib.datasets.records import Bodies, RecordError, attempt_uid, language, optional_text, text

VERDICTS = ("AC", "WA", "TLE", "MLE", "OLE", "RE", "CE", "IE")
PASSED_THROUGH = ("submitted_at", "judges", "conditions", "repeats")


def labels(record: dict[str, Any]) -> dict[str, Any] | None:
    """The record's `labels` (or `label`) as the API's label: `verdict` one of the verdicts, `score` a number."""
    name = "labels" if "labels" in record else "label"
    value = record.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordError(name, f"expected an object with verdict and/or score, got {type(value).__name__}")
    label: dict[str, Any] = {}
    verdict = value.get("verdict")
    if verdict is not None:
        if verdict not in VERDICTS:
            raise RecordError(f"{name}.verdict", f"expected one of {', '.join(VERDICTS)}, got {verdict!r}")
        label["verdict"] = verdict
    score = value.get("score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise RecordError(f"{name}.score", f"expected a number, got {type(score).__name__}")
        label["score"] = score
    unknown = sorted(set(value) - {"verdict", "score"})
    if unknown:
        raise RecordError(f"{name}.{unknown[0]}", "unknown label: an attempt's label holds verdict and score")
    return label


def load(record: dict[str, Any], line: int) -> Bodies:
    """One attempt body.

    Raises:
        RecordError: no `problem_id`, no program, an unknown language, a `turn` that is not a whole number >= 0,
            a label that is not a verdict or a number.
    """
    problem_id = text(record, "problem_id")
    source = text(record, "source_code" if "source_code" in record else "code")
    attempt: dict[str, Any] = {
        "problem_id": problem_id,
        "language": language(record, "language", "python"),
        "source_code": source,
    }
    for name in ("participant", "context"):
        value = optional_text(record, name, blank=True)
        if value is not None:
            attempt[name] = value
    turn = record.get("turn")
    if turn is not None:
        if isinstance(turn, bool) or not isinstance(turn, int) or turn < 0:
            raise RecordError("turn", f"expected a whole number >= 0, got {turn!r}")
        attempt["turn"] = turn
    label = labels(record)
    if label is not None:
        attempt["label"] = label
    for name in PASSED_THROUGH:
        if record.get(name) is not None:
            attempt[name] = record[name]
    uid = optional_text(record, "attempt_uid") or (str(record["id"]) if record.get("id") is not None else None)
    attempt["attempt_uid"] = uid or attempt_uid(problem_id, line, attempt)
    return Bodies(attempts=[attempt])
