"""The ``panels`` report (metrics/reports/panels.py): members, error correlation, N_eff, learned panels compared."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from metrics.html import render_html
from metrics.panel import percentile_ranks
from metrics.panels import effective_judges, error_correlation, judge_errors
from metrics.plots import render_all
from metrics.registry import compare
from metrics.reports import build_report
from tests.metrics.test_reports import make_rows

BOOT = 60


@pytest.fixture(scope="module")
def table() -> list[dict[str, Any]]:
    rows = make_rows(seed=2)
    # A judge that failed everywhere under blind and one that does not apply: both are named, never dropped.
    first = rows[0]
    rows.append({**first, "judge": "epsilon", "status": "not_applicable", "p_ac": None, "score": None})
    return rows


@pytest.fixture(scope="module")
def report(table: list[dict[str, Any]]) -> dict[str, Any]:
    built = build_report(
        "panels", table, {"bootstrap": BOOT, "folds": 3, "k": [1, 2], "min_items": 10, "min_clusters": 5}
    )
    out = built.to_json()
    json.dumps(out, allow_nan=False)
    return out


def _blind(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [r for r in report["tables"][name]["rows"] if r["condition"] == "blind"]


def test_members_say_who_was_used_and_why_others_were_not(report: dict[str, Any]) -> None:
    members = {r["judge"]: r for r in _blind(report, "panel_members")}
    assert {j for j, r in members.items() if r["status"] == "used"} == {"alpha", "beta", "gamma"}
    assert members["delta"]["status"] == "left_out" and members["delta"]["reason"] == "failed (1 rows)"
    assert members["epsilon"]["reason"] == "not_applicable (1 rows)"
    assert report["params"]["definition"] == "unweighted mean percentile rank, paper 001 VI-A10"


def test_error_correlation_and_effective_judges_match_the_library(
    table: list[dict[str, Any]], report: dict[str, Any]
) -> None:
    rows = [r for r in table if r["condition"] == "blind" and r["status"] == "ok" and r["repeat"] == 0]
    by = {(r["judge"], r["attempt_id"]): (r["p_ac"] if r["p_ac"] is not None else r["score"] / 5) for r in rows}
    attempts = sorted({r["attempt_id"] for r in rows})
    labels = {r["attempt_id"]: r["label_ac"] for r in rows}
    matrix = np.array([[by[(j, a)] for a in attempts] for j in ("alpha", "beta", "gamma")])
    y = [labels[a] for a in attempts]
    corr = error_correlation(judge_errors(matrix, y), y)
    pair = next(r for r in _blind(report, "error_correlation") if (r["judge_a"], r["judge_b"]) == ("alpha", "beta"))
    assert pair["correlation"]["value"] == pytest.approx(corr[0, 1])
    assert pair["n"] == len(attempts) and pair["correlation"]["n"] == len(attempts)
    lo, hi = pair["correlation"]["ci"]
    assert -1 <= lo <= pair["correlation"]["value"] <= hi <= 1
    effective = _blind(report, "effective_judges")[0]
    cell = effective["effective_judges"]
    assert cell["value"] == pytest.approx(effective_judges(corr))
    assert 1.0 <= cell["value"] <= 3.0 and cell["ci"][0] <= cell["value"] <= cell["ci"][1]
    assert cell["clusters"] == effective["clusters"] and cell["trust"] == "ok"
    heatmap = report["plots"]["error_correlation"]
    assert heatmap["labels"]["blind"] == ["alpha", "beta", "gamma"]
    assert heatmap["sizes"]["blind"] == {"n": len(attempts), "clusters": effective["clusters"]}
    # The unweighted panel's ROC-AUC is the registry's on the mean percentile rank.
    ranks = np.vstack([percentile_ranks(r) for r in matrix]).mean(axis=0)
    expected = compare(["roc_auc"], [labels[a] for a in attempts], {"panel": ranks.tolist()}, bootstrap=0)
    panel = next(r for r in _blind(report, "panel_comparison") if r["panel"].startswith("Unweighted"))
    assert panel["roc_auc"]["value"] == pytest.approx(expected["values"]["panel"]["roc_auc"])
    assert "log_loss" not in panel  # a rank is not a probability


def test_learned_panels_are_compared_on_the_same_resamples(report: dict[str, Any]) -> None:
    comparison = {r["panel"]: r for r in _blind(report, "panel_comparison")}
    assert len(comparison) == 6  # panel, weighted, stacked, selected_1, selected_2, best single
    best = comparison["Best single judge (in sample)"]
    assert best["members"] == "alpha" and "log_loss" in best
    assert comparison["Selected: at most 1 judges (out of fold)"]["members"] == "alpha (most folds)"
    differences = {r["difference"]: r for r in _blind(report, "panel_differences")}
    assert {"stacked - panel", "stacked - best_single", "weighted - best_single", "selected_2 - panel"} <= set(
        differences
    )
    stacked = differences["stacked - best_single"]
    assert {"roc_auc", "log_loss"} <= set(stacked) and stacked["roc_auc"]["n"] == best["n"]
    assert "log_loss" not in differences["selected_2 - panel"]
    for row in differences.values():
        lo, hi = row["roc_auc"]["ci"]
        assert lo <= hi


def test_the_plot_and_page_render(report: dict[str, Any]) -> None:
    images = render_all(report)
    assert set(images) == {"error_correlation"}
    page = render_html(report, images, "panels")
    assert "Which judges each panel used" in page and "not_applicable (1 rows)" in page


def test_too_few_judges_says_so() -> None:
    rows = [r for r in make_rows(seed=1, n_traj=10) if r["judge"] == "alpha"]
    out = build_report("panels", rows, {"bootstrap": 10}).to_json()
    assert out["sections"][0]["note"].startswith("No data")
    assert "need 2" in out["errors"]["panels/blind"]
