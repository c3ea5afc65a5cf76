"""AXIOM's four binary subtasks scored by MCC, and min-max normalisation to the 0-5 scale."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from metrics import MetricInputError, UndefinedMetricError
from metrics.axiom import minmax_to_scale, subtask_labels, subtask_mcc

TRUTH = np.array([0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5])
PRED = np.array([0, 2, 2, 4, 3, 5, 1, 1, 3, 5, 5, 4])


@pytest.mark.parametrize(
    ("subtask", "included", "positive_truth"),
    [
        ("gating", {0, 1, 2, 3, 4, 5}, {0}),
        ("functionality", {0, 1, 2, 3, 4, 5}, {3, 4, 5}),
        ("quality", {3, 4, 5}, {5}),
        ("effort", {1, 2, 3, 4}, {1, 3}),
    ],
)
def test_subtask_sets_follow_section_v_b(subtask: str, included: set[int], positive_truth: set[int]) -> None:
    truth, prediction = subtask_labels(TRUTH, PRED, subtask)
    kept = np.isin(TRUTH, list(included))
    assert truth.tolist() == np.isin(TRUTH[kept], list(positive_truth)).astype(int).tolist()
    assert prediction.tolist() == np.isin(PRED[kept], list(positive_truth)).astype(int).tolist()
    assert subtask_mcc(TRUTH, PRED, subtask) == pytest.approx(skm.matthews_corrcoef(truth, prediction))


def test_quality_subtask_worked_example() -> None:
    # Included (truth 3-5): truth 3 4 5 3 4 5 -> 0 0 1 0 0 1; predictions 4 3 5 5 5 4 -> 0 0 1 1 1 0.
    # TP 1, FN 1, FP 2, TN 2: MCC = (1*2 - 2*1) / ... = 0.
    assert subtask_mcc(TRUTH, PRED, "quality") == pytest.approx(0.0)


def test_subtask_refusals() -> None:
    with pytest.raises(UndefinedMetricError, match="positive and negative"):
        subtask_mcc([0, 1, 2], [0, 5, 5], "quality")  # no item has a true score of 3-5
    with pytest.raises(UndefinedMetricError, match="same class"):
        subtask_mcc([0, 1, 3], [1, 1, 1], "gating")
    with pytest.raises(MetricInputError, match="y_score"):
        subtask_mcc([0, 1], [0, 6], "gating")
    with pytest.raises(MetricInputError, match="subtask"):
        subtask_mcc([0, 1], [0, 1], "style")


def test_minmax_normalisation_worked_example() -> None:
    # s_min 0, s_max 1: 5 * s = 0, 0.5, 2.5, 4.5, 5 -> round half to even -> 0, 0, 2, 4, 5; 0.7 -> 3.5 -> 4.
    assert minmax_to_scale([0.0, 0.1, 0.5, 0.9, 1.0]).tolist() == [0, 0, 2, 4, 5]
    assert minmax_to_scale([0.0, 0.3, 1.0]).tolist() == [0, 2, 5]
    assert minmax_to_scale([1.0, 3.0], lo=1, hi=5).tolist() == [1, 5]
    with pytest.raises(UndefinedMetricError, match="every raw score"):
        minmax_to_scale([0.4, 0.4])
