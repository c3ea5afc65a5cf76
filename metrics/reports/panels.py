"""The ``panels`` report: panels that know their judges (issue 24 item 3; paper 001 VI-A10 and VIII).

Per condition, over the labelled attempts (mutants left out) that every used judge scored:

- ``panel_members`` (``condition, judge, status, reason, items``): every judge of the rows, ``used`` or ``left_out``
  with why (``failed``, ``not_applicable``, ``no score``): a judge is never dropped silently.
- ``error_correlation`` (``condition, judge_a, judge_b, n, clusters, correlation``): the pooled within-class
  correlation of the judges' probability errors ``p - y`` (:mod:`metrics.panels`: dependence given the truth), and
  ``effective_judges`` (``condition, judges, n, clusters, effective_judges``): the participation ratio
  ``N^2 / sum r_ij^2``, with a cluster-bootstrap interval.
- ``panel_comparison`` (``condition, panel, members, n, clusters, roc_auc, log_loss``): the unweighted percentile-
  rank panel, the out-of-fold skill-weighted, stacked and selected (at most ``k`` judges, for every ``k``) panels,
  and the best single judge (highest in-sample ROC-AUC, which favours it); log-loss only for probabilities.
- ``panel_differences`` (``condition, difference, n, clusters, roc_auc, log_loss``): every learned panel minus the
  unweighted panel and minus the best single judge, paired on the same cluster-bootstrap resamples (ROC-AUC), and
  the probability panels minus the best single judge (log-loss; lower is better, so a negative difference favours
  the panel).

Plot: ``error_correlation`` (judges x judges heatmap per condition, with n and clusters).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from metrics.bootstrap import bootstrap_loop, draw_resamples, summarise
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.panels import best_single, effective_judges, error_correlation, fit_panels, judge_errors, most_chosen
from metrics.registry import compare
from metrics.reports.common import (
    CLUSTERS,
    LABELS,
    Index,
    TidyRow,
    check_cluster,
    difference_rows,
    interval_text,
    names,
)
from metrics.reports.model import Cell, ErrorCorrelationHeatmap, Report, Row

KIND = "panels"
PANEL = "panel"
BEST = "best_single"
DEFINITION = "unweighted mean percentile rank, paper 001 VI-A10"
TITLES = {
    PANEL: "Unweighted percentile-rank panel (paper 001 VI-A10)",
    "weighted": "Skill-weighted mean probability (out of fold)",
    "stacked": "Stacked logistic regression (out of fold)",
    BEST: "Best single judge (in sample)",
}
REPORT_LABELS = {
    **LABELS,
    "status": "Status",
    "reason": "Reason",
    "items": "Items scored",
    "correlation": "Error correlation",
    "effective_judges": "Effective judges",
    "panel": "Panel",
    "members": "Members",
}


def _left_out_reason(rows: Sequence[TidyRow], judge: str, condition: str) -> str:
    """Why a judge has no score under a condition: the statuses of its repeat-0 rows of non-mutants."""
    statuses = Counter(
        str(r.get("status"))
        for r in rows
        if r.get("judge") == judge
        and r.get("condition") == condition
        and (r.get("repeat") or 0) == 0
        and not r.get("parent_attempt_id")
    )
    parts = [f"{status} ({statuses[status]} rows)" for status in ("failed", "not_applicable") if statuses[status]]
    return ", ".join(parts) or "no score"


def build(
    rows: Sequence[TidyRow],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    folds: int = 5,
    bootstrap: int = 2000,
    cluster: str = "trajectory",
    seed: int = 0,
    k: Sequence[int] | None = None,
) -> Report:
    """The panels report (module docstring); ``k``: the budgets of the selected panels (default 2 judges)."""
    cluster = check_cluster(cluster, CLUSTERS, "panels")
    budgets = sorted({int(v) for v in (k or [2])})
    index = Index(rows)
    judges = names(rows, "judge", judges)
    conditions = names([r for r in rows if not r.get("parent_attempt_id")], "condition", conditions)
    params = {"judges": judges, "conditions": conditions, "folds": folds, "bootstrap": bootstrap}
    report = Report(KIND, {**params, "cluster": cluster, "seed": seed, "k": budgets, "definition": DEFINITION})
    errors = report.errors
    members: list[Row] = []
    correlations: list[Row] = []
    effective: list[Row] = []
    comparison: list[Row] = []
    differences: list[Row] = []
    heatmap = ErrorCorrelationHeatmap("Error correlation between judges (p - label)", list(judges), {}, {})
    for condition in conditions:
        labelled = {
            j: {a: p for a, p in index.prob.get((j, condition), {}).items() if index.label(a) is not None}
            for j in judges
        }
        used = [j for j in judges if labelled[j]]
        for judge in judges:
            row: Row = {"condition": condition, "judge": judge, "items": len(labelled[judge])}
            if judge in used:
                row |= {"status": "used", "reason": None}
            else:
                row |= {"status": "left_out", "reason": _left_out_reason(rows, judge, condition)}
            members.append(row)
        common = sorted(set.intersection(*(set(labelled[j]) for j in used))) if used else []
        where = f"panels/{condition}"
        if len(used) < 2 or len(common) < 2:
            errors[where] = f"{len(used)} judge(s) with labelled scores on {len(common)} common attempts; need 2 and 2"
            continue
        matrix = np.array([[labelled[j][a] for a in common] for j in used])
        y = np.array([index.label(a) for a in common], dtype=np.int64)
        groups = index.clusters(common, cluster)
        n, n_clusters = len(common), len(set(groups))
        size = {"n": n, "clusters": n_clusters}
        err = judge_errors(matrix, y)
        corr = error_correlation(err, y)
        heatmap.labels[condition] = list(used)
        heatmap.conditions[condition] = [[None if np.isnan(v) else float(v) for v in r] for r in corr]
        heatmap.sizes[condition] = size
        draws = _resampled_correlations(err, y, groups, bootstrap, seed)
        for a in range(len(used)):
            for b in range(a + 1, len(used)):
                pair: Row = {"condition": condition, "judge_a": used[a], "judge_b": used[b], **size}
                if np.isnan(corr[a, b]):
                    errors[f"error_correlation/{condition}/{used[a]}/{used[b]}/correlation"] = "an error is constant"
                else:
                    pair["correlation"] = _cell(float(corr[a, b]), None if draws is None else draws[:, a, b])
                correlations.append(pair)
        effective.append(_effective_row(condition, used, corr, draws, size, errors))
        _compare_panels(
            condition, used, matrix, y, groups, size, folds, seed, bootstrap, budgets, comparison, differences, errors
        )
    report.add_table(
        "panel_members",
        "Which judges each panel used",
        ["condition", "judge", "status", "reason", "items"],
        members,
        REPORT_LABELS,
    )
    report.add_table(
        "error_correlation",
        "Error correlation between judges",
        ["condition", "judge_a", "judge_b", "n", "clusters", "correlation"],
        correlations,
        REPORT_LABELS,
    )
    report.add_table(
        "effective_judges",
        "Effective number of independent judges",
        ["condition", "judges", "n", "clusters", "effective_judges"],
        effective,
        REPORT_LABELS,
    )
    report.add_table(
        "panel_comparison",
        "Panels and the best single judge",
        ["condition", "panel", "members", "n", "clusters", "roc_auc", "log_loss"],
        comparison,
        REPORT_LABELS,
    )
    report.add_table(
        "panel_differences",
        "Paired differences (same resamples)",
        ["condition", "difference", "n", "clusters", "roc_auc", "log_loss"],
        differences,
        REPORT_LABELS,
    )
    if heatmap.conditions:
        report.plots["error_correlation"] = heatmap
    report.add_section(
        "panels",
        "Panels that know their judges",
        "The panel is the mean of each judge's percentile rank (paper 001 VI-A10); the members table says which "
        "judges it used and why any was left out. The error correlation compares the judges' mistakes (probability "
        "minus the true label, compared within the accepted and within the rejected attempts, so that the label "
        "itself does not make them look alike): judges that err together add little, which the effective number of "
        "independent judges counts (1 = one judge's worth, N = N independent judges). Weighted, stacked and "
        "selected panels are learned on other folds than the ones they score (folds grouped by cluster) and "
        "compared with the unweighted panel and the best single judge on the same resamples. Brackets are 95% "
        "intervals from a "
        f"{interval_text(cluster, bootstrap)}.",
        ["panel_members", "error_correlation", "effective_judges", "panel_comparison", "panel_differences"],
        ["error_correlation"],
        note=None if heatmap.conditions else "No data: fewer than two judges with labelled scores on common attempts.",
    )
    return report


def _resampled_correlations(
    err: np.ndarray, y: np.ndarray, groups: list[str], bootstrap: int, seed: int
) -> np.ndarray | None:
    """(resamples x judges x judges) error correlations on the cluster-bootstrap resamples (NaN where undefined);
    None without a bootstrap. One set of draws serves every pair and the effective number of judges."""
    if bootstrap <= 0:
        return None

    def resampled(items: np.ndarray, copy: np.ndarray) -> np.ndarray:
        return error_correlation(err[:, items], y[items])

    draws = bootstrap_loop(resampled, draw_resamples(groups, bootstrap, seed), groups)
    judges = err.shape[0]
    return np.stack([np.full((judges, judges), np.nan) if d is None else d for d in draws])


def _cell(value: float, distribution: np.ndarray | None) -> Cell:
    """A cell with the percentile interval of its resample values, when any is defined."""
    if distribution is None or not np.isfinite(distribution).any():
        return Cell.of(value)
    summary = summarise(distribution)
    return Cell.of(value, summary["ci"], summary["degenerate"])


def _effective_row(
    condition: str,
    used: list[str],
    corr: np.ndarray,
    draws: np.ndarray | None,
    size: dict[str, int],
    errors: dict[str, str],
) -> Row:
    """The effective number of judges, with the percentile interval of its cluster-bootstrap resamples."""
    row: Row = {"condition": condition, "judges": len(used), **size}
    where = f"effective_judges/{condition}/effective_judges"
    try:
        value = effective_judges(corr)
    except UndefinedMetricError as exc:
        errors[where] = str(exc)
        return row
    if draws is None:
        row["effective_judges"] = Cell.of(value)
        return row
    distribution = np.array([np.nan if np.isnan(m).any() else effective_judges(m) for m in draws])
    row["effective_judges"] = _cell(value, distribution)
    if not np.isfinite(distribution).any():
        errors[f"{where}/ci"] = "undefined on every bootstrap resample"
    return row


def _compare_panels(
    condition: str,
    used: list[str],
    matrix: np.ndarray,
    y: np.ndarray,
    groups: list[str],
    size: dict[str, int],
    folds: int,
    seed: int,
    bootstrap: int,
    budgets: list[int],
    comparison: list[Row],
    differences: list[Row],
    errors: dict[str, str],
) -> None:
    """The panel_comparison and panel_differences rows of one condition."""
    where = f"panel_comparison/{condition}"
    try:
        fit = fit_panels(matrix, y, groups, folds=folds, seed=seed, max_judges=budgets)
        best = best_single(matrix, y)
    except (MetricInputError, UndefinedMetricError) as exc:
        errors[where] = str(exc)
        return
    scores = {name: values.tolist() for name, values in fit.scores.items()}
    scores[BEST] = matrix[best].tolist()
    described = {PANEL: ", ".join(used), "weighted": ", ".join(used), "stacked": ", ".join(used), BEST: used[best]}
    for name, chosen in fit.selections.items():
        described[name] = ", ".join(used[m] for m in most_chosen(chosen)) + " (most folds)"
    learned = [name for name in scores if name not in (PANEL, BEST)]
    probabilistic = [*fit.probabilistic, BEST]
    shared: dict[str, Any] = {"groups": groups, "bootstrap": bootstrap, "cluster": groups, "seed": seed}
    try:
        ranking = compare(["roc_auc"], y, scores, pairs=[(p, q) for p in learned for q in (PANEL, BEST)], **shared)
        loss = compare(
            ["log_loss"],
            y,
            {p: scores[p] for p in probabilistic},
            pairs=[(p, BEST) for p in fit.probabilistic],
            **shared,
        )
    except (MetricInputError, UndefinedMetricError) as exc:
        errors[where] = str(exc)
        return
    for name in scores:
        title = TITLES.get(name, f"Selected: at most {name.removeprefix('selected_')} judges (out of fold)")
        row: Row = {"condition": condition, "panel": title, "members": described[name], **size}
        for metric, result in (("roc_auc", ranking), ("log_loss", loss)):
            value = result["values"].get(name, {}).get(metric)
            if value is None or not np.isfinite(value):
                if metric == "roc_auc" or name in probabilistic:
                    errors[f"{where}/{name}/{metric}"] = "not computed"
                continue
            row[metric] = Cell.of(
                float(value),
                result.get("ci", {}).get(name, {}).get(metric),
                result.get("degenerate", {}).get(name, {}).get(metric, False),
            )
        comparison.append(row)
    if bootstrap > 0:
        ident: Row = {"condition": condition}
        merged: dict[str, Row] = {}
        for metric, result in (("roc_auc", ranking), ("log_loss", loss)):
            for diff in difference_rows(
                result, [metric], ident, size["n"], "panel_differences", errors, size["clusters"]
            ):
                merged.setdefault(str(diff["difference"]), {}).update(diff)
        differences.extend(merged.values())
