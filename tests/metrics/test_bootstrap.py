"""Cluster bootstrap: reproducible draws, whole clusters, paired differences on the same resamples."""

from __future__ import annotations

import numpy as np
import pytest

from metrics import MetricInputError, UndefinedMetricError, compare, compute
from metrics.bootstrap import draw_resamples, paired_difference, percentile_interval
from metrics.registry import VECTORISED_METRICS


def _trajectory_data(seed: int = 0, n_trajectories: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_trajectories), rng.integers(1, 6, n_trajectories))
    labels = (rng.random(groups.size) < 0.35).astype(int)
    scores = np.round(np.clip(0.4 * labels + 0.6 * rng.random(groups.size), 0, 1), 1)
    return labels, scores, groups


def test_draws_are_reproducible_for_a_seed() -> None:
    clusters = np.repeat(["a", "b", "c", "d"], 3)
    first, again = draw_resamples(clusters, 50, seed=7), draw_resamples(clusters, 50, seed=7)
    assert np.array_equal(first.draws, again.draws)
    assert not np.array_equal(first.draws, draw_resamples(clusters, 50, seed=8).draws)
    labels, scores, groups = _trajectory_data()
    results = [compute(["roc_auc", "mean"], labels, scores, bootstrap=100, cluster=groups, seed=3) for _ in range(2)]
    assert results[0]["ci"] == results[1]["ci"]


def test_resamples_keep_clusters_whole() -> None:
    clusters = np.array([5, 5, 5, 9, 2, 2, 7, 7, 7, 7])
    resamples = draw_resamples(clusters, 200, seed=1)
    weights = resamples.weights(clusters)
    for label in np.unique(clusters):
        members = weights[:, clusters == label]
        assert (members == members[:, :1]).all()  # every member drawn as often as its cluster
    cluster_sizes = np.bincount(np.searchsorted(resamples.labels, clusters))
    assert np.array_equal(weights.sum(axis=1), resamples.counts @ cluster_sizes)
    for b in range(200):
        items, copy = resamples.indices(b, clusters)
        assert np.array_equal(np.bincount(items, minlength=clusters.size), weights[b])
        for draw in np.unique(copy):
            drawn = items[copy == draw]
            cluster = clusters[drawn[0]]
            assert sorted(drawn.tolist()) == np.flatnonzero(clusters == cluster).tolist()  # the whole cluster, once
        assert np.unique(copy).size == resamples.n_clusters


def test_different_item_sets_share_the_draws_of_their_common_clusters() -> None:
    # Two judges' primary subsets hold different mutants of the same seeds: each takes its weights from the same
    # per-seed counts, so per-resample statistics pair up.
    resamples = draw_resamples(["s1", "s2", "s3", "s4"], 100, seed=2)
    first = resamples.weights(["s1", "s1", "s2", "s4"])
    second = resamples.weights(["s2", "s4", "s4"])
    assert np.array_equal(first[:, 2], second[:, 0])
    assert np.array_equal(first[:, 3], second[:, 1])
    with pytest.raises(MetricInputError, match="not among the resampled clusters"):
        resamples.weights(["s9"])


def test_interval_contains_the_point_estimate_on_easy_data() -> None:
    labels, scores, groups = _trajectory_data(seed=2, n_trajectories=120)
    result = compute(
        ["roc_auc", "pr_auc", "brier", "log_loss", "ece", "mcc", "mcc_oof"],
        labels,
        scores,
        groups=groups,
        bootstrap=400,
        cluster=groups,
    )
    assert not result["errors"] and not result["ci_errors"]
    for name, (low, high) in result["ci"].items():
        assert low <= result["values"][name] <= high, name
        assert low < high, name


def test_vectorised_and_straightforward_paths_agree_resample_by_resample() -> None:
    labels, scores, groups = _trajectory_data(seed=4)
    problems = groups // 4  # a coarser clustering: resample problems, keep trajectories inside them
    common = {"groups": groups, "bootstrap": 60, "cluster": problems, "params": {"folds": 5}}
    # Probabilities here: AXIOM's subtasks (0..5 scores) are checked the same way in tests/metrics/test_trust_cards.py.
    chosen = [name for name in VECTORISED_METRICS if not name.startswith("axiom_")]
    fast = compute(chosen, labels, scores, **common)
    slow = compute(chosen, labels, scores, vectorised=False, **common)
    assert fast["values"] == slow["values"]
    for name in chosen:
        assert fast["ci"][name] == pytest.approx(slow["ci"][name], abs=1e-12), name


def test_paired_differences_use_the_same_resamples() -> None:
    labels, scores, groups = _trajectory_data(seed=5)
    # A monotone transform has the same ROC-AUC on every resample, so on shared resamples the difference is exactly
    # zero; on independent resamples it would spread around zero.
    result = compare(["roc_auc", "brier"], labels, {"a": scores, "b": scores**2}, bootstrap=300, cluster=groups)
    # ... and every resample equal: the zero-width interval is degenerate, and says so.
    assert result["differences"]["a - b"]["roc_auc"] == {"value": 0.0, "ci": [0.0, 0.0], "degenerate": True}
    independent = compute(["roc_auc"], labels, scores, bootstrap=300, cluster=groups, seed=1)["ci"]["roc_auc"]
    own = result["ci"]["a"]["roc_auc"]
    assert own != independent  # a different seed gives other resamples, so pairing is not automatic
    brier_a = compute(["brier"], labels, scores, bootstrap=300, cluster=groups)
    assert result["ci"]["a"]["brier"] == pytest.approx(brier_a["ci"]["brier"])
    difference = result["differences"]["a - b"]["brier"]
    assert difference["value"] == pytest.approx(result["values"]["a"]["brier"] - result["values"]["b"]["brier"])
    assert difference["ci"][0] <= difference["value"] <= difference["ci"][1]


def test_paired_difference_helper() -> None:
    a = np.array([0.5, 0.6, 0.7, np.nan])
    assert paired_difference(a, a - 0.1) == pytest.approx((0.1, 0.1))
    with pytest.raises(MetricInputError, match="same resamples"):
        paired_difference(a, a[:2])


def test_too_few_clusters_and_undefined_resamples_are_reported() -> None:
    result = compute(["mean"], y_score=[0.1, 0.2, 0.3], bootstrap=50, cluster=["x", "x", "x"])
    assert result["values"]["mean"] == pytest.approx(0.2)
    assert "at least 2 clusters" in result["ci_errors"]["mean"]
    assert "mean" not in result["ci"]
    # Two single-item clusters of different classes: about half the resamples hold one class only.
    result = compute(["roc_auc"], [0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8], bootstrap=200, cluster=[0, 1, 0, 1])
    assert result["bootstrap"]["dropped"]["roc_auc"] > 0
    assert result["ci"]["roc_auc"] == [1.0, 1.0]
    with pytest.raises(UndefinedMetricError, match="every bootstrap resample"):
        percentile_interval([np.nan, np.nan])


def test_bootstrap_argument_errors() -> None:
    with pytest.raises(MetricInputError, match="bootstrap"):
        compute(["mean"], y_score=[0.1, 0.2], bootstrap=-1)
    with pytest.raises(MetricInputError, match="cluster"):
        compute(["mean"], y_score=[0.1, 0.2], bootstrap=10, cluster=[1, 2, 3])
    with pytest.raises(MetricInputError, match="seed"):
        draw_resamples([1, 2], 10, seed=-1)
