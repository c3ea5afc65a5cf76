"""The ``cocreation`` report: Success@Turn, success after an initial failure and Kaplan-Meier time to success
(paper 001, IV-C3/C4).

Tables: ``summary`` (``trajectories, attempts, clusters, solved, success_after_failure``) and ``turns`` (``turn,
success_at_turn, unsolved_km``). Plots: ``success_at_turn``, ``kaplan_meier``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.registry import compute
from metrics.reports.common import LABELS, Cluster, TidyRow, check_cluster, cluster_of, interval_text, metric_cells
from metrics.reports.model import Cell, Report, Row, TurnCurve

KIND = "cocreation"
# Intervals must not split a trajectory: a seed program is not a unit here.
CLUSTERS = (Cluster.TRAJECTORY, Cluster.PROBLEM)
_CURVES: tuple[tuple[Literal["success_at_turn", "kaplan_meier"], str, str], ...] = (
    ("success_at_turn", "success_at_turn", "Success@Turn"),
    ("kaplan_meier", "unsolved_km", "Kaplan-Meier: share of trajectories unsolved"),
)


def build(
    rows: Sequence[TidyRow],
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
    cluster = check_cluster(cluster, CLUSTERS, "co-creation metrics")
    report = Report(KIND, {"bootstrap": bootstrap, "cluster": cluster, "seed": seed, "max_turn": max_turn})
    errors = report.errors
    attempts: dict[str, TidyRow] = {}
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
        _sections(report, bootstrap, cluster, note=f"No data: {errors['cocreation']}.")
        return report
    y_true = [int(attempts[a]["label_ac"]) for a in aids]
    groups = [cluster_of(attempts[a], "trajectory") for a in aids]
    turns = [int(attempts[a]["turn"]) for a in aids]
    clusters = [cluster_of(attempts[a], cluster) for a in aids]
    try:
        result = compute(
            ["success_at_turn", "success_after_failure", "kaplan_meier"],
            y_true=y_true,
            groups=groups,
            params={"turn": turns, "max_turn": max_turn},
            bootstrap=bootstrap,
            cluster=clusters,
            seed=seed,
        )
    except (MetricInputError, UndefinedMetricError) as exc:
        errors["cocreation"] = str(exc)
        _sections(report, bootstrap, cluster, note=f"Not computed: {exc}")
        return report
    summary = metric_cells(
        ["success_after_failure"],
        result["values"],
        result.get("ci", {}),
        result["errors"],
        result.get("ci_errors", {}),
        "summary/all",
        errors,
        bootstrap,
        result.get("degenerate", {}),
    )
    solved = len({g for g, y in zip(groups, y_true, strict=True) if y})
    report.add_table(
        "summary",
        "Trajectories",
        ["trajectories", "attempts", "clusters", "solved", "success_after_failure"],
        [
            {
                "trajectories": len(set(groups)),
                "attempts": len(aids),
                "clusters": len(set(clusters)),
                "solved": solved,
                **summary,
            }
        ],
        LABELS,
        size=("attempts", "clusters"),
    )
    curves: dict[str, TurnCurve] = {}
    for name, _, title in _CURVES:
        values = result["values"].get(name)
        if not isinstance(values, dict):
            errors[f"turns/{name}"] = result["errors"].get(name, "not computed")
            continue
        ci = result.get("ci", {}).get(name, {}) or {}
        if bootstrap > 0 and not ci:
            errors[f"turns/{name}/ci"] = result.get("ci_errors", {}).get(name, "no bootstrap interval")
        keys = sorted(values, key=int)
        curves[name] = TurnCurve(
            title,
            kind=name,
            turns=[int(k) for k in keys],
            value=[float(values[k]) for k in keys],
            lo=[float(ci[k][0]) if k in ci else None for k in keys],
            hi=[float(ci[k][1]) if k in ci else None for k in keys],
            n=len(aids),
            clusters=len(set(clusters)),
        )
    turn_rows: list[Row] = []
    reference = curves.get("success_at_turn") or curves.get("kaplan_meier")
    degenerate = result.get("degenerate", {})
    for i, turn in enumerate(reference.turns if reference else []):
        row: Row = {"turn": turn}
        for name, column, _ in _CURVES:
            curve = curves.get(name)
            if curve is not None:
                flat = (degenerate.get(name) or {}).get(str(turn), False)
                lo, hi = curve.lo[i], curve.hi[i]
                cell = Cell(curve.value[i], lo, hi, flat) if lo is not None and hi is not None else Cell(curve.value[i])
                # Every turn's figure is computed over all the trajectories' attempts.
                row[column] = cell.sized(len(aids), len(set(clusters)))
        turn_rows.append(row)
    report.add_table("turns", "Per turn", ["turn", "success_at_turn", "unsolved_km"], turn_rows, LABELS)
    report.plots.update(curves)
    _sections(report, bootstrap, cluster)
    return report


def _sections(report: Report, bootstrap: int, cluster: str, note: str | None = None) -> None:
    report.add_section(
        "summary",
        "Trajectories at a glance",
        "A trajectory is one participant working on one problem over several attempts (turns). Success after an "
        "initial failure is the share of trajectories whose first attempt was rejected that were accepted later.",
        ["summary"],
        note=note,
    )
    report.add_section(
        "turns",
        "When do trajectories succeed?",
        "Success@Turn k is the share of trajectories accepted at or before turn k. The Kaplan-Meier column is the "
        "estimated share still unsolved after turn k, counting trajectories that stopped without success as "
        f"censored at their last turn. Brackets are 95% intervals from a {interval_text(cluster, bootstrap)}.",
        ["turns"],
        ["success_at_turn", "kaplan_meier"],
    )
