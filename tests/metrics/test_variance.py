"""Judge variance (metrics/variance.py) against worked examples and a numpy simulation of a noisy judge."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.variance import Z_95, flip_rate, item_repeats, judge_variance, noise_floor, within_variance


def test_per_item_variance_and_flips_of_a_worked_example() -> None:
    # Item a: 0.3, 0.98, 1.0 (the case of issue 24) flips at 0.5; b: 0.2, 0.2 is steady; c has one repeat only.
    item = ["a", "a", "a", "b", "b", "c"]
    p = [0.3, 0.98, 1.0, 0.2, 0.2, 0.9]
    repeats = item_repeats(item, p)
    assert repeats.item == ["a", "b"]
    assert repeats.variance[0] == pytest.approx(np.var([0.3, 0.98, 1.0], ddof=1))
    assert repeats.variance[1] == 0.0
    assert repeats.flipped.tolist() == [1.0, 0.0]
    assert within_variance(item, p) == pytest.approx(np.var([0.3, 0.98, 1.0], ddof=1) / 2)
    assert flip_rate(item, p) == 0.5
    # At a threshold of 0.25 item a never flips (every repeat accepted), and b never did.
    assert flip_rate(item, p, threshold=0.25) == 0.0


def test_noise_floor_formula() -> None:
    assert noise_floor(0.04, 100) == pytest.approx(1.959964 * np.sqrt(2 * 0.04 / 100), rel=1e-6)
    assert noise_floor(0.04, 100, repeats=4) == pytest.approx(noise_floor(0.04, 400))
    with pytest.raises(MetricInputError, match="n must be"):
        noise_floor(0.04, 0)


def test_no_item_with_two_repeats_is_undefined() -> None:
    with pytest.raises(UndefinedMetricError, match="two repeats"):
        item_repeats(["a", "b"], [0.1, 0.2])


def test_noise_floor_matches_a_simulation_of_two_equal_systems() -> None:
    """Two systems with the same true item scores, judged once per item by a judge with repeat noise sigma: the
    judge's estimate of sigma_w^2 from repeats recovers sigma^2, and the difference of the two systems' means exceeds
    the noise floor in about 5% of simulated studies."""
    rng = np.random.default_rng(7)
    n, sigma, repeats = 500, 0.15, 4
    truth = rng.uniform(0.2, 0.8, size=n)
    # The judge's repeats on one system's items: what the platform measures.
    scores = truth[:, None] + rng.normal(0.0, sigma, size=(n, repeats))
    item = np.repeat(np.arange(n), repeats)
    sigma_w2 = within_variance(item, scores.ravel())
    assert sigma_w2 == pytest.approx(sigma**2, rel=0.12)
    floor = noise_floor(sigma_w2, n)
    # 10,000 simulated studies: each system judged once per item.
    studies = 10_000
    first = truth + rng.normal(0.0, sigma, size=(studies, n))
    second = truth + rng.normal(0.0, sigma, size=(studies, n))
    exceeded = float(np.mean(np.abs(first.mean(axis=1) - second.mean(axis=1)) > floor))
    assert 0.038 < exceeded < 0.062
    # A true difference of three floors is told apart almost always.
    shifted = float(np.mean(np.abs(first.mean(axis=1) + 3 * floor - second.mean(axis=1)) > floor))
    assert shifted > 0.99


def test_judge_variance_figures_carry_intervals_n_and_clusters() -> None:
    rng = np.random.default_rng(3)
    n, repeats = 60, 2
    truth = rng.uniform(0.0, 1.0, size=n)
    scores = np.clip(truth[:, None] + rng.normal(0.0, 0.1, size=(n, repeats)), 0, 1).ravel()
    item = np.repeat([f"a{i}" for i in range(n)], repeats)
    cluster = np.repeat([f"p{i // 3}" for i in range(n)], repeats)
    figures = judge_variance(item, scores, cluster, threshold=0.5, bootstrap=300, seed=1)
    for name in ("variance", "flip_rate", "noise_floor"):
        figure = figures[name]
        assert figure["n"] == n and figure["clusters"] == 20
        low, high = figure["ci"]
        assert low <= figure["value"] <= high and low < high
    assert figures["noise_floor"]["value"] == pytest.approx(Z_95 * np.sqrt(2 * figures["variance"]["value"] / n))
    flips = item_repeats(item, scores).flipped.mean()
    assert figures["flip_rate"]["value"] == pytest.approx(flips) and 0 < flips < 1


def test_an_item_in_two_clusters_is_refused() -> None:
    with pytest.raises(MetricInputError, match="two clusters"):
        judge_variance(["a", "a"], [0.1, 0.2], ["p", "q"])
