"""Calibration of acceptance probabilities: ECE with equal-width bins and reliability-diagram data (paper 001, V-B1).

ECE = sum_b (n_b / N) |obs(b) - pred(b)| with B = 15 equal-width bins and bin index ``min(floor(p * B), B - 1)``
(api.md), so p = 1.0 falls in the last bin. Empty bins contribute nothing. Written by hand: scikit-learn's
``calibration_curve`` returns the curve but not the ECE, and bins by searching edges rather than by the
``floor(p * B)`` rule the API fixes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from metrics.arrays import (
    FloatArray,
    IntArray,
    as_binary_vector,
    as_probabilities,
    check_same_length,
    require_nonempty,
)
from metrics.errors import MetricInputError

DEFAULT_BINS = 15


def check_bins(bins: int) -> int:
    """The bin count, or MetricInputError naming ``params.bins``."""
    if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or bins < 1:
        raise MetricInputError(f"params.bins must be a positive integer, got {bins!r}")
    return int(bins)


def bin_index(y_prob: FloatArray, bins: int) -> IntArray:
    """``min(floor(p * bins), bins - 1)`` for every probability."""
    return np.minimum(np.floor(y_prob * bins).astype(np.int64), bins - 1)


def ece(y_true: ArrayLike, y_prob: ArrayLike, bins: int = DEFAULT_BINS) -> float:
    """Expected calibration error over ``bins`` equal-width bins.

    Args:
        y_true: 0/1 labels.
        y_prob: probabilities in [0, 1].
        bins: number of equal-width bins (paper 001 uses 15).

    Raises:
        MetricInputError: malformed labels, probabilities or bin count.
        UndefinedMetricError: empty input.
    """
    bins = check_bins(bins)
    labels = as_binary_vector(y_true, "y_true")
    probs = as_probabilities(y_prob, "y_prob")
    check_same_length(y_true=labels, y_prob=probs)
    require_nonempty(labels, "ECE")
    gaps = np.bincount(bin_index(probs, bins), weights=labels - probs, minlength=bins)
    return float(np.abs(gaps).sum() / labels.size)


def reliability_diagram(y_true: ArrayLike, y_prob: ArrayLike, bins: int = DEFAULT_BINS) -> list[dict[str, Any]]:
    """Per non-empty bin: edges, count, mean predicted probability and observed positive rate.

    These are the points of a reliability diagram; ``sum(count * |observed - predicted|) / N`` is the ECE.
    """
    bins = check_bins(bins)
    labels = as_binary_vector(y_true, "y_true")
    probs = as_probabilities(y_prob, "y_prob")
    check_same_length(y_true=labels, y_prob=probs)
    index = bin_index(probs, bins)
    counts = np.bincount(index, minlength=bins)
    predicted = np.bincount(index, weights=probs, minlength=bins)
    observed = np.bincount(index, weights=labels, minlength=bins)
    return [
        {
            "bin": b,
            "lower": b / bins,
            "upper": (b + 1) / bins,
            "count": int(counts[b]),
            "mean_predicted": float(predicted[b] / counts[b]),
            "observed_rate": float(observed[b] / counts[b]),
        }
        for b in range(bins)
        if counts[b] > 0
    ]


def ece_weighted(y_true: IntArray, y_prob: FloatArray, weights: FloatArray, bins: int = DEFAULT_BINS) -> FloatArray:
    """ECE of every resample (rows of item multiplicities ``weights``); NaN for an empty resample."""
    membership = np.zeros((y_prob.size, bins))
    membership[np.arange(y_prob.size), bin_index(y_prob, bins)] = 1.0
    gaps = (weights * (y_true - y_prob)) @ membership
    totals = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, np.abs(gaps).sum(axis=1) / totals, np.nan)
