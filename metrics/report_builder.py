"""Build the metrics service's reports (api.md "Metrics", ``POST /v1/reports`` kinds) from a tidy judgment table.

Pure: python data in, JSON-able dicts out. Every number comes from the metric library (``metrics.registry`` and the
modules it wraps); this module only selects rows, aligns arrays and lays the results out.

Input: the tidy judgment table
    A list of dicts, one per stored judgment row, with the keys ``attempt_id, problem_id, participant, turn,
    trajectory, label_ac, label_score, judge, condition, repeat, status, p_ac, score, parent_attempt_id, operator,
    arm, severity``. Only ``status == "ok"`` rows with ``repeat == 0`` are scored, except the consistency part of
    :func:`agreement`, which reads every repeat. A judge's probability for an attempt is ``p_ac`` when present, else
    ``score / 5`` (the 0..5 rubric score read as a probability); a row with neither is left out. Perturbation
    mutants (rows with a ``parent_attempt_id``) are read by :func:`perturbation` only; every other builder ignores
    them.

Output: every builder returns one report
    ``{"kind", "params", "generated_at", "sections", "tables", "plots", "errors"}``:

    - ``params``: the arguments the report was built with (and the bootstrap actually used).
    - ``sections``: ``[{"id", "title", "explanation", "tables": [table name], "plots": [plot name]}]`` in reading
      order; ``explanation`` says in plain language what the numbers mean.
    - ``tables``: ``{name: {"title", "columns": [{"key", "label"}], "rows": [row]}}``. A row is a dict keyed by the
      column keys. A cell is a plain value (str / int / float / None for "not applicable", e.g. a judge name or a
      count) or a metric cell ``{"value": float, "ci": [lo, hi]}`` (``ci`` absent when no interval could be
      computed). A metric that cannot be computed is ABSENT from its row, and ``errors`` says why.
    - ``plots``: ``{name: plot data}``, each with ``"type"`` (the renderer in :mod:`metrics.plots`) and ``"title"``.
    - ``errors``: ``{where: reason}``; ``where`` is ``"<table>/<row identifiers>/<column>"`` for a missing cell (with a
      ``/ci`` suffix when only the interval is missing), or a section name for a whole missing part.

    Intervals are 95% cluster-bootstrap percentile intervals (``bootstrap`` resamples, ``seed``), clustered by
    ``cluster``: the trajectory (participant x problem, the unit of dependence, paper 001 IV-C2), the problem (the
    robustness check), or the seed program for perturbation mutants. Paired differences are computed on the same
    resamples (``metrics.registry.compare``).

Plot data (``report["plots"]``; rendered by :func:`metrics.plots.render`)
    - ``roc``: ``{"conditions": {condition: {judge: {"fpr": [...], "tpr": [...], "auc"}}}}`` (panel included).
    - ``reliability``: ``{"bins": 15, "judges": {judge: {condition: [calibration.reliability_diagram bins]}}}``.
    - ``kappa_heatmap``: ``{"judges", "labels": {condition: [judge]}, "conditions": {condition: matrix}}``, matrix
      rows/columns in ``labels[condition]`` order, None where kappa is undefined.
    - ``success_at_turn`` / ``kaplan_meier``: ``{"turns", "value", "lo", "hi"}`` (lo/hi None without interval).
    - ``perturbation_shift``: ``{"panels": {"judge / condition": {"operators", "mean_drop", "count", "arm",
      "control_band": [lo, hi] | None}}}``.
    - ``similarity_scatter``: ``{"surface_similarity", "df_score", "thresholds": {x_lo, x_hi, y_lo, y_hi} | None}``.

judge_quality tables (what a caller reads to print the main table)
    ``tables["metrics"]["rows"]``: one row per judge x condition (the panel as judge ``"panel"``) with keys
    ``judge, condition, n, positives`` and, per metric in ``JUDGE_QUALITY_METRICS`` (``roc_auc, pr_auc, log_loss,
    brier, ece, mcc_oof``), a cell ``{"value": v, "ci": [lo, hi]}``; e.g. ``row["roc_auc"]["value"]``.
    ``tables["condition_differences"]`` (``judge, difference, n`` + metric cells ``a - b``) and
    ``tables["panel_differences"]`` (``condition, difference, n`` + metric cells ``judge - panel``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from itertools import combinations
from typing import Any

import numpy as np
from sklearn.metrics import roc_curve

from metrics import axiom as axiom_lib
from metrics import calibration, panel
from metrics import similarity as similarity_lib
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.registry import compare, compute

Row = Mapping[str, Any]
Report = dict[str, Any]

JUDGE_QUALITY_METRICS = ("roc_auc", "pr_auc", "log_loss", "brier", "ece", "mcc_oof")
PANEL_METRICS = ("roc_auc", "pr_auc", "mcc_oof")  # the panel is a percentile rank, not a probability
PANEL = "panel"
ECE_BINS = 15
CLUSTERS = ("trajectory", "problem", "seed")
AXIOM_METRICS = (
    "axiom_gating",
    "axiom_functionality",
    "axiom_quality",
    "axiom_effort",
    "spearman",
    "kendall_tau",
    "krippendorff_alpha",
    "emd",
    "mean",
    "entropy",
)

_LABELS = {
    "judge": "Judge",
    "condition": "Condition",
    "n": "n",
    "positives": "Accepted",
    "roc_auc": "ROC-AUC",
    "pr_auc": "PR-AUC",
    "log_loss": "LogLoss",
    "brier": "Brier",
    "ece": "ECE (15 bins)",
    "mcc_oof": "MCC (out-of-fold)",
    "difference": "Difference",
    "cohen_kappa": "Cohen's kappa (median cut)",
    "spearman": "Spearman rho",
    "kendall_tau": "Kendall tau-b",
    "fleiss_kappa": "Fleiss' kappa (median cut)",
    "krippendorff_alpha": "Krippendorff's alpha",
    "icc": "ICC(2,1)",
    "axiom_gating": "MCC gating",
    "axiom_functionality": "MCC functionality",
    "axiom_quality": "MCC quality",
    "axiom_effort": "MCC effort",
    "emd": "EMD",
    "mean": "Mean score",
    "entropy": "Entropy",
    "mae": "MAE vs df_score",
    "distinguishability": "Distinguishability",
    "trajectories": "Trajectories",
    "attempts": "Attempts",
    "solved": "Solved",
    "success_after_failure": "Success after initial failure",
    "turn": "Turn",
    "success_at_turn": "Success@Turn",
    "unsolved_km": "Unsolved (Kaplan-Meier)",
    "judge_a": "Judge A",
    "judge_b": "Judge B",
    "judges": "Judges",
    "repeats": "Repeats",
    "scale": "Judge scale",
    "mutants": "Mutants",
    "primary": "Primary subset",
    "arm_discrimination": "Arm discrimination A_j",
    "semantic_share": "Semantic reacted share",
    "semantic_reacted": "Semantic reacted",
    "control_share": "Control reacted share",
    "control_reacted": "Control reacted",
    "severity_gradient": "Severity gradient rho",
    "metric": "Metric",
    "region": "Region",
    "pairs": "Pairs",
}


# --------------------------------------------------------------------------------------------------- helpers


def probability(row: Row) -> float | None:
    """A judge's acceptance probability for a row: ``p_ac`` when present, else ``score / 5``, else None."""
    if row.get("p_ac") is not None:
        return float(row["p_ac"])
    if row.get("score") is not None:
        return float(row["score"]) / 5.0
    return None


def _scored(rows: Iterable[Row], mutants: bool = False) -> list[Row]:
    """Rows that score: ok, repeat 0, and (unless ``mutants``) not a perturbation mutant."""
    return [
        r
        for r in rows
        if r.get("status") == "ok" and (r.get("repeat") or 0) == 0 and (mutants or not r.get("parent_attempt_id"))
    ]


def _check_cluster(cluster: str) -> str:
    if cluster not in CLUSTERS:
        raise MetricInputError(f"cluster must be one of {', '.join(CLUSTERS)}, got {cluster!r}")
    return cluster


def _cluster_of(row: Row, cluster: str) -> str:
    if cluster == "problem":
        return str(row.get("problem_id"))
    if cluster == "seed":
        return str(row.get("parent_attempt_id") or row.get("attempt_id"))
    return str(row.get("trajectory") or row.get("attempt_id"))


def _names(rows: Sequence[Row], key: str, chosen: Sequence[str] | None) -> list[str]:
    if chosen is not None:
        return list(chosen)
    return sorted({str(r[key]) for r in rows if r.get(key) is not None})


def _new_report(kind: str, params: dict[str, Any]) -> Report:
    return {
        "kind": kind,
        "params": params,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "sections": [],
        "tables": {},
        "plots": {},
        "errors": {},
    }


def _table(title: str, keys: Sequence[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"title": title, "columns": [{"key": k, "label": _LABELS.get(k, k)} for k in keys], "rows": rows}


def _section(
    report: Report, sid: str, title: str, explanation: str, tables: Sequence[str], plots: Sequence[str]
) -> None:
    report["sections"].append(
        {
            "id": sid,
            "title": title,
            "explanation": explanation,
            "tables": [t for t in tables if t in report["tables"]],
            "plots": [p for p in plots if p in report["plots"]],
        }
    )


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(float(value))


def _cells(
    metrics: Sequence[str],
    values: Mapping[str, Any],
    ci: Mapping[str, Any],
    errs: Mapping[str, str],
    ci_errs: Mapping[str, str],
    where: str,
    errors: dict[str, str],
    bootstrap: int,
) -> dict[str, Any]:
    """Metric cells ``{"value", "ci"}`` for scalar metrics; reasons for the missing ones go to ``errors``."""
    cells: dict[str, Any] = {}
    for metric in metrics:
        value = values.get(metric)
        if not _finite(value):
            errors[f"{where}/{metric}"] = errs.get(metric, "not computed")
            continue
        cell: dict[str, Any] = {"value": float(values[metric])}
        interval = ci.get(metric)
        if isinstance(interval, list | tuple) and len(interval) == 2 and all(_finite(v) for v in interval):
            cell["ci"] = [float(interval[0]), float(interval[1])]
        elif bootstrap > 0:
            errors[f"{where}/{metric}/ci"] = ci_errs.get(metric, "no bootstrap interval")
        cells[metric] = cell
    return cells


def _compute_cells(
    metrics: Sequence[str], where: str, errors: dict[str, str], bootstrap: int, **kwargs: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``registry.compute`` turned into scalar cells; also returns the raw result (empty on a refused input)."""
    try:
        result = compute(list(metrics), bootstrap=bootstrap, **kwargs)
    except (MetricInputError, UndefinedMetricError) as exc:
        for metric in metrics:
            errors[f"{where}/{metric}"] = str(exc)
        return {}, {}
    scalar = [m for m in metrics if not isinstance(result["values"].get(m), dict)]
    cells = _cells(
        scalar,
        result["values"],
        result.get("ci", {}),
        result.get("errors", {}),
        result.get("ci_errors", {}),
        where,
        errors,
        bootstrap,
    )
    return cells, result


def _difference_rows(
    result: Mapping[str, Any], metrics: Sequence[str], ident: dict[str, Any], n: int, table: str, errors: dict[str, str]
) -> list[dict[str, Any]]:
    rows = []
    for label, by_metric in result.get("differences", {}).items():
        row: dict[str, Any] = {**ident, "difference": label, "n": n}
        where = "/".join([table, *map(str, ident.values()), label])
        for metric in metrics:
            entry = by_metric.get(metric)
            if entry and _finite(entry.get("value")) and all(_finite(v) for v in entry.get("ci", [])):
                row[metric] = {"value": float(entry["value"]), "ci": [float(v) for v in entry["ci"]]}
            else:
                errors[f"{where}/{metric}"] = "undefined for one of the two sides on the full sample or every resample"
        rows.append(row)
    return rows


class _Index:
    """Scored rows of a table indexed by judge x condition x attempt, with per-attempt facts."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.prob: dict[tuple[str, str], dict[str, float]] = {}
        self.raw_score: dict[tuple[str, str], dict[str, float]] = {}
        self.attempt: dict[str, Row] = {}
        for row in _scored(rows):
            aid = str(row["attempt_id"])
            self.attempt.setdefault(aid, row)
            key = (str(row["judge"]), str(row["condition"]))
            p = probability(row)
            if p is not None:
                self.prob.setdefault(key, {})[aid] = p
            raw = row.get("score") if row.get("score") is not None else row.get("p_ac")
            if raw is not None:
                self.raw_score.setdefault(key, {})[aid] = float(raw)

    def label(self, aid: str) -> int | None:
        value = self.attempt[aid].get("label_ac")
        return None if value is None else int(value)


# ------------------------------------------------------------------------------------------------ judge_quality


def judge_quality(
    rows: Sequence[Row],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    folds: int = 10,
    bootstrap: int = 2000,
    cluster: str = "trajectory",
    seed: int = 0,
) -> Report:
    """Discrimination, calibration and out-of-fold decision quality of every judge x condition (paper 001, V-B1).

    Per judge x condition, on its scored attempts that carry a ``label_ac``: n, positives, ROC-AUC, PR-AUC,
    LogLoss, Brier, ECE (15 bins) and MCC_oof (grouped ``folds``-fold CV on trajectories), each with its
    cluster-bootstrap interval. The panel (paper 001 VI-A10: unweighted mean percentile rank across the judges,
    ``metrics.panel``) is the pseudo-judge ``"panel"`` over the attempts at least one judge scored; being a rank it
    gets the rank/threshold metrics only (ROC-AUC, PR-AUC, MCC_oof). Paired differences on the same resamples:
    between conditions per judge (each later condition minus each earlier one, in ``conditions`` order; on the
    attempts the judge scored under all conditions) and each judge minus the panel per condition (on the attempts
    every judge scored).
    """
    cluster = _check_cluster(cluster)
    index = _Index(rows)
    judges = _names(_scored(rows), "judge", judges)
    conditions = _names(_scored(rows), "condition", conditions)
    report = _new_report(
        "judge_quality",
        {
            "judges": judges,
            "conditions": conditions,
            "folds": folds,
            "bootstrap": bootstrap,
            "cluster": cluster,
            "seed": seed,
            "ece_bins": ECE_BINS,
            "probability": "p_ac when present, else score / 5",
        },
    )
    errors: dict[str, str] = report["errors"]
    labelled = {aid for aid in index.attempt if index.label(aid) is not None}
    params = {"folds": folds, "bins": ECE_BINS}
    metric_rows: list[dict[str, Any]] = []
    panel_rows: list[dict[str, Any]] = []
    roc_data: dict[str, dict[str, Any]] = {}
    reliability: dict[str, dict[str, Any]] = {}

    def arrays(aids: Sequence[str]) -> dict[str, Any]:
        return {
            "y_true": [index.label(a) for a in aids],
            "groups": [_cluster_of(index.attempt[a], "trajectory") for a in aids],
            "cluster": [_cluster_of(index.attempt[a], cluster) for a in aids],
        }

    for condition in conditions:
        per_judge: dict[str, dict[str, float]] = {}
        for judge in judges:
            probs = {a: p for a, p in index.prob.get((judge, condition), {}).items() if a in labelled}
            where = f"metrics/{judge}/{condition}"
            aids = sorted(probs)
            if not aids:
                errors[where] = "no scored attempt with a label_ac for this judge and condition"
                continue
            per_judge[judge] = probs
            data = arrays(aids)
            y_score = [probs[a] for a in aids]
            cells, _ = _compute_cells(
                JUDGE_QUALITY_METRICS, where, errors, bootstrap, y_true=data["y_true"], y_score=y_score,
                groups=data["groups"], params=params, cluster=data["cluster"], seed=seed,
            )  # fmt: skip
            positives = int(sum(data["y_true"]))
            metric_rows.append(
                {"judge": judge, "condition": condition, "n": len(aids), "positives": positives, **cells}
            )
            if 0 < positives < len(aids):
                fpr, tpr, _ = roc_curve(data["y_true"], y_score)
                curve: dict[str, Any] = {"fpr": fpr.tolist(), "tpr": tpr.tolist()}
                if "roc_auc" in cells:
                    curve["auc"] = cells["roc_auc"]["value"]
                roc_data.setdefault(condition, {})[judge] = curve
            try:
                bins = calibration.reliability_diagram(data["y_true"], y_score, ECE_BINS)
                reliability.setdefault(judge, {})[condition] = bins
            except (MetricInputError, UndefinedMetricError) as exc:
                errors[f"reliability/{judge}/{condition}"] = str(exc)

        # The panel: percentile ranks per judge over the attempts of this condition, averaged per attempt.
        where = f"metrics/{PANEL}/{condition}"
        present = [j for j in judges if j in per_judge]
        if len(present) < 2:
            errors[where] = f"the panel needs at least two judges with scored attempts; got {len(present)}"
            continue
        aids = sorted(set().union(*(per_judge[j] for j in present)))
        matrix = [[per_judge[j].get(a, math.nan) for a in aids] for j in present]
        consensus = dict(zip(aids, panel.panel_consensus(matrix).tolist(), strict=True))
        data = arrays(aids)
        y_panel = [consensus[a] for a in aids]
        cells, _ = _compute_cells(
            PANEL_METRICS, where, errors, bootstrap, y_true=data["y_true"], y_score=y_panel,
            groups=data["groups"], params={"folds": folds}, cluster=data["cluster"], seed=seed,
        )  # fmt: skip
        for metric in JUDGE_QUALITY_METRICS:
            if metric not in PANEL_METRICS:
                errors[f"{where}/{metric}"] = "the panel is a mean percentile rank, not a probability: not calibrated"
        metric_rows.append(
            {"judge": PANEL, "condition": condition, "n": len(aids), "positives": int(sum(data["y_true"])), **cells}
        )
        positives = int(sum(data["y_true"]))
        if 0 < positives < len(aids):
            fpr, tpr, _ = roc_curve(data["y_true"], y_panel)
            curve = {"fpr": fpr.tolist(), "tpr": tpr.tolist()}
            if "roc_auc" in cells:
                curve["auc"] = cells["roc_auc"]["value"]
            roc_data.setdefault(condition, {})[PANEL] = curve

        # Each judge minus the panel, on the attempts every judge scored.
        common = sorted(set.intersection(*(set(per_judge[j]) for j in present)))
        if len(common) < 2:
            errors[f"panel_differences/{condition}"] = "fewer than two attempts scored by every judge"
            continue
        data = arrays(common)
        scores = {j: [per_judge[j][a] for a in common] for j in present}
        scores[PANEL] = [consensus[a] for a in common]
        try:
            result = compare(
                list(PANEL_METRICS), data["y_true"], scores, groups=data["groups"], params={"folds": folds},
                bootstrap=bootstrap, cluster=data["cluster"], seed=seed, pairs=[(j, PANEL) for j in present],
            )  # fmt: skip
            if bootstrap > 0:
                panel_rows += _difference_rows(
                    result, PANEL_METRICS, {"condition": condition}, len(common), "panel_differences", errors
                )
        except (MetricInputError, UndefinedMetricError) as exc:
            errors[f"panel_differences/{condition}"] = str(exc)

    # Between conditions, per judge, on the attempts the judge scored under every condition.
    condition_rows: list[dict[str, Any]] = []
    if len(conditions) >= 2 and bootstrap > 0:
        for judge in judges:
            maps = {c: index.prob.get((judge, c), {}) for c in conditions}
            common = sorted(set(labelled).intersection(*(set(m) for m in maps.values())))
            if len(common) < 2:
                errors[f"condition_differences/{judge}"] = "fewer than two attempts scored under every condition"
                continue
            data = arrays(common)
            pairs = [(later, earlier) for earlier, later in combinations(conditions, 2)]
            try:
                result = compare(
                    list(JUDGE_QUALITY_METRICS), data["y_true"], {c: [maps[c][a] for a in common] for c in conditions},
                    groups=data["groups"], params=params, bootstrap=bootstrap, cluster=data["cluster"], seed=seed,
                    pairs=pairs,
                )  # fmt: skip
            except (MetricInputError, UndefinedMetricError) as exc:
                errors[f"condition_differences/{judge}"] = str(exc)
                continue
            condition_rows += _difference_rows(
                result, JUDGE_QUALITY_METRICS, {"judge": judge}, len(common), "condition_differences", errors
            )
    elif bootstrap == 0:
        errors["differences"] = "paired differences need a bootstrap (bootstrap > 0)"
    else:
        errors["condition_differences"] = "only one condition: no difference between conditions"

    keys = ["judge", "condition", "n", "positives", *JUDGE_QUALITY_METRICS]
    report["tables"]["metrics"] = _table("Judge quality per judge and condition", keys, metric_rows)
    if condition_rows:
        report["tables"]["condition_differences"] = _table(
            "Paired differences between conditions",
            ["judge", "difference", "n", *JUDGE_QUALITY_METRICS],
            condition_rows,
        )
    if panel_rows:
        report["tables"]["panel_differences"] = _table(
            "Paired differences: judge minus panel", ["condition", "difference", "n", *PANEL_METRICS], panel_rows
        )
    if roc_data:
        report["plots"]["roc"] = {"type": "roc", "title": "ROC curves per condition", "conditions": roc_data}
    if reliability:
        report["plots"]["reliability"] = {
            "type": "reliability",
            "title": f"Reliability diagrams ({ECE_BINS} equal-width bins)",
            "bins": ECE_BINS,
            "judges": reliability,
        }
    interval = f"{cluster}-clustered bootstrap ({bootstrap} resamples)" if bootstrap else "no bootstrap"
    _section(
        report, "metrics", "How well each judge predicts acceptance",
        "Each row scores one judge's acceptance probabilities against the real verdicts. ROC-AUC is the chance that "
        "an accepted attempt gets a higher probability than a rejected one (0.5 = guessing, 1 = perfect). PR-AUC is "
        "the average precision for finding accepted attempts. LogLoss and Brier penalise confident wrong "
        "probabilities (lower is better). ECE is the average gap between predicted and observed acceptance rates "
        "over 15 probability bins (lower is better). MCC (out-of-fold) is the quality of accept/reject decisions "
        f"with the threshold chosen on other trajectories ({folds}-fold grouped CV; -1..1, 0 = chance). The panel "
        f"averages the judges' percentile ranks. Brackets are 95% intervals from a {interval}.",
        ["metrics"], ["roc", "reliability"],
    )  # fmt: skip
    _section(
        report, "condition_differences", "Does the input condition change a judge?",
        "Each row is the same judge on the same attempts under two conditions, later minus earlier condition. An "
        "interval that excludes 0 means the condition changed that metric beyond resampling noise.",
        ["condition_differences"], [],
    )  # fmt: skip
    _section(
        report, "panel_differences", "Judges against the panel",
        "Each row is one judge minus the panel on the attempts every judge scored. Positive ROC-AUC differences "
        "mean the judge ranks attempts better than the consensus of all judges.",
        ["panel_differences"], [],
    )  # fmt: skip
    return report


# ---------------------------------------------------------------------------------------------------- agreement


def agreement(
    rows: Sequence[Row],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    bootstrap: int = 2000,
    cluster: str = "trajectory",
    seed: int = 0,
) -> Report:
    """Inter-judge agreement per condition (paper 001 VI-A9) and consistency across repeats (paper 000 V-C).

    Per condition, on the attempts every judge scored (labels are not needed): Cohen's kappa of every judge pair with
    each judge's probability cut at its own median, Spearman's rho and Kendall's tau-b between the probabilities,
    Fleiss' kappa (median cut) and Krippendorff's alpha (interval level) across all judges. Per judge x condition
    with at least two repeats: Krippendorff's alpha (interval) and ICC(2,1) with the repeats as raters, over the
    attempts that have at least two ok repeats (ICC uses the attempts with every repeat).
    """
    cluster = _check_cluster(cluster)
    index = _Index(rows)
    judges = _names(_scored(rows), "judge", judges)
    conditions = _names(_scored(rows), "condition", conditions)
    report = _new_report(
        "agreement",
        {"judges": judges, "conditions": conditions, "bootstrap": bootstrap, "cluster": cluster, "seed": seed},
    )
    errors: dict[str, str] = report["errors"]
    pair_rows: list[dict[str, Any]] = []
    multi_rows: list[dict[str, Any]] = []
    heatmap: dict[str, list[list[float | None]]] = {}
    for condition in conditions:
        present = [j for j in judges if index.prob.get((j, condition))]
        if len(present) < 2:
            errors[f"agreement/{condition}"] = f"agreement needs at least two judges; {len(present)} scored here"
            continue
        common = sorted(set.intersection(*(set(index.prob[(j, condition)]) for j in present)))
        if len(common) < 2:
            errors[f"agreement/{condition}"] = "fewer than two attempts scored by every judge"
            continue
        clusters = [_cluster_of(index.attempt[a], cluster) for a in common]
        vectors = {j: [index.prob[(j, condition)][a] for a in common] for j in present}
        matrix: list[list[float | None]] = [[1.0 if a == b else None for b in present] for a in present]
        for (ia, ja), (ib, jb) in combinations(enumerate(present), 2):
            where = f"pairwise/{condition}/{ja}/{jb}"
            kappa, _ = _compute_cells(
                ["cohen_kappa"], where, errors, bootstrap, y_true=vectors[ja], y_score=vectors[jb],
                params={"median_cut": True}, cluster=clusters, seed=seed,
            )  # fmt: skip
            ranks, _ = _compute_cells(
                ["spearman", "kendall_tau"], where, errors, bootstrap, y_true=vectors[ja], y_score=vectors[jb],
                cluster=clusters, seed=seed,
            )  # fmt: skip
            pair_rows.append({"condition": condition, "judge_a": ja, "judge_b": jb, "n": len(common), **kappa, **ranks})
            if "cohen_kappa" in kappa:
                matrix[ia][ib] = matrix[ib][ia] = kappa["cohen_kappa"]["value"]
        heatmap[condition] = matrix
        ratings = [vectors[j] for j in present]
        where = f"multi_rater/{condition}"
        fleiss, _ = _compute_cells(
            ["fleiss_kappa"], where, errors, bootstrap, ratings=ratings, params={"median_cut": True},
            cluster=clusters, seed=seed,
        )  # fmt: skip
        alpha, _ = _compute_cells(
            ["krippendorff_alpha"], where, errors, bootstrap, ratings=ratings, params={"level": "interval"},
            cluster=clusters, seed=seed,
        )  # fmt: skip
        multi_rows.append({"condition": condition, "judges": ", ".join(present), "n": len(common), **fleiss, **alpha})

    consistency_rows = _consistency(rows, judges, conditions, bootstrap, cluster, seed, errors)
    report["tables"]["pairwise"] = _table(
        "Pairwise agreement", ["condition", "judge_a", "judge_b", "n", "cohen_kappa", "spearman", "kendall_tau"],
        pair_rows,
    )  # fmt: skip
    report["tables"]["multi_rater"] = _table(
        "Agreement across all judges", ["condition", "judges", "n", "fleiss_kappa", "krippendorff_alpha"], multi_rows
    )
    if consistency_rows:
        report["tables"]["consistency"] = _table(
            "Consistency across repeats", ["judge", "condition", "repeats", "n", "krippendorff_alpha", "icc"],
            consistency_rows,
        )  # fmt: skip
    if heatmap:
        report["plots"]["kappa_heatmap"] = {
            "type": "kappa_heatmap",
            "title": "Pairwise Cohen's kappa (each judge cut at its own median)",
            "judges": judges,
            "labels": {c: [j for j in judges if index.prob.get((j, c))] for c in heatmap},
            "conditions": heatmap,
        }
    interval = f"{cluster}-clustered bootstrap ({bootstrap} resamples)" if bootstrap else "no bootstrap"
    _section(
        report, "pairwise", "Do two judges agree?",
        "Cohen's kappa compares the accept/reject calls of two judges after cutting each judge's probabilities at "
        "its own median (so judges with different scales are comparable); 0 = chance agreement, 1 = perfect. "
        "Spearman and Kendall measure whether two judges rank the attempts in the same order (-1..1). Brackets are "
        f"95% intervals from a {interval}.",
        ["pairwise"], ["kappa_heatmap"],
    )  # fmt: skip
    _section(
        report, "multi_rater", "Do all judges agree?",
        "Fleiss' kappa is the multi-judge version of Cohen's kappa on the median-cut calls; Krippendorff's alpha "
        "(interval level) measures agreement of the raw probabilities across all judges (1 = perfect, 0 = chance).",
        ["multi_rater"], [],
    )  # fmt: skip
    _section(
        report, "consistency", "Does a judge agree with itself?",
        "The same judge scored the same attempts several times (repeats). Krippendorff's alpha and the intraclass "
        "correlation ICC(2,1) treat the repeats as raters: values near 1 mean the judge gives the same probability "
        "every time.",
        ["consistency"], [],
    )  # fmt: skip
    return report


def _consistency(
    rows: Sequence[Row],
    judges: Sequence[str],
    conditions: Sequence[str],
    bootstrap: int,
    cluster: str,
    seed: int,
    errors: dict[str, str],
) -> list[dict[str, Any]]:
    by_key: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
    facts: dict[str, Row] = {}
    for row in rows:
        p = probability(row)
        if row.get("status") != "ok" or p is None or row.get("parent_attempt_id"):
            continue
        aid = str(row["attempt_id"])
        facts.setdefault(aid, row)
        key = (str(row["judge"]), str(row["condition"]))
        by_key.setdefault(key, {}).setdefault(int(row.get("repeat") or 0), {})[aid] = p
    out: list[dict[str, Any]] = []
    if not any(len(v) >= 2 for v in by_key.values()):
        errors["consistency"] = "no judge has two or more repeats: consistency across repeats is not measured"
        return out
    for judge in judges:
        for condition in conditions:
            repeats = by_key.get((judge, condition), {})
            where = f"consistency/{judge}/{condition}"
            if len(repeats) < 2:
                errors[where] = f"needs at least two repeats; got {len(repeats)}"
                continue
            order = sorted(repeats)
            aids = sorted(a for a in set().union(*repeats.values()) if sum(a in repeats[r] for r in order) >= 2)
            if len(aids) < 2:
                errors[where] = "fewer than two attempts scored in at least two repeats"
                continue
            ratings = [[repeats[r].get(a) for a in aids] for r in order]
            clusters = [_cluster_of(facts[a], cluster) for a in aids]
            alpha, _ = _compute_cells(
                ["krippendorff_alpha"], where, errors, bootstrap, ratings=ratings, params={"level": "interval"},
                cluster=clusters, seed=seed,
            )  # fmt: skip
            icc, _ = _compute_cells(["icc"], where, errors, bootstrap, ratings=ratings, cluster=clusters, seed=seed)
            out.append({"judge": judge, "condition": condition, "repeats": len(order), "n": len(aids), **alpha, **icc})
    return out


# --------------------------------------------------------------------------------------------------- cocreation


def cocreation(
    rows: Sequence[Row],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    bootstrap: int = 2000,
    cluster: str = "trajectory",
    seed: int = 0,
    max_turn: int | None = None,
) -> Report:
    """Success@Turn, success after an initial failure and Kaplan-Meier time to success (paper 001, IV-C3/C4).

    One item per attempt (judges are not needed): its ``label_ac``, ``trajectory`` and ``turn``; attempts without a
    label or a turn are left out. Intervals resample whole trajectories (or problems, which never split one).
    ``judges`` and ``conditions`` are accepted for a uniform builder signature and ignored: the verdicts do not
    depend on the judge.
    """
    cluster = _check_cluster(cluster)
    if cluster == "seed":
        raise MetricInputError("cluster must be trajectory or problem for co-creation metrics")
    report = _new_report("cocreation", {"bootstrap": bootstrap, "cluster": cluster, "seed": seed, "max_turn": max_turn})
    errors: dict[str, str] = report["errors"]
    attempts: dict[str, Row] = {}
    for source in rows:
        if (
            source.get("label_ac") is not None
            and source.get("turn") is not None
            and not source.get("parent_attempt_id")
        ):
            attempts.setdefault(str(source["attempt_id"]), source)
    aids = sorted(attempts)
    if not aids:
        errors["cocreation"] = "no attempt with both a label_ac and a turn"
        _cocreation_sections(report, bootstrap, cluster)
        return report
    y_true = [int(attempts[a]["label_ac"]) for a in aids]
    groups = [_cluster_of(attempts[a], "trajectory") for a in aids]
    turns = [int(attempts[a]["turn"]) for a in aids]
    clusters = [_cluster_of(attempts[a], cluster) for a in aids]
    names = ["success_at_turn", "success_after_failure", "kaplan_meier"]
    try:
        result = compute(
            names, y_true=y_true, groups=groups, params={"turn": turns, "max_turn": max_turn},
            bootstrap=bootstrap, cluster=clusters, seed=seed,
        )  # fmt: skip
    except (MetricInputError, UndefinedMetricError) as exc:
        errors["cocreation"] = str(exc)
        _cocreation_sections(report, bootstrap, cluster)
        return report
    summary = _cells(
        ["success_after_failure"], result["values"], result.get("ci", {}), result["errors"],
        result.get("ci_errors", {}), "summary/all", errors, bootstrap,
    )  # fmt: skip
    n_traj = len(set(groups))
    report["tables"]["summary"] = _table(
        "Trajectories", ["trajectories", "attempts", "solved", "success_after_failure"],
        [{"trajectories": n_traj, "attempts": len(aids), "solved": len({g for g, y in zip(groups, y_true, strict=True)
                                                                         if y}), **summary}],
    )  # fmt: skip
    turn_rows: list[dict[str, Any]] = []
    plots: dict[str, dict[str, Any]] = {}
    for name, plot_name in (("success_at_turn", "success_at_turn"), ("kaplan_meier", "kaplan_meier")):
        values = result["values"].get(name)
        if not isinstance(values, dict):
            errors[f"turns/{name}"] = result["errors"].get(name, "not computed")
            continue
        ci = result.get("ci", {}).get(name, {}) or {}
        if bootstrap > 0 and not ci:
            errors[f"turns/{name}/ci"] = result.get("ci_errors", {}).get(name, "no bootstrap interval")
        keys = sorted(values, key=int)
        plots[plot_name] = {
            "type": plot_name,
            "title": "Success@Turn" if name == "success_at_turn" else "Kaplan-Meier: share of trajectories unsolved",
            "turns": [int(k) for k in keys],
            "value": [float(values[k]) for k in keys],
            "lo": [float(ci[k][0]) if k in ci else None for k in keys],
            "hi": [float(ci[k][1]) if k in ci else None for k in keys],
        }
    for i, turn in enumerate(plots.get("success_at_turn", plots.get("kaplan_meier", {})).get("turns", [])):
        row: dict[str, Any] = {"turn": turn}
        for name, column in (("success_at_turn", "success_at_turn"), ("kaplan_meier", "unsolved_km")):
            data = plots.get(name)
            if data is None:
                continue
            cell: dict[str, Any] = {"value": data["value"][i]}
            if data["lo"][i] is not None:
                cell["ci"] = [data["lo"][i], data["hi"][i]]
            row[column] = cell
        turn_rows.append(row)
    report["tables"]["turns"] = _table("Per turn", ["turn", "success_at_turn", "unsolved_km"], turn_rows)
    report["plots"].update(plots)
    _cocreation_sections(report, bootstrap, cluster)
    return report


def _cocreation_sections(report: Report, bootstrap: int, cluster: str) -> None:
    interval = f"{cluster}-clustered bootstrap ({bootstrap} resamples)" if bootstrap else "no bootstrap"
    _section(
        report, "summary", "Trajectories at a glance",
        "A trajectory is one participant working on one problem over several attempts (turns). Success after an "
        "initial failure is the share of trajectories whose first attempt was rejected that were accepted later.",
        ["summary"], [],
    )  # fmt: skip
    _section(
        report, "turns", "When do trajectories succeed?",
        "Success@Turn k is the share of trajectories accepted at or before turn k. The Kaplan-Meier column is the "
        "estimated share still unsolved after turn k, counting trajectories that stopped without success as "
        f"censored at their last turn. Brackets are 95% intervals from a {interval}.",
        ["turns"], ["success_at_turn", "kaplan_meier"],
    )  # fmt: skip


# -------------------------------------------------------------------------------------------------------- axiom


def axiom(
    rows: Sequence[Row],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    bootstrap: int = 2000,
    cluster: str = "trajectory",
    seed: int = 0,
) -> Report:
    """AXIOM-style evaluation of the judges' 0..5 scores against ``label_score`` (paper 000, V-B).

    Per judge x condition, on its scored attempts with a ``label_score``: the four subtask MCCs (gating,
    functionality, quality, effort), Spearman, Kendall, Krippendorff's alpha (interval; label and judge as two
    raters), EMD, the mean and the normalised entropy of the judge's scores. The judge's score is ``score`` when
    present, else ``p_ac``; a judge whose scores all lie in [0, 1] is min-max normalised to 0..5
    (``metrics.axiom.minmax_to_scale``); scores on 0..5 and labels are rounded half-to-even to integers.
    """
    cluster = _check_cluster(cluster)
    index = _Index(rows)
    judges = _names(_scored(rows), "judge", judges)
    conditions = _names(_scored(rows), "condition", conditions)
    report = _new_report(
        "axiom",
        {"judges": judges, "conditions": conditions, "bootstrap": bootstrap, "cluster": cluster, "seed": seed},
    )
    errors: dict[str, str] = report["errors"]
    table_rows: list[dict[str, Any]] = []
    labelled = {a for a, r in index.attempt.items() if r.get("label_score") is not None}
    if not labelled:
        errors["axiom"] = "no scored attempt has a label_score"
    else:
        truth_all = sorted(labelled)
        truth = [float(np.round(float(index.attempt[a]["label_score"]))) for a in truth_all]
        cells, _ = _compute_cells(
            ["mean", "entropy"], "axiom/ground truth/all", errors, bootstrap, y_score=truth,
            cluster=[_cluster_of(index.attempt[a], cluster) for a in truth_all], seed=seed,
        )  # fmt: skip
        table_rows.append({"judge": "ground truth", "condition": "", "n": len(truth_all), "scale": "0..5", **cells})
    for judge in judges if labelled else []:
        for condition in conditions:
            raw = {a: v for a, v in index.raw_score.get((judge, condition), {}).items() if a in labelled}
            where = f"axiom/{judge}/{condition}"
            if len(raw) < 2:
                errors[where] = f"fewer than two scored attempts with a label_score ({len(raw)})"
                continue
            aids = sorted(raw)
            values = np.array([raw[a] for a in aids])
            scale = "0..5"
            try:
                if values.max() <= 1.0:
                    scores = axiom_lib.minmax_to_scale(values).astype(float).tolist()
                    scale = "[0, 1] min-max to 0..5"
                else:
                    scores = np.clip(np.round(values), 0, 5).tolist()
            except UndefinedMetricError as exc:
                errors[where] = str(exc)
                continue
            y_true = [float(np.round(float(index.attempt[a]["label_score"]))) for a in aids]
            cells, _ = _compute_cells(
                AXIOM_METRICS, where, errors, bootstrap, y_true=y_true, y_score=scores,
                cluster=[_cluster_of(index.attempt[a], cluster) for a in aids], seed=seed,
            )  # fmt: skip
            table_rows.append({"judge": judge, "condition": condition, "n": len(aids), "scale": scale, **cells})
    report["tables"]["axiom"] = _table(
        "AXIOM subtasks and score distribution", ["judge", "condition", "n", "scale", *AXIOM_METRICS], table_rows
    )
    _section(
        report, "axiom", "How well do the judges' 0..5 scores match the reference scores?",
        "The four MCC columns are AXIOM's diagnostic subtasks: gating (is the code a 0?), functionality (3-5 vs "
        "0-2), quality (5 vs 3-4) and effort (1/3 vs 2/4); -1..1, 0 = chance. Spearman, Kendall and Krippendorff's "
        "alpha measure agreement with the reference scores; EMD is the distance between the two score "
        "distributions (lower is better); mean and entropy describe how the judge uses the scale (entropy 1 = all "
        "six scores equally often, 0 = always the same score).",
        ["axiom"], [],
    )  # fmt: skip
    return report


# ------------------------------------------------------------------------------------------------- perturbation


def perturbation(
    rows: Sequence[Row],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    bootstrap: int = 2000,
    cluster: str = "seed",
    seed: int = 0,
    primary_threshold: float = 0.5,
    reaction_drop: float = 0.05,
) -> Report:
    """Defect sensitivity from the perturbation study (paper 001, VI-B), per judge x condition.

    Mutants are rows with ``parent_attempt_id`` and ``arm``; the seed's probability is the same judge's (same
    condition, repeat 0) for the parent attempt. Restricted to the primary subset (seed probability >=
    ``primary_threshold``): arm discrimination A_j, reactions per arm (drop > ``reaction_drop``), severity
    gradient; intervals resample seed programs (``cluster="seed"``, default; ``"trajectory"`` or ``"problem"`` of the
    seed resample coarser units that never split a seed's mutants). Plot: mean drop by operator, per judge x
    condition, with the control band = the central 95% of the control mutants' drops.
    """
    cluster = _check_cluster(cluster)
    index = _Index(rows)
    scored = _scored(rows, mutants=True)
    judges = _names(scored, "judge", judges)
    conditions = _names(scored, "condition", conditions)
    report = _new_report(
        "perturbation",
        {
            "judges": judges, "conditions": conditions, "bootstrap": bootstrap, "cluster": cluster, "seed": seed,
            "primary_threshold": primary_threshold, "reaction_drop": reaction_drop,
        },
    )  # fmt: skip
    errors: dict[str, str] = report["errors"]
    mutants = [r for r in scored if r.get("parent_attempt_id") and r.get("arm") and probability(r) is not None]
    table_rows: list[dict[str, Any]] = []
    shift: dict[str, Any] = {}
    if not mutants:
        errors["perturbation"] = "no mutants: no scored row has a parent_attempt_id and an arm"
    metrics = ["arm_discrimination", "severity_gradient", "reactions"]
    for judge in judges if mutants else []:
        for condition in conditions:
            seeds = index.prob.get((judge, condition), {})
            chosen = [
                m for m in mutants
                if m["judge"] == judge and m["condition"] == condition and str(m["parent_attempt_id"]) in seeds
            ]  # fmt: skip
            where = f"perturbation/{judge}/{condition}"
            if not chosen:
                errors[where] = "no mutant whose seed this judge scored under this condition"
                continue
            y_score = [float(probability(m) or 0.0) for m in chosen]
            seed_score = [seeds[str(m["parent_attempt_id"])] for m in chosen]
            arms = [str(m["arm"]) for m in chosen]
            severity = [None if m.get("severity") is None else float(m["severity"]) for m in chosen]
            clusters = [_cluster_of(m, cluster) for m in chosen]
            primary = [s >= primary_threshold for s in seed_score]
            cells, result = _compute_cells(
                metrics, where, errors, bootstrap, y_score=y_score,
                params={"seed_score": seed_score, "arm": arms, "severity": severity,
                        "primary_threshold": primary_threshold, "reaction_drop": reaction_drop},
                cluster=clusters, seed=seed,
            )  # fmt: skip
            row: dict[str, Any] = {
                "judge": judge, "condition": condition, "mutants": len(chosen), "primary": int(sum(primary)), **cells,
            }  # fmt: skip
            reactions = result.get("values", {}).get("reactions") if result else None
            if isinstance(reactions, dict):
                rci = result.get("ci", {}).get("reactions", {}) or {}
                for arm in ("semantic", "control"):
                    share = f"{arm}_share"
                    if share in reactions:
                        cell: dict[str, Any] = {"value": float(reactions[share])}
                        if share in rci:
                            cell["ci"] = [float(v) for v in rci[share]]
                        row[share] = cell
                        row[f"{arm}_reacted"] = f"{int(reactions[f'{arm}_reacted'])}/{int(reactions[f'{arm}_scored'])}"
                    else:
                        errors[f"{where}/{share}"] = f"no {arm} mutant in the primary subset"
            elif result:
                errors[f"{where}/reactions"] = result.get("errors", {}).get("reactions", "not computed")
            table_rows.append(row)
            # Plot data: mean drop by operator over the primary subset, and the control band.
            drops: dict[str, list[float]] = {}
            control: list[float] = []
            for m, p, s, keep in zip(chosen, y_score, seed_score, primary, strict=True):
                if not keep:
                    continue
                drop = s - p
                drops.setdefault(str(m.get("operator") or m["arm"]), []).append(drop)
                if m["arm"] == "control":
                    control.append(drop)
            if drops:
                operators = sorted(drops)
                arm_of = {str(m.get("operator") or m["arm"]): str(m["arm"]) for m in chosen}
                shift[f"{judge} / {condition}"] = {
                    "operators": operators,
                    "mean_drop": [float(np.mean(drops[o])) for o in operators],
                    "count": [len(drops[o]) for o in operators],
                    "arm": [arm_of[o] for o in operators],
                    "control_band": [float(v) for v in np.percentile(control, [2.5, 97.5])] if control else None,
                }
    table_keys = [
        "judge", "condition", "mutants", "primary", "arm_discrimination", "semantic_share", "semantic_reacted",
        "control_share", "control_reacted", "severity_gradient",
    ]  # fmt: skip
    report["tables"]["perturbation"] = _table("Defect sensitivity (primary subset)", table_keys, table_rows)
    if shift:
        report["plots"]["perturbation_shift"] = {
            "type": "perturbation_shift",
            "title": "Mean probability drop by operator (primary subset)",
            "panels": shift,
        }
    _section(
        report, "perturbation", "Does a judge notice injected defects?",
        "Mutants are copies of accepted programs with one injected defect (semantic arm) or a harmless rewrite "
        "(control arm). Only mutants whose original the judge itself scored as acceptable (probability >= "
        f"{primary_threshold}) count. Arm discrimination is the chance that a semantic mutant's probability drops "
        "more than a control mutant's (0.5 = no better than chance). Reacted counts mutants whose probability "
        f"dropped by more than {reaction_drop}. The severity gradient is the Spearman correlation between the "
        "operator's severity and the drop. Intervals resample seed programs.",
        ["perturbation"], ["perturbation_shift"],
    )  # fmt: skip
    return report


# --------------------------------------------------------------------------------------------------- similarity


def similarity(
    pairs: Sequence[Mapping[str, Any]],
    *,
    bootstrap: int = 2000,
    seed: int = 0,
    step: float = 0.01,
    equivalent_at: float = 1.0,
) -> Report:
    """Reference-based metrics against functional similarity (paper 002, 3.2.2, 3.4, 4.2).

    ``pairs``: ``{"df_score", "surface_similarity", "cems": {metric: score}}`` per code pair (optionally
    ``"equivalent": 0/1``; otherwise a pair counts as functionally equivalent when ``df_score >= equivalent_at``).
    Per metric: distinguishability and MAE against ``df_score`` (intervals resample pairs); Algorithm 2's SFD/DFS
    thresholds (grid ``step``) with the number of pairs and each metric's MAE per region.
    """
    report = _new_report("similarity", {"bootstrap": bootstrap, "seed": seed, "step": step,
                                        "equivalent_at": equivalent_at})  # fmt: skip
    errors: dict[str, str] = report["errors"]
    if not pairs:
        errors["similarity"] = "no code pairs: similarity needs pairs with df_score, surface_similarity and cems"
        _similarity_sections(report)
        return report
    df = [float(p["df_score"]) for p in pairs]
    surface = [float(p["surface_similarity"]) for p in pairs]
    names = sorted({m for p in pairs for m in (p.get("cems") or {})})
    equivalent = [
        int(p["equivalent"]) if p.get("equivalent") is not None else int(float(p["df_score"]) >= equivalent_at)
        for p in pairs
    ]
    metric_rows: list[dict[str, Any]] = []
    scores: dict[str, list[float]] = {}
    for name in names:
        values = [(p.get("cems") or {}).get(name) for p in pairs]
        where = f"metrics/{name}"
        if any(v is None for v in values):
            errors[where] = "some pairs lack this metric's score; it is left out"
            continue
        scores[name] = [float(v) for v in values if v is not None]
        d, _ = _compute_cells(["distinguishability"], where, errors, bootstrap, y_true=equivalent,
                              y_score=scores[name], seed=seed)  # fmt: skip
        m, _ = _compute_cells(["mae"], where, errors, bootstrap, y_true=df, y_score=scores[name], seed=seed)
        metric_rows.append({"metric": name, "n": len(pairs), **d, **m})
    report["tables"]["metrics"] = _table(
        "Metrics against functional similarity", ["metric", "n", "distinguishability", "mae"], metric_rows
    )
    plot: dict[str, Any] = {
        "type": "similarity_scatter",
        "title": "SurfaceSim vs df_score",
        "surface_similarity": surface,
        "df_score": df,
        "thresholds": None,
    }
    if not scores:
        errors["regions"] = "no metric scored every pair: Algorithm 2 needs metric scores"
    else:
        try:
            th = similarity_lib.select_region_thresholds(surface, df, scores, step=step)
        except (MetricInputError, UndefinedMetricError) as exc:
            errors["regions"] = str(exc)
        else:
            thresholds = {"x_lo": th.x_lo, "x_hi": th.x_hi, "y_lo": th.y_lo, "y_hi": th.y_hi,
                          "objective": th.objective}  # fmt: skip
            plot["thresholds"] = thresholds
            masks = similarity_lib.region_masks(surface, df, th)
            region_rows = []
            for region in ("dfs", "sfd", "control"):
                mask = masks[region]
                row: dict[str, Any] = {"region": region.upper() if region != "control" else "Control",
                                       "pairs": int(mask.sum())}  # fmt: skip
                for name, metric_values in scores.items():
                    if mask.any():
                        err = similarity_lib.prediction_error(np.array(df)[mask], np.array(metric_values)[mask])
                        row[f"mae:{name}"] = {"value": err}
                    else:
                        errors[f"regions/{region}/mae:{name}"] = "empty region"
                region_rows.append(row)
            report["tables"]["thresholds"] = _table(
                "Algorithm 2 thresholds", ["x_lo", "x_hi", "y_lo", "y_hi", "objective"], [thresholds]
            )
            report["tables"]["regions"] = _table(
                "Pairs and MAE per region", ["region", "pairs", *[f"mae:{n}" for n in scores]], region_rows
            )
    report["plots"]["similarity_scatter"] = plot
    _similarity_sections(report)
    return report


def _similarity_sections(report: Report) -> None:
    _section(
        report, "metrics", "Do the code metrics track functional similarity?",
        "Distinguishability is a metric's mean score on functionally equivalent pairs divided by its mean on "
        "non-equivalent pairs (above 1 = it scores equivalent code higher). MAE is the mean absolute gap between the "
        "metric's score and df_score, the share of tests on which both programs behave the same (lower is better).",
        ["metrics"], [],
    )  # fmt: skip
    _section(
        report, "regions", "Where do the metrics fail?",
        "Algorithm 2 picks the thresholds that separate two corners: DFS (different surface, same function: low "
        "SurfaceSim, high df_score) and SFD (similar surface, different function), where surface-based metrics err "
        "most compared with the rest (Control).",
        ["thresholds", "regions"], ["similarity_scatter"],
    )  # fmt: skip


BUILDERS = {
    "judge_quality": judge_quality,
    "agreement": agreement,
    "cocreation": cocreation,
    "axiom": axiom,
    "perturbation": perturbation,
    "similarity": similarity,
}
