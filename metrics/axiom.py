"""AXIOM's diagnostic subtasks and the normalisation of rule-based metrics to the 0-5 scale (paper 000, V-B, IV-D1).

Subtasks (V-B), each scored by MCC over the items whose ground-truth score is positive or negative for it:

=============  ===============  ===============  ==========
subtask        positive         negative         excluded
=============  ===============  ===============  ==========
gating         0                1-5              none
functionality  3-5              0-2              none
quality        5                3-4              0-2
effort         1 and 3          2 and 4          0 and 5
=============  ===============  ===============  ==========

A prediction counts as positive exactly when its score lies in the subtask's positive set, and as negative otherwise
(the paper does not say what to do with a predicted score in the excluded set, e.g. a predicted 0 on the quality
subtask for an item whose true score is 3; a metric that predicts it has not recognised a high-quality program, so it
is a negative prediction).

Normalisation (IV-D1): ``round(5 (s - s_min) / (s_max - s_min))`` with ``s_min``/``s_max`` the minimum and maximum raw
score of that metric over the data set. ``round`` is NumPy's (and Python's) round-half-to-even, the function the
paper's formula names in Python; a raw score exactly halfway between two levels therefore goes to the even level.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from sklearn import metrics as skm

from metrics.arrays import FloatArray, IntArray, as_float_vector, check_same_length
from metrics.decisions import mcc_weighted
from metrics.errors import MetricInputError, UndefinedMetricError

SUBTASKS: dict[str, tuple[frozenset[int], frozenset[int]]] = {
    "gating": (frozenset({0}), frozenset({1, 2, 3, 4, 5})),
    "functionality": (frozenset({3, 4, 5}), frozenset({0, 1, 2})),
    "quality": (frozenset({5}), frozenset({3, 4})),
    "effort": (frozenset({1, 3}), frozenset({2, 4})),
}


def _scores_0_to_5(values: ArrayLike, name: str) -> IntArray:
    array = as_float_vector(values, name)
    if array.size and (not np.all(array == np.round(array)) or array.min() < 0 or array.max() > 5):
        raise MetricInputError(f"{name} must hold integer scores 0..5 for the AXIOM subtasks")
    return array.astype(np.int64)


def subtask_labels(y_true: ArrayLike, y_pred: ArrayLike, subtask: str) -> tuple[IntArray, IntArray]:
    """Binary truth and prediction of a subtask over the items it includes (module docstring)."""
    if subtask not in SUBTASKS:
        raise MetricInputError(f"unknown AXIOM subtask {subtask!r}; known: {', '.join(SUBTASKS)}")
    truth = _scores_0_to_5(y_true, "y_true")
    prediction = _scores_0_to_5(y_pred, "y_score")
    check_same_length(y_true=truth, y_score=prediction)
    positive, negative = SUBTASKS[subtask]
    included = np.isin(truth, list(positive | negative))
    positive_list = list(positive)
    return (
        np.isin(truth[included], positive_list).astype(np.int64),
        np.isin(prediction[included], positive_list).astype(np.int64),
    )


def subtask_mcc(y_true: ArrayLike, y_pred: ArrayLike, subtask: str) -> float:
    """MCC of one AXIOM subtask (``gating``, ``functionality``, ``quality``, ``effort``).

    Args:
        y_true: ground-truth scores 0..5.
        y_pred: the metric's scores 0..5 (normalise continuous metrics with :func:`minmax_to_scale` first).
        subtask: which subtask.

    Raises:
        MetricInputError: scores not integers 0..5, unknown subtask.
        UndefinedMetricError: the included items hold one class, or every prediction is the same.
    """
    truth, prediction = subtask_labels(y_true, y_pred, subtask)
    what = f"MCC of the {subtask} subtask"
    if truth.size == 0 or truth.min() == truth.max():
        raise UndefinedMetricError(f"{what} needs positive and negative items; the included {truth.size} are not both")
    if prediction.min() == prediction.max():
        raise UndefinedMetricError(f"{what} is undefined: every prediction is the same class, so MCC is 0/0")
    return float(skm.matthews_corrcoef(truth, prediction))


def subtask_mcc_weighted(y_true: ArrayLike, y_pred: ArrayLike, subtask: str, weights: FloatArray) -> FloatArray:
    """:func:`subtask_mcc` on every bootstrap resample at once (rows of item multiplicities); NaN where undefined.
    The same MCC from weighted confusion counts (:func:`metrics.decisions.mcc_weighted`), so that a report's
    interval needs no scikit-learn call per resample."""
    truth = _scores_0_to_5(y_true, "y_true")
    positive, negative = SUBTASKS[subtask]
    included = np.isin(truth, list(positive | negative))
    binary_truth, binary_prediction = subtask_labels(y_true, y_pred, subtask)
    return mcc_weighted(binary_truth, binary_prediction.astype(np.float64), weights[:, included], 0.5)


def minmax_to_scale(raw: ArrayLike, lo: int = 0, hi: int = 5) -> IntArray:
    """Normalise raw metric scores to the integer scale lo..hi by min-max and rounding (paper 000, IV-D1).

    Raises:
        UndefinedMetricError: empty input, or every raw score equal (s_max = s_min).
    """
    values = as_float_vector(raw, "raw")
    if values.size == 0:
        raise UndefinedMetricError("min-max normalisation is undefined on empty input")
    s_min, s_max = values.min(), values.max()
    if s_max == s_min:
        raise UndefinedMetricError(f"min-max normalisation is undefined: every raw score is {s_min:g}")
    return (lo + np.round((hi - lo) * (values - s_min) / (s_max - s_min))).astype(np.int64)
