"""One entry point for every metric named in api.md: ``compute`` for one score vector, ``compare`` for several on
the same items with paired differences on the same bootstrap resamples.

Inputs (api.md conventions)
    y_true: labels, 0/1 for binary metrics, ordinal scores for correlation, agreement, MAE and EMD.
    y_score: predictions, or a second rater's scores.
    groups: the trajectory of every item (CV groups for ``mcc_oof``; trajectories for co-creation metrics).
    ratings: raters x items matrix, None for a missing rating (Krippendorff's alpha, Fleiss' kappa, ICC). Without
        it those three use the two raters ``[y_true, y_score]``.
    cluster: the bootstrap cluster of every item (default: every item its own cluster).
    surface_sim: SurfaceSim of every code pair (``local_thresholds``).
    metric_scores: name -> every code pair's score by that metric (``local_thresholds``).
Every per-item array has one entry per item (every array of ``metric_scores`` too); ``ratings`` has one column per
item.

Metrics and the params each reads (defaults in brackets)
    roc_auc, pr_auc, brier: y_true (0/1), y_score.
    log_loss: y_true, y_score in [0, 1]; ``eps`` [1e-15], clipping (see ``discrimination``).
    ece: y_true, y_score in [0, 1]; ``bins`` [15], bin = min(floor(p * bins), bins - 1).
    mcc: y_true, y_score; ``threshold`` [0.5], decisions ``y_score >= threshold``.
    mcc_oof: y_true, y_score, groups; ``folds`` [10], ``grid`` [0.01..0.99].
    scale_validity: y_score; ``grid`` [0.01..0.99]. A dict: distinct_values, effective_thresholds, share_zero,
        share_one.
    spearman, kendall_tau (tau-b), pearson, mae: y_true, y_score.
    emd: y_true, y_score, integers on ``scale`` [[0, 5]].
    mean: the mean of ``target`` [``"y_score"``; or ``"y_true"``].
    entropy: normalised Shannon entropy of ``target`` [``"y_score"``] over the integer support ``scale`` [[0, 5]].
    cohen_kappa: y_true and y_score as two raters; ``weights`` [``"none"``] | ``"linear"`` | ``"quadratic"``
        (weighted kappa needs integers on ``scale``); ``median_cut`` [false]: cut each rater at its own median first
        (paper 001, VI-A9).
    fleiss_kappa: ratings; ``median_cut`` [false]: cut each rater (row) at its own median first.
    krippendorff_alpha: ratings; ``level`` [``"interval"``] | ``"nominal"`` | ``"ordinal"``.
    icc: ratings; ``icc_form`` [``"2,1"``] | ``"3,1"``.
    arm_discrimination, reactions, severity_gradient (paper 001, VI-B): one item per mutant. y_score is the judge's
        probability for the mutant; ``seed_score`` (per item) its probability for the mutant's seed; ``arm`` (per
        item) ``"semantic"`` or ``"control"``; ``severity`` (per item; severity_gradient only) the operator's
        severity, null for controls. Only mutants with ``seed_score >= primary_threshold`` [0.5] count;
        ``reaction_drop`` [0.05] is the drop that counts as a reaction. ``reactions`` is a dict (per arm: reacted,
        scored, share). Use the seed as ``cluster``.
    success_at_turn, success_after_failure, kaplan_meier (paper 001, IV-C3/C4): one item per attempt. y_true is the
        acceptance, groups the trajectory, ``turn`` (per item) the 1-based turn; ``max_turn`` [longest trajectory]
        bounds the reported turns. success_at_turn and kaplan_meier are dicts keyed by turn ("1", "2", ...). With a
        bootstrap, clusters must not split a trajectory.
    distinguishability (paper 002, 3.2.2): one item per code pair; y_score the metric's non-negative score, y_true 1
        for an equivalent pair and 0 for a non-equivalent one.
    local_thresholds (paper 002, 3.4, Algorithm 2): one item per code pair; y_true its df_score in [0, 1],
        surface_sim its SurfaceSim in [0, 1], metric_scores the metrics' scores. ``protocol`` [``"pseudocode"``] |
        ``"local_rq3"`` (see ``metrics.similarity``); ``step`` [the protocol's: 0.01 | 0.05], at least 0.01. A dict:
        x_lo, x_hi, y_lo, y_hi, objective, n_dfs, n_sfd, n_control. No bootstrap interval: with a bootstrap it is
        in ``ci_errors`` with the reason (a percentile interval of grid thresholds is not a meaningful interval).
    axiom_gating, axiom_functionality, axiom_quality, axiom_effort (paper 000, V-B): y_true ground-truth scores 0..5,
        y_score the metric's scores 0..5; MCC of that subtask.
    With a bootstrap: ``ci_level`` [0.95], ``min_clusters`` [2].

Output
    ``{"values": {name: float | dict}, "ci": {name: [lo, hi] | {key: [lo, hi]}}, "errors": {name: reason}}``; with a
    bootstrap also ``"ci_errors": {name: reason}`` and ``"bootstrap": {"resamples", "clusters", "seed",
    "dropped": {name: resamples on which the metric was undefined and left out}}``. A metric that cannot be
    computed is in ``errors`` with the reason, never a NaN or a placeholder number. Malformed input raises
    :class:`MetricInputError` naming the argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from metrics import agreement, axiom, calibration, cocreation, decisions, discrimination, perturbation, similarity
from metrics._arrays import (
    FloatArray,
    IntArray,
    as_binary_vector,
    as_float_vector,
    as_label_vector,
    as_probabilities,
    as_ratings_matrix,
    label_codes,
)
from metrics.bootstrap import (
    ClusterResamples,
    bootstrap_loop,
    draw_resamples,
    paired_difference,
    percentile_interval,
)
from metrics.errors import MetricInputError, UndefinedMetricError

Value = float | dict[str, float]

PER_ITEM_PARAMS = ("seed_score", "arm", "severity", "turn")
SCALAR_PARAMS: dict[str, Any] = {
    "threshold": decisions.DEFAULT_THRESHOLD,
    "bins": calibration.DEFAULT_BINS,
    "folds": decisions.DEFAULT_FOLDS,
    "grid": None,
    "level": "interval",
    "weights": "none",
    "scale": None,
    "eps": discrimination.LOG_LOSS_EPS,
    "median_cut": False,
    "icc_form": "2,1",
    "target": "y_score",
    "primary_threshold": perturbation.PRIMARY_THRESHOLD,
    "reaction_drop": perturbation.REACTION_DROP,
    "max_turn": None,
    "ci_level": 0.95,
    "min_clusters": 2,
    "protocol": "pseudocode",
    "step": None,
}
# Algorithm 2's finest grid step through compute: its work grows with (1 / step) ** 4.
MIN_THRESHOLD_STEP = 0.01


def _number(params: Mapping[str, Any], key: str, low: float | None = None, high: float | None = None) -> float:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | float | np.number) or not np.isfinite(value):
        raise MetricInputError(f"params.{key} must be a number, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise MetricInputError(f"params.{key} must lie in [{low}, {high}], got {value!r}")
    return float(value)


def _integer(params: Mapping[str, Any], key: str, low: int) -> int:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise MetricInputError(f"params.{key} must be an integer >= {low}, got {value!r}")
    return int(value)


def _choice(params: Mapping[str, Any], key: str, options: Sequence[str]) -> str:
    value = params[key]
    if value not in options:
        raise MetricInputError(f"params.{key} must be one of {', '.join(options)}, got {value!r}")
    return str(value)


@dataclass
class _Inputs:
    """Validated request arrays and settings, shared by every metric of one request."""

    n_items: int
    y_true: FloatArray | None
    y_score: FloatArray | None
    groups: NDArray[Any] | None
    ratings: FloatArray | None
    items: dict[str, NDArray[Any]]
    settings: dict[str, Any]
    surface_sim: FloatArray | None = None
    metric_scores: dict[str, FloatArray] | None = None
    fold_ids: IntArray | None = None
    _cache: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        y_true: ArrayLike | None,
        y_score: ArrayLike | None,
        groups: ArrayLike | None,
        ratings: ArrayLike | None,
        params: Mapping[str, Any] | None,
        surface_sim: ArrayLike | None = None,
        metric_scores: Mapping[str, ArrayLike] | None = None,
    ) -> _Inputs:
        raw = dict(params or {})
        unknown = sorted(set(raw) - set(SCALAR_PARAMS) - set(PER_ITEM_PARAMS))
        if unknown:
            raise MetricInputError(f"params.{unknown[0]} is not a known parameter")
        arrays: dict[str, NDArray[Any]] = {}
        truth = None if y_true is None else as_float_vector(y_true, "y_true")
        score = None if y_score is None else as_float_vector(y_score, "y_score")
        group_labels = None if groups is None else as_label_vector(groups, "groups")
        matrix = None if ratings is None else as_ratings_matrix(ratings)
        for key in PER_ITEM_PARAMS:
            if raw.get(key) is not None:
                if key == "arm":
                    arrays[key] = as_label_vector(raw[key], "params.arm")
                else:
                    arrays[key] = as_float_vector(raw[key], f"params.{key}", allow_missing=key == "severity")
        lengths = {
            name: len(array)
            for name, array in (("y_true", truth), ("y_score", score), ("groups", group_labels))
            if array is not None
        }
        lengths.update({f"params.{key}": len(array) for key, array in arrays.items()})
        if matrix is not None:
            lengths["ratings (columns)"] = matrix.shape[1]
        if len(set(lengths.values())) > 1:
            described = ", ".join(f"{name}: {length}" for name, length in lengths.items())
            raise MetricInputError(f"per-item inputs differ in length ({described}); they must match")
        n_items = next(iter(lengths.values()), None)
        surface = None if surface_sim is None else as_float_vector(surface_sim, "surface_sim")
        if surface is not None:
            if n_items is not None and surface.size != n_items:
                raise MetricInputError(
                    f"surface_sim has {surface.size} entries but the other per-item inputs have {n_items}"
                )
            n_items = surface.size
        per_metric = None
        if metric_scores is not None:
            if not isinstance(metric_scores, Mapping):
                raise MetricInputError("metric_scores must map metric names to per-item scores")
            per_metric = {}
            for name, values in metric_scores.items():
                where = f"metric_scores.{name}"
                per_metric[str(name)] = vector = as_float_vector(values, where)
                if n_items is not None and vector.size != n_items:
                    raise MetricInputError(
                        f"{where} has {vector.size} entries but the other per-item inputs have {n_items}"
                    )
                n_items = vector.size
        settings = {key: raw.get(key, default) for key, default in SCALAR_PARAMS.items()}
        settings = {key: (SCALAR_PARAMS[key] if value is None else value) for key, value in settings.items()}
        return cls(
            n_items=0 if n_items is None else n_items,
            y_true=truth,
            y_score=score,
            groups=group_labels,
            ratings=matrix,
            items=arrays,
            settings=settings,
            surface_sim=surface,
            metric_scores=per_metric,
        )

    def need(self, what: str, metric: str) -> NDArray[Any]:
        value = self.items.get(what) if what in PER_ITEM_PARAMS else getattr(self, what)
        if value is None:
            where = f"params.{what}" if what in PER_ITEM_PARAMS else what
            raise MetricInputError(f"{where} is required for {metric}")
        return np.asarray(value)

    def binary_truth(self, metric: str) -> IntArray:
        if "binary" not in self._cache:
            self._cache["binary"] = as_binary_vector(self.need("y_true", metric), "y_true")
        return np.asarray(self._cache["binary"])

    def probabilities(self, metric: str) -> FloatArray:
        if "probabilities" not in self._cache:
            self._cache["probabilities"] = as_probabilities(self.need("y_score", metric), "y_score")
        return np.asarray(self._cache["probabilities"])

    def rater_matrix(self, metric: str) -> FloatArray:
        if self.ratings is not None:
            return self.ratings
        if self.y_true is None or self.y_score is None:
            raise MetricInputError(f"ratings (or both y_true and y_score) is required for {metric}")
        return np.vstack([self.y_true, self.y_score])

    def folds(self, metric: str) -> IntArray:
        if self.fold_ids is None:
            groups = self.need("groups", metric)
            self.fold_ids = decisions.group_folds(groups, _integer(self.settings, "folds", 2))
        return self.fold_ids

    def take(self, items: IntArray, copy: IntArray) -> _Inputs:
        """The inputs of one bootstrap resample; a group drawn twice becomes two groups."""
        settings = dict(self.settings)
        if settings["max_turn"] is None and "turn" in self.items and self.items["turn"].size:
            # Report the same turns on every resample as on the full sample, even when a resample lacks the
            # longest trajectory.
            settings["max_turn"] = int(self.items["turn"].max())
        groups = None
        if self.groups is not None:
            _, codes = label_codes(self.groups)
            groups = copy * (int(codes.max()) + 1) + codes[items]
        return replace(
            self,
            n_items=int(items.size),
            y_true=None if self.y_true is None else self.y_true[items],
            y_score=None if self.y_score is None else self.y_score[items],
            groups=groups,
            ratings=None if self.ratings is None else self.ratings[:, items],
            items={key: array[items] for key, array in self.items.items()},
            settings=settings,
            surface_sim=None if self.surface_sim is None else self.surface_sim[items],
            metric_scores=None
            if self.metric_scores is None
            else {name: values[items] for name, values in self.metric_scores.items()},
            fold_ids=None if self.fold_ids is None else self.fold_ids[items],
            _cache={},
        )


def _grid(inputs: _Inputs) -> FloatArray:
    return decisions.check_grid(inputs.settings["grid"])


def _mcc_oof(inputs: _Inputs) -> float:
    folds = inputs.folds("mcc_oof")
    return decisions.mcc_oof_from_folds(
        inputs.binary_truth("mcc_oof"), inputs.need("y_score", "mcc_oof"), folds, _grid(inputs)
    )


def _mcc_oof_weighted(inputs: _Inputs, weights: FloatArray) -> FloatArray:
    return decisions.mcc_oof_weighted(
        inputs.binary_truth("mcc_oof"),
        inputs.need("y_score", "mcc_oof"),
        weights,
        inputs.folds("mcc_oof"),
        _grid(inputs),
    )


def _target(inputs: _Inputs, metric: str) -> FloatArray:
    target = _choice(inputs.settings, "target", ("y_score", "y_true"))
    return inputs.need(target, metric)


def _median_cut(inputs: _Inputs) -> bool:
    value = inputs.settings["median_cut"]
    if not isinstance(value, bool):
        raise MetricInputError(f"params.median_cut must be true or false, got {value!r}")
    return value


def _cohen_kappa(inputs: _Inputs) -> float:
    first, second = inputs.need("y_true", "cohen_kappa"), inputs.need("y_score", "cohen_kappa")
    if _median_cut(inputs):
        first, second = agreement.median_cut(first, "y_true"), agreement.median_cut(second, "y_score")
    return agreement.cohen_kappa(first, second, inputs.settings["weights"], inputs.settings["scale"])


def _fleiss_kappa(inputs: _Inputs) -> float:
    matrix = inputs.rater_matrix("fleiss_kappa")
    return agreement.fleiss_kappa_median_cut(matrix) if _median_cut(inputs) else agreement.fleiss_kappa(matrix)


def _mutants(inputs: _Inputs, metric: str) -> tuple[FloatArray, NDArray[Any], NDArray[np.bool_]]:
    """Drop of every mutant, its arm, and the primary-subset mask."""
    seed = inputs.need("seed_score", metric)
    drop = perturbation.score_drop(inputs.need("y_score", metric), seed)
    arm = inputs.need("arm", metric)
    primary = seed >= _number(inputs.settings, "primary_threshold")
    return drop, arm, primary


def _arm_discrimination(inputs: _Inputs) -> float:
    drop, arm, primary = _mutants(inputs, "arm_discrimination")
    return perturbation.arm_discrimination(drop[primary], arm[primary])


def _reactions(inputs: _Inputs) -> dict[str, float]:
    drop, arm, primary = _mutants(inputs, "reactions")
    return perturbation.reactions(drop[primary], arm[primary], _number(inputs.settings, "reaction_drop"))


def _severity_gradient(inputs: _Inputs) -> float:
    drop, arm, primary = _mutants(inputs, "severity_gradient")
    severity = inputs.need("severity", "severity_gradient")
    semantic = perturbation.semantic_mask(arm)
    if np.any(semantic & np.isnan(severity)):
        raise MetricInputError("params.severity is missing for a semantic mutant")
    return perturbation.severity_gradient(drop[primary & semantic], severity[primary & semantic])


def _trajectory_args(inputs: _Inputs, metric: str) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    return inputs.need("y_true", metric), inputs.need("groups", metric), inputs.need("turn", metric)


def _max_turn(inputs: _Inputs) -> int | None:
    return None if inputs.settings["max_turn"] is None else _integer(inputs.settings, "max_turn", 1)


def _axiom(subtask: str) -> Callable[[_Inputs], float]:
    def point(inputs: _Inputs) -> float:
        name = f"axiom_{subtask}"
        return axiom.subtask_mcc(inputs.need("y_true", name), inputs.need("y_score", name), subtask)

    return point


def _local_thresholds(inputs: _Inputs) -> dict[str, float]:
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
    protocol = _choice(inputs.settings, "protocol", tuple(similarity.PROTOCOLS))
    step = None if inputs.settings["step"] is None else _number(inputs.settings, "step", MIN_THRESHOLD_STEP, 1.0)
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


# Why a metric has no bootstrap interval (it is computed once, on the full sample).
NO_INTERVAL = {
    "local_thresholds": "no bootstrap interval for local_thresholds: it is a grid search, computed once on the full "
    "sample (a percentile interval of grid thresholds would not be a meaningful interval)",
}


@dataclass(frozen=True)
class _Spec:
    point: Callable[[_Inputs], Value]
    weighted: Callable[[_Inputs, FloatArray], FloatArray] | None = None
    trajectories: bool = False
    bootstrap: bool = True


_SPECS: dict[str, _Spec] = {
    "roc_auc": _Spec(
        lambda i: discrimination.roc_auc(i.binary_truth("roc_auc"), i.need("y_score", "roc_auc")),
        lambda i, w: discrimination.roc_auc_weighted(i.binary_truth("roc_auc"), i.need("y_score", "roc_auc"), w),
    ),
    "pr_auc": _Spec(
        lambda i: discrimination.pr_auc(i.binary_truth("pr_auc"), i.need("y_score", "pr_auc")),
        lambda i, w: discrimination.pr_auc_weighted(i.binary_truth("pr_auc"), i.need("y_score", "pr_auc"), w),
    ),
    "log_loss": _Spec(
        lambda i: discrimination.log_loss(i.binary_truth("log_loss"), i.probabilities("log_loss"), i.settings["eps"]),
        lambda i, w: discrimination.log_loss_weighted(
            i.binary_truth("log_loss"), i.probabilities("log_loss"), w, i.settings["eps"]
        ),
    ),
    "brier": _Spec(
        lambda i: discrimination.brier(i.binary_truth("brier"), i.probabilities("brier")),
        lambda i, w: discrimination.brier_weighted(i.binary_truth("brier"), i.probabilities("brier"), w),
    ),
    "ece": _Spec(
        lambda i: calibration.ece(i.binary_truth("ece"), i.probabilities("ece"), i.settings["bins"]),
        lambda i, w: calibration.ece_weighted(
            i.binary_truth("ece"), i.probabilities("ece"), w, calibration.check_bins(i.settings["bins"])
        ),
    ),
    "mcc": _Spec(
        lambda i: decisions.mcc(i.binary_truth("mcc"), i.need("y_score", "mcc"), i.settings["threshold"]),
        lambda i, w: decisions.mcc_weighted(
            i.binary_truth("mcc"), i.need("y_score", "mcc"), w, decisions.check_threshold(i.settings["threshold"])
        ),
    ),
    "mcc_oof": _Spec(_mcc_oof, _mcc_oof_weighted),
    "scale_validity": _Spec(lambda i: decisions.scale_validity(i.need("y_score", "scale_validity"), _grid(i))),
    "spearman": _Spec(lambda i: agreement.spearman(i.need("y_true", "spearman"), i.need("y_score", "spearman"))),
    "kendall_tau": _Spec(
        lambda i: agreement.kendall_tau(i.need("y_true", "kendall_tau"), i.need("y_score", "kendall_tau"))
    ),
    "pearson": _Spec(lambda i: agreement.pearson(i.need("y_true", "pearson"), i.need("y_score", "pearson"))),
    "mae": _Spec(lambda i: agreement.mae(i.need("y_true", "mae"), i.need("y_score", "mae"))),
    "mean": _Spec(lambda i: agreement.mean_score(_target(i, "mean"), i.settings["target"])),
    "entropy": _Spec(
        lambda i: agreement.normalised_entropy(_target(i, "entropy"), i.settings["scale"], i.settings["target"])
    ),
    "emd": _Spec(lambda i: agreement.emd(i.need("y_true", "emd"), i.need("y_score", "emd"), i.settings["scale"])),
    "cohen_kappa": _Spec(_cohen_kappa),
    "fleiss_kappa": _Spec(_fleiss_kappa),
    "krippendorff_alpha": _Spec(
        lambda i: agreement.krippendorff_alpha(i.rater_matrix("krippendorff_alpha"), i.settings["level"])
    ),
    "icc": _Spec(lambda i: agreement.icc(i.rater_matrix("icc"), i.settings["icc_form"])),
    "arm_discrimination": _Spec(_arm_discrimination),
    "reactions": _Spec(_reactions),
    "severity_gradient": _Spec(_severity_gradient),
    "success_at_turn": _Spec(
        lambda i: cocreation.success_at_turn(*_trajectory_args(i, "success_at_turn"), _max_turn(i)),
        trajectories=True,
    ),
    "success_after_failure": _Spec(
        lambda i: cocreation.success_after_failure(*_trajectory_args(i, "success_after_failure")), trajectories=True
    ),
    "kaplan_meier": _Spec(
        lambda i: cocreation.kaplan_meier(*_trajectory_args(i, "kaplan_meier"), _max_turn(i)), trajectories=True
    ),
    "distinguishability": _Spec(
        lambda i: similarity.distinguishability(
            i.need("y_score", "distinguishability"), i.need("y_true", "distinguishability")
        )
    ),
    "local_thresholds": _Spec(_local_thresholds, bootstrap=False),
    **{f"axiom_{subtask}": _Spec(_axiom(subtask)) for subtask in axiom.SUBTASKS},
}

METRIC_NAMES: tuple[str, ...] = tuple(_SPECS)
VECTORISED_METRICS: tuple[str, ...] = tuple(name for name, spec in _SPECS.items() if spec.weighted is not None)


def _check_names(metrics: Sequence[str]) -> list[str]:
    if isinstance(metrics, str) or not isinstance(metrics, Sequence) or not metrics:
        raise MetricInputError("metrics must be a non-empty list of metric names")
    unknown = [name for name in metrics if name not in _SPECS]
    if unknown:
        raise MetricInputError(f"metrics: unknown metric {unknown[0]!r}; known: {', '.join(METRIC_NAMES)}")
    return list(dict.fromkeys(metrics))


def _point_values(names: Sequence[str], inputs: _Inputs) -> tuple[dict[str, Value], dict[str, str]]:
    values: dict[str, Value] = {}
    errors: dict[str, str] = {}
    for name in names:
        try:
            values[name] = _SPECS[name].point(inputs)
        except UndefinedMetricError as exc:
            errors[name] = str(exc)
    return values, errors


Distribution = FloatArray | dict[str, FloatArray]


def _distribution(
    name: str,
    inputs: _Inputs,
    resamples: ClusterResamples,
    cluster: NDArray[Any],
    weights: FloatArray | None,
    vectorised: bool,
) -> Distribution:
    """The metric on every resample: NaN (or a missing key) where it is undefined."""
    spec = _SPECS[name]
    if vectorised and spec.weighted is not None and weights is not None:
        return np.asarray(spec.weighted(inputs, weights), dtype=np.float64)
    results = bootstrap_loop(lambda items, copy: spec.point(inputs.take(items, copy)), resamples, cluster)
    if all(result is None or isinstance(result, float | int) for result in results):
        return np.array([np.nan if result is None else result for result in results], dtype=np.float64)
    keys = list(dict.fromkeys(key for result in results if isinstance(result, dict) for key in result))
    return {
        key: np.array([result.get(key, np.nan) if isinstance(result, dict) else np.nan for result in results])
        for key in keys
    }


def _interval(distribution: Distribution, level: float) -> tuple[list[float] | dict[str, list[float]], int]:
    """Percentile interval (per key for dict metrics) and the number of resamples left out as undefined."""
    if isinstance(distribution, dict):
        intervals: dict[str, list[float]] = {}
        dropped = 0
        for key, values in distribution.items():
            finite = np.isfinite(values)
            if finite.any():
                intervals[key] = list(percentile_interval(values, level))
            dropped = max(dropped, int((~finite).sum()))
        if not intervals:
            raise UndefinedMetricError("the metric is undefined on every bootstrap resample")
        return intervals, dropped
    return list(percentile_interval(distribution, level)), int((~np.isfinite(distribution)).sum())


def _prepare_bootstrap(
    inputs: _Inputs, names: Sequence[str], bootstrap: int, cluster: ArrayLike | None, seed: int
) -> tuple[ClusterResamples, NDArray[Any]]:
    labels = np.arange(inputs.n_items) if cluster is None else as_label_vector(cluster, "cluster")
    if labels.size != inputs.n_items:
        raise MetricInputError(f"cluster has {labels.size} elements but there are {inputs.n_items} items")
    if inputs.groups is not None and any(_SPECS[name].trajectories for name in names):
        _, group_codes = label_codes(inputs.groups)
        _, cluster_codes = label_codes(labels)
        pairs = np.unique(np.stack([group_codes, cluster_codes]), axis=1)
        if np.unique(pairs[0]).size != pairs.shape[1]:
            raise MetricInputError("cluster splits a trajectory (groups); resample whole trajectories or coarser units")
    min_clusters = _integer(inputs.settings, "min_clusters", 2)
    return draw_resamples(labels, bootstrap, seed, min_clusters), labels


def _check_bootstrap_count(bootstrap: int) -> None:
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int | np.integer) or bootstrap < 0:
        raise MetricInputError(f"bootstrap must be a non-negative integer, got {bootstrap!r}")


def compute(
    metrics: list[str],
    y_true: ArrayLike | None = None,
    y_score: ArrayLike | None = None,
    groups: ArrayLike | None = None,
    ratings: ArrayLike | None = None,
    params: Mapping[str, Any] | None = None,
    bootstrap: int = 0,
    cluster: ArrayLike | None = None,
    seed: int = 0,
    *,
    vectorised: bool = True,
    surface_sim: ArrayLike | None = None,
    metric_scores: Mapping[str, ArrayLike] | None = None,
) -> dict[str, Any]:
    """Compute the named metrics, with cluster-bootstrap percentile intervals when ``bootstrap > 0``.

    Args:
        metrics: names from :data:`METRIC_NAMES`.
        y_true, y_score, groups, ratings, params, cluster, surface_sim, metric_scores: see the module docstring.
        bootstrap: number of resamples (0: no intervals).
        seed: seed of the resampling generator.
        vectorised: evaluate the metrics that have a weights-based form on all resamples at once (default), or call
            the ordinary metric once per resample (the straightforward path; same resamples, same numbers).

    Returns:
        ``{"values", "ci", "errors"}`` (and ``"ci_errors"``, ``"bootstrap"`` with a bootstrap); see the module
        docstring.

    Raises:
        MetricInputError: malformed input, naming the argument.
    """
    names = _check_names(metrics)
    _check_bootstrap_count(bootstrap)
    inputs = _Inputs.build(y_true, y_score, groups, ratings, params, surface_sim, metric_scores)
    values, errors = _point_values(names, inputs)
    result: dict[str, Any] = {"values": values, "ci": {}, "errors": errors}
    if bootstrap == 0:
        return result
    level = _number(inputs.settings, "ci_level", 0.0, 1.0)
    result["ci_errors"] = {name: NO_INTERVAL[name] for name in values if not _SPECS[name].bootstrap}
    values = {name: value for name, value in values.items() if _SPECS[name].bootstrap}
    if not values:
        return result
    try:
        resamples, labels = _prepare_bootstrap(inputs, names, bootstrap, cluster, seed)
    except UndefinedMetricError as exc:
        result["ci_errors"].update({name: str(exc) for name in values})
        return result
    weights = resamples.weights(labels) if vectorised and any(_SPECS[n].weighted for n in values) else None
    dropped: dict[str, int] = {}
    for name in values:
        try:
            interval, dropped[name] = _interval(
                _distribution(name, inputs, resamples, labels, weights, vectorised), level
            )
        except UndefinedMetricError as exc:
            result["ci_errors"][name] = str(exc)
            continue
        result["ci"][name] = interval
    result["bootstrap"] = {
        "resamples": resamples.n_resamples,
        "clusters": resamples.n_clusters,
        "seed": int(seed),
        "dropped": {name: count for name, count in dropped.items() if count},
    }
    return result


def compare(
    metrics: list[str],
    y_true: ArrayLike,
    scores: Mapping[str, ArrayLike],
    groups: ArrayLike | None = None,
    params: Mapping[str, Any] | None = None,
    bootstrap: int = 2000,
    cluster: ArrayLike | None = None,
    seed: int = 0,
    pairs: Sequence[tuple[str, str]] | None = None,
    *,
    vectorised: bool = True,
) -> dict[str, Any]:
    """Several score vectors (judges, or one judge under several conditions) on the same items and labels.

    Every score vector is evaluated on the same resamples, so the interval of a difference between two of them is
    the percentile interval of the per-resample differences (paired).

    Args:
        metrics: scalar metric names (dict-valued metrics have no paired difference).
        y_true: labels shared by all score vectors.
        scores: name -> y_score.
        groups, params, cluster, seed: as in :func:`compute`.
        bootstrap: number of resamples (2,000 by default; 0: values only).
        pairs: which differences ``a - b`` to report; every pair in ``scores`` order by default.
        vectorised: as in :func:`compute`.

    Returns:
        ``{"values": {score: {metric: v}}, "ci": {score: {metric: [lo, hi]}}, "errors": {score: {metric: reason}},
        "differences": {"a - b": {metric: {"value": d, "ci": [lo, hi]}}}, "ci_errors": {...}}``.
    """
    names = _check_names(metrics)
    _check_bootstrap_count(bootstrap)
    if not scores:
        raise MetricInputError("scores must name at least one score vector")
    chosen_pairs = list(combinations(scores, 2)) if pairs is None else [tuple(pair) for pair in pairs]
    for pair in chosen_pairs:
        if len(pair) != 2 or any(name not in scores for name in pair):
            raise MetricInputError(f"pairs: {pair!r} does not name two entries of scores")
    inputs = {name: _Inputs.build(y_true, values, groups, None, params) for name, values in scores.items()}
    result: dict[str, Any] = {"values": {}, "ci": {}, "errors": {}, "differences": {}, "ci_errors": {}}
    for name, item in inputs.items():
        result["values"][name], result["errors"][name] = _point_values(names, item)
        result["ci"][name], result["ci_errors"][name] = {}, {}
    if bootstrap == 0:
        return result
    first = next(iter(inputs.values()))
    level = _number(first.settings, "ci_level", 0.0, 1.0)
    resamples, labels = _prepare_bootstrap(first, names, bootstrap, cluster, seed)
    weights = resamples.weights(labels) if vectorised else None
    distributions: dict[str, dict[str, FloatArray]] = {}
    for score_name, item in inputs.items():
        distributions[score_name] = {}
        for metric in result["values"][score_name]:
            distribution = _distribution(metric, item, resamples, labels, weights, vectorised)
            if isinstance(distribution, dict):
                raise MetricInputError(f"metrics: {metric} is dict-valued; compare takes scalar metrics")
            distributions[score_name][metric] = distribution
            try:
                result["ci"][score_name][metric] = list(percentile_interval(distribution, level))
            except UndefinedMetricError as exc:
                result["ci_errors"][score_name][metric] = str(exc)
    for a, b in chosen_pairs:
        label = f"{a} - {b}"
        result["differences"][label] = {}
        for metric in names:
            if metric not in distributions[a] or metric not in distributions[b]:
                continue
            value_a, value_b = result["values"][a][metric], result["values"][b][metric]
            try:
                interval = list(paired_difference(distributions[a][metric], distributions[b][metric], level))
            except UndefinedMetricError:
                continue
            result["differences"][label][metric] = {"value": value_a - value_b, "ci": interval}
    return result
