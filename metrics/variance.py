"""Judge variance from repeated judgments: per-item variance, flip rate, noise floor (issue 24, item 2).

A judge asked R >= 2 times about the same item (judgments ``repeat`` 0..R-1, same judge and condition) gives R
probabilities ``p_i1 .. p_iR`` for item i. Over the n items with at least two repeats:

- per-item variance ``s_i^2 = sum_r (p_ir - mean_i)^2 / (R_i - 1)`` (the unbiased sample variance, ``ddof=1``), and
  the judge's within-item variance ``sigma_w^2 = mean_i s_i^2``;
- flip rate: the share of items whose decision ``I[p_ir >= t]`` is not the same on every repeat, at the decision
  threshold ``t`` the caller names (the platform passes the judge's MCC-selected threshold, or 0.5 when it has no
  labels to select one on; :func:`flip_rate` takes it as given);
- noise floor: the smallest difference between two systems' mean scores that this judge can tell apart at 95%,
  ``z * sqrt(2 * sigma_w^2 / (n * r))`` with ``z = 1.959964`` (the normal 97.5% quantile), for two systems each
  scored on n items with r repeats averaged per item (r = 1: one judgment per item, as a study usually has).

Assumptions of the noise floor: the judge's repeat noise is independent across items, repeats and systems, with the
same variance ``sigma_w^2`` for every item (its mean over items stands for all); n is large enough for the normal
approximation of a mean; and the two systems are compared on their own items' true scores held fixed, so it is the
floor set by the judge's own noise only (sampling of items adds to it, never takes from it). A difference of mean
scores smaller than the floor is one the judge's noise alone produces more than 5% of the time.

Intervals resample clusters (trajectories or problems) of items with :mod:`metrics.bootstrap`, all three figures on
the same resamples; the noise floor's interval is the floor of every resample's ``sigma_w^2`` at the full-sample n.

Written by hand because no library computes repeat variance, flips or the floor over grouped repeats; each step is a
numpy reduction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import norm

from metrics.arrays import FloatArray, as_float_vector, as_label_vector, check_same_length, label_codes
from metrics.bootstrap import DEFAULT_LEVEL, draw_resamples, is_degenerate, percentile_interval
from metrics.errors import MetricInputError, UndefinedMetricError

Z_95 = float(norm.ppf(0.975))
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class Repeats:
    """The repeated probabilities of the items that have at least two: ``item`` labels (sorted), each item's
    ``variance`` (ddof 1), whether its decisions ``flipped`` at ``threshold``, its ``repeats`` count."""

    item: list[Any]
    variance: FloatArray
    flipped: FloatArray
    repeats: FloatArray
    threshold: float


def item_repeats(item: ArrayLike, y_score: ArrayLike, threshold: float = DEFAULT_THRESHOLD) -> Repeats:
    """Per-item variance and flips of the probabilities ``y_score`` grouped by ``item`` (one entry per judgment).

    Raises:
        MetricInputError: malformed input or threshold.
        UndefinedMetricError: no item has two repeats.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not np.isfinite(threshold):
        raise MetricInputError(f"params.threshold must be a number, got {threshold!r}")
    labels = as_label_vector(item, "item")
    scores = as_float_vector(y_score, "y_score")
    check_same_length(item=labels, y_score=scores)
    names, codes = label_codes(labels)
    count = np.bincount(codes, minlength=len(names)).astype(np.float64)
    total = np.bincount(codes, weights=scores, minlength=len(names))
    mean = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
    squares = np.bincount(codes, weights=(scores - mean[codes]) ** 2, minlength=len(names))
    accepted = np.bincount(codes, weights=(scores >= threshold).astype(np.float64), minlength=len(names))
    keep = count >= 2
    if not keep.any():
        raise UndefinedMetricError("judge variance needs items with at least two repeats; none has")
    return Repeats(
        item=[name for name, kept in zip(names.tolist(), keep.tolist(), strict=True) if kept],
        variance=squares[keep] / (count[keep] - 1.0),
        flipped=((accepted[keep] > 0) & (accepted[keep] < count[keep])).astype(np.float64),
        repeats=count[keep],
        threshold=float(threshold),
    )


def within_variance(item: ArrayLike, y_score: ArrayLike) -> float:
    """``sigma_w^2``: the mean over items of the per-item sample variance across repeats."""
    return float(item_repeats(item, y_score).variance.mean())


def flip_rate(item: ArrayLike, y_score: ArrayLike, threshold: float = DEFAULT_THRESHOLD) -> float:
    """Share of items (with at least two repeats) whose decisions ``I[p >= threshold]`` differ between repeats."""
    return float(item_repeats(item, y_score, threshold).flipped.mean())


def noise_floor(sigma_w2: float, n: int, repeats: int = 1, z: float = Z_95) -> float:
    """``z * sqrt(2 * sigma_w2 / (n * repeats))``: the smallest difference of two systems' mean scores (n items each,
    ``repeats`` judgments averaged per item) this judge's noise lets it tell apart at 95% (see the module docstring).

    Raises:
        MetricInputError: a negative variance or a count below 1.
    """
    if not np.isfinite(sigma_w2) or sigma_w2 < 0:
        raise MetricInputError(f"sigma_w2 must be a non-negative number, got {sigma_w2!r}")
    for name, value in (("n", n), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise MetricInputError(f"{name} must be a positive integer, got {value!r}")
    return float(z * np.sqrt(2.0 * sigma_w2 / (int(n) * int(repeats))))


def judge_variance(
    item: ArrayLike,
    y_score: ArrayLike,
    cluster: ArrayLike | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    bootstrap: int = 500,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
    min_clusters: int = 2,
) -> dict[str, dict[str, Any]]:
    """The three figures of a judge x condition, each ``{"value", "ci", "degenerate", "n", "clusters"}``:
    ``variance`` (sigma_w^2), ``flip_rate`` and ``noise_floor`` (for n = the items with repeats, r = 1).

    Args:
        item: the item (attempt) of every judgment.
        y_score: the probability of every judgment.
        cluster: the cluster of every judgment (constant within an item); each item its own by default.
        threshold: the decision threshold of the flip rate.
        bootstrap: cluster-bootstrap resamples (0: no intervals).

    Raises:
        MetricInputError: malformed input, or an item spread over two clusters.
        UndefinedMetricError: no item has two repeats.
    """
    repeats = item_repeats(item, y_score, threshold)
    n = len(repeats.item)
    labels = as_label_vector(item, "item")
    if cluster is None:
        item_cluster = np.asarray(repeats.item)
    else:
        clusters = as_label_vector(cluster, "cluster")
        check_same_length(item=labels, cluster=clusters)
        of_item: dict[Any, Any] = {}
        for key, value in zip(labels.tolist(), clusters.tolist(), strict=True):
            if of_item.setdefault(key, value) != value:
                raise MetricInputError(f"item {key!r} lies in two clusters; an item's repeats share one cluster")
        item_cluster = np.asarray([of_item[key] for key in repeats.item])
    n_clusters = int(np.unique(item_cluster).size)
    per_item = {"variance": repeats.variance, "flip_rate": repeats.flipped}
    out: dict[str, dict[str, Any]] = {
        name: {"value": float(values.mean()), "n": n, "clusters": n_clusters} for name, values in per_item.items()
    }
    out["noise_floor"] = {"value": noise_floor(out["variance"]["value"], n), "n": n, "clusters": n_clusters}
    if bootstrap > 0 and n_clusters >= max(2, min_clusters):
        weights = draw_resamples(item_cluster, bootstrap, seed, min_clusters).weights(item_cluster)
        mass = weights.sum(axis=1)
        distributions = {name: (weights @ values) / mass for name, values in per_item.items()}
        distributions["noise_floor"] = Z_95 * np.sqrt(2.0 * distributions["variance"] / n)
        for name, distribution in distributions.items():
            out[name]["ci"] = list(percentile_interval(distribution, level))
            out[name]["degenerate"] = is_degenerate(distribution)
    return out
