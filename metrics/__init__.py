"""Tribunal's meta-evaluation library: pure functions from numpy arrays to numbers, importing nothing else of the
platform, so it can be used offline. ``compute`` serves every metric named in api.md."""

from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.registry import METRIC_NAMES, compare, compute

__all__ = ["METRIC_NAMES", "MetricInputError", "UndefinedMetricError", "compare", "compute"]
