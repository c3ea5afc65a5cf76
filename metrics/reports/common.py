"""What every report builder shares: reading the tidy judgment table, clusters, and metric cells from the registry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from metrics import panel
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.registry import compute
from metrics.reports.model import Cell, Row, finite

# A row of the tidy judgment table (see metrics.reports).
TidyRow = Mapping[str, Any]


class Cluster(StrEnum):
    """The unit a report's bootstrap resamples: a trajectory (participant x problem, the unit of dependence, paper
    001 IV-C2), a problem (the robustness check), or a seed program and its mutants (paper 001 VI-B)."""

    TRAJECTORY = "trajectory"
    PROBLEM = "problem"
    SEED = "seed"


CLUSTERS: tuple[Cluster, ...] = tuple(Cluster)

LABELS = {
    "judge": "Judge",
    "condition": "Condition",
    "n": "n",
    "clusters": "Clusters",
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
    "guard_mutants": "Semantic mutants in a guard context",
    "arm_discrimination_without_guard": "A_j without guard-context mutants",
    "confirmed_mutants": "Confirmed mutants (df_score)",
    "arm_discrimination_confirmed": "Confirmed-defect A_j",
    "arm_discrimination_confirmed_difference": "Confirmed - raw A_j",
    "semantic_share": "Semantic reacted share",
    "semantic_reacted": "Semantic reacted",
    "control_share": "Control reacted share",
    "control_reacted": "Control reacted",
    "severity_gradient": "Severity gradient rho",
    "metric": "Metric",
    "region": "Region",
    "pairs": "Pairs",
    "k": "k",
    "tasks": "Tasks",
    "samples": "Samples",
    "pass_at_k": "pass@k",
}


def probability(row: TidyRow) -> float | None:
    """A judge's acceptance probability for a row: ``p_ac`` when present, else ``score / 5``, else None (the output
    the panel ranks, ``metrics.panel.judge_output``)."""
    return panel.judge_output(row.get("p_ac"), row.get("score"))


def scored(rows: Iterable[TidyRow], mutants: bool = False) -> list[TidyRow]:
    """Rows that score: ok, repeat 0, and (unless ``mutants``) not a perturbation mutant."""
    return [
        r
        for r in rows
        if r.get("status") == "ok" and (r.get("repeat") or 0) == 0 and (mutants or not r.get("parent_attempt_id"))
    ]


def check_cluster(cluster: str, allowed: Sequence[str] = CLUSTERS, what: str = "this report") -> str:
    """``cluster`` when it is one of ``allowed``; MetricInputError naming ``cluster`` otherwise."""
    if cluster not in allowed:
        raise MetricInputError(f"cluster must be one of {', '.join(allowed)} for {what}, got {cluster!r}")
    return cluster


def cluster_of(row: TidyRow, cluster: str) -> str:
    """The bootstrap cluster of a row's attempt: its problem, its seed program (a mutant's parent, else itself), or
    its trajectory (participant x problem; an attempt without a participant is its own trajectory)."""
    if cluster == "problem":
        return str(row.get("problem_id"))
    if cluster == "seed":
        return str(row.get("seed_attempt_id") or row.get("parent_attempt_id") or row.get("attempt_id"))
    return str(row.get("trajectory") or row.get("attempt_id"))


def names(rows: Sequence[TidyRow], key: str, chosen: Sequence[str] | None) -> list[str]:
    """The chosen names in their order, else every value of ``key`` in the rows, sorted."""
    if chosen is not None:
        return list(chosen)
    return sorted({str(r[key]) for r in rows if r.get(key) is not None})


def interval_text(cluster: str, bootstrap: int) -> str:
    return f"{cluster}-clustered bootstrap ({bootstrap} resamples)" if bootstrap else "no bootstrap"


def metric_cells(
    metrics: Sequence[str],
    values: Mapping[str, Any],
    ci: Mapping[str, Any],
    errs: Mapping[str, str],
    ci_errs: Mapping[str, str],
    where: str,
    errors: dict[str, str],
    bootstrap: int,
    degenerate: Mapping[str, Any] | None = None,
) -> Row:
    """Cells for scalar metrics (with the registry's ``degenerate`` flag of each interval); the reason for a missing
    value or interval goes to ``errors``."""
    cells: Row = {}
    for metric in metrics:
        value = values.get(metric)
        if not finite(value):
            errors[f"{where}/{metric}"] = errs.get(metric, "not computed")
            continue
        cell = Cell.of(float(value), ci.get(metric), (degenerate or {}).get(metric, False))
        if cell.interval is None and bootstrap > 0:
            errors[f"{where}/{metric}/ci"] = ci_errs.get(metric, "no bootstrap interval")
        cells[metric] = cell
    return cells


def compute_cells(
    metrics: Sequence[str], where: str, errors: dict[str, str], bootstrap: int, **kwargs: Any
) -> tuple[Row, dict[str, Any]]:
    """``registry.compute`` turned into scalar cells; also returns the raw result (empty on a refused input)."""
    try:
        result = compute(list(metrics), bootstrap=bootstrap, **kwargs)
    except (MetricInputError, UndefinedMetricError) as exc:
        for metric in metrics:
            errors[f"{where}/{metric}"] = str(exc)
        return {}, {}
    scalar = [m for m in metrics if not isinstance(result["values"].get(m), dict)]
    cells = metric_cells(
        scalar,
        result["values"],
        result.get("ci", {}),
        result.get("errors", {}),
        result.get("ci_errors", {}),
        where,
        errors,
        bootstrap,
        result.get("degenerate", {}),
    )
    return cells, result


def difference_rows(
    result: Mapping[str, Any],
    metrics: Sequence[str],
    ident: Row,
    n: int,
    table: str,
    errors: dict[str, str],
    clusters: int,
) -> list[Row]:
    """Rows of paired differences (``registry.compare``): ``ident``, the difference's label, n, clusters and a cell
    per metric; a difference undefined on the sample or every resample goes to ``errors``."""
    rows: list[Row] = []
    for label, by_metric in result.get("differences", {}).items():
        row: Row = {**ident, "difference": label, "n": n, "clusters": clusters}
        where = "/".join([table, *map(str, ident.values()), label])
        for metric in metrics:
            entry = by_metric.get(metric)
            if entry and finite(entry.get("value")) and all(finite(v) for v in entry.get("ci", [])):
                row[metric] = Cell.of(float(entry["value"]), entry.get("ci"), entry.get("degenerate", False))
            else:
                errors[f"{where}/{metric}"] = "undefined for one of the two sides on the full sample or every resample"
        rows.append(row)
    return rows


class Index:
    """Scored rows of a table indexed by judge x condition x attempt, with per-attempt facts."""

    def __init__(self, rows: Sequence[TidyRow]) -> None:
        self.prob: dict[tuple[str, str], dict[str, float]] = {}
        self.raw_score: dict[tuple[str, str], dict[str, float]] = {}
        self.attempt: dict[str, TidyRow] = {}
        for row in scored(rows):
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

    def clusters(self, aids: Sequence[str], cluster: str) -> list[str]:
        """The cluster of every attempt, in order."""
        return [cluster_of(self.attempt[a], cluster) for a in aids]
