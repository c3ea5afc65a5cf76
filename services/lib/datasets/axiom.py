"""AXIOM records (inst, code, lang, score) as a problem from the instruction and a labelled attempt.

The problem has no tests (statement = inst; its id is derived from inst, so every record of one instruction shares
it); the attempt carries AXIOM's 0-5 score as its label (`label: {"score": score}`, docs/api.md).
"""

from __future__ import annotations

from typing import Any

from services.lib.datasets.records import Bodies, RecordError, attempt_uid, digest, language, text


def load(record: dict[str, Any], line: int) -> Bodies:
    """One AXIOM record: the problem `AXIOM/<digest of inst>` and the attempt of `code` in `lang`, labelled.

    Raises:
        RecordError: `inst` or `code` missing or blank, an unknown `lang`, a `score` not a number in 0..5.
    """
    inst = text(record, "inst")
    code = text(record, "code")
    lang = language(record, "lang")
    score = record.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise RecordError("score", "missing" if score is None else f"expected a number, got {type(score).__name__}")
    if not 0 <= score <= 5:
        raise RecordError("score", f"expected 0..5, got {score}")
    problem_id = f"AXIOM/{digest(inst)}"
    title = inst.strip().splitlines()[0][:200]
    problem = {"problem_id": problem_id, "title": title, "statement": inst}
    attempt = {
        "attempt_uid": attempt_uid(problem_id, line, code, lang, score),
        "problem_id": problem_id,
        "language": lang,
        "source_code": code,
        "label": {"score": score},
    }
    return Bodies(problems=[problem], attempts=[attempt])
