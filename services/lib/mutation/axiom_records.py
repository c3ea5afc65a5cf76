"""AXIOM's benchmark items as data (paper 000, III-C2 and IV-B): which final score calibration may give a program,
the calibrated-score body, and the JSONL record shape of the export.

Pure (pydantic only), and in the mutation library rather than the perturb service so that the gateway, which
records calibrated scores and serves the export, can use it without importing a service. The perturb service's
`services/perturb/axiom/calibration.py` and `synthesis.py` re-export these names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RecordKind = Literal["reference", "exemplar", "deteriorative", "context_disruption"]


# --- III-C2: calibration -----------------------------------------------------------------------------------------


def allowed_scores(target_score: int) -> tuple[int, ...]:
    """The final scores calibration may give a program of this target score (III-C2). Its functional status is
    settled by the tests, so calibration moves a score only within its band: 1-2 (fails a test; structural vs
    localized repair), 3-5 (passes; code quality and the scope of its fixes). 0-point pairs are absolute (III-B4)."""
    if target_score == 0:
        return (0,)
    if target_score in (1, 2):
        return (1, 2)
    if target_score in (3, 4, 5):
        return (3, 4, 5)
    raise ValueError(f"a target score is 0..5, got {target_score}")


class CalibratedScore(BaseModel):
    """What the calibrated-score endpoint records: the annotator's final score s for a program (III-C2)."""

    model_config = ConfigDict(extra="forbid")

    score: int = Field(ge=0, le=5)
    annotator: str = Field(min_length=1, max_length=200)
    note: str | None = Field(default=None, max_length=4000)


def check_calibration(target_score: int, score: int) -> str | None:
    """None if `score` is a valid final score for a program of `target_score`, else the reason it is not."""
    allowed = allowed_scores(target_score)
    if score in allowed:
        return None
    return (
        f"a program of target score {target_score} can be calibrated to {', '.join(map(str, allowed))} only: its "
        "functional status is settled by its tests (III-C2)"
    )


# --- IV-B: the export --------------------------------------------------------------------------------------------


class AxiomRecord(BaseModel):
    """One benchmark item in AXIOM's record shape (`inst`, `code`, `lang`, `score`) plus provenance.

    `score` is the item's ground truth as AXIOM means it: the calibrated score when an annotator recorded one,
    else the target score s(p) (0 for a context-disruption pair). `target_score` keeps the synthesised score.
    """

    model_config = ConfigDict(extra="forbid")

    inst: str
    code: str
    lang: str
    score: int = Field(ge=0, le=5)
    target_score: int = Field(ge=0, le=5)
    rules: list[str]
    parent: str | None
    calibrated_score: int | None = Field(default=None, ge=0, le=5)
    kind: RecordKind


def export_record(
    *,
    inst: str,
    code: str,
    lang: str,
    target_score: int,
    rules: Iterable[str],
    parent: str | None,
    kind: RecordKind,
    calibrated_score: int | None = None,
) -> AxiomRecord:
    """One export record; `score` is `calibrated_score` if given, else `target_score`."""
    return AxiomRecord(
        inst=inst,
        code=code,
        lang=lang,
        score=calibrated_score if calibrated_score is not None else target_score,
        target_score=target_score,
        rules=list(rules),
        parent=parent,
        calibrated_score=calibrated_score,
        kind=kind,
    )


def to_jsonl(records: Iterable[AxiomRecord | Mapping[str, Any]]) -> str:
    """JSON Lines: one record per line, keys in AXIOM's order first, UTF-8 text kept as is."""
    lines = []
    for record in records:
        data = record.model_dump(mode="json") if isinstance(record, AxiomRecord) else dict(record)
        lines.append(json.dumps(data, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


# --- where a benchmark job keeps what it knows of a program (the attempt's `mutation` column) ---------------------

REFERENCES_KEY = "axiom_benchmarks"


def benchmark_entry(mutation: Mapping[str, Any] | None, job_id: str) -> dict[str, Any]:
    """What synthesis job `job_id` stored about a program: a program the job made keeps it in its own `axiom`
    record (`job_id` names the job); a reference program (a seed of the job, which may belong to several jobs)
    under `axiom_benchmarks[job_id]`. Empty if the job stored nothing."""
    mutation = mutation or {}
    record = mutation.get("axiom")
    if isinstance(record, Mapping) and record.get("job_id") == job_id:
        return dict(record)
    references = mutation.get(REFERENCES_KEY)
    entry = references.get(job_id) if isinstance(references, Mapping) else None
    return dict(entry) if isinstance(entry, Mapping) else {}


def with_benchmark_entry(mutation: Mapping[str, Any] | None, job_id: str, **updates: Any) -> dict[str, Any]:
    """A new `mutation` value with `updates` merged into what job `job_id` stores about the program (a new dict,
    so that an ORM JSON column sees the change)."""
    result = dict(mutation or {})
    record = result.get("axiom")
    if isinstance(record, Mapping) and record.get("job_id") == job_id:
        result["axiom"] = {**record, **updates}
        return result
    references = dict(result.get(REFERENCES_KEY) or {})
    references[job_id] = {**(references.get(job_id) or {}), **updates}
    result[REFERENCES_KEY] = references
    return result
