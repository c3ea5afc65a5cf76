"""Trust cards (issue 24, item 4): per judge and condition, one card per use, each with its figures, provenance and a
verdict against the operator's thresholds; and the ``trust`` report kind that shows them.

Uses and the figure each verdict is taken on (its point estimate against the threshold; the interval is shown):

- ``ranking``: ROC-AUC (verdict, ``min_auc``) and PR-AUC;
- ``gating``: out-of-fold MCC (verdict, ``min_mcc``) and the MCC-selected threshold on all labelled attempts;
- ``defect_detection``: arm discrimination A_j (verdict, ``min_arm_discrimination``) and the severity gradient, from
  the perturbation report's builder. Where differential fuzzing confirmed some mutants (a perturbation with
  ``confirm``), the verdict reads the confirmed A_j (:data:`CONFIRMED_DEFECT_METRIC`: semantic mutants with
  df_score < 1, controls with df_score == 1, metrics/perturbation.py), shown beside the raw one; else the raw A_j;
- ``quality_grading``: AXIOM's four subtask MCCs from the axiom report's builder (verdict: the lowest,
  ``min_axiom_mcc``);
- ``stability``: within-item variance, flip rate (verdict, ``max_flip_rate``) and the noise floor from repeats
  (:mod:`metrics.variance`), at the gating threshold when there are labels, else 0.5 (the card says which).

A verdict is ``fit`` or ``unfit``; ``too_few`` when the verdict's figure comes from fewer than ``min_items`` items or
``min_clusters`` clusters; ``no_data`` when it could not be computed (the card's ``errors`` say why). Its text reads
e.g. ``fit for gating: no, MCC 0.41 [0.33, 0.49] < 0.5``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from metrics import decisions, variance
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.reports import axiom, perturbation
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
)
from metrics.reports.model import Cell, Report, Row, Trust, trust_of

KIND = "trust"
USES = ("ranking", "gating", "defect_detection", "quality_grading", "stability")
# The A_j column of the perturbation table a defect-detection card reads (see the module docstring).
DEFECT_METRIC = "arm_discrimination"
# The A_j over the mutants differential fuzzing confirmed (the verdict's, when there is one).
CONFIRMED_DEFECT_METRIC = "arm_discrimination_confirmed"
DEFAULT_THRESHOLDS: dict[str, float] = {
    "min_auc": 0.8,
    "min_mcc": 0.5,
    "min_arm_discrimination": 0.7,
    "min_axiom_mcc": 0.5,
    "max_flip_rate": 0.1,
}
AXIOM_SUBTASKS = ("axiom_gating", "axiom_functionality", "axiom_quality", "axiom_effort")
SHORT = {
    "roc_auc": "ROC-AUC",
    "mcc_oof": "MCC",
    DEFECT_METRIC: "A_j",
    CONFIRMED_DEFECT_METRIC: "confirmed A_j",
    "flip_rate": "flip rate",
    "noise_floor": "noise floor",
    "variance": "within-item variance",
    **{name: LABELS[name] for name in AXIOM_SUBTASKS},
}
# Per use: (verdict figure(s), threshold key, higher is better).
RULES: dict[str, tuple[tuple[str, ...], str, bool]] = {
    "ranking": (("roc_auc",), "min_auc", True),
    "gating": (("mcc_oof",), "min_mcc", True),
    "defect_detection": ((DEFECT_METRIC,), "min_arm_discrimination", True),
    "quality_grading": (AXIOM_SUBTASKS, "min_axiom_mcc", True),
    "stability": (("flip_rate",), "max_flip_rate", False),
}
SAMPLE_PROBLEMS = 10


def _text(value: float) -> str:
    return f"{value:.2f}"


def verdict(use: str, figures: Mapping[str, Cell], thresholds: Mapping[str, float]) -> tuple[str, str]:
    """``(status, text)`` of a card from its figures (trust already judged): see the module docstring."""
    keys, threshold_key, higher = RULES[use]
    if use == "defect_detection" and CONFIRMED_DEFECT_METRIC in figures:
        keys = (CONFIRMED_DEFECT_METRIC,)  # the mutants fuzzing confirmed, not the raw ones
    label = use.replace("_", " ")
    present = [k for k in keys if k in figures]
    if not present:
        return "no_data", f"fit for {label}: no data"
    small = [k for k in present if figures[k].trust == Trust.TOO_FEW]
    if small:
        cell = figures[small[0]]
        return "too_few", f"fit for {label}: too few to judge (n={cell.n}, {cell.clusters} clusters)"
    # The worst of the verdict's figures decides (for AXIOM: the lowest subtask MCC).
    key = min(present, key=lambda k: figures[k].estimate if higher else -figures[k].estimate)
    cell, limit = figures[key], float(thresholds[threshold_key])
    fit = cell.estimate >= limit if higher else cell.estimate <= limit
    shown = f"{SHORT.get(key, key)} {_text(cell.estimate)}"
    if cell.interval is not None:
        shown += f" [{_text(cell.interval[0])}, {_text(cell.interval[1])}]"
    relation = (">=" if fit else "<") if higher else ("<=" if fit else ">")
    return ("fit" if fit else "unfit"), f"fit for {label}: {'yes' if fit else 'no'}, {shown} {relation} {limit:g}"


def figure_json(name: str, cell: Cell) -> dict[str, Any]:
    """A card's figure: ``{"name", "value", "ci" (null without one), "n", "clusters", ...}`` (the cell's JSON)."""
    return {"name": name, "ci": None, **cell.to_json()}


def _cell(figure: Mapping[str, Any]) -> Cell:
    return Cell.of(figure["value"], figure.get("ci"), figure.get("degenerate", False)).sized(
        figure["n"], figure["clusters"]
    )


def judge_cards(
    rows: Sequence[TidyRow],
    judge: str,
    condition: str,
    *,
    bootstrap: int = 500,
    cluster: str = "trajectory",
    seed: int = 0,
    folds: int = 5,
    thresholds: Mapping[str, float] | None = None,
    min_items: int = 30,
    min_clusters: int = 10,
) -> dict[str, Any]:
    """The cards of ``judge`` under ``condition`` over the tidy rows: ``{"judge", "condition", "cards": [{"use",
    "verdict", "status", "figures", "data", "errors"}]}``."""
    cluster = check_cluster(cluster, CLUSTERS, "trust cards")
    limits = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
    theirs = [r for r in rows if r.get("judge") == judge]
    mine = [r for r in theirs if r.get("condition") == condition]
    index = Index(rows)
    probs = index.prob.get((judge, condition), {})
    labelled = sorted(a for a in probs if index.label(a) is not None)
    figures: dict[str, dict[str, Cell]] = {use: {} for use in USES}
    errors: dict[str, dict[str, str]] = {use: {} for use in USES}
    used: dict[str, list[str]] = {use: [] for use in USES}
    threshold, threshold_source = decisions.DEFAULT_THRESHOLD, "0.5 (no labelled attempts to select one on)"

    # Ranking and gating: the registry's metrics on the labelled attempts.
    if labelled:
        y_true = [int(index.label(a) or 0) for a in labelled]
        y_score = [probs[a] for a in labelled]
        cluster_labels = index.clusters(labelled, cluster)
        sample: dict[str, Any] = {
            "y_true": y_true,
            "y_score": y_score,
            "groups": index.clusters(labelled, "trajectory"),
            "cluster": cluster_labels,
        }
        n, clusters = len(labelled), len(set(cluster_labels))
        for use, metrics in (("ranking", ["roc_auc", "pr_auc"]), ("gating", ["mcc_oof"])):
            cells, _ = compute_cells(metrics, use, errors[use], bootstrap, params={"folds": folds}, seed=seed, **sample)
            figures[use].update({k: v.sized(n, clusters) for k, v in cells.items() if isinstance(v, Cell)})
            used[use] = labelled
        if 0 < sum(y_true) < len(y_true):
            labels = np.asarray(y_true, dtype=np.int64)
            threshold = decisions.select_threshold(labels, np.asarray(y_score), decisions.DEFAULT_GRID)
            threshold_source = "the MCC-maximising threshold on every labelled attempt"
            figures["gating"]["threshold"] = Cell(threshold).sized(n, clusters)
    else:
        for use in ("ranking", "gating"):
            errors[use][use] = "no scored attempt with a label_ac (a verdict) for this judge and condition"

    # Defect detection and quality grading: the perturbation and axiom reports' own builders, on this judge.
    for use, build, table, keys in (
        (
            "defect_detection",
            perturbation.build,
            "perturbation",
            (DEFECT_METRIC, CONFIRMED_DEFECT_METRIC, "severity_gradient"),
        ),
        ("quality_grading", axiom.build, "axiom", AXIOM_SUBTASKS),
    ):
        # Only the subtasks of AXIOM's report are computed (its builder's ``metrics``), not its whole table.
        kwargs: dict[str, Any] = {"metrics": AXIOM_SUBTASKS} if use == "quality_grading" else {"cluster": "seed"}
        part = build(rows, judges=[judge], conditions=[condition], bootstrap=bootstrap, seed=seed, **kwargs)
        found = [r for r in part.tables[table].rows if r.get("judge") == judge and r.get("condition") == condition]
        for key in keys:
            if found and isinstance(found[0].get(key), Cell):
                figures[use][key] = found[0][key]  # type: ignore[assignment]
        errors[use].update({k: v for k, v in part.errors.items() if judge in k or "/" not in k})
    used["defect_detection"] = sorted({str(r["attempt_id"]) for r in mine if r.get("arm")})
    used["quality_grading"] = [a for a in probs if index.attempt[a].get("label_score") is not None]

    # Stability: every repeat of the judge's ok rows (mutants aside).
    repeated = [
        r for r in mine if r.get("status") == "ok" and not r.get("parent_attempt_id") and probability(r) is not None
    ]
    try:
        stable = variance.judge_variance(
            [str(r["attempt_id"]) for r in repeated],
            [float(probability(r) or 0.0) for r in repeated],
            [cluster_of(r, cluster) for r in repeated],
            threshold=threshold,
            bootstrap=bootstrap,
            seed=seed,
        )
        figures["stability"] = {name: _cell(figure) for name, figure in stable.items()}
        used["stability"] = sorted({str(r["attempt_id"]) for r in repeated})
    except (MetricInputError, UndefinedMetricError) as exc:
        errors["stability"]["stability"] = str(exc)

    cards = []
    for use in USES:
        judged = {k: _trusted(v, min_items, min_clusters) for k, v in figures[use].items()}
        status, text = verdict(use, judged, limits)
        data = {**provenance(index, used[use], mine), "conditions": _conditions(theirs), "condition": condition}
        if use == "stability":
            data["threshold"], data["threshold_source"] = threshold, threshold_source
        card = {
            "use": use,
            "verdict": text,
            "status": status,
            "threshold": {RULES[use][1]: limits[RULES[use][1]]},
            "figures": [figure_json(name, cell) for name, cell in judged.items()],
            "data": data,
            "errors": errors[use],
        }
        cards.append(card)
    return {"judge": judge, "condition": condition, "cards": cards}


def _trusted(cell: Cell, min_items: int, min_clusters: int) -> Cell:
    if cell.n is None or cell.clusters is None:
        return cell
    return replace(cell, trust=trust_of(cell.n, cell.clusters, min_items, min_clusters))


def _conditions(rows: Sequence[TidyRow]) -> list[str]:
    return sorted({str(r["condition"]) for r in rows if r.get("condition") is not None})


def provenance(index: Index, attempts: Sequence[str], mine: Sequence[TidyRow]) -> dict[str, Any]:
    """Where a card's figures come from: the problems (count and a sample of ids), the attempts' date range, and
    the conditions this judge has rows under."""
    facts = [index.attempt[a] for a in attempts if a in index.attempt]
    problems = sorted({str(r.get("problem_id")) for r in facts})
    dates = sorted(str(r["created_at"]) for r in facts if r.get("created_at"))
    repeats = [int(r.get("repeat") or 0) for r in mine]
    return {
        "dataset": {"attempts": len(facts), "problems": len(problems), "problem_ids": problems[:SAMPLE_PROBLEMS]},
        "date_range": [dates[0], dates[-1]] if dates else None,
        "conditions": _conditions(mine),
        "repeats": max(repeats) + 1 if repeats else 0,
    }


def build(
    rows: Sequence[TidyRow],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    folds: int = 5,
    bootstrap: int = 500,
    cluster: str = "trajectory",
    seed: int = 0,
    thresholds: Mapping[str, float] | None = None,
    min_items: int = 1,
    min_clusters: int = 1,
) -> Report:
    """The ``trust`` report: every judge x condition's cards as one table (``trust_cards``: judge, condition, use,
    verdict and one figure per row); verdicts judged against ``min_items`` / ``min_clusters`` (the request's, else
    the operator's) and ``thresholds`` (the operator's, TRIBUNAL_TRUST_*)."""
    cluster = check_cluster(cluster, CLUSTERS, KIND)
    ok = [r for r in rows if r.get("status") == "ok"]
    judges = names(ok, "judge", judges)
    conditions = names(ok, "condition", conditions)
    limits = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
    report = Report(
        KIND,
        {
            "judges": judges,
            "conditions": conditions,
            "folds": folds,
            "bootstrap": bootstrap,
            "cluster": cluster,
            "seed": seed,
            "thresholds": limits,
        },
    )
    table: list[Row] = []
    for judge in judges:
        for condition in conditions:
            if not any(r.get("judge") == judge and r.get("condition") == condition for r in ok):
                continue
            result = judge_cards(
                rows,
                judge,
                condition,
                bootstrap=bootstrap,
                cluster=cluster,
                seed=seed,
                folds=folds,
                thresholds=limits,
                min_items=min_items,
                min_clusters=min_clusters,
            )
            for card in result["cards"]:
                for reason_at, reason in card["errors"].items():
                    report.errors[f"trust/{judge}/{condition}/{card['use']}/{reason_at}"] = reason
                for ordinal, figure in enumerate(card["figures"] or [None]):
                    row: Row = {"judge": judge, "condition": condition, "use": card["use"].replace("_", " ")}
                    # The verdict once per card, on its first figure's row.
                    row["verdict"] = "" if ordinal else card["verdict"].split(": ", 1)[-1]
                    if figure is not None:
                        row["figure"] = SHORT.get(figure["name"], LABELS.get(figure["name"], figure["name"]))
                        row["value"] = _cell(figure)
                        row["n"], row["clusters"] = figure["n"], figure["clusters"]
                    table.append(row)
    report.add_table(
        "trust_cards",
        "Trust cards: what each judge is fit for",
        ["judge", "condition", "use", "verdict", "figure", "value", "n", "clusters"],
        table,
        {**LABELS, "use": "Use", "verdict": "Verdict", "figure": "Figure", "value": "Value [95% interval]"},
    )
    report.add_section(
        "trust_cards",
        "How far to trust each judge, use by use",
        "One card per use of a judge: ranking (ROC-AUC, PR-AUC), gating (out-of-fold MCC at the threshold chosen "
        "on other folds), defect detection (arm discrimination A_j and severity gradient on perturbation mutants), "
        "quality grading (AXIOM's subtask MCCs, where reference scores exist) and stability (variance across "
        "repeats, flip rate across the decision threshold, and the noise floor: the smallest difference of two "
        "systems' mean scores the judge can tell apart at 95%). The verdict compares the first figure with the "
        f"operator's threshold ({', '.join(f'{k} {v}' for k, v in limits.items())}). Brackets are 95% intervals "
        f"from a {interval_text(cluster, bootstrap)}.",
        ["trust_cards"],
        note=None if table else "No data: no judge has an ok judgment in the selected attempts.",
    )
    return report
