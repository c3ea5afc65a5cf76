"""Discrimination and probabilistic scoring of a judge's acceptance probabilities (paper 001, V-B1).

Point estimates call scikit-learn. The ``*_weighted`` variants evaluate the same metric for many bootstrap
resamples at once: resample ``b`` is a row of item multiplicities ``weights[b]`` (how many times each item was
drawn), and every formula is the expanded-sample formula written with those multiplicities. They are written by
hand because calling scikit-learn once per resample is the bottleneck of a 2,000-resample bootstrap; the tests check
them against scikit-learn on the expanded samples. Undefined resamples come back as NaN for the bootstrap to drop.

LogLoss clipping: probabilities are clipped to ``[eps, 1 - eps]`` with ``eps = 1e-15`` before the logarithm. Paper
001 gives the formula without saying how an output of exactly 0 or 1 is handled, yet reports finite LogLoss for judges
that emit exactly 0.00 and 1.00, so it clipped; 1e-15 is scikit-learn's long-standing default (scikit-learn >= 1.5
clips at machine epsilon, 2.2e-16, instead). The clipping constant changes the loss of a confidently wrong
prediction (34.5 nats at 1e-15), so it is a parameter and is reported with the results.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from sklearn import metrics as skm

from metrics.arrays import (
    FloatArray,
    IntArray,
    as_binary_vector,
    as_float_vector,
    as_probabilities,
    check_same_length,
    require_both_classes,
    require_nonempty,
)
from metrics.errors import MetricInputError

LOG_LOSS_EPS = 1e-15


def check_eps(eps: float) -> float:
    """The clipping constant, in (0, 0.5); 0 would let a confidently wrong prediction cost infinity."""
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 < eps < 0.5:
        raise MetricInputError(f"params.eps must lie strictly between 0 and 0.5, got {eps!r}")
    return float(eps)


def _binary_inputs(y_true: ArrayLike, y_score: ArrayLike, *, probabilities: bool) -> tuple[IntArray, FloatArray]:
    labels = as_binary_vector(y_true, "y_true")
    scores = as_probabilities(y_score, "y_score") if probabilities else as_float_vector(y_score, "y_score")
    check_same_length(y_true=labels, y_score=scores)
    return labels, scores


def roc_auc(y_true: ArrayLike, y_score: ArrayLike) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties counting one half.

    Args:
        y_true: 0/1 labels (1 = accepted).
        y_score: any real scores, higher meaning more likely positive.

    Raises:
        MetricInputError: labels not 0/1, or lengths differ.
        UndefinedMetricError: only one class present.
    """
    labels, scores = _binary_inputs(y_true, y_score, probabilities=False)
    require_both_classes(labels, "ROC-AUC")
    return float(skm.roc_auc_score(labels, scores))


def pr_auc(y_true: ArrayLike, y_score: ArrayLike) -> float:
    """PR-AUC reported as average precision, sum over thresholds of (R_n - R_{n-1}) * P_n (scikit-learn's AP).

    Raises:
        UndefinedMetricError: only one class present (AP needs positives, and with no negatives it is trivially 1).
    """
    labels, scores = _binary_inputs(y_true, y_score, probabilities=False)
    require_both_classes(labels, "PR-AUC")
    return float(skm.average_precision_score(labels, scores))


def log_loss(y_true: ArrayLike, y_prob: ArrayLike, eps: float = LOG_LOSS_EPS) -> float:
    """Mean negative log-likelihood of the labels, probabilities clipped to ``[eps, 1 - eps]`` (module docstring).

    Defined with a single class present too: the formula needs no second class.
    """
    check_eps(eps)
    labels, probs = _binary_inputs(y_true, y_prob, probabilities=True)
    require_nonempty(labels, "LogLoss")
    clipped = np.clip(probs, eps, 1.0 - eps)
    return float(skm.log_loss(labels, clipped, labels=[0, 1]))


def brier(y_true: ArrayLike, y_prob: ArrayLike) -> float:
    """Brier score, the mean squared difference between probability and 0/1 label."""
    labels, probs = _binary_inputs(y_true, y_prob, probabilities=True)
    require_nonempty(labels, "Brier score")
    return float(skm.brier_score_loss(labels, probs, pos_label=1))


def _score_levels(y_true: IntArray, y_score: FloatArray, weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per-resample positive and negative weight at each distinct score, scores ascending: two (B, U) arrays."""
    order = np.argsort(y_score, kind="mergesort")
    sorted_scores = y_score[order]
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    sorted_weights = weights[:, order]
    positive = sorted_weights * y_true[order]
    negative = sorted_weights - positive
    return np.add.reduceat(positive, starts, axis=1), np.add.reduceat(negative, starts, axis=1)


def roc_auc_weighted(y_true: IntArray, y_score: FloatArray, weights: FloatArray) -> FloatArray:
    """ROC-AUC of every resample (rows of ``weights``); NaN where a resample holds one class only."""
    if y_true.size == 0:
        return np.full(weights.shape[0], np.nan)
    positive, negative = _score_levels(y_true, y_score, weights)
    negatives_below = np.cumsum(negative, axis=1) - negative
    numerator = (positive * (negatives_below + 0.5 * negative)).sum(axis=1)
    denominator = positive.sum(axis=1) * negative.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)


def pr_auc_weighted(y_true: IntArray, y_score: FloatArray, weights: FloatArray) -> FloatArray:
    """Average precision of every resample; NaN where a resample holds one class only."""
    if y_true.size == 0:
        return np.full(weights.shape[0], np.nan)
    positive, negative = _score_levels(y_true, y_score, weights)
    positive, negative = positive[:, ::-1], negative[:, ::-1]  # thresholds from the highest score down
    true_positives = np.cumsum(positive, axis=1)
    predicted = true_positives + np.cumsum(negative, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        # A level with no predicted positives so far adds no recall, so its precision never counts.
        precision = np.where(predicted > 0, true_positives / predicted, 0.0)
        total_positive = positive.sum(axis=1)
        total_negative = negative.sum(axis=1)
        ap = (positive * precision).sum(axis=1) / total_positive
    return np.where((total_positive > 0) & (total_negative > 0), ap, np.nan)


def log_loss_weighted(
    y_true: IntArray, y_prob: FloatArray, weights: FloatArray, eps: float = LOG_LOSS_EPS
) -> FloatArray:
    """LogLoss of every resample, with the same clipping as :func:`log_loss`."""
    check_eps(eps)
    clipped = np.clip(y_prob, eps, 1.0 - eps)
    labels = y_true.astype(np.float64)
    losses = -(labels * np.log(clipped) + (1.0 - labels) * np.log1p(-clipped))
    return _weighted_mean(losses, weights)


def brier_weighted(y_true: IntArray, y_prob: FloatArray, weights: FloatArray) -> FloatArray:
    """Brier score of every resample."""
    return _weighted_mean((y_prob - y_true.astype(np.float64)) ** 2, weights)


def _weighted_mean(values: FloatArray, weights: FloatArray) -> FloatArray:
    totals = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, (weights @ values) / totals, np.nan)
