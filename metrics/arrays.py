"""Input checking shared by the metric modules: every conversion names the argument it checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from metrics.errors import MetricInputError, UndefinedMetricError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


def as_float_vector(values: ArrayLike, name: str, *, allow_missing: bool = False) -> FloatArray:
    """A 1-D float64 array; None/NaN only where ``allow_missing`` (they stay NaN)."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MetricInputError(f"{name} must be a list of numbers") from exc
    if array.ndim != 1:
        raise MetricInputError(f"{name} must be one-dimensional, got shape {array.shape}")
    if np.isinf(array).any():
        raise MetricInputError(f"{name} contains an infinite value")
    if not allow_missing and np.isnan(array).any():
        raise MetricInputError(f"{name} contains a missing value (null or NaN)")
    return array


def as_binary_vector(values: ArrayLike, name: str) -> IntArray:
    """A 1-D array of 0/1 labels (booleans accepted)."""
    array = as_float_vector(values, name)
    if not np.isin(array, (0.0, 1.0)).all():
        bad = array[~np.isin(array, (0.0, 1.0))][0]
        raise MetricInputError(f"{name} must hold binary labels 0/1, found {bad!r}")
    return array.astype(np.int64)


def as_probabilities(values: ArrayLike, name: str) -> FloatArray:
    """A 1-D array of probabilities in [0, 1]."""
    array = as_float_vector(values, name)
    if array.size and (array.min() < 0.0 or array.max() > 1.0):
        raise MetricInputError(f"{name} must hold probabilities in [0, 1]")
    return array


def as_label_vector(values: ArrayLike, name: str) -> NDArray[Any]:
    """A 1-D array of opaque labels (groups, clusters, arms); JSON null is not a label."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise MetricInputError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.dtype == object:
        if any(item is None for item in array):
            raise MetricInputError(f"{name} contains a missing label (null)")
        # Mixed JSON types (1 and "a") cannot be ordered by numpy; their text forms can.
        array = array.astype(str)
    return array


def label_codes(values: NDArray[Any]) -> tuple[NDArray[Any], IntArray]:
    """Sorted unique labels and, for each element, its index among them."""
    unique, codes = np.unique(values, return_inverse=True)
    return unique, codes.astype(np.int64)


def as_ratings_matrix(values: ArrayLike, name: str = "ratings") -> FloatArray:
    """A raters x items float matrix; None/NaN mark a missing rating."""
    try:
        array = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MetricInputError(f"{name} must be a raters x items matrix of numbers or nulls") from exc
    if array.ndim != 2:
        raise MetricInputError(f"{name} must be a raters x items matrix, got shape {array.shape}")
    if np.isinf(array).any():
        raise MetricInputError(f"{name} contains an infinite value")
    return array


def check_same_length(**arrays: Sequence[Any] | NDArray[Any]) -> int:
    """The common length of the named arrays, or MetricInputError naming the first that differs."""
    names = list(arrays)
    length = len(arrays[names[0]])
    for other in names[1:]:
        if len(arrays[other]) != length:
            raise MetricInputError(
                f"{other} has {len(arrays[other])} elements but {names[0]} has {length}; they must match"
            )
    return length


def require_both_classes(y_true: IntArray, what: str) -> None:
    """UndefinedMetricError unless ``y_true`` holds at least one 0 and one 1."""
    if y_true.size == 0:
        raise UndefinedMetricError(f"{what} is undefined on empty input")
    positives = int(y_true.sum())
    if positives == 0 or positives == y_true.size:
        only = "positive" if positives else "negative"
        raise UndefinedMetricError(f"{what} needs both classes in y_true; all {y_true.size} labels are {only}")


def require_nonempty(array: NDArray[Any], what: str) -> None:
    """UndefinedMetricError on empty input."""
    if array.size == 0:
        raise UndefinedMetricError(f"{what} is undefined on empty input")


def require_not_constant(array: FloatArray, name: str, what: str) -> None:
    """UndefinedMetricError when every value of ``array`` is the same (a correlation's 0/0)."""
    if array.size and np.all(array == array[0]):
        raise UndefinedMetricError(f"{what} is undefined: {name} is constant ({array[0]:g} everywhere)")
