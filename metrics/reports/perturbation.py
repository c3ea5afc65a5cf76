"""The ``perturbation`` report: does a judge notice injected defects? (paper 001, VI-B).

Table: ``perturbation`` (``judge, condition, mutants, clusters, primary`` + arm discrimination, reactions per arm and
the severity gradient; when mutants carry a differential-fuzzing ``df_score``, the confirmed-defect A_j and its paired
difference from the raw A_j). Plot: ``perturbation_shift``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metrics.bootstrap import bootstrap_loop, draw_resamples, summarise
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.perturbation import (
    PRIMARY_THRESHOLD,
    REACTION_DROP,
    arm_discrimination,
    confirmed_mask,
    primary_subset,
)
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
from metrics.reports.model import Cell, PerturbationShiftPlot, Report, Row, ShiftPanel

KIND = "perturbation"
SYNTHESIZED_PREFIX = "axiom:"
TABLE_KEYS = (
    "judge",
    "condition",
    "mutants",
    "clusters",
    "primary",
    "arm_discrimination",
    "guard_mutants",
    "arm_discrimination_without_guard",
    "confirmed_mutants",
    "arm_discrimination_confirmed",
    "arm_discrimination_confirmed_difference",
    "semantic_share",
    "semantic_reacted",
    "control_share",
    "control_reacted",
    "severity_gradient",
)


def build(
    rows: Sequence[TidyRow],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    bootstrap: int = 2000,
    cluster: str = "seed",
    seed: int = 0,
    primary_threshold: float = PRIMARY_THRESHOLD,
    reaction_drop: float = REACTION_DROP,
) -> Report:
    """Defect sensitivity from the perturbation study (paper 001, VI-B), per judge x condition.

    Mutants are rows with ``parent_attempt_id`` and ``arm``; the seed's probability is the same judge's (same
    condition, repeat 0) for the parent attempt. Restricted to the primary subset (seed probability >=
    ``primary_threshold``): arm discrimination A_j, reactions per arm (drop > ``reaction_drop``), severity
    gradient; intervals resample seed programs (``cluster="seed"``, default; ``"trajectory"`` or ``"problem"`` of the
    seed resample coarser units that never split a seed's mutants). Plot: mean drop by operator, per judge x
    condition, with the control band = the central 95% of the control mutants' drops.
    """
    cluster = check_cluster(cluster, CLUSTERS, "perturbation")
    index = Index(rows)
    population = scored(rows, mutants=True)
    judges = names(population, "judge", judges)
    conditions = names(population, "condition", conditions)
    report = Report(
        KIND,
        {
            "judges": judges,
            "conditions": conditions,
            "bootstrap": bootstrap,
            "cluster": cluster,
            "seed": seed,
            "primary_threshold": primary_threshold,
            "reaction_drop": reaction_drop,
        },
    )
    errors = report.errors
    # AXIOM's synthesized programs (operator "axiom:...") are derived attempts with an arm too; they are the axiom
    # report's, not a perturbation study's.
    mutants = [
        r
        for r in population
        if r.get("parent_attempt_id")
        and r.get("arm")
        and not str(r.get("operator") or "").startswith(SYNTHESIZED_PREFIX)
        and probability(r) is not None
    ]
    table_rows: list[Row] = []
    shift = PerturbationShiftPlot("Mean probability drop by operator (primary subset)")
    if not mutants:
        errors["perturbation"] = "no mutants: no scored row has a parent_attempt_id and an arm"
    for judge in judges if mutants else []:
        for condition in conditions:
            seeds = index.prob.get((judge, condition), {})
            chosen = [
                m
                for m in mutants
                if m["judge"] == judge and m["condition"] == condition and str(m["parent_attempt_id"]) in seeds
            ]
            where = f"perturbation/{judge}/{condition}"
            if not chosen:
                errors[where] = "no mutant whose seed this judge scored under this condition"
                continue
            row, panel = _judge_condition(
                judge,
                condition,
                chosen,
                seeds,
                where,
                errors,
                bootstrap,
                cluster,
                seed,
                primary_threshold,
                reaction_drop,
            )
            table_rows.append(row)
            if panel is not None:
                shift.panels[f"{judge} / {condition}"] = panel
    report.add_table("perturbation", "Defect sensitivity (primary subset)", TABLE_KEYS, table_rows, LABELS)
    if shift.panels:
        report.plots["perturbation_shift"] = shift
    report.add_section(
        "perturbation",
        "Does a judge notice injected defects?",
        "Mutants are copies of accepted programs with one injected defect (semantic arm) or a harmless rewrite "
        "(control arm). Only mutants whose original the judge itself scored as acceptable (probability >= "
        f"{primary_threshold}) count. Arm discrimination is the chance that a semantic mutant's probability drops "
        "more than a control mutant's (0.5 = no better than chance). Reacted counts mutants whose probability "
        f"dropped by more than {reaction_drop}. The severity gradient is the Spearman correlation between the "
        f"operator's severity and the drop. Brackets are 95% intervals from a {interval_text(cluster, bootstrap)}.",
        ["perturbation"],
        ["perturbation_shift"],
        note=None
        if mutants
        else "No data: no scored mutant (an attempt with a parent_attempt_id and an arm) in the selected attempts.",
    )
    return report


def _judge_condition(
    judge: str,
    condition: str,
    chosen: list[TidyRow],
    seeds: dict[str, float],
    where: str,
    errors: dict[str, str],
    bootstrap: int,
    cluster: str,
    seed: int,
    primary_threshold: float,
    reaction_drop: float,
) -> tuple[Row, ShiftPanel | None]:
    """One judge x condition: its table row and its panel of the shift plot (None without a primary mutant)."""
    y_score = [float(probability(m) or 0.0) for m in chosen]
    seed_score = [seeds[str(m["parent_attempt_id"])] for m in chosen]
    arms = [str(m["arm"]) for m in chosen]
    severity = [None if m.get("severity") is None else float(m["severity"]) for m in chosen]
    clusters = [cluster_of(m, cluster) for m in chosen]
    primary = primary_subset(seed_score, primary_threshold).tolist()
    params = {"seed_score": seed_score, "arm": arms, "primary_threshold": primary_threshold}
    cells, result = compute_cells(
        ["arm_discrimination", "reactions"],
        where,
        errors,
        bootstrap,
        y_score=y_score,
        params={**params, "reaction_drop": reaction_drop},
        cluster=clusters,
        seed=seed,
    )
    # The severity gradient is defined over operators with a severity (paper 001's four): semantic mutants of an
    # operator without one (the MutPy operators) are left out of it, and only of it.
    graded = [a != "semantic" or s is not None for a, s in zip(arms, severity, strict=True)]
    if any(a == "semantic" and g for a, g in zip(arms, graded, strict=True)):
        gradient, _ = compute_cells(
            ["severity_gradient"],
            where,
            errors,
            bootstrap,
            y_score=[v for v, g in zip(y_score, graded, strict=True) if g],
            params={
                "seed_score": [v for v, g in zip(seed_score, graded, strict=True) if g],
                "arm": [v for v, g in zip(arms, graded, strict=True) if g],
                "severity": [v for v, g in zip(severity, graded, strict=True) if g],
                "primary_threshold": primary_threshold,
            },
            cluster=[v for v, g in zip(clusters, graded, strict=True) if g],
            seed=seed,
        )
        cells.update(gradient)
    else:
        errors[f"{where}/severity_gradient"] = "no semantic mutant of an operator with a severity (paper 001's four)"

    def size(mask: Sequence[bool]) -> tuple[int, int]:
        """The primary mutants a figure is computed from (within ``mask``) and their distinct clusters."""
        chosen_clusters = [c for c, p, m in zip(clusters, primary, mask, strict=True) if p and m]
        return len(chosen_clusters), len(set(chosen_clusters))

    every = [True] * len(chosen)
    cells = {
        key: value.sized(*size(graded if key == "severity_gradient" else every)) if isinstance(value, Cell) else value
        for key, value in cells.items()
    }
    row: Row = {
        "judge": judge,
        "condition": condition,
        "mutants": len(chosen),
        "clusters": len(set(clusters)),
        "primary": int(sum(primary)),
        **cells,
    }
    # The guard-excluded variant (paper 001 VI-B4): semantic mutants whose edit sits in a guard condition the
    # problem's constraints may never reach are set aside, controls kept.
    guard = [m.get("arm") == "semantic" and bool(m.get("guard_context")) for m in chosen]
    row["guard_mutants"] = int(sum(guard))
    keep = [not g for g in guard]
    unguarded, _ = compute_cells(
        ["arm_discrimination"],
        f"{where}/without_guard",
        errors,
        bootstrap,
        y_score=[v for v, k in zip(y_score, keep, strict=True) if k],
        params={
            "seed_score": [v for v, k in zip(seed_score, keep, strict=True) if k],
            "arm": [v for v, k in zip(arms, keep, strict=True) if k],
            "primary_threshold": primary_threshold,
        },
        cluster=[v for v, k in zip(clusters, keep, strict=True) if k],
        seed=seed,
    )
    unguarded_cell = unguarded.get("arm_discrimination")
    if isinstance(unguarded_cell, Cell):
        row["arm_discrimination_without_guard"] = unguarded_cell.sized(*size(keep))
    _confirmed(row, chosen, y_score, seed_score, arms, clusters, primary, where, errors, bootstrap, seed)
    reactions = result.get("values", {}).get("reactions") if result else None
    if isinstance(reactions, dict):
        rci = result.get("ci", {}).get("reactions", {}) or {}
        flat = result.get("degenerate", {}).get("reactions", {}) or {}
        for arm in ("semantic", "control"):
            share = f"{arm}_share"
            if share in reactions:
                cell = Cell.of(float(reactions[share]), rci.get(share), flat.get(share, False))
                row[share] = cell.sized(*size([a == arm for a in arms]))
                row[f"{arm}_reacted"] = f"{int(reactions[f'{arm}_reacted'])}/{int(reactions[f'{arm}_scored'])}"
            else:
                errors[f"{where}/{share}"] = f"no {arm} mutant in the primary subset"
    elif result:
        errors[f"{where}/reactions"] = result.get("errors", {}).get("reactions", "not computed")

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
    if not drops:
        return row, None
    operators = sorted(drops)
    arm_of = {str(m.get("operator") or m["arm"]): str(m["arm"]) for m in chosen}
    band = np.percentile(control, [2.5, 97.5]) if control else None
    return row, ShiftPanel(
        operators=operators,
        mean_drop=[float(np.mean(drops[o])) for o in operators],
        count=[len(drops[o]) for o in operators],
        arm=[arm_of[o] for o in operators],
        control_band=None if band is None else (float(band[0]), float(band[1])),
    )


def _confirmed(
    row: Row,
    chosen: list[TidyRow],
    y_score: list[float],
    seed_score: list[float],
    arms: list[str],
    clusters: list[str],
    primary: list[bool],
    where: str,
    errors: dict[str, str],
    bootstrap: int,
    seed: int,
) -> None:
    """Confirmed-defect A_j (issue 24 item 4) beside the raw one, when mutants carry a differential-fuzzing
    ``df_score``: only semantic mutants that behave differently (df_score < 1) and controls that behave the same
    (df_score == 1) count (:func:`metrics.perturbation.confirmed_mask`). The difference confirmed - raw is paired:
    both are computed on every resample of the same seed-cluster draws (drawn over all of this row's mutants)."""
    df_scores = [np.nan if m.get("df_score") is None else float(m["df_score"]) for m in chosen]
    if all(np.isnan(d) for d in df_scores):
        return
    confirmed = confirmed_mask(arms, df_scores)
    row["confirmed_mutants"] = int(sum(c and p for c, p in zip(confirmed, primary, strict=True)))
    drop = np.asarray(seed_score) - np.asarray(y_score)
    arm = np.asarray(arms)
    keep = np.asarray(primary)

    def both(items: np.ndarray) -> tuple[float, float]:
        raw_items = items[keep[items]]
        confirmed_items = raw_items[confirmed[raw_items]]
        return arm_discrimination(drop[raw_items], arm[raw_items]), arm_discrimination(
            drop[confirmed_items], arm[confirmed_items]
        )

    name = f"{where}/arm_discrimination_confirmed"
    try:
        raw, value = both(np.arange(len(chosen)))
    except (MetricInputError, UndefinedMetricError) as exc:
        errors[name] = str(exc)
        return

    def size(mask: np.ndarray) -> tuple[int, int]:
        members = [c for c, m in zip(clusters, mask.tolist(), strict=True) if m]
        return len(members), len(set(members))

    confirmed_size = size(keep & confirmed)
    cell, difference = Cell.of(value), Cell.of(value - raw)
    if bootstrap > 0:
        try:
            draws = bootstrap_loop(lambda items, copy: both(items), draw_resamples(clusters, bootstrap, seed), clusters)
            pairs = np.array([(np.nan, np.nan) if d is None else d for d in draws], dtype=np.float64)
            summary, paired = summarise(pairs[:, 1]), summarise(pairs[:, 1] - pairs[:, 0])
            cell = Cell.of(value, summary["ci"], summary["degenerate"])
            difference = Cell.of(value - raw, paired["ci"], paired["degenerate"])
        except (MetricInputError, UndefinedMetricError) as exc:
            errors[f"{name}/ci"] = str(exc)
    row["arm_discrimination_confirmed"] = cell.sized(*confirmed_size)
    row["arm_discrimination_confirmed_difference"] = difference.sized(*size(keep))
