"""The metric table: every metric of api.md by name (`SPECS`), each with its point function over `Inputs`, its
weights-based form for the vectorised bootstrap where it has one, and whether it has a bootstrap interval at all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from metrics import (
    agreement,
    axiom,
    calibration,
    cocreation,
    decisions,
    discrimination,
    passk,
    perturbation,
    similarity,
)
from metrics.arrays import FloatArray
from metrics.errors import MetricInputError
from metrics.inputs import Inputs, choice_param, integer_param, number_param

Value = float | dict[str, float]

# Algorithm 2's finest grid step through compute: its work grows with (1 / step) ** 4.
MIN_THRESHOLD_STEP = 0.01


def _grid(inputs: Inputs) -> FloatArray:
    return decisions.check_grid(inputs.settings["grid"])


def _mcc_oof(inputs: Inputs) -> float:
    folds = inputs.folds("mcc_oof")
    return decisions.mcc_oof_from_folds(
        inputs.binary_truth("mcc_oof"), inputs.need("y_score", "mcc_oof"), folds, _grid(inputs)
    )


def _mcc_oof_weighted(inputs: Inputs, weights: FloatArray) -> FloatArray:
    return decisions.mcc_oof_weighted(
        inputs.binary_truth("mcc_oof"),
        inputs.need("y_score", "mcc_oof"),
        weights,
        inputs.folds("mcc_oof"),
        _grid(inputs),
    )


def _target(inputs: Inputs, metric: str) -> FloatArray:
    target = choice_param(inputs.settings, "target", ("y_score", "y_true"))
    return inputs.need(target, metric)


def _median_cut(inputs: Inputs) -> bool:
    value = inputs.settings["median_cut"]
    if not isinstance(value, bool):
        raise MetricInputError(f"params.median_cut must be true or false, got {value!r}")
    return value


def _cohen_kappa(inputs: Inputs) -> float:
    first, second = inputs.need("y_true", "cohen_kappa"), inputs.need("y_score", "cohen_kappa")
    if _median_cut(inputs):
        first, second = agreement.median_cut(first, "y_true"), agreement.median_cut(second, "y_score")
    return agreement.cohen_kappa(first, second, inputs.settings["weights"], inputs.settings["scale"])


def _fleiss_kappa(inputs: Inputs) -> float:
    matrix = inputs.rater_matrix("fleiss_kappa")
    return agreement.fleiss_kappa_median_cut(matrix) if _median_cut(inputs) else agreement.fleiss_kappa(matrix)


def _mutants(inputs: Inputs, metric: str) -> tuple[FloatArray, NDArray[Any], NDArray[np.bool_]]:
    """Drop of every mutant, its arm, and the primary-subset mask."""
    seed = inputs.need("seed_score", metric)
    drop = perturbation.score_drop(inputs.need("y_score", metric), seed)
    arm = inputs.need("arm", metric)
    primary = seed >= number_param(inputs.settings, "primary_threshold")
    return drop, arm, primary


def _arm_discrimination(inputs: Inputs) -> float:
    drop, arm, primary = _mutants(inputs, "arm_discrimination")
    return perturbation.arm_discrimination(drop[primary], arm[primary])


def _reactions(inputs: Inputs) -> dict[str, float]:
    drop, arm, primary = _mutants(inputs, "reactions")
    return perturbation.reactions(drop[primary], arm[primary], number_param(inputs.settings, "reaction_drop"))


def _severity_gradient(inputs: Inputs) -> float:
    drop, arm, primary = _mutants(inputs, "severity_gradient")
    severity = inputs.need("severity", "severity_gradient")
    semantic = perturbation.semantic_mask(arm)
    if np.any(semantic & np.isnan(severity)):
        raise MetricInputError("params.severity is missing for a semantic mutant")
    return perturbation.severity_gradient(drop[primary & semantic], severity[primary & semantic])


def _trajectory_args(inputs: Inputs, metric: str) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    return inputs.need("y_true", metric), inputs.need("groups", metric), inputs.need("turn", metric)


def _max_turn(inputs: Inputs) -> int | None:
    return None if inputs.settings["max_turn"] is None else integer_param(inputs.settings, "max_turn", 1)


def _axiom(subtask: str) -> Callable[[Inputs], float]:
    def point(inputs: Inputs) -> float:
        name = f"axiom_{subtask}"
        return axiom.subtask_mcc(inputs.need("y_true", name), inputs.need("y_score", name), subtask)

    return point


def _axiom_weighted(subtask: str) -> Callable[[Inputs, FloatArray], FloatArray]:
    def weighted(inputs: Inputs, weights: FloatArray) -> FloatArray:
        name = f"axiom_{subtask}"
        return axiom.subtask_mcc_weighted(inputs.need("y_true", name), inputs.need("y_score", name), subtask, weights)

    return weighted


def _local_thresholds(inputs: Inputs) -> dict[str, float]:
    name = "local_thresholds"
    df_score = inputs.need("y_true", name)
    surface = inputs.need("surface_sim", name)
    if inputs.metric_scores is None:
        raise MetricInputError(f"metric_scores is required for {name}")
    if not inputs.metric_scores:
        raise MetricInputError(f"metric_scores must name at least one metric for {name}")
    for where, values in (("y_true", df_score), ("surface_sim", surface)):
        if values.size and (values.min() < 0 or values.max() > 1):
            raise MetricInputError(f"{where} must lie in [0, 1] for {name}")
    protocol = choice_param(inputs.settings, "protocol", tuple(similarity.PROTOCOLS))
    step = None if inputs.settings["step"] is None else number_param(inputs.settings, "step", MIN_THRESHOLD_STEP, 1.0)
    found = similarity.select_region_thresholds(surface, df_score, inputs.metric_scores, step=step, protocol=protocol)
    assert found.n_dfs is not None and found.n_sfd is not None and found.n_control is not None
    return {
        "x_lo": found.x_lo,
        "x_hi": found.x_hi,
        "y_lo": found.y_lo,
        "y_hi": found.y_hi,
        "objective": found.objective,
        "n_dfs": found.n_dfs,
        "n_sfd": found.n_sfd,
        "n_control": found.n_control,
    }


def _pass_at_k(inputs: Inputs) -> tuple[dict[str, float], dict[str, str]]:
    name = "pass_at_k"
    return passk.pass_at_k(inputs.binary_truth(name), inputs.need("groups", name), inputs.settings["k"])


def _pass_at_k_skipped(inputs: Inputs) -> dict[str, str]:
    return _pass_at_k(inputs)[1]


# Why a metric has no bootstrap interval (it is computed once, on the full sample).
NO_INTERVAL = {
    "local_thresholds": "no bootstrap interval for local_thresholds: it is a grid search, computed once on the full "
    "sample (a percentile interval of grid thresholds would not be a meaningful interval)",
}


@dataclass(frozen=True)
class Spec:
    """One metric: its value on the inputs, its weights-based form over all resamples at once (if it has one),
    whether its resamples must keep trajectories (the groups) whole, whether it has a bootstrap interval, and for a
    dict-valued metric that leaves some keys out, why (key -> reason; empty when it leaves none out)."""

    point: Callable[[Inputs], Value]
    weighted: Callable[[Inputs, FloatArray], FloatArray] | None = None
    trajectories: bool = False
    bootstrap: bool = True
    left_out: Callable[[Inputs], dict[str, str]] | None = None


SPECS: dict[str, Spec] = {
    "roc_auc": Spec(
        lambda i: discrimination.roc_auc(i.binary_truth("roc_auc"), i.need("y_score", "roc_auc")),
        lambda i, w: discrimination.roc_auc_weighted(i.binary_truth("roc_auc"), i.need("y_score", "roc_auc"), w),
    ),
    "pr_auc": Spec(
        lambda i: discrimination.pr_auc(i.binary_truth("pr_auc"), i.need("y_score", "pr_auc")),
        lambda i, w: discrimination.pr_auc_weighted(i.binary_truth("pr_auc"), i.need("y_score", "pr_auc"), w),
    ),
    "log_loss": Spec(
        lambda i: discrimination.log_loss(i.binary_truth("log_loss"), i.probabilities("log_loss"), i.settings["eps"]),
        lambda i, w: discrimination.log_loss_weighted(
            i.binary_truth("log_loss"), i.probabilities("log_loss"), w, i.settings["eps"]
        ),
    ),
    "brier": Spec(
        lambda i: discrimination.brier(i.binary_truth("brier"), i.probabilities("brier")),
        lambda i, w: discrimination.brier_weighted(i.binary_truth("brier"), i.probabilities("brier"), w),
    ),
    "ece": Spec(
        lambda i: calibration.ece(i.binary_truth("ece"), i.probabilities("ece"), i.settings["bins"]),
        lambda i, w: calibration.ece_weighted(
            i.binary_truth("ece"), i.probabilities("ece"), w, calibration.check_bins(i.settings["bins"])
        ),
    ),
    "mcc": Spec(
        lambda i: decisions.mcc(i.binary_truth("mcc"), i.need("y_score", "mcc"), i.settings["threshold"]),
        lambda i, w: decisions.mcc_weighted(
            i.binary_truth("mcc"), i.need("y_score", "mcc"), w, decisions.check_threshold(i.settings["threshold"])
        ),
    ),
    "mcc_oof": Spec(_mcc_oof, _mcc_oof_weighted),
    "scale_validity": Spec(lambda i: decisions.scale_validity(i.need("y_score", "scale_validity"), _grid(i))),
    "spearman": Spec(lambda i: agreement.spearman(i.need("y_true", "spearman"), i.need("y_score", "spearman"))),
    "kendall_tau": Spec(
        lambda i: agreement.kendall_tau(i.need("y_true", "kendall_tau"), i.need("y_score", "kendall_tau"))
    ),
    "pearson": Spec(lambda i: agreement.pearson(i.need("y_true", "pearson"), i.need("y_score", "pearson"))),
    "mae": Spec(lambda i: agreement.mae(i.need("y_true", "mae"), i.need("y_score", "mae"))),
    "mean": Spec(lambda i: agreement.mean_score(_target(i, "mean"), i.settings["target"])),
    "entropy": Spec(
        lambda i: agreement.normalised_entropy(_target(i, "entropy"), i.settings["scale"], i.settings["target"])
    ),
    "emd": Spec(lambda i: agreement.emd(i.need("y_true", "emd"), i.need("y_score", "emd"), i.settings["scale"])),
    "cohen_kappa": Spec(_cohen_kappa),
    "fleiss_kappa": Spec(_fleiss_kappa),
    "krippendorff_alpha": Spec(
        lambda i: agreement.krippendorff_alpha(i.rater_matrix("krippendorff_alpha"), i.settings["level"])
    ),
    "icc": Spec(lambda i: agreement.icc(i.rater_matrix("icc"), i.settings["icc_form"])),
    "arm_discrimination": Spec(_arm_discrimination),
    "reactions": Spec(_reactions),
    "severity_gradient": Spec(_severity_gradient),
    "success_at_turn": Spec(
        lambda i: cocreation.success_at_turn(*_trajectory_args(i, "success_at_turn"), _max_turn(i)),
        trajectories=True,
    ),
    "success_after_failure": Spec(
        lambda i: cocreation.success_after_failure(*_trajectory_args(i, "success_after_failure")), trajectories=True
    ),
    "kaplan_meier": Spec(
        lambda i: cocreation.kaplan_meier(*_trajectory_args(i, "kaplan_meier"), _max_turn(i)), trajectories=True
    ),
    "distinguishability": Spec(
        lambda i: similarity.distinguishability(
            i.need("y_score", "distinguishability"), i.need("y_true", "distinguishability")
        )
    ),
    "local_thresholds": Spec(_local_thresholds, bootstrap=False),
    # A task's samples are resampled together (trajectories=True: groups are the tasks).
    "pass_at_k": Spec(lambda i: _pass_at_k(i)[0], trajectories=True, left_out=_pass_at_k_skipped),
    **{f"axiom_{subtask}": Spec(_axiom(subtask), _axiom_weighted(subtask)) for subtask in axiom.SUBTASKS},
}

METRIC_NAMES: tuple[str, ...] = tuple(SPECS)
VECTORISED_METRICS: tuple[str, ...] = tuple(name for name, spec in SPECS.items() if spec.weighted is not None)
