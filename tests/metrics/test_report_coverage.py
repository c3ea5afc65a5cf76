"""Every report lists every judge with its counts of ok, failed and not-applicable rows (metrics.reports.coverage),
and a judge with no ok row still appears, with the reason it has no figures; only ok rows are scored."""

from __future__ import annotations

from typing import Any

import pytest

from metrics.html import render_html
from metrics.reports import KINDS, build_report

JUDGES = ("alpha", "refsim", "broken")


def _rows() -> list[dict[str, Any]]:
    """40 labelled attempts: alpha scores each (ok, informative), refsim does not apply to any (no reference) and
    broken fails on 3 and does not apply to 1."""
    rows: list[dict[str, Any]] = []
    for i in range(40):
        label = i % 2
        base = {
            "attempt_id": f"a{i}",
            "problem_id": f"p{i % 8}",
            "participant": f"u{i % 5}",
            "turn": i // 5 + 1,
            "trajectory": f"u{i % 5}|p{i % 8}",
            "label_ac": label,
            "label_score": float(label * 5),
            "condition": "blind",
            "repeat": 0,
            "parent_attempt_id": None,
            "verdict": "AC" if label else "WA",
            "passed": 3 * label,
            "total": 3,
        }
        p = 0.2 + 0.6 * label if i % 7 else 0.5
        rows.append({**base, "judge": "alpha", "status": "ok", "p_ac": p, "score": round(5 * p), "error": None})
        na = {"status": "not_applicable", "p_ac": None, "score": None, "error": "no reference solution in python"}
        rows.append({**base, "judge": "refsim", **na})
        if i < 4:
            failed = {"status": "failed", "p_ac": None, "score": None, "error": "unavailable: lint: pylint timed out"}
            rows.append({**base, "judge": "broken", **(failed if i < 3 else na)})
    return rows


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "similarity"])
def test_every_kind_lists_every_judge_with_its_counts(kind: str) -> None:
    report = build_report(kind, _rows(), {"bootstrap": 20, "folds": 3}, configured_judges=[*JUDGES, "idle"]).to_json()
    rows = {row["judge"]: row for row in report["tables"]["judge_rows"]["rows"]}
    assert list(rows) == [*JUDGES, "idle"]
    counts = {judge: (r["ok"], r["failed"], r["not_applicable"], r["rows"]) for judge, r in rows.items()}
    assert counts == {"alpha": (40, 0, 0, 40), "refsim": (0, 0, 40, 40), "broken": (0, 3, 1, 4), "idle": (0, 0, 0, 0)}
    assert rows["alpha"]["note"] is None
    assert rows["refsim"]["note"] == (
        'no ok rows, so no figures: it does not apply to 40 of its rows (most often "no reference solution in '
        'python", 40 rows)'
    )
    assert "it failed on 3" in rows["broken"]["note"] and "pylint timed out" in rows["broken"]["note"]
    assert rows["idle"]["note"].startswith("no rows")
    (section,) = [s for s in report["sections"] if s["id"] == "judge_rows"]
    assert section["tables"] == ["judge_rows"] and "refsim" in section["note"] and "alpha" not in section["note"]
    page = render_html(report, {}, "t")
    assert "Judges and their rows" in page and "no reference solution in python" in page


def test_only_ok_rows_are_scored() -> None:
    """refsim's and broken's rows carry no score and never reach the metrics: the judge-quality table has alpha
    alone, on its 40 attempts, exactly as if the other rows were not there."""
    rows = _rows()
    report = build_report("judge_quality", rows, {"bootstrap": 20, "folds": 3}, configured_judges=JUDGES).to_json()
    alone = build_report("judge_quality", [r for r in rows if r["judge"] == "alpha"], {"bootstrap": 20, "folds": 3})
    metrics = report["tables"]["metrics"]["rows"]
    assert {row["judge"] for row in metrics} == {"alpha"}
    assert [row for row in metrics if row["judge"] == "alpha"][0]["n"] == 40
    assert metrics == alone.to_json()["tables"]["metrics"]["rows"]


def test_rows_that_are_not_judgments_get_no_judge_section() -> None:
    pairs = [{"pair_id": "x", "problem_id": "p", "attempt_id": "x", "trajectory": "x"}]
    assert "judge_rows" not in build_report("pass_at_k", pairs, {}).to_json()["tables"]
