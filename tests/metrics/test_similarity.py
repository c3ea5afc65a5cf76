"""LoCaL: distinguishability, MAE against df_score, and Algorithm 2's SFD/DFS threshold search."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from metrics import MetricInputError, UndefinedMetricError
from metrics.similarity import (
    RegionThresholds,
    distinguishability,
    prediction_error,
    region_masks,
    select_region_thresholds,
    threshold_grid,
)


def test_distinguishability_worked_example() -> None:
    # Equivalent pairs .8 .6 (mean .7), non-equivalent .2 .4 .3 (mean .3): d = 7/3.
    assert distinguishability([0.8, 0.2, 0.6, 0.4, 0.3], [1, 0, 1, 0, 0]) == pytest.approx(7 / 3)
    with pytest.raises(UndefinedMetricError, match="mean score is 0"):
        distinguishability([0.5, 0.0], [1, 0])
    with pytest.raises(UndefinedMetricError, match="both kinds"):
        distinguishability([0.5, 0.4], [1, 1])
    with pytest.raises(MetricInputError, match="non-negative"):
        distinguishability([0.5, -0.1], [1, 0])


def test_prediction_error_is_mae_by_default() -> None:
    assert prediction_error([1.0, 0.0], [0.5, 0.5]) == pytest.approx(0.5)
    assert prediction_error([1.0, 0.0], [0.5, 0.5], error="squared") == pytest.approx(0.25)


def _literal_algorithm_2(x: np.ndarray, y: np.ndarray, scores: np.ndarray, step: float, error: str) -> tuple:
    """Algorithm 2 as printed: four nested loops, per-metric errors, strict improvement; empty regions skipped."""
    grid = threshold_grid(step)
    best, best_tuple = -np.inf, None
    for x1, x2, y1, y2 in itertools.product(grid, grid, grid, grid):
        if not (x1 < x2 and y1 < y2):
            continue
        dfs = (x <= x1) & (y >= y2)
        sfd = (x >= x2) & (y <= y1)
        ctrl = ~(dfs | sfd)
        if not (dfs.any() and sfd.any() and ctrl.any()):
            continue
        gaps = []
        for metric in scores:
            e = np.abs(y - metric) if error == "absolute" else (y - metric) ** 2
            gaps.append(np.mean([e[dfs].mean() - e[ctrl].mean(), e[sfd].mean() - e[ctrl].mean()]))
        objective = np.mean(gaps)
        if objective > best:
            best, best_tuple = objective, (x1, x2, y1, y2)
    return best, best_tuple


@pytest.mark.parametrize(("seed", "error"), [(0, "absolute"), (1, "absolute"), (2, "squared"), (3, "squared")])
def test_algorithm_2_matches_the_literal_pseudo_code(seed: int, error: str) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.random(40), rng.random(40)
    scores = np.clip(np.vstack([x, 0.5 * x + 0.5 * y]) + rng.normal(0, 0.1, (2, 40)), 0, 1)
    best, expected = _literal_algorithm_2(x, y, scores, 0.2, error)
    found = select_region_thresholds(x, y, scores, step=0.2, error=error)
    assert (found.x_lo, found.x_hi, found.y_lo, found.y_hi) == pytest.approx(expected)
    assert found.objective == pytest.approx(best)


def test_algorithm_2_matches_the_pseudo_code_when_values_sit_on_the_grid() -> None:
    # Values on grid points exercise the inclusive bounds (x <= x1, x >= x2, ...) and make many tuples share one
    # partition, so the first-in-loop-order tie-break is what decides.
    rng = np.random.default_rng(9)
    x, y = np.round(rng.random(30), 1), np.round(rng.random(30), 1)
    scores = np.round(np.vstack([x, 1 - y]), 1)
    best, expected = _literal_algorithm_2(x, y, scores, 0.1, "absolute")
    found = select_region_thresholds(x, y, scores, step=0.1)
    assert (found.x_lo, found.x_hi, found.y_lo, found.y_hi) == pytest.approx(expected)
    assert found.objective == pytest.approx(best)


def test_algorithm_2_tiny_worked_example() -> None:
    # (x, y, m): P1 (.9, 0, .9) and P2 (.1, 1, .1) are corners a surface metric gets wrong by .9; P3 (.5, .5, .5)
    # and P4 (.6, .6, .6) are Control pairs it gets right. The best objective isolates P2 in DFS and P1 in SFD:
    # (.9 + .9) / 2 - 0 = .9. Many tuples reach it; the scan keeps the first in loop order (step .1):
    # x1 = .1 (the smallest with P2 in DFS: x <= x1), x2 = .2 (the smallest above x1), y1 = 0 (P1 in SFD: y <= y1,
    # and P3, P4 out), y2 = .1 (the smallest above y1; only P2 has x <= .1).
    x = np.array([0.9, 0.1, 0.5, 0.6])
    y = np.array([0.0, 1.0, 0.5, 0.6])
    found = select_region_thresholds(x, y, [x.copy()], step=0.1)
    assert found == RegionThresholds(x_lo=0.1, x_hi=0.2, y_lo=0.0, y_hi=0.1, objective=pytest.approx(0.9))
    masks = region_masks(x, y, found)
    assert masks["sfd"].tolist() == [True, False, False, False]
    assert masks["dfs"].tolist() == [False, True, False, False]
    assert masks["control"].tolist() == [False, False, True, True]


def test_algorithm_2_refusals() -> None:
    with pytest.raises(UndefinedMetricError, match="non-empty"):
        select_region_thresholds([0.5, 0.5], [0.5, 0.5], [[0.1, 0.2]], step=0.5)
    with pytest.raises(MetricInputError, match="surface_sim"):
        select_region_thresholds([1.5], [0.5], [[0.1]])
    with pytest.raises(MetricInputError, match="metric_scores"):
        select_region_thresholds([0.5, 0.2], [0.5, 0.1], [[0.1]])
    with pytest.raises(MetricInputError, match="step"):
        select_region_thresholds([0.5], [0.5], [[0.1]], step=0)
