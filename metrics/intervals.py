"""Bootstrap intervals of the table's metrics: the resamples of a request (whole trajectories kept together), a
metric's values on every resample (vectorised through its weights-based form, or one call per resample), and
their percentile interval. The resampling itself is metrics.bootstrap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from metrics.arrays import FloatArray, as_label_vector, label_codes
from metrics.bootstrap import ClusterResamples, bootstrap_loop, draw_resamples, is_degenerate, percentile_interval
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.inputs import Inputs, integer_param
from metrics.table import SPECS

Distribution = FloatArray | dict[str, FloatArray]


def resampled_values(
    name: str,
    inputs: Inputs,
    resamples: ClusterResamples,
    cluster: NDArray[Any],
    weights: FloatArray | None,
    vectorised: bool,
) -> Distribution:
    """The metric on every resample: NaN (or a missing key) where it is undefined."""
    spec = SPECS[name]
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


def percentile_ci(distribution: Distribution, level: float) -> tuple[list[float] | dict[str, list[float]], int]:
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


def degenerate_ci(
    distribution: Distribution, intervals: list[float] | dict[str, list[float]]
) -> bool | dict[str, bool]:
    """Whether each interval of :func:`percentile_ci` is degenerate (:func:`metrics.bootstrap.is_degenerate`: all
    defined resamples equal), in the interval's shape: a bool, or per key for a dict metric."""
    if isinstance(distribution, dict) and isinstance(intervals, dict):
        return {key: is_degenerate(distribution[key]) for key in intervals}
    return is_degenerate(distribution if not isinstance(distribution, dict) else np.zeros(0))


def prepare_bootstrap(
    inputs: Inputs, names: Sequence[str], bootstrap: int, cluster: ArrayLike | None, seed: int
) -> tuple[ClusterResamples, NDArray[Any]]:
    """The resamples of the request's clusters (every item its own cluster by default) and the cluster labels;
    MetricInputError if a cluster splits a trajectory that a trajectory metric needs whole."""
    labels = np.arange(inputs.n_items) if cluster is None else as_label_vector(cluster, "cluster")
    if labels.size != inputs.n_items:
        raise MetricInputError(f"cluster has {labels.size} elements but there are {inputs.n_items} items")
    if inputs.groups is not None and any(SPECS[name].trajectories for name in names):
        _, group_codes = label_codes(inputs.groups)
        _, cluster_codes = label_codes(labels)
        pairs = np.unique(np.stack([group_codes, cluster_codes]), axis=1)
        if np.unique(pairs[0]).size != pairs.shape[1]:
            raise MetricInputError(
                "cluster splits a trajectory (groups; for pass_at_k, a task); resample whole groups or coarser units"
            )
    min_clusters = integer_param(inputs.settings, "min_clusters", 2)
    return draw_resamples(labels, bootstrap, seed, min_clusters), labels


def check_bootstrap_count(bootstrap: int) -> None:
    """MetricInputError unless `bootstrap` is a non-negative integer."""
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int | np.integer) or bootstrap < 0:
        raise MetricInputError(f"bootstrap must be a non-negative integer, got {bootstrap!r}")
