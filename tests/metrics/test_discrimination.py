"""ROC-AUC, PR-AUC, LogLoss and Brier against scikit-learn, point and per-resample (weighted) forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from metrics import MetricInputError, UndefinedMetricError
from metrics.discrimination import (
    brier,
    brier_weighted,
    log_loss,
    log_loss_weighted,
    pr_auc,
    pr_auc_weighted,
    roc_auc,
    roc_auc_weighted,
)

# Scores drawn from a coarse grid so that ties, the hard case for rank metrics, are frequent.
coarse = st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.5, 0.75, 0.9, 1.0]), min_size=2, max_size=40)


@st.composite
def labelled(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    scores = np.array(draw(coarse))
    labels = np.array(draw(st.lists(st.integers(0, 1), min_size=scores.size, max_size=scores.size)))
    return labels, scores


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(labelled())
def test_point_metrics_match_sklearn_on_tied_scores(data: tuple[np.ndarray, np.ndarray]) -> None:
    labels, scores = data
    assert brier(labels, scores) == pytest.approx(skm.brier_score_loss(labels, scores, pos_label=1))
    clipped = np.clip(scores, 1e-15, 1 - 1e-15)
    assert log_loss(labels, scores) == pytest.approx(skm.log_loss(labels, clipped, labels=[0, 1]))
    if 0 < labels.sum() < labels.size:
        assert roc_auc(labels, scores) == pytest.approx(skm.roc_auc_score(labels, scores))
        assert pr_auc(labels, scores) == pytest.approx(skm.average_precision_score(labels, scores))
    else:
        for metric in (roc_auc, pr_auc):
            with pytest.raises(UndefinedMetricError, match="both classes"):
                metric(labels, scores)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(labelled(), st.integers(0, 2**32 - 1))
def test_weighted_forms_equal_sklearn_on_the_expanded_sample(data: tuple[np.ndarray, np.ndarray], seed: int) -> None:
    labels, scores = data
    weights = np.random.default_rng(seed).integers(0, 4, size=(5, labels.size)).astype(float)
    auc = roc_auc_weighted(labels, scores, weights)
    ap = pr_auc_weighted(labels, scores, weights)
    loss = log_loss_weighted(labels, scores, weights)
    squared = brier_weighted(labels, scores, weights)
    for row in range(weights.shape[0]):
        items = np.repeat(np.arange(labels.size), weights[row].astype(int))
        y, p = labels[items], scores[items]
        if y.size == 0:
            assert np.isnan(loss[row]) and np.isnan(squared[row]) and np.isnan(auc[row])
            continue
        assert loss[row] == pytest.approx(skm.log_loss(y, np.clip(p, 1e-15, 1 - 1e-15), labels=[0, 1]))
        assert squared[row] == pytest.approx(skm.brier_score_loss(y, p, pos_label=1))
        if 0 < y.sum() < y.size:
            assert auc[row] == pytest.approx(skm.roc_auc_score(y, p))
            assert ap[row] == pytest.approx(skm.average_precision_score(y, p))
        else:
            assert np.isnan(auc[row]) and np.isnan(ap[row])


def test_constant_scores_rank_at_chance() -> None:
    labels = np.array([0, 1, 0, 1, 1])
    assert roc_auc(labels, np.full(5, 0.3)) == 0.5
    assert pr_auc(labels, np.full(5, 0.3)) == pytest.approx(0.6)  # the prevalence


def test_roc_auc_is_the_probability_a_positive_outranks_a_negative() -> None:
    # Pairs (pos, neg): (0.8, 0.3) win, (0.8, 0.8) tie, (0.4, 0.3) win, (0.4, 0.8) loss -> (2 + 0.5) / 4.
    assert roc_auc([1, 0, 1, 0], [0.8, 0.3, 0.4, 0.8]) == pytest.approx(0.625)


def test_log_loss_is_finite_at_exact_zero_and_one_with_documented_clipping() -> None:
    # A confidently wrong prediction costs -log(1e-15) = 34.54 nats; a confidently right one costs ~0.
    assert log_loss([1, 0], [0.0, 0.0]) == pytest.approx(-np.log(1e-15) / 2)
    assert log_loss([1, 0], [0.0, 0.0], eps=1e-6) == pytest.approx(-np.log(1e-6) / 2, rel=1e-6)


def test_one_class_is_fine_for_proper_scores() -> None:
    assert brier([1, 1], [0.5, 1.0]) == pytest.approx(0.125)
    assert log_loss([0, 0], [0.5, 0.5]) == pytest.approx(np.log(2))


def test_empty_input_is_undefined() -> None:
    for metric in (roc_auc, pr_auc, log_loss, brier):
        with pytest.raises(UndefinedMetricError):
            metric([], [])


def test_malformed_input_names_the_argument() -> None:
    with pytest.raises(MetricInputError, match="y_true"):
        roc_auc([0, 2], [0.1, 0.2])
    with pytest.raises(MetricInputError, match="y_score"):
        roc_auc([0, 1], [0.1])
    with pytest.raises(MetricInputError, match="y_score"):
        brier([0, 1], [0.1, 1.2])
    with pytest.raises(MetricInputError, match="y_true"):
        log_loss([0, None], [0.1, 0.2])
    with pytest.raises(MetricInputError, match="params.eps"):
        log_loss([0, 1], [0.0, 1.0], eps=0.0)
