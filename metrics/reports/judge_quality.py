"""The ``judge_quality`` report: how well every judge x condition predicts acceptance (paper 001, V-B1).

Tables (what a caller reads to print the main table)
    ``metrics``: one row per judge x condition (the panel as judge ``"panel"``) with ``judge, condition, n,
    clusters, positives`` and, per metric in ``METRICS`` (``roc_auc, pr_auc, log_loss, brier, ece, mcc_oof``), a
    cell ``{"value": v, "ci": [lo, hi]}``; e.g. ``row["roc_auc"]["value"]``.
    ``condition_differences`` (``judge, difference, n`` + metric cells ``a - b``) and ``panel_differences``
    (``condition, difference, n`` + metric cells ``judge - panel``). A judge whose rows carry probability-weighted
    outputs (``weighted_p_ac`` / ``weighted_score``, from the endpoint's logprobs) also appears as the pseudo-judge
    ``"<judge> (weighted)"``, and ``weighting_differences`` (``judge, condition, difference, n`` + metric cells
    ``weighted - sampled``) compares the two on the same attempts and resamples.
Plots: ``roc``, ``reliability``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

from sklearn.metrics import roc_curve

from metrics import calibration as ece_metrics
from metrics import panel, recalibration
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.registry import compare
from metrics.reports.common import (
    CLUSTERS,
    LABELS,
    Index,
    TidyRow,
    check_cluster,
    compute_cells,
    difference_rows,
    interval_text,
    names,
    scored,
)
from metrics.reports.model import Cell, ReliabilityPlot, Report, RocCurve, RocPlot, Row

KIND = "judge_quality"
METRICS = ("roc_auc", "pr_auc", "log_loss", "brier", "ece", "mcc_oof")
PANEL_METRICS = ("roc_auc", "pr_auc", "mcc_oof")  # the panel is a percentile rank, not a probability
PANEL = "panel"
ECE_BINS = 15
CALIBRATION_COLUMNS = tuple(f"{m}_{side}" for m in recalibration.METRICS for side in ("before", "after", "difference"))
CALIBRATION_LABELS = {
    **{
        f"{m}_{side}": f"{name} {side}"
        for m, name in (("ece", "ECE"), ("brier", "Brier"), ("log_loss", "LogLoss"))
        for side in ("before", "after", "difference")
    },
    "applied": "Applied",
}
# The pseudo-judge of a judge's probability-weighted outputs; a space never occurs in a judge's name.
WEIGHTED = " (weighted)"


def with_weighted(rows: Sequence[TidyRow]) -> list[TidyRow]:
    """The rows, and for every row with a probability-weighted output a copy as the pseudo-judge
    ``"<judge> (weighted)"`` whose ``p_ac``/``score`` are the weighted ones."""
    out = list(rows)
    for row in rows:
        if row.get("weighted_p_ac") is not None or row.get("weighted_score") is not None:
            out.append(
                {
                    **row,
                    "judge": f"{row['judge']}{WEIGHTED}",
                    "p_ac": row.get("weighted_p_ac"),
                    "score": row.get("weighted_score"),
                }
            )
    return out


def build(
    rows: Sequence[TidyRow],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    folds: int = 10,
    bootstrap: int = 2000,
    cluster: str = "trajectory",
    seed: int = 0,
    mutants: bool = False,
    calibration: str | None = None,
) -> Report:
    """Discrimination, calibration and out-of-fold decision quality of every judge x condition (paper 001, V-B1).

    With ``mutants``, perturbation mutants count as attempts too, each labelled by its own verdict (a study of
    references and their verified mutants: controlled ground truth). Paper 001 measures judges on participants'
    submissions only, which is the default; with mutants the panel also ranks them.

    Per judge x condition, on its scored attempts that carry a ``label_ac``: n, positives, ROC-AUC, PR-AUC,
    LogLoss, Brier, ECE (15 bins) and MCC_oof (grouped ``folds``-fold CV on trajectories), each with its
    cluster-bootstrap interval. The panel (paper 001 VI-A10: unweighted mean percentile rank across the judges,
    ``metrics.panel``, each judge ranking every non-mutant attempt it scored in ``rows``, labelled or not) is the
    pseudo-judge ``"panel"`` over the labelled attempts at least one judge scored; being a rank it gets the
    rank/threshold metrics only (ROC-AUC, PR-AUC, MCC_oof). Paired differences on the same resamples:
    between conditions per judge (each later condition minus each earlier one, in ``conditions`` order; on the
    attempts the judge scored under all conditions) and each judge minus the panel per condition (on the attempts
    every judge scored). With ``calibration`` (``isotonic`` | ``platt``), the table ``calibration_differences``
    shows, per judge x condition, ECE, Brier and LogLoss before and after that out-of-fold map
    (``metrics.recalibration``, folds grouped by ``cluster``) as paired differences on the same resamples, and
    whether the map would be applied.
    """
    cluster = check_cluster(cluster, CLUSTERS, "judge_quality")
    rows = with_weighted(rows)
    if mutants:
        # A mutant is kept as an attempt: its parent still clusters it with its seed under cluster="seed".
        rows = [{**r, "seed_attempt_id": r.get("parent_attempt_id"), "parent_attempt_id": None} for r in rows]
    index = Index(rows)
    if judges is not None:
        # A chosen judge brings its weighted twin, when its rows have one.
        in_rows = {str(r["judge"]) for r in rows}
        twins = [f"{j}{WEIGHTED}" for j in judges if f"{j}{WEIGHTED}" in in_rows and f"{j}{WEIGHTED}" not in judges]
        judges = [*judges, *twins]
    judges = names(scored(rows), "judge", judges)
    conditions = names(scored(rows), "condition", conditions)
    report = Report(
        KIND,
        {
            "judges": judges,
            "conditions": conditions,
            "folds": folds,
            "bootstrap": bootstrap,
            "cluster": cluster,
            "seed": seed,
            "mutants": mutants,
            "ece_bins": ECE_BINS,
            "probability": "p_ac when present, else score / 5",
            "calibration": calibration,
        },
    )
    errors = report.errors
    labelled = {aid for aid in index.attempt if index.label(aid) is not None}
    params = {"folds": folds, "bins": ECE_BINS}
    metric_rows: list[Row] = []
    panel_rows: list[Row] = []
    weighting_rows: list[Row] = []
    roc = RocPlot("ROC curves per condition")
    reliability = ReliabilityPlot(f"Reliability diagrams ({ECE_BINS} equal-width bins)", ECE_BINS)

    def arrays(aids: Sequence[str]) -> dict[str, Any]:
        return {
            "y_true": [index.label(a) for a in aids],
            "groups": index.clusters(aids, "trajectory"),
            "cluster": index.clusters(aids, cluster),
        }

    def add_curve(condition: str, judge: str, data: dict[str, Any], y_score: list[float], cells: Row) -> None:
        y_true = data["y_true"]
        positives = int(sum(y_true))
        if 0 < positives < len(y_true):
            fpr, tpr, _ = roc_curve(y_true, y_score)
            auc = cells.get("roc_auc")
            roc.conditions.setdefault(condition, {})[judge] = RocCurve(
                fpr.tolist(),
                tpr.tolist(),
                auc.estimate if isinstance(auc, Cell) else None,
                n=len(y_true),
                clusters=len(set(data["cluster"])),
            )

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
            cells, _ = compute_cells(
                METRICS,
                where,
                errors,
                bootstrap,
                y_true=data["y_true"],
                y_score=y_score,
                groups=data["groups"],
                params=params,
                cluster=data["cluster"],
                seed=seed,
            )
            metric_rows.append(
                {
                    "judge": judge,
                    "condition": condition,
                    "n": len(aids),
                    "clusters": len(set(data["cluster"])),
                    "positives": int(sum(data["y_true"])),
                    **cells,
                }
            )
            add_curve(condition, judge, data, y_score, cells)
            try:
                bins = ece_metrics.reliability_diagram(data["y_true"], y_score, ECE_BINS)
                reliability.judges.setdefault(judge, {})[condition] = bins
            except (MetricInputError, UndefinedMetricError) as exc:
                errors[f"reliability/{judge}/{condition}"] = str(exc)

        weighting_rows += _weighting_differences(condition, per_judge, params, bootstrap, arrays, seed, errors)

        # The panel (metrics.panel): each judge ranks every attempt it scored under this condition, labelled or
        # not (the population the API ranks in), and the ranks are averaged per attempt; scored on the labelled.
        # A weighted pseudo-judge is the same judge read another way, so it does not sit on the panel.
        where = f"metrics/{PANEL}/{condition}"
        present = [j for j in judges if j in per_judge and not j.endswith(WEIGHTED)]
        if len(present) < 2:
            errors[where] = f"the panel needs at least two judges with scored attempts; got {len(present)}"
            continue
        population = {j: index.prob[(j, condition)] for j in present}  # per_judge[j] is its labelled part
        ranked = sorted(set().union(*population.values()))
        matrix = [[population[j].get(a, math.nan) for a in ranked] for j in present]
        consensus = dict(zip(ranked, panel.panel_consensus(matrix).tolist(), strict=True))
        aids = sorted(set().union(*(per_judge[j] for j in present)))
        data = arrays(aids)
        y_panel = [consensus[a] for a in aids]
        cells, _ = compute_cells(
            PANEL_METRICS,
            where,
            errors,
            bootstrap,
            y_true=data["y_true"],
            y_score=y_panel,
            groups=data["groups"],
            params={"folds": folds},
            cluster=data["cluster"],
            seed=seed,
        )
        for metric in METRICS:
            if metric not in PANEL_METRICS:
                errors[f"{where}/{metric}"] = "the panel is a mean percentile rank, not a probability: not calibrated"
        metric_rows.append(
            {
                "judge": PANEL,
                "condition": condition,
                "n": len(aids),
                "clusters": len(set(data["cluster"])),
                "positives": int(sum(data["y_true"])),
                **cells,
            }
        )
        add_curve(condition, PANEL, data, y_panel, cells)

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
                list(PANEL_METRICS),
                data["y_true"],
                scores,
                groups=data["groups"],
                params={"folds": folds},
                bootstrap=bootstrap,
                cluster=data["cluster"],
                seed=seed,
                pairs=[(j, PANEL) for j in present],
            )
            if bootstrap > 0:
                panel_rows += difference_rows(
                    result,
                    PANEL_METRICS,
                    {"condition": condition},
                    len(common),
                    "panel_differences",
                    errors,
                    len(set(data["cluster"])),
                )
        except (MetricInputError, UndefinedMetricError) as exc:
            errors[f"panel_differences/{condition}"] = str(exc)

    calibration_rows = (
        _calibration_differences(
            index, labelled, judges, conditions, calibration, cluster, folds, bootstrap, seed, errors
        )
        if calibration is not None
        else []
    )
    condition_rows = _condition_differences(
        index, labelled, judges, conditions, params, bootstrap, arrays, seed, errors
    )

    report.add_table(
        "metrics",
        "Judge quality per judge and condition",
        ["judge", "condition", "n", "clusters", "positives", *METRICS],
        metric_rows,
        LABELS,
    )
    if condition_rows:
        report.add_table(
            "condition_differences",
            "Paired differences between conditions",
            ["judge", "difference", "n", "clusters", *METRICS],
            condition_rows,
            LABELS,
        )
    if calibration_rows:
        report.add_table(
            "calibration_differences",
            f"Calibration before and after an out-of-fold {calibration} map",
            ["judge", "condition", "n", "clusters", *CALIBRATION_COLUMNS, "applied"],
            calibration_rows,
            {**LABELS, **CALIBRATION_LABELS},
        )
    if weighting_rows:
        report.add_table(
            "weighting_differences",
            "Paired differences: probability-weighted minus sampled output",
            ["judge", "condition", "difference", "n", "clusters", *METRICS],
            weighting_rows,
            LABELS,
        )
    if panel_rows:
        report.add_table(
            "panel_differences",
            "Paired differences: judge minus panel",
            ["condition", "difference", "n", "clusters", *PANEL_METRICS],
            panel_rows,
            LABELS,
        )
    if roc.conditions:
        report.plots["roc"] = roc
    if reliability.judges:
        report.plots["reliability"] = reliability
    report.add_section(
        "metrics",
        "How well each judge predicts acceptance",
        "Each row scores one judge's acceptance probabilities against the real verdicts. ROC-AUC is the chance that "
        "an accepted attempt gets a higher probability than a rejected one (0.5 = guessing, 1 = perfect). PR-AUC is "
        "the average precision for finding accepted attempts. LogLoss and Brier penalise confident wrong "
        "probabilities (lower is better). ECE is the average gap between predicted and observed acceptance rates "
        "over 15 probability bins (lower is better). MCC (out-of-fold) is the quality of accept/reject decisions "
        f"with the threshold chosen on other trajectories ({folds}-fold grouped CV; -1..1, 0 = chance). The panel "
        "averages the judges' percentile ranks. Brackets are 95% intervals from a "
        f"{interval_text(cluster, bootstrap)}; Clusters is the number of {cluster}s resampled.",
        ["metrics"],
        ["roc", "reliability"],
        note=None if metric_rows else "No data: no judge scored an attempt that has a label_ac (a verdict).",
    )
    report.add_section(
        "condition_differences",
        "Does the input condition change a judge?",
        "Each row is the same judge on the same attempts under two conditions, later minus earlier condition. An "
        "interval that excludes 0 means the condition changed that metric beyond resampling noise.",
        ["condition_differences"],
    )
    report.add_section(
        "calibration_differences",
        "Would a calibration map help?",
        "Each row maps one judge's probabilities through a map learned on other folds (folds grouped by "
        f"{cluster}, so no map sees the attempt it calibrates) and compares ECE, Brier and LogLoss after minus "
        "before on the same resamples. Applied is yes only when the ECE difference's interval lies below 0.",
        ["calibration_differences"],
    )
    report.add_section(
        "weighting_differences",
        "Sampled or probability-weighted?",
        "Where an endpoint gives token probabilities, a judge's output is read two ways: the score it wrote (the "
        'sampled one) and the probability-weighted one ("<judge> (weighted)": the probability of acceptance, '
        "or the expected 0-5 score, from the probabilities of the allowed answers at the score's token; G-Eval's "
        "weighting). Each row is weighted minus sampled, on the same attempts and resamples.",
        ["weighting_differences"],
    )
    report.add_section(
        "panel_differences",
        "Judges against the panel",
        "Each row is one judge minus the panel on the attempts every judge scored. Positive ROC-AUC differences "
        "mean the judge ranks attempts better than the consensus of all judges.",
        ["panel_differences"],
    )
    return report


def _condition_differences(
    index: Index,
    labelled: set[str],
    judges: Sequence[str],
    conditions: Sequence[str],
    params: dict[str, Any],
    bootstrap: int,
    arrays: Callable[[Sequence[str]], dict[str, Any]],
    seed: int,
    errors: dict[str, str],
) -> list[Row]:
    """Between conditions, per judge, on the attempts the judge scored under every condition."""
    rows: list[Row] = []
    if bootstrap == 0:
        errors["differences"] = "paired differences need a bootstrap (bootstrap > 0)"
        return rows
    if len(conditions) < 2:
        errors["condition_differences"] = "only one condition: no difference between conditions"
        return rows
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
                list(METRICS),
                data["y_true"],
                {c: [maps[c][a] for a in common] for c in conditions},
                groups=data["groups"],
                params=params,
                bootstrap=bootstrap,
                cluster=data["cluster"],
                seed=seed,
                pairs=pairs,
            )
        except (MetricInputError, UndefinedMetricError) as exc:
            errors[f"condition_differences/{judge}"] = str(exc)
            continue
        rows += difference_rows(
            result, METRICS, {"judge": judge}, len(common), "condition_differences", errors, len(set(data["cluster"]))
        )
    return rows


def _weighting_differences(
    condition: str,
    per_judge: dict[str, dict[str, float]],
    params: dict[str, Any],
    bootstrap: int,
    arrays: Callable[[Sequence[str]], dict[str, Any]],
    seed: int,
    errors: dict[str, str],
) -> list[Row]:
    """Weighted minus sampled, per judge with a weighted twin, on the attempts both scored."""
    rows: list[Row] = []
    for judge, sampled in per_judge.items():
        weighted = per_judge.get(f"{judge}{WEIGHTED}")
        if judge.endswith(WEIGHTED) or weighted is None or bootstrap == 0:
            continue
        common = sorted(set(sampled) & set(weighted))
        where = f"weighting_differences/{judge}/{condition}"
        if len(common) < 2:
            errors[where] = "fewer than two attempts with both a sampled and a weighted output"
            continue
        data = arrays(common)
        twin = f"{judge}{WEIGHTED}"
        try:
            result = compare(
                list(METRICS),
                data["y_true"],
                {judge: [sampled[a] for a in common], twin: [weighted[a] for a in common]},
                groups=data["groups"],
                params=params,
                bootstrap=bootstrap,
                cluster=data["cluster"],
                seed=seed,
                pairs=[(twin, judge)],
            )
        except (MetricInputError, UndefinedMetricError) as exc:
            errors[where] = str(exc)
            continue
        rows += difference_rows(
            result,
            METRICS,
            {"judge": judge, "condition": condition},
            len(common),
            "weighting_differences",
            errors,
            len(set(data["cluster"])),
        )
    return rows


def _calibration_differences(
    index: Index,
    labelled: set[str],
    judges: Sequence[str],
    conditions: Sequence[str],
    method: str,
    cluster: str,
    folds: int,
    bootstrap: int,
    seed: int,
    errors: dict[str, str],
) -> list[Row]:
    """Per judge x condition: the out-of-fold calibration's figures (``metrics.recalibration.calibrate``)."""
    recalibration.check_method(method)
    rows: list[Row] = []
    for condition in conditions:
        for judge in judges:
            probs = {a: p for a, p in index.prob.get((judge, condition), {}).items() if a in labelled}
            aids = sorted(probs)
            where = f"calibration_differences/{judge}/{condition}"
            try:
                result = recalibration.calibrate(
                    method,
                    [min(1.0, max(0.0, probs[a])) for a in aids],
                    [int(index.label(a) or 0) for a in aids],  # labelled: never None
                    index.clusters(aids, cluster),
                    folds=folds,
                    bootstrap=bootstrap,
                    seed=seed,
                )
            except (MetricInputError, UndefinedMetricError) as exc:
                errors[where] = str(exc)
                continue
            row: Row = {
                "judge": judge,
                "condition": condition,
                "n": result["n"],
                "clusters": result["clusters"],
                "applied": "yes" if result["applied"] else "no",
            }
            for column in CALIBRATION_COLUMNS:
                cell = result[column]
                if cell["value"] is not None:
                    row[column] = Cell.of(float(cell["value"]), cell["ci"])
            rows.append(row)
    return rows
