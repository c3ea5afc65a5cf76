"""Panels that know their judges (metrics/panels.py): exact small worked examples and reference libraries."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, matthews_corrcoef

from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.panel import percentile_ranks
from metrics.panels import (
    effective_judges,
    error_correlation,
    fit_panels,
    grouped_folds,
    judge_errors,
    select_subset,
    skill_weights,
)

Y = [1, 1, 1, 1, 0, 0, 0, 0]
# Within each class, judge A's deviations from its class mean are (+.1, -.1, +.1, -.1) and judge B's (+.1, +.1,
# -.1, -.1): orthogonal, so the pooled within-class correlation is exactly 0.
P_A = [0.9, 0.7, 0.9, 0.7, 0.3, 0.1, 0.3, 0.1]
P_B = [0.9, 0.9, 0.7, 0.7, 0.3, 0.3, 0.1, 0.1]


def test_identical_errors_count_as_one_judge() -> None:
    correlation = error_correlation(judge_errors([P_B, P_B], Y), Y)
    assert correlation.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert effective_judges(correlation) == 1.0


def test_uncorrelated_errors_count_as_two_judges() -> None:
    correlation = error_correlation(judge_errors([P_A, P_B], Y), Y)
    assert correlation[0, 1] == pytest.approx(0.0, abs=1e-12)
    assert effective_judges(correlation) == pytest.approx(2.0, abs=1e-12)
    # Uncentred, the label alone makes these unrelated errors look alike (both hold -y): Pearson 0.8.
    errors = judge_errors([P_A, P_B], Y)
    assert np.corrcoef(errors)[0, 1] == pytest.approx(0.8)


def test_worked_within_class_correlation() -> None:
    y = [1, 1, 0, 0, 0]
    first = [0.9, 0.5, 0.4, 0.2, 0.0]
    second = [0.8, 0.6, 0.1, 0.2, 0.3]
    # Deviations from class means: first (.2, -.2 | .2, 0, -.2), second (.1, -.1 | -.1, 0, .1).
    # sum d1 d2 = .02 + .02 - .02 + 0 - .02 = 0; sum d1^2 = .16, sum d2^2 = .04 -> r = 0.
    # Swap the rejected part of second to (.1, 0, -.1): sum = .02 + .02 + .02 + .02 = .08 -> r = .08 / .08 = 1.
    assert error_correlation(judge_errors([first, second], y), y)[0, 1] == pytest.approx(0.0, abs=1e-12)
    flipped = [0.8, 0.6, 0.3, 0.2, 0.1]
    assert error_correlation(judge_errors([first, flipped], y), y)[0, 1] == pytest.approx(1.0)


def test_conditionally_independent_judges_count_as_two() -> None:
    """Judges whose noise is independent given the label: N_eff near 2; one judge copied: exactly 1."""
    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 4000)
    first = np.clip(0.3 + 0.4 * y + rng.normal(0, 0.1, y.size), 0, 1)
    second = np.clip(0.3 + 0.4 * y + rng.normal(0, 0.1, y.size), 0, 1)
    assert effective_judges(error_correlation(judge_errors([first, second], y), y)) == pytest.approx(2.0, abs=0.01)
    assert effective_judges(error_correlation(judge_errors([first, first], y), y)) == pytest.approx(1.0)


def test_participation_ratio_worked_example() -> None:
    # R = [[1, .5], [.5, 1]]: eigenvalues 1.5 and 0.5, (1.5 + 0.5)^2 / (1.5^2 + 0.5^2) = 4 / 2.5 = 1.6.
    assert effective_judges([[1.0, 0.5], [0.5, 1.0]]) == pytest.approx(1.6)
    # Anti-correlated errors are shared too: r = -0.5 gives the same 1.6 (the design-effect form would give 4).
    assert effective_judges([[1.0, -0.5], [-0.5, 1.0]]) == pytest.approx(1.6)
    eigen = np.linalg.eigvalsh(np.array([[1, 0.3, 0.1], [0.3, 1, -0.2], [0.1, -0.2, 1]]))
    expected = eigen.sum() ** 2 / (eigen**2).sum()
    assert effective_judges([[1, 0.3, 0.1], [0.3, 1, -0.2], [0.1, -0.2, 1]]) == pytest.approx(expected)


def test_undefined_correlation_is_not_zero() -> None:
    perfect = [1.0] * 4 + [0.0] * 4  # error constant 0
    correlation = error_correlation(judge_errors([perfect, P_B], Y), Y)
    assert math.isnan(correlation[0, 1]) and math.isnan(correlation[0, 0])
    with pytest.raises(UndefinedMetricError):
        effective_judges(correlation)
    with pytest.raises(MetricInputError):
        effective_judges([[1.0, 0.0]])


def test_decision_errors_correlate_as_phi() -> None:
    y = [1, 1, 1, 0, 0, 0]
    first = [0.9, 0.4, 0.3, 0.6, 0.1, 0.2]
    second = [0.8, 0.2, 0.7, 0.6, 0.7, 0.1]
    errors = judge_errors([first, second], y, kind="decision")
    assert errors.tolist() == [[0, -1, -1, 1, 0, 0], [0, -1, 0, 1, 1, 0]]
    wrong = np.abs(errors) > 0  # on these items an error's sign is fixed by the label, so phi of "wrong"
    # Within one class (the rejected attempts alone) the correlation of decision errors is phi of "wrong".
    rejected = slice(3, 6)
    on_rejected = error_correlation(errors[:, rejected], [0, 0, 0])[0, 1]
    assert on_rejected == pytest.approx(matthews_corrcoef(wrong[0, rejected], wrong[1, rejected]))
    with pytest.raises(MetricInputError, match="kind"):
        judge_errors([first], y, kind="bogus")  # type: ignore[arg-type]


def test_skill_weights_worked_example() -> None:
    y = [1, 1, 0, 0]
    good = [0.9, 0.8, 0.2, 0.1]
    useless = [0.5, 0.5, 0.5, 0.5]  # exactly the base rate: no skill, weight 0
    weights = skill_weights([good, useless], y)
    assert weights.tolist() == [1.0, 0.0]
    better = [0.99, 0.9, 0.1, 0.01]
    base = log_loss(y, [0.5] * 4)
    skill = np.array([base - log_loss(y, good), base - log_loss(y, better)])
    assert skill_weights([good, better], y) == pytest.approx(skill / skill.sum())
    assert skill_weights([useless, useless], y).tolist() == [0.5, 0.5]
    with pytest.raises(UndefinedMetricError):
        skill_weights([good], [1, 1, 1, 1])


def test_select_subset_prefers_fewer_judges_on_ties() -> None:
    y = [1, 1, 0, 0]
    ranks = np.vstack([percentile_ranks(p) for p in ([0.9, 0.8, 0.2, 0.1], [0.2, 0.9, 0.8, 0.1], [1.0, 0.8, 0.2, 0.0])])
    assert select_subset(ranks, y, 1) == (0,)
    assert select_subset(ranks, y, 3) == (0,)  # AUC 1 alone; no larger panel beats it
    assert select_subset(ranks, y, 2, costs=[5.0, 1.0, 1.0], budget=2.0) == (2,)
    with pytest.raises(UndefinedMetricError, match="budget"):
        select_subset(ranks, y, 2, costs=[5.0, 5.0, 5.0], budget=1.0)


def _study(seed: int = 3, clusters: int = 12) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    groups = [f"g{i // 4}" for i in range(4 * clusters)]
    y = np.array([1, 0] * (2 * clusters))
    signal = np.clip(0.5 + (y - 0.5) * 0.6 + rng.normal(0, 0.15, y.size), 0.01, 0.99)
    noise = rng.uniform(0.01, 0.99, y.size)
    weak = np.clip(0.5 + (y - 0.5) * 0.2 + rng.normal(0, 0.2, y.size), 0.01, 0.99)
    return np.vstack([signal, noise, weak]), y, groups


def test_fit_panels_is_out_of_fold() -> None:
    matrix, y, groups = _study()
    fit = fit_panels(matrix, y, groups, folds=4, seed=1, max_judges=[1])
    assert set(fit.scores) == {"panel", "weighted", "stacked", "selected_1"}
    assert fit.folds == 4 and not any(np.isnan(s).any() for s in fit.scores.values())
    pairs = grouped_folds(y, groups, 4, 1)
    features = np.log(matrix / (1 - matrix)).T
    for (train, test), coef in zip(pairs, fit.stacked, strict=True):
        assert not set(np.asarray(groups)[train]) & set(np.asarray(groups)[test])
        model = LogisticRegression().fit(features[train], y[train])
        assert coef == pytest.approx(model.coef_[0])
        assert fit.scores["stacked"][test] == pytest.approx(model.predict_proba(features[test])[:, 1])
        weights = skill_weights(matrix[:, train], y[train])
        assert fit.scores["weighted"][test] == pytest.approx(weights @ matrix[:, test])
    # The signal judge is chosen alone in every fold, and the noise judge earns (almost) no weight.
    assert fit.selections["selected_1"] == [(0,)] * 4
    assert all(w[0] > w[1] for w in fit.weights)
    assert fit.scores["panel"] == pytest.approx(np.vstack([percentile_ranks(r) for r in matrix]).mean(axis=0))


def test_fit_panels_refuses_incomplete_or_tiny_inputs() -> None:
    matrix, y, groups = _study()
    holed = matrix.copy()
    holed[0, 0] = np.nan
    with pytest.raises(MetricInputError, match="complete"):
        fit_panels(holed, y, groups)
    with pytest.raises(UndefinedMetricError, match="2 clusters"):
        fit_panels(matrix, y, ["one"] * y.size)
    with pytest.raises(MetricInputError, match="folds"):
        fit_panels(matrix, y, groups, folds=1)
