"""Calibrated judges (issue 24, item 1): an out-of-fold map from a judge's raw acceptance probability to the observed
acceptance, isotonic or Platt, and whether it improves calibration (paper 001 V-B1's ECE, Brier and LogLoss).

The raw probability (:func:`raw_probability`)
    The probability-weighted ``p_ac`` where the judgment has one (token probabilities of the allowed answers,
    G-Eval's weighting), else ``p_ac``, else the probability-weighted 0-5 score / 5, else the 0-5 score / 5: the
    finest reading of the judgment's acceptance probability it carries (``metrics.panel.judge_output`` reads the
    sampled outputs the same way).

The maps (:func:`fit_map`, :func:`apply_map`), both scikit-learn's
    ``isotonic``: ``IsotonicRegression(y_min=0, y_max=1, increasing=True, out_of_bounds="clip")``; stored as its
        thresholds ``X`` and ``y``; applied as scikit-learn predicts, a linear interpolation between thresholds
        clipped at both ends (``numpy.interp``).
    ``platt``: ``LogisticRegression(C=1e6)`` (practically unpenalised) on the logit of the raw probability
        (clipped to ``[1e-6, 1 - 1e-6]``): ``p' = sigmoid(coef * logit(p) + intercept)``. Platt's sigmoid on the
        logit rather than on ``p`` itself, so that an already calibrated judge maps to coef 1, intercept 0, and a
        judge that is overconfident by a factor ``a`` on the logit scale (``logit p = a logit q``) is undone exactly.
    A training fold that holds one class only gets the constant map at that class (its observed rate): a logistic
    regression is undefined there; the final map, fitted on all items, always sees both (:func:`check_items`).

Out of fold (:func:`fold_assignment`, :func:`out_of_fold`)
    Folds from scikit-learn's ``StratifiedGroupKFold`` (shuffled with ``seed``) over the items' groups (trajectory
    or problem): a group's items are all in one fold, so no map ever sees the item (or the group) it calibrates.
    ``k = min(folds, groups, items of the rarer class)``.

Before and after (:func:`calibrate`)
    ECE (15 bins), Brier and LogLoss of the raw and of the out-of-fold calibrated probabilities, on the same items,
    with ``metrics.registry.compare``: the difference ``after - before`` of each on the same cluster-bootstrap
    resamples, with its percentile interval.
    The map is **applied** only when the whole interval of the ECE difference lies below 0 (its upper end < 0): a
    map whose improvement resampling noise could explain is reported, not served. Without a bootstrap there is no
    interval, so nothing is applied.

Written by hand: only the glue (the fold loop, a map's JSON form and its application from that form). scikit-learn's
``CalibratedClassifierCV`` calibrates a classifier it fits itself, on its own (ungrouped) folds, and keeps the maps
as objects; here the scores come from a judge, the folds must follow trajectories or problems, and the map must be
stored as JSON and applied on read by the gateway.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold

from metrics.arrays import FloatArray, IntArray, as_binary_vector, as_label_vector, as_probabilities
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.panel import judge_output
from metrics.registry import compare

METHODS = ("isotonic", "platt")
METRICS = ("ece", "brier", "log_loss")
DEFAULT_FOLDS = 10
ECE_BINS = 15
# Fewest labelled items, and fewest of each class, a calibration is learned from.
MIN_ITEMS = 20
MIN_PER_CLASS = 2
LOGIT_EPS = 1e-6
APPLY_RULE = "applied when the 95% interval of ece_after - ece_before lies entirely below 0"


def raw_probability(
    p_ac: float | None,
    score: float | None,
    weighted_p_ac: float | None = None,
    weighted_score: float | None = None,
) -> float | None:
    """The judgment's raw acceptance probability (module docstring): weighted p_ac, p_ac, weighted score / 5,
    score / 5, the first that exists; None when the judgment has none."""
    if weighted_p_ac is not None:
        return float(weighted_p_ac)
    if p_ac is not None:
        return float(p_ac)
    return judge_output(None, weighted_score if weighted_score is not None else score)


def check_method(method: str) -> str:
    if method not in METHODS:
        raise MetricInputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    return method


def _logit(p: FloatArray) -> FloatArray:
    clipped = np.clip(p, LOGIT_EPS, 1.0 - LOGIT_EPS)
    return np.log(clipped / (1.0 - clipped))


def fit_map(method: str, y_prob: ArrayLike, y_true: ArrayLike) -> dict[str, Any]:
    """The map of ``method`` fitted on these items, as JSON: ``{"method": "isotonic", "X": [...], "y": [...]}``,
    ``{"method": "platt", "coef": a, "intercept": b}`` or, on one class only, ``{"method": "constant", "value"}``."""
    check_method(method)
    probs = as_probabilities(y_prob, "y_prob")
    labels = as_binary_vector(y_true, "y_true")
    if labels.size == 0:
        raise UndefinedMetricError("a calibration map needs at least one item")
    if labels.min() == labels.max():
        return {"method": "constant", "value": float(labels[0])}
    if method == "isotonic":
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(probs, labels)
        return {"method": "isotonic", "X": iso.X_thresholds_.tolist(), "y": iso.y_thresholds_.tolist()}
    model = LogisticRegression(C=1e6, max_iter=1000).fit(_logit(probs).reshape(-1, 1), labels)
    return {"method": "platt", "coef": float(model.coef_[0, 0]), "intercept": float(model.intercept_[0])}


def apply_map(params: Mapping[str, Any], y_prob: ArrayLike) -> FloatArray:
    """The calibrated probabilities of ``y_prob`` under a map stored by :func:`fit_map`."""
    probs = np.asarray(y_prob, dtype=np.float64)
    method = params.get("method")
    if method == "isotonic":
        return np.interp(probs, np.asarray(params["X"], dtype=float), np.asarray(params["y"], dtype=float))
    if method == "platt":
        z = float(params["coef"]) * _logit(probs) + float(params["intercept"])
        return 1.0 / (1.0 + np.exp(-z))
    if method == "constant":
        return np.full(probs.shape, float(params["value"]))
    raise MetricInputError(f"not a calibration map: method {method!r}")


def check_items(y_true: IntArray, groups: Sequence[Any]) -> None:
    """UndefinedMetricError saying why these items are too few to learn a calibration from, else nothing."""
    positives = int(y_true.sum())
    if y_true.size < MIN_ITEMS:
        raise UndefinedMetricError(f"a calibration needs at least {MIN_ITEMS} labelled items; got {y_true.size}")
    if min(positives, y_true.size - positives) < MIN_PER_CLASS:
        raise UndefinedMetricError(
            f"a calibration needs at least {MIN_PER_CLASS} accepted and {MIN_PER_CLASS} rejected labelled items; "
            f"got {positives} accepted of {y_true.size}"
        )
    if len(set(groups)) < 2:
        raise UndefinedMetricError("a calibration needs labelled items from at least 2 clusters; got 1")


def fold_assignment(y_true: ArrayLike, groups: ArrayLike, folds: int = DEFAULT_FOLDS, seed: int = 0) -> IntArray:
    """The fold of every item (0..k-1): grouped and stratified (module docstring), a group's items in one fold."""
    labels = as_binary_vector(y_true, "y_true")
    group_labels = as_label_vector(groups, "groups")
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise MetricInputError(f"folds must be an integer >= 2, got {folds!r}")
    positives = int(labels.sum())
    k = min(folds, len(np.unique(group_labels)), positives, labels.size - positives)
    if k < 2:
        raise UndefinedMetricError("grouped folds need at least 2 groups and 2 items of each class")
    splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    assignment = np.full(labels.size, -1, dtype=np.int64)
    with warnings.catch_warnings():
        # "The least populated class has only m members": k is bounded by it already.
        warnings.simplefilter("ignore", UserWarning)
        for fold, (_, test) in enumerate(splitter.split(np.zeros(labels.size), labels, group_labels)):
            assignment[test] = fold
    return assignment


def out_of_fold(
    method: str, y_prob: ArrayLike, y_true: ArrayLike, folds: IntArray
) -> tuple[FloatArray, list[dict[str, Any]]]:
    """Every item's probability calibrated by the map fitted on the other folds, and the maps of the folds."""
    probs = as_probabilities(y_prob, "y_prob")
    labels = as_binary_vector(y_true, "y_true")
    calibrated = np.empty(probs.size)
    maps = []
    for fold in np.unique(folds):
        test = folds == fold
        params = fit_map(method, probs[~test], labels[~test])
        calibrated[test] = apply_map(params, probs[test])
        maps.append(params)
    return calibrated, maps


def _cell(value: float | None, ci: Sequence[float] | None) -> dict[str, Any]:
    return {"value": value, "ci": list(ci) if ci is not None else None}


def calibrate(
    method: str,
    y_prob: ArrayLike,
    y_true: ArrayLike,
    groups: Sequence[Any],
    *,
    folds: int = DEFAULT_FOLDS,
    bootstrap: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Learn and judge a calibration of one judge x condition (module docstring).

    Args:
        method: ``isotonic`` or ``platt``.
        y_prob: the raw probabilities; y_true: the observed acceptance (0/1).
        groups: every item's cluster (trajectory or problem): the CV groups and the bootstrap clusters.
        folds, bootstrap, seed: CV folds, bootstrap resamples (0: no intervals, nothing applied), seed of both.

    Returns:
        ``n, clusters, positives, folds``; for each of ece, brier, log_loss ``<m>_before``, ``<m>_after`` (``{value,
        ci}``) and ``<m>_difference`` (after - before, ``{value, ci}`` paired on the same resamples); ``applied``,
        ``rule``, and ``map`` (fitted on all items).

    Raises:
        MetricInputError: malformed input. UndefinedMetricError: too few labelled items (the reason).
    """
    check_method(method)
    probs = as_probabilities(y_prob, "y_prob")
    labels = as_binary_vector(y_true, "y_true")
    if probs.size != labels.size or len(groups) != labels.size:
        raise MetricInputError("y_prob, y_true and groups must have one entry per item")
    check_items(labels, groups)
    assignment = fold_assignment(labels, list(map(str, groups)), folds, seed)
    calibrated, _ = out_of_fold(method, probs, labels, assignment)
    result = compare(
        list(METRICS),
        labels,
        {"after": calibrated, "before": probs},
        params={"bins": ECE_BINS},
        bootstrap=bootstrap,
        cluster=list(map(str, groups)),
        seed=seed,
        pairs=[("after", "before")],
    )
    out: dict[str, Any] = {
        "n": int(labels.size),
        "clusters": len(set(groups)),
        "positives": int(labels.sum()),
        "folds": int(assignment.max()) + 1,
    }
    difference = result["differences"].get("after - before", {})
    for metric in METRICS:
        for side in ("before", "after"):
            out[f"{metric}_{side}"] = _cell(result["values"][side].get(metric), result["ci"][side].get(metric))
        entry = difference.get(metric)
        value = result["values"]["after"].get(metric)
        before = result["values"]["before"].get(metric)
        point = value - before if value is not None and before is not None else None
        out[f"{metric}_difference"] = _cell(point, entry["ci"] if entry else None)
    ece_ci = out["ece_difference"]["ci"]
    out["applied"] = bool(ece_ci is not None and ece_ci[1] < 0)
    out["rule"] = APPLY_RULE
    out["map"] = fit_map(method, probs, labels)
    return out
