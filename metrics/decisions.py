"""Thresholded decisions: MCC at a threshold, out-of-fold MCC by grouped K-fold (paper 001, IV-C2), scale validity
(VI-A7).

Out-of-fold protocol (IV-C2): folds are formed on the trajectory groups so that no group is split; for each
held-out fold the threshold t* is chosen on the other K-1 folds as the grid point (0.01..0.99) that maximises MCC of
the decisions ``I[p >= t]``, applied unchanged to the held-out fold; the out-of-fold decisions of all folds are pooled
and one MCC is computed on them.

Choices the paper leaves open, fixed here:
- Folds come from scikit-learn's ``GroupKFold`` (deterministic, balances fold sizes); fewer groups than folds is
  reported as undefined.
- A threshold whose training decisions are all one class has an undefined MCC; during selection it counts as 0,
  scikit-learn's convention, so selection never fails. Ties between thresholds go to the smallest threshold (the
  first maximum on the ascending grid, as a strict ``>`` scan would choose).
- The reported MCC itself (``mcc``, ``mcc_oof``) is undefined, not 0, when y_true or the decisions hold one class.

In a bootstrap resample the fold assignment of the full sample is kept (every copy of a drawn trajectory stays in its
trajectory's fold, so no copy leaks across folds) and the thresholds are re-selected within the resample.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from sklearn import metrics as skm
from sklearn.model_selection import GroupKFold

from metrics.arrays import (
    FloatArray,
    IntArray,
    as_binary_vector,
    as_float_vector,
    as_label_vector,
    check_same_length,
    label_codes,
    require_both_classes,
    require_nonempty,
)
from metrics.errors import MetricInputError, UndefinedMetricError

DEFAULT_THRESHOLD = 0.5
DEFAULT_FOLDS = 10
DEFAULT_GRID: FloatArray = np.round(np.arange(1, 100) / 100, 2)


def check_grid(grid: ArrayLike | None) -> FloatArray:
    """The threshold grid (default 0.01..0.99), or MetricInputError naming ``params.grid``."""
    if grid is None:
        return DEFAULT_GRID
    values = as_float_vector(grid, "params.grid")
    if values.size == 0 or np.any(np.diff(values) <= 0):
        raise MetricInputError("params.grid must be a non-empty, strictly increasing list of thresholds")
    return values


def check_threshold(threshold: float) -> float:
    """A finite threshold, or MetricInputError naming ``params.threshold``."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float | np.number) or not np.isfinite(threshold):
        raise MetricInputError(f"params.threshold must be a number, got {threshold!r}")
    return float(threshold)


def mcc_from_counts(tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> FloatArray:
    """Elementwise MCC from confusion counts (any broadcastable shapes); NaN where a marginal is zero.

    Written by hand because it is evaluated for every threshold x fold x resample at once; both the point and the
    bootstrap paths use it, so they select identical thresholds.
    """
    tp_, fp_, fn_, tn_ = (np.asarray(value, dtype=np.float64) for value in (tp, fp, fn, tn))
    denominator = (tp_ + fp_) * (tp_ + fn_) * (tn_ + fp_) * (tn_ + fn_)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (tp_ * tn_ - fp_ * fn_) / np.sqrt(denominator), np.nan)


def _decision_inputs(y_true: ArrayLike, y_score: ArrayLike) -> tuple[IntArray, FloatArray]:
    labels = as_binary_vector(y_true, "y_true")
    scores = as_float_vector(y_score, "y_score")
    check_same_length(y_true=labels, y_score=scores)
    return labels, scores


def _pooled_mcc(labels: IntArray, decisions: IntArray, what: str) -> float:
    require_both_classes(labels, what)
    positives = int(decisions.sum())
    if positives in (0, decisions.size):
        kind = "accept" if positives else "reject"
        raise UndefinedMetricError(f"{what} is undefined: every decision is {kind}, so MCC is 0/0")
    return float(skm.matthews_corrcoef(labels, decisions))


def mcc(y_true: ArrayLike, y_score: ArrayLike, threshold: float = DEFAULT_THRESHOLD) -> float:
    """MCC of the decisions ``I[y_score >= threshold]`` against 0/1 labels.

    Raises:
        MetricInputError: labels not 0/1, lengths differ, threshold not a number.
        UndefinedMetricError: one class in y_true, or every decision the same.
    """
    threshold = check_threshold(threshold)
    labels, scores = _decision_inputs(y_true, y_score)
    return _pooled_mcc(labels, (scores >= threshold).astype(np.int64), "MCC")


def mcc_curve(y_true: IntArray, y_score: FloatArray, grid: FloatArray) -> FloatArray:
    """MCC at every threshold of ``grid`` (NaN where undefined), for validated arrays."""
    above = (y_score[None, :] >= grid[:, None]).astype(np.float64)
    tp = above @ y_true
    fp = above @ (1 - y_true)
    positives, negatives = y_true.sum(), y_true.size - y_true.sum()
    return mcc_from_counts(tp, fp, positives - tp, negatives - fp)


def select_threshold(y_true: IntArray, y_score: FloatArray, grid: FloatArray) -> float:
    """The grid threshold with the largest MCC (undefined counted as 0, ties to the smallest threshold)."""
    curve = np.nan_to_num(mcc_curve(y_true, y_score, grid), nan=0.0)
    return float(grid[int(np.argmax(curve))])


def group_folds(groups: ArrayLike, folds: int = DEFAULT_FOLDS) -> IntArray:
    """Fold index (0..folds-1) of every item, folds formed on groups by scikit-learn's ``GroupKFold``.

    Raises:
        MetricInputError: folds not an integer >= 2, malformed groups.
        UndefinedMetricError: fewer distinct groups than folds.
    """
    if isinstance(folds, bool) or not isinstance(folds, int | np.integer) or folds < 2:
        raise MetricInputError(f"params.folds must be an integer >= 2, got {folds!r}")
    labels = as_label_vector(groups, "groups")
    _, codes = label_codes(labels)
    n_groups = int(codes.max()) + 1 if codes.size else 0
    if n_groups < folds:
        raise UndefinedMetricError(f"out-of-fold MCC needs at least {folds} groups for {folds} folds; got {n_groups}")
    fold_ids = np.empty(codes.size, dtype=np.int64)
    for fold, (_, test) in enumerate(GroupKFold(n_splits=int(folds)).split(codes, groups=codes)):
        fold_ids[test] = fold
    return fold_ids


def oof_decisions(
    y_true: IntArray, y_score: FloatArray, fold_ids: IntArray, grid: FloatArray
) -> tuple[IntArray, dict[int, float]]:
    """Out-of-fold decisions and the threshold each fold received (chosen on the other folds)."""
    decisions = np.zeros(y_true.size, dtype=np.int64)
    thresholds: dict[int, float] = {}
    for fold in np.unique(fold_ids):
        held_out = fold_ids == fold
        threshold = select_threshold(y_true[~held_out], y_score[~held_out], grid)
        thresholds[int(fold)] = threshold
        decisions[held_out] = y_score[held_out] >= threshold
    return decisions, thresholds


def mcc_oof_from_folds(
    y_true: ArrayLike, y_score: ArrayLike, fold_ids: ArrayLike, grid: ArrayLike | None = None
) -> float:
    """Out-of-fold MCC for a given fold assignment (see the module docstring)."""
    labels, scores = _decision_inputs(y_true, y_score)
    folds = np.asarray(fold_ids, dtype=np.int64)
    check_same_length(y_true=labels, folds=folds)
    require_nonempty(labels, "out-of-fold MCC")
    decisions, _ = oof_decisions(labels, scores, folds, check_grid(grid))
    return _pooled_mcc(labels, decisions, "out-of-fold MCC")


def mcc_oof(
    y_true: ArrayLike,
    y_score: ArrayLike,
    groups: ArrayLike,
    folds: int = DEFAULT_FOLDS,
    grid: ArrayLike | None = None,
) -> float:
    """Out-of-fold MCC by grouped K-fold CV with the threshold chosen on the other K-1 folds (paper 001, IV-C2).

    Args:
        y_true: 0/1 labels.
        y_score: the judge's probabilities (any real scores work).
        groups: the trajectory of every item; no trajectory is split across folds.
        folds: K, 10 by default.
        grid: candidate thresholds, 0.01..0.99 by default.

    Raises:
        MetricInputError: malformed input.
        UndefinedMetricError: fewer groups than folds, one class, or constant pooled decisions.
    """
    labels, scores = _decision_inputs(y_true, y_score)
    group_labels = as_label_vector(groups, "groups")
    check_same_length(y_true=labels, groups=group_labels)
    require_both_classes(labels, "out-of-fold MCC")
    return mcc_oof_from_folds(labels, scores, group_folds(group_labels, folds), grid)


def scale_validity(y_score: ArrayLike, grid: ArrayLike | None = None) -> dict[str, float]:
    """How informative a probability scale is (paper 001, VI-A7).

    Returns:
        ``distinct_values`` (number of distinct outputs), ``effective_thresholds`` (how many distinct decision
        vectors ``I[p >= t]`` the grid's thresholds produce; 99 thresholds over a scale of few values collapse to
        few rules), ``share_zero`` and ``share_one`` (share of outputs exactly 0 and exactly 1).

    Raises:
        UndefinedMetricError: empty input.
    """
    scores = as_float_vector(y_score, "y_score")
    thresholds = check_grid(grid)
    require_nonempty(scores, "scale validity")
    # Decision vectors of a monotone rule are nested, so two thresholds give the same vector exactly when they
    # accept the same number of items.
    accepted = np.searchsorted(np.sort(scores), thresholds, side="left")
    return {
        "distinct_values": int(np.unique(scores).size),
        "effective_thresholds": int(np.unique(accepted).size),
        "share_zero": float(np.mean(scores == 0.0)),
        "share_one": float(np.mean(scores == 1.0)),
    }


def mcc_weighted(y_true: IntArray, y_score: FloatArray, weights: FloatArray, threshold: float) -> FloatArray:
    """MCC at ``threshold`` for every resample (rows of item multiplicities); NaN where undefined."""
    accept = (y_score >= threshold).astype(np.float64)
    tp = weights @ (y_true * accept)
    fp = weights @ ((1 - y_true) * accept)
    positives = weights @ y_true.astype(np.float64)
    negatives = weights.sum(axis=1) - positives
    return mcc_from_counts(tp, fp, positives - tp, negatives - fp)


def mcc_oof_weighted(
    y_true: IntArray, y_score: FloatArray, weights: FloatArray, fold_ids: IntArray, grid: FloatArray
) -> FloatArray:
    """Out-of-fold MCC for every resample, thresholds re-selected within each resample; NaN where undefined.

    Per fold it builds the (resamples x thresholds) confusion counts with one matrix product, derives the training
    counts of every fold as total minus fold, selects each fold's threshold with one argmax over the grid, and
    pools the held-out counts at the selected thresholds.
    """
    accept = (y_score[:, None] >= grid[None, :]).astype(np.float64)
    folds: Sequence[int] = [int(f) for f in np.unique(fold_ids)]
    n_resamples = weights.shape[0]
    tp_fold = np.empty((n_resamples, len(folds), grid.size))
    fp_fold = np.empty_like(tp_fold)
    pos_fold = np.empty((n_resamples, len(folds)))
    neg_fold = np.empty_like(pos_fold)
    for slot, fold in enumerate(folds):
        members = fold_ids == fold
        fold_weights = weights[:, members]
        fold_labels = y_true[members].astype(np.float64)
        tp_fold[:, slot] = (fold_weights * fold_labels) @ accept[members]
        fp_fold[:, slot] = (fold_weights * (1.0 - fold_labels)) @ accept[members]
        pos_fold[:, slot] = fold_weights @ fold_labels
        neg_fold[:, slot] = fold_weights.sum(axis=1) - pos_fold[:, slot]
    tp_train = tp_fold.sum(axis=1, keepdims=True) - tp_fold
    fp_train = fp_fold.sum(axis=1, keepdims=True) - fp_fold
    pos_train = (pos_fold.sum(axis=1, keepdims=True) - pos_fold)[..., None]
    neg_train = (neg_fold.sum(axis=1, keepdims=True) - neg_fold)[..., None]
    curve = np.nan_to_num(mcc_from_counts(tp_train, fp_train, pos_train - tp_train, neg_train - fp_train), nan=0.0)
    best = np.argmax(curve, axis=2)[..., None]
    tp = np.take_along_axis(tp_fold, best, axis=2)[..., 0].sum(axis=1)
    fp = np.take_along_axis(fp_fold, best, axis=2)[..., 0].sum(axis=1)
    positives, negatives = pos_fold.sum(axis=1), neg_fold.sum(axis=1)
    return mcc_from_counts(tp, fp, positives - tp, negatives - fp)
