"""The ``axiom`` report: the judges' 0..5 scores against reference scores (``label_score``), AXIOM-style (paper 000,
V-B).

Table: ``axiom`` (``judge, condition, n, clusters, scale`` + the cells of ``METRICS``); the first row is the ground
truth's own mean and entropy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metrics import axiom as axiom_lib
from metrics.errors import UndefinedMetricError
from metrics.reports.common import CLUSTERS, LABELS, Index, TidyRow, check_cluster, compute_cells, names, scored
from metrics.reports.model import Report, Row

KIND = "axiom"
METRICS = (
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


def build(
    rows: Sequence[TidyRow],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    bootstrap: int = 2000,
    cluster: str = "trajectory",
    seed: int = 0,
    metrics: Sequence[str] = METRICS,
) -> Report:
    """AXIOM-style evaluation of the judges' 0..5 scores against ``label_score`` (paper 000, V-B).

    Per judge x condition, on its scored attempts with a ``label_score``: the four subtask MCCs (gating,
    functionality, quality, effort), Spearman, Kendall, Krippendorff's alpha (interval; label and judge as two
    raters), EMD, the mean and the normalised entropy of the judge's scores. The judge's score is ``score`` when
    present, else ``p_ac``; a judge whose scores all lie in [0, 1] is min-max normalised to 0..5
    (``metrics.axiom.minmax_to_scale``); scores on 0..5 and labels are rounded half-to-even to integers.
    """
    cluster = check_cluster(cluster, CLUSTERS, "axiom")
    index = Index(rows)
    judges = names(scored(rows), "judge", judges)
    conditions = names(scored(rows), "condition", conditions)
    report = Report(
        KIND, {"judges": judges, "conditions": conditions, "bootstrap": bootstrap, "cluster": cluster, "seed": seed}
    )
    errors = report.errors
    table_rows: list[Row] = []
    labelled = {a for a, r in index.attempt.items() if r.get("label_score") is not None}
    if not labelled:
        errors["axiom"] = "no scored attempt has a label_score"
    else:
        truth_all = sorted(labelled)
        truth = [float(np.round(float(index.attempt[a]["label_score"]))) for a in truth_all]
        clusters = index.clusters(truth_all, cluster)
        cells, _ = compute_cells(
            ["mean", "entropy"],
            "axiom/ground truth/all",
            errors,
            bootstrap,
            y_score=truth,
            cluster=clusters,
            seed=seed,
        )
        table_rows.append(
            {
                "judge": "ground truth",
                "condition": "",
                "n": len(truth_all),
                "clusters": len(set(clusters)),
                "scale": "0..5",
                **cells,
            }
        )
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
            clusters = index.clusters(aids, cluster)
            cells, _ = compute_cells(
                metrics, where, errors, bootstrap, y_true=y_true, y_score=scores, cluster=clusters, seed=seed
            )
            table_rows.append(
                {
                    "judge": judge,
                    "condition": condition,
                    "n": len(aids),
                    "clusters": len(set(clusters)),
                    "scale": scale,
                    **cells,
                }
            )
    report.add_table(
        "axiom",
        "AXIOM subtasks and score distribution",
        ["judge", "condition", "n", "clusters", "scale", *metrics],
        table_rows,
        LABELS,
    )
    report.add_section(
        "axiom",
        "How well do the judges' 0..5 scores match the reference scores?",
        "The four MCC columns are AXIOM's diagnostic subtasks: gating (is the code a 0?), functionality (3-5 vs "
        "0-2), quality (5 vs 3-4) and effort (1/3 vs 2/4); -1..1, 0 = chance. Spearman, Kendall and Krippendorff's "
        "alpha measure agreement with the reference scores; EMD is the distance between the two score "
        "distributions (lower is better); mean and entropy describe how the judge uses the scale (entropy 1 = all "
        "six scores equally often, 0 = always the same score).",
        ["axiom"],
        note=None
        if labelled
        else "No data: no scored attempt has a reference score (label.score, 0..5) to compare the judges with.",
    )
    return report
