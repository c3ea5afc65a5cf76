"""ECE with 15 equal-width bins and the reliability-diagram data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics import MetricInputError, UndefinedMetricError
from metrics.calibration import ece, ece_weighted, reliability_diagram


def test_ece_worked_example() -> None:
    # p = 0.10, 0.10, 0.12 -> floor(p * 15) = 1 (1.5, 1.5, 1.8): bin 1 holds 3 items, observed 1/3, predicted 0.32/3,
    #   contributing 3/5 * |1/3 - 0.32/3| = 0.68/5 = 0.136.
    # p = 0.90 -> bin 13, observed 1, predicted 0.9: 1/5 * 0.1 = 0.02.
    # p = 1.00 -> floor(15) = 15, capped to bin 14: observed 1, predicted 1: 0.
    # ECE = 0.156.
    assert ece([1, 0, 0, 1, 1], [0.1, 0.1, 0.12, 0.9, 1.0]) == pytest.approx(0.156)


def _reference_ece(labels: np.ndarray, probs: np.ndarray, bins: int) -> float:
    total = 0.0
    for b in range(bins):
        members = np.minimum(np.floor(probs * bins), bins - 1) == b
        if members.any():
            total += members.sum() / labels.size * abs(labels[members].mean() - probs[members].mean())
    return total


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.floats(0, 1)), min_size=1, max_size=60),
    st.integers(1, 20),
)
def test_ece_matches_the_per_bin_definition(pairs: list[tuple[int, float]], bins: int) -> None:
    labels = np.array([label for label, _ in pairs])
    probs = np.array([prob for _, prob in pairs])
    assert ece(labels, probs, bins) == pytest.approx(_reference_ece(labels, probs, bins), abs=1e-12)
    diagram = reliability_diagram(labels, probs, bins)
    assert sum(row["count"] for row in diagram) == labels.size
    from_diagram = sum(row["count"] * abs(row["observed_rate"] - row["mean_predicted"]) for row in diagram)
    assert from_diagram / labels.size == pytest.approx(ece(labels, probs, bins), abs=1e-12)


def test_weighted_ece_equals_the_expanded_sample() -> None:
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 40)
    probs = np.round(rng.random(40), 2)
    weights = rng.integers(0, 3, size=(20, 40)).astype(float)
    values = ece_weighted(labels, probs, weights, 15)
    for row in range(20):
        items = np.repeat(np.arange(40), weights[row].astype(int))
        assert values[row] == pytest.approx(ece(labels[items], probs[items]))


def test_perfect_calibration_and_edges() -> None:
    assert ece([0, 1], [0.0, 1.0]) == 0.0
    with pytest.raises(UndefinedMetricError):
        ece([], [])
    with pytest.raises(MetricInputError, match="params.bins"):
        ece([0, 1], [0.2, 0.4], bins=0)
    with pytest.raises(MetricInputError, match="y_prob"):
        ece([0, 1], [0.2, 1.4])
