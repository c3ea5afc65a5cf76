"""Numbers that say how far they can be trusted (issue 23, item 7): every figure of every report kind carries its n
and clusters, a figure below the minimums is "too few to judge", and a degenerate interval says so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from metrics.bootstrap import is_degenerate, summarise
from metrics.html import format_cell, render_html
from metrics.plots import render
from metrics.registry import compute
from metrics.reports import KINDS, ReportParamError, build_report
from tests.metrics.test_reports import make_rows, similarity_rows

MINIMUMS = {"min_items": 30, "min_clusters": 10}


def metric_cells(report: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(table, row, cell) for every metric cell of a report's JSON."""
    for name, table in report["tables"].items():
        for row in table["rows"]:
            for value in row.values():
                if isinstance(value, dict) and "value" in value:
                    yield name, row, value


def four_attempts() -> list[dict[str, Any]]:
    """One judge that separates two accepted from two rejected attempts perfectly, each its own trajectory."""
    rows = []
    for i, (label, p) in enumerate([(1, 0.9), (1, 0.8), (0, 0.2), (0, 0.1)]):
        rows.append(
            {
                "attempt_id": f"a{i}",
                "problem_id": f"p{i}",
                "participant": "u",
                "turn": 1,
                "trajectory": f"u|p{i}",
                "label_ac": label,
                "label_score": None,
                "judge": "alpha",
                "condition": "blind",
                "repeat": 0,
                "status": "ok",
                "p_ac": p,
                "score": None,
                "parent_attempt_id": None,
            }
        )
    return rows


def test_a_report_over_four_attempts_is_too_few_to_judge_and_its_interval_degenerate() -> None:
    report = build_report("judge_quality", four_attempts(), {"bootstrap": 200, "folds": 2, **MINIMUMS}).to_json()
    row = report["tables"]["metrics"]["rows"][0]
    auc = row["roc_auc"]
    assert auc == {"value": 1.0, "ci": [1.0, 1.0], "degenerate": True, "n": 4, "clusters": 4, "trust": "too_few"}
    cells = list(metric_cells(report))
    assert cells and all(cell["trust"] == "too_few" for _, _, cell in cells)
    assert report["params"]["min_items"] == 30 and report["params"]["min_clusters"] == 10
    assert format_cell(auc) == "1.000 [1.000, 1.000] (degenerate interval; too few to judge (n=4, 4 clusters))"
    page = render_html(report, {}, "four attempts")
    assert '<td class="too-few" title="n = 4 items, 4 clusters">1.000 [1.000, 1.000]' in page
    assert '<span class="flag">degenerate interval</span>' in page
    assert '<span class="flag">too few to judge (n=4, 4 clusters)</span>' in page
    assert "fewer than 30 items or fewer than 10 clusters" in page
    # The ROC curve is drawn from the same four attempts, and its legend says so.
    curve = report["plots"]["roc"]["conditions"]["blind"]["alpha"]
    assert (curve["n"], curve["clusters"], curve["trust"]) == (4, 4, "too_few")
    assert render(report["plots"]["roc"]["type"], report["plots"]["roc"]).startswith(b"\x89PNG")


def test_a_report_over_enough_items_is_judged_ok_and_its_intervals_real() -> None:
    rows = make_rows()
    report = build_report("judge_quality", rows, {"bootstrap": 200, "folds": 5, **MINIMUMS}).to_json()
    table = report["tables"]["metrics"]["rows"]
    assert table and all(row["n"] >= 30 and row["clusters"] >= 10 for row in table)
    for _, row, cell in metric_cells(report):
        assert cell["trust"] == "ok", (row, cell)
    auc = next(row["roc_auc"] for row in table if row["judge"] == "alpha" and row["condition"] == "blind")
    assert auc["degenerate"] is False and auc["ci"][0] < auc["ci"][1]
    assert (auc["n"], auc["clusters"]) == (table[0]["n"], table[0]["clusters"])
    page = render_html(report, {}, "enough")
    assert 'class="too-few"' not in page and "too few to judge (" not in page
    # Enough items, yet alpha separates the classes perfectly without the blind condition's noise: every resample
    # has ROC-AUC 1, and the page says the interval is degenerate, not that the judge is measured to +-0.
    flat = [(row["judge"], row["condition"], key) for key, row in _degenerate(report["tables"]["metrics"]["rows"])]
    assert flat == [("alpha", "nonblind", "roc_auc"), ("alpha", "nonblind", "pr_auc")]
    assert page.count('<span class="flag">degenerate interval</span>') == 2


def _degenerate(rows: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(k, row) for row in rows for k, v in row.items() if isinstance(v, dict) and v.get("degenerate")]


@pytest.fixture(scope="module")
def kind_rows() -> dict[str, list[dict[str, Any]]]:
    judged = make_rows(repeats=2, mutants=True)
    executed = similarity_rows()
    return {kind: executed if kind in ("similarity", "pass_at_k") else judged for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_every_figure_of_every_kind_carries_n_and_clusters(kind: str, kind_rows: dict[str, Any]) -> None:
    report = build_report(kind, kind_rows[kind], {"bootstrap": 20, "folds": 3, **MINIMUMS}).to_json()
    cells = list(metric_cells(report))
    assert cells, f"{kind}: no figure to check"
    for table, row, cell in cells:
        assert isinstance(cell["n"], int) and isinstance(cell["clusters"], int), (kind, table, row)
        assert 1 <= cell["clusters"] <= cell["n"], (kind, table, row)
        if "ci" in cell:
            assert isinstance(cell["degenerate"], bool), (kind, table, row)
        if table == "pairs":  # one pair's own measurements: no minimum applies
            assert "trust" not in cell and (cell["n"], cell["clusters"]) == (1, 1)
            continue
        expected = "too_few" if cell["n"] < 30 or cell["clusters"] < 10 else "ok"
        assert cell["trust"] == expected, (kind, table, row)
        # A table that shows n and clusters shows the ones its figures were computed from.
        if kind != "perturbation" and isinstance(row.get("n"), int):
            assert (cell["n"], cell["clusters"]) == (row["n"], row["clusters"]), (kind, table, row)
    # Plots of an estimate (ROC curves, the co-creation curves) carry theirs too.
    for plot in report["plots"].values():
        if plot["type"] == "roc":
            curves = [curve for by in plot["conditions"].values() for curve in by.values()]
        else:
            curves = [plot] if plot["type"] in ("success_at_turn", "kaplan_meier") else []
        for curve in curves:
            assert curve["n"] >= curve["clusters"] >= 1 and curve["trust"] in ("ok", "too_few"), (kind, plot)


def test_without_minimums_figures_are_sized_but_not_judged() -> None:
    report = build_report("judge_quality", four_attempts(), {"bootstrap": 50, "folds": 2}).to_json()
    auc = report["tables"]["metrics"]["rows"][0]["roc_auc"]
    assert (auc["n"], auc["clusters"]) == (4, 4) and "trust" not in auc and "min_items" not in report["params"]


@pytest.mark.parametrize(
    ("request_", "field"),
    [({"min_items": 0, "min_clusters": 2}, "min_items"), ({"min_items": 5}, "min_clusters")],
)
def test_a_bad_minimum_is_refused_naming_it(request_: dict[str, Any], field: str) -> None:
    with pytest.raises(ReportParamError) as refused:
        build_report("judge_quality", four_attempts(), request_)
    assert refused.value.field == field and field in str(refused.value)


def test_degenerate_means_every_resample_equal_not_a_narrow_interval() -> None:
    assert is_degenerate([0.5] * 50 + [float("nan")])
    narrow = 0.5 + 1e-6 * np.arange(100)
    assert not is_degenerate(narrow)
    assert summarise(narrow)["degenerate"] is False and summarise([0.7] * 10)["degenerate"] is True
    assert not is_degenerate([float("nan")] * 3) and not is_degenerate([])
    # The registry's flag beside each interval, for scalar and dict metrics alike.
    y_true, y_score, tasks = [1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1], ["t0", "t1", "t2", "t3"]
    flat = compute(["roc_auc", "brier"], y_true, y_score, bootstrap=100)
    assert flat["degenerate"] == {"roc_auc": True, "brier": False}
    passk = compute(["pass_at_k"], [1, 0, 1, 1, 0, 0, 1, 0], groups=tasks * 2, bootstrap=100, cluster=tasks * 2)
    assert passk["degenerate"] == {"pass_at_k": {"1": False}}
