"""Trust cards (metrics/reports/trust.py): one card per use with intervals, n, clusters, provenance and verdicts
against the operator's thresholds; the trust report kind and its HTML section."""

from __future__ import annotations

import pytest

from metrics.html import render_html
from metrics.reports import KINDS, build_report
from metrics.reports.model import Cell, Trust
from metrics.reports.trust import USES, judge_cards, verdict
from tests.metrics.test_reports import make_rows

THRESHOLDS = {"min_auc": 0.8, "min_mcc": 0.5, "min_arm_discrimination": 0.7, "min_axiom_mcc": 0.5, "max_flip_rate": 0.1}


def test_verdict_text_names_the_figure_its_interval_and_the_threshold() -> None:
    low = {"mcc_oof": Cell(0.41, 0.33, 0.49, n=200, clusters=40, trust=Trust.OK)}
    assert verdict("gating", low, THRESHOLDS) == ("unfit", "fit for gating: no, MCC 0.41 [0.33, 0.49] < 0.5")
    high = {"roc_auc": Cell(0.91, 0.87, 0.95, n=200, clusters=40, trust=Trust.OK)}
    assert verdict("ranking", high, THRESHOLDS) == ("fit", "fit for ranking: yes, ROC-AUC 0.91 [0.87, 0.95] >= 0.8")
    flips = {"flip_rate": Cell(0.2, 0.1, 0.3, n=50, clusters=12, trust=Trust.OK)}
    assert verdict("stability", flips, THRESHOLDS)[1] == "fit for stability: no, flip rate 0.20 [0.10, 0.30] > 0.1"
    few = {"mcc_oof": Cell(0.9, 0.8, 1.0, n=8, clusters=3, trust=Trust.TOO_FEW)}
    assert verdict("gating", few, THRESHOLDS) == ("too_few", "fit for gating: too few to judge (n=8, 3 clusters)")
    assert verdict("quality_grading", {}, THRESHOLDS) == ("no_data", "fit for quality grading: no data")


def test_cards_carry_intervals_n_clusters_provenance_and_verdicts() -> None:
    rows = make_rows(repeats=3)
    result = judge_cards(rows, "alpha", "blind", bootstrap=200, thresholds=THRESHOLDS, min_items=30, min_clusters=10)
    assert result["judge"] == "alpha" and [card["use"] for card in result["cards"]] == list(USES)
    cards = {card["use"]: card for card in result["cards"]}
    ranking = {f["name"]: f for f in cards["ranking"]["figures"]}
    assert set(ranking) == {"roc_auc", "pr_auc"}
    auc = ranking["roc_auc"]
    assert auc["ci"][0] <= auc["value"] <= auc["ci"][1] and auc["n"] > 30 and auc["clusters"] >= 10
    assert cards["ranking"]["status"] in ("fit", "unfit") and cards["ranking"]["verdict"].startswith("fit for ranking")
    assert {f["name"] for f in cards["gating"]["figures"]} == {"mcc_oof", "threshold"}
    stability = {f["name"]: f for f in cards["stability"]["figures"]}
    assert set(stability) == {"variance", "flip_rate", "noise_floor"}
    assert all(f["ci"] is not None and f["n"] == auc["n"] for f in stability.values())
    assert cards["stability"]["data"]["repeats"] == 3
    assert cards["stability"]["data"]["threshold_source"].startswith("the MCC-maximising")
    grading = {f["name"] for f in cards["quality_grading"]["figures"]}
    assert grading == {"axiom_gating", "axiom_functionality", "axiom_quality", "axiom_effort"}
    # No mutants in these rows: defect detection has no data, and says why.
    assert cards["defect_detection"]["status"] == "no_data" and cards["defect_detection"]["errors"]
    data = cards["ranking"]["data"]
    assert data["dataset"]["problems"] == 7 and data["dataset"]["problem_ids"][0] == "p0"
    assert data["conditions"] == ["blind", "nonblind"]


def test_a_judge_asked_once_has_no_stability_figures_and_says_why() -> None:
    cards = {c["use"]: c for c in judge_cards(make_rows(), "beta", "blind", bootstrap=50)["cards"]}
    assert cards["stability"]["status"] == "no_data"
    assert "two repeats" in cards["stability"]["errors"]["stability"]


def test_too_few_items_make_every_card_too_few() -> None:
    result = judge_cards(make_rows(n_traj=40), "alpha", "blind", bootstrap=50, min_items=10_000, min_clusters=1)
    statuses = {card["use"]: card["status"] for card in result["cards"]}
    assert statuses["ranking"] == statuses["gating"] == "too_few"


@pytest.mark.parametrize("repeats", [2])
def test_the_trust_report_kind_lists_cards_and_renders_them(repeats: int) -> None:
    assert "trust" in KINDS
    request = {"bootstrap": 100, "judges": ["alpha"], "min_items": 30, "min_clusters": 10}
    report = build_report("trust", make_rows(repeats=repeats), request).to_json()
    table = report["tables"]["trust_cards"]
    uses = {row["use"] for row in table["rows"]}
    assert uses == {u.replace("_", " ") for u in USES}
    valued = [row for row in table["rows"] if "value" in row]
    assert all({"n", "clusters", "trust"} <= set(row["value"]) for row in valued)
    page = render_html(report, {}, "trust")
    assert 'id="section-trust_cards"' in page and "fit for" not in page.split("section-trust_cards")[0]
    assert "yes, ROC-AUC" in page or "no, ROC-AUC" in page


def test_report_tables_stay_within_a_laptop_page() -> None:
    """No table wider than the page: tables scroll inside their own box and text cells (verdicts) wrap."""
    page = render_html(build_report("trust", make_rows(), {"bootstrap": 0, "judges": ["alpha"]}), {}, "trust")
    css = page.split("<style>", 1)[1].split("</style>", 1)[0]
    assert "table.data{border-collapse:collapse;" in css and "display:block;overflow-x:auto" in css
    assert "table.data{max-width:100%}" in css
    assert "table.data td.text{white-space:normal;overflow-wrap:anywhere;max-width:24rem}" in css
    assert "max-width:1200px" in css


def test_axiom_subtask_intervals_vectorised_equal_the_loop() -> None:
    """The weights-based AXIOM subtask MCC (what keeps a card over 10k rows fast) gives the same intervals as one
    scikit-learn call per resample."""
    import numpy as np

    from metrics.registry import compute

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 6, 300)
    scores = np.clip(truth + rng.integers(-1, 2, 300), 0, 5)
    request = {
        "y_true": truth.tolist(),
        "y_score": scores.tolist(),
        "cluster": [f"c{i % 60}" for i in range(300)],
        "bootstrap": 200,
        "seed": 1,
    }
    names = ["axiom_gating", "axiom_functionality", "axiom_quality", "axiom_effort"]
    fast, slow = compute(names, **request), compute(names, vectorised=False, **request)
    assert fast["values"] == slow["values"]
    for name in names:
        assert fast["ci"][name] == pytest.approx(slow["ci"][name], abs=1e-12)


def test_a_shift_bar_without_mutants_is_drawn_as_no_data_not_as_zero() -> None:
    """An operator with no scored mutant (count 0, no mean) is rendered (hatched, "no data") beside a real 0 bar;
    docs/img/trust_zero_vs_no_data.png is this plot."""
    import matplotlib.pyplot as plt

    from metrics import plots

    drawn: list[str] = []
    original = plt.Axes.text

    def record(self: plt.Axes, x: float, y: float, s: str, *args: object, **kwargs: object) -> object:
        drawn.append(s)
        return original(self, x, y, s, *args, **kwargs)

    panel = {"operators": ["a", "b", "c"], "mean_drop": [0.3, 0.0, None], "count": [5, 4, 0], "arm": ["semantic"] * 3}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plt.Axes, "text", record)
        shift = {"title": "shift", "panels": {"j / blind": {**panel, "control_band": None}}}
        png = plots.render("perturbation_shift", shift)
    assert png.startswith(b"\x89PNG") and drawn.count("no data") == 1 and drawn.count("0") == 1
