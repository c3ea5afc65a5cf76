"""Cluster bootstrap: resample whole clusters with replacement, percentile intervals, paired differences.

One :class:`ClusterResamples` is drawn per analysis (numpy ``Generator`` seeded by the caller, so the same seed and
clusters give the same resamples) and shared by every quantity whose intervals are compared: two judges, two input
conditions, or two subsets whose items carry labels from the same clusters each take their item weights from the
same draws, which is what makes an interval for a paired difference valid.

A resample draws C clusters with replacement from the C distinct clusters (2,000 resamples by default, as in paper
001). It is represented in two equivalent ways:

- weights: a (resamples x items) matrix holding how many times each item's cluster was drawn; vectorised metrics
  evaluate all resamples at once from it (a duplicated item is a weight of 2);
- an index set: the items of the drawn clusters, concatenated in draw order, each with the ordinal of the draw that
  brought it in (``copy``), so that a trajectory drawn twice can be told apart from one long trajectory. This is the
  straightforward path: call the ordinary metric once per resample on the expanded arrays.

Percentile intervals ignore resamples on which the metric is undefined (NaN); how many were dropped is reported by
:func:`summarise`. An interval needs at least two clusters (``min_clusters``): with one, every resample is the sample.

A *degenerate* interval (:func:`is_degenerate`) is one whose defined resample values are all equal (within
``DEGENERATE_TOLERANCE``): e.g. ROC-AUC 1.000 [1.000, 1.000] over four attempts, where every resample separates the
classes perfectly. Its width says nothing about the uncertainty (the resamples could not vary), unlike a real narrow
interval, whose resamples did vary a little. This is the one definition of the concept; the registry and the
reports carry it as a flag beside the interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from metrics.arrays import FloatArray, IntArray, as_label_vector
from metrics.errors import MetricInputError, UndefinedMetricError

DEFAULT_RESAMPLES = 2000
DEFAULT_LEVEL = 0.95
MAX_RESAMPLES = 100_000
# Resample values closer together than this count as equal (float noise of weighted sums, not variation).
DEGENERATE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class ClusterResamples:
    """``n_resamples`` draws of all clusters with replacement.

    Attributes:
        labels: the distinct cluster labels, sorted; draws index into them.
        draws: (resamples x clusters) indices of the drawn clusters, in draw order.
        counts: (resamples x clusters) number of times each cluster was drawn.
    """

    labels: NDArray[Any]
    draws: IntArray
    counts: IntArray

    @property
    def n_resamples(self) -> int:
        return int(self.draws.shape[0])

    @property
    def n_clusters(self) -> int:
        return int(self.labels.size)

    def cluster_index(self, cluster: ArrayLike) -> IntArray:
        """Index into :attr:`labels` of every item's cluster; MetricInputError for a label never drawn from."""
        items = as_label_vector(cluster, "cluster")
        if items.size == 0:
            return np.zeros(0, dtype=np.int64)
        if self.labels.dtype.kind != items.dtype.kind and {self.labels.dtype.kind, items.dtype.kind} & {"U", "S"}:
            raise MetricInputError("cluster labels must be of the same kind (all numbers or all strings)")
        position = np.searchsorted(self.labels, items)
        position = np.minimum(position, self.n_clusters - 1)
        if not np.array_equal(self.labels[position], items):
            raise MetricInputError("cluster holds a label that is not among the resampled clusters")
        return position.astype(np.int64)

    def weights(self, cluster: ArrayLike) -> FloatArray:
        """(resamples x items) multiplicity of every item: how often its cluster was drawn."""
        return self.counts[:, self.cluster_index(cluster)].astype(np.float64)

    def indices(self, resample: int, cluster: ArrayLike) -> tuple[IntArray, IntArray]:
        """Items of resample ``resample`` (with repeats) and, for each, the ordinal of the draw that brought it in."""
        index = self.cluster_index(cluster)
        order = np.argsort(index, kind="mergesort")
        starts = np.searchsorted(index[order], np.arange(self.n_clusters + 1))
        drawn = self.draws[resample]
        sizes = starts[drawn + 1] - starts[drawn]
        copy = np.repeat(np.arange(drawn.size), sizes)
        # Position of each expanded element within its cluster's member list.
        within = np.arange(copy.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        items = order[np.repeat(starts[drawn], sizes) + within]
        return items.astype(np.int64), copy.astype(np.int64)


def draw_resamples(
    cluster: ArrayLike, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0, min_clusters: int = 2
) -> ClusterResamples:
    """Draw ``n_resamples`` cluster resamples from the distinct labels of ``cluster``.

    Args:
        cluster: the cluster label of every item (trajectory, problem, seed program, ...).
        n_resamples: number of resamples (2,000 by default).
        seed: seed of the numpy ``Generator``; the same seed and labels give the same draws.
        min_clusters: fewest distinct clusters accepted.

    Raises:
        MetricInputError: malformed labels or resample count.
        UndefinedMetricError: fewer than ``min_clusters`` distinct clusters.
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer):
        raise MetricInputError(f"bootstrap must be an integer number of resamples, got {n_resamples!r}")
    if not 1 <= n_resamples <= MAX_RESAMPLES:
        raise MetricInputError(f"bootstrap must be between 1 and {MAX_RESAMPLES}, got {n_resamples}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise MetricInputError(f"seed must be a non-negative integer, got {seed!r}")
    labels = np.unique(as_label_vector(cluster, "cluster"))
    if labels.size < max(2, min_clusters):
        raise UndefinedMetricError(
            f"a cluster bootstrap needs at least {max(2, min_clusters)} clusters; got {labels.size}"
        )
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, labels.size, size=(int(n_resamples), labels.size), dtype=np.int64)
    offsets = draws + (np.arange(draws.shape[0]) * labels.size)[:, None]
    counts = np.bincount(offsets.ravel(), minlength=draws.size).reshape(draws.shape)
    return ClusterResamples(labels=labels, draws=draws, counts=counts)


def percentile_interval(distribution: ArrayLike, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Percentile interval of the defined (non-NaN) resample values.

    Raises:
        MetricInputError: level outside (0, 1).
        UndefinedMetricError: the metric was undefined on every resample.
    """
    if not 0 < level < 1:
        raise MetricInputError(f"params.ci_level must lie in (0, 1), got {level!r}")
    values = np.asarray(distribution, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise UndefinedMetricError("the metric is undefined on every bootstrap resample")
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def is_degenerate(distribution: ArrayLike) -> bool:
    """True when the defined (non-NaN) resample values are all equal (within ``DEGENERATE_TOLERANCE``), so that
    their percentile interval has no width because the resamples could not vary; False when there is none."""
    values = np.asarray(distribution, dtype=np.float64)
    values = values[np.isfinite(values)]
    return bool(values.size) and float(values.max() - values.min()) <= DEGENERATE_TOLERANCE


def summarise(distribution: ArrayLike, level: float = DEFAULT_LEVEL) -> dict[str, Any]:
    """Interval, how many resamples were dropped as undefined, and whether the interval is degenerate."""
    values = np.asarray(distribution, dtype=np.float64)
    low, high = percentile_interval(values, level)
    return {
        "ci": [low, high],
        "dropped": int((~np.isfinite(values)).sum()),
        "resamples": int(values.size),
        "degenerate": is_degenerate(values),
    }


def paired_difference(
    distribution_a: ArrayLike, distribution_b: ArrayLike, level: float = DEFAULT_LEVEL
) -> tuple[float, float]:
    """Percentile interval of ``a - b`` over resamples; both distributions must come from the same resamples."""
    first = np.asarray(distribution_a, dtype=np.float64)
    second = np.asarray(distribution_b, dtype=np.float64)
    if first.shape != second.shape:
        raise MetricInputError("paired differences need two distributions over the same resamples")
    return percentile_interval(first - second, level)


def bootstrap_loop[T](
    metric: Callable[[IntArray, IntArray], T], resamples: ClusterResamples, cluster: ArrayLike
) -> list[T | None]:
    """Evaluate ``metric(items, copy)`` once per resample (the straightforward path).

    ``metric`` raises :class:`UndefinedMetricError` where it has no value; that resample's entry is None.
    """
    cluster_labels = as_label_vector(cluster, "cluster")
    values: list[T | None] = []
    for resample in range(resamples.n_resamples):
        items, copy = resamples.indices(resample, cluster_labels)
        try:
            values.append(metric(items, copy))
        except UndefinedMetricError:
            values.append(None)
    return values
