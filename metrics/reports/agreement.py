"""The ``agreement`` report: inter-judge agreement (paper 001, VI-A9) and consistency across repeats (paper 000, V-C).

Tables: ``pairwise`` (``condition, judge_a, judge_b, n, clusters`` + Cohen's kappa, Spearman, Kendall),
``multi_rater`` (``condition, judges, n, clusters`` + Fleiss' kappa, Krippendorff's alpha) and ``consistency``
(``judge, condition, repeats, n, clusters`` + Krippendorff's alpha, ICC). Plot: ``kappa_heatmap``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from metrics.reports.common import (
    CLUSTERS,
    LABELS,
    Index,
    TidyRow,
    check_cluster,
    cluster_of,
    compute_cells,
    interval_text,
    names,
    probability,
    scored,
)
from metrics.reports.model import Cell, KappaHeatmap, Report, Row

KIND = "agreement"


def build(
    rows: Sequence[TidyRow],
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
    attempts that have at least two ok repeats (ICC uses the attempts with every repeat). Intervals resample
    ``cluster`` (trajectory, problem or seed program).
    """
    cluster = check_cluster(cluster, CLUSTERS, "agreement")
    index = Index(rows)
    judges = names(scored(rows), "judge", judges)
    conditions = names(scored(rows), "condition", conditions)
    report = Report(
        KIND, {"judges": judges, "conditions": conditions, "bootstrap": bootstrap, "cluster": cluster, "seed": seed}
    )
    errors = report.errors
    pair_rows: list[Row] = []
    multi_rows: list[Row] = []
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
        clusters = index.clusters(common, cluster)
        ident: Row = {"n": len(common), "clusters": len(set(clusters))}
        vectors = {j: [index.prob[(j, condition)][a] for a in common] for j in present}
        matrix: list[list[float | None]] = [[1.0 if a == b else None for b in present] for a in present]
        for (ia, ja), (ib, jb) in combinations(enumerate(present), 2):
            where = f"pairwise/{condition}/{ja}/{jb}"
            pair = {"y_true": vectors[ja], "y_score": vectors[jb], "cluster": clusters, "seed": seed}
            kappa, _ = compute_cells(["cohen_kappa"], where, errors, bootstrap, params={"median_cut": True}, **pair)
            ranks, _ = compute_cells(["spearman", "kendall_tau"], where, errors, bootstrap, **pair)
            pair_rows.append({"condition": condition, "judge_a": ja, "judge_b": jb, **ident, **kappa, **ranks})
            kappa_cell = kappa.get("cohen_kappa")
            if isinstance(kappa_cell, Cell):
                matrix[ia][ib] = matrix[ib][ia] = kappa_cell.estimate
        heatmap[condition] = matrix
        ratings = [vectors[j] for j in present]
        where = f"multi_rater/{condition}"
        fleiss, _ = compute_cells(
            ["fleiss_kappa"],
            where,
            errors,
            bootstrap,
            ratings=ratings,
            params={"median_cut": True},
            cluster=clusters,
            seed=seed,
        )
        alpha, _ = compute_cells(
            ["krippendorff_alpha"],
            where,
            errors,
            bootstrap,
            ratings=ratings,
            params={"level": "interval"},
            cluster=clusters,
            seed=seed,
        )
        multi_rows.append({"condition": condition, "judges": ", ".join(present), **ident, **fleiss, **alpha})

    consistency_rows = _consistency(rows, judges, conditions, bootstrap, cluster, seed, errors)
    report.add_table(
        "pairwise",
        "Pairwise agreement",
        ["condition", "judge_a", "judge_b", "n", "clusters", "cohen_kappa", "spearman", "kendall_tau"],
        pair_rows,
        LABELS,
    )
    report.add_table(
        "multi_rater",
        "Agreement across all judges",
        ["condition", "judges", "n", "clusters", "fleiss_kappa", "krippendorff_alpha"],
        multi_rows,
        LABELS,
    )
    if consistency_rows:
        report.add_table(
            "consistency",
            "Consistency across repeats",
            ["judge", "condition", "repeats", "n", "clusters", "krippendorff_alpha", "icc"],
            consistency_rows,
            LABELS,
        )
    if heatmap:
        report.plots["kappa_heatmap"] = KappaHeatmap(
            "Pairwise Cohen's kappa (each judge cut at its own median)",
            judges=list(judges),
            labels={c: [j for j in judges if index.prob.get((j, c))] for c in heatmap},
            conditions=heatmap,
        )
    report.add_section(
        "pairwise",
        "Do two judges agree?",
        "Cohen's kappa compares the accept/reject calls of two judges after cutting each judge's probabilities at "
        "its own median (so judges with different scales are comparable); 0 = chance agreement, 1 = perfect. "
        "Spearman and Kendall measure whether two judges rank the attempts in the same order (-1..1). Brackets are "
        f"95% intervals from a {interval_text(cluster, bootstrap)}; Clusters is the number of {cluster}s resampled.",
        ["pairwise"],
        ["kappa_heatmap"],
        note=None if pair_rows else "No data: no condition has two judges that scored the same two or more attempts.",
    )
    report.add_section(
        "multi_rater",
        "Do all judges agree?",
        "Fleiss' kappa is the multi-judge version of Cohen's kappa on the median-cut calls; Krippendorff's alpha "
        "(interval level) measures agreement of the raw probabilities across all judges (1 = perfect, 0 = chance).",
        ["multi_rater"],
    )
    report.add_section(
        "consistency",
        "Does a judge agree with itself?",
        "The same judge scored the same attempts several times (repeats). Krippendorff's alpha and the intraclass "
        "correlation ICC(2,1) treat the repeats as raters: values near 1 mean the judge gives the same probability "
        "every time.",
        ["consistency"],
    )
    return report


def _consistency(
    rows: Sequence[TidyRow],
    judges: Sequence[str],
    conditions: Sequence[str],
    bootstrap: int,
    cluster: str,
    seed: int,
    errors: dict[str, str],
) -> list[Row]:
    by_key: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
    facts: dict[str, TidyRow] = {}
    for row in rows:
        p = probability(row)
        if row.get("status") != "ok" or p is None or row.get("parent_attempt_id"):
            continue
        aid = str(row["attempt_id"])
        facts.setdefault(aid, row)
        key = (str(row["judge"]), str(row["condition"]))
        by_key.setdefault(key, {}).setdefault(int(row.get("repeat") or 0), {})[aid] = p
    out: list[Row] = []
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
            clusters = [cluster_of(facts[a], cluster) for a in aids]
            alpha, _ = compute_cells(
                ["krippendorff_alpha"],
                where,
                errors,
                bootstrap,
                ratings=ratings,
                params={"level": "interval"},
                cluster=clusters,
                seed=seed,
            )
            icc, _ = compute_cells(["icc"], where, errors, bootstrap, ratings=ratings, cluster=clusters, seed=seed)
            out.append(
                {
                    "judge": judge,
                    "condition": condition,
                    "repeats": len(order),
                    "n": len(aids),
                    "clusters": len(set(clusters)),
                    **alpha,
                    **icc,
                }
            )
    return out
