"""Agreement, correlation and distribution metrics against scikit-learn, scipy, statsmodels, krippendorff, pingouin."""

from __future__ import annotations

import warnings

import krippendorff as kd
import numpy as np
import pandas as pd
import pingouin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn import metrics as skm
from statsmodels.stats import inter_rater

from metrics import MetricInputError, UndefinedMetricError
from metrics.agreement import (
    cohen_kappa,
    emd,
    fleiss_kappa,
    fleiss_kappa_median_cut,
    icc,
    kendall_tau,
    krippendorff_alpha,
    mae,
    mean_score,
    median_cut,
    normalised_entropy,
    pearson,
    spearman,
)

scores_0_5 = st.lists(st.integers(0, 5), min_size=2, max_size=30)


@st.composite
def score_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    first = np.array(draw(scores_0_5), dtype=float)
    second = np.array(draw(st.lists(st.integers(0, 5), min_size=first.size, max_size=first.size)), dtype=float)
    return first, second


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(score_pairs())
def test_correlations_match_scipy_or_refuse_constant_input(pair: tuple[np.ndarray, np.ndarray]) -> None:
    first, second = pair
    constant = np.ptp(first) == 0 or np.ptp(second) == 0
    for ours, reference in (
        (spearman, lambda a, b: stats.spearmanr(a, b).statistic),
        (kendall_tau, lambda a, b: stats.kendalltau(a, b, variant="b").statistic),
        (pearson, lambda a, b: stats.pearsonr(a, b).statistic),
    ):
        if constant:
            with pytest.raises(UndefinedMetricError, match="constant"):
                ours(first, second)
        else:
            assert ours(first, second) == pytest.approx(reference(first, second))
    assert mae(first, second) == pytest.approx(np.mean(np.abs(first - second)))
    assert emd(first, second) == pytest.approx(stats.wasserstein_distance(first, second))


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(score_pairs(), st.sampled_from(["none", "linear", "quadratic"]))
def test_cohen_kappa_matches_sklearn_with_the_full_scale_as_categories(
    pair: tuple[np.ndarray, np.ndarray], weights: str
) -> None:
    first, second = pair
    if np.union1d(first, second).size == 1:
        with pytest.raises(UndefinedMetricError, match="chance agreement is 1"):
            cohen_kappa(first, second, weights)
        return
    labels = np.union1d(first, second) if weights == "none" else np.arange(6)
    expected = skm.cohen_kappa_score(first, second, labels=labels, weights=None if weights == "none" else weights)
    assert cohen_kappa(first, second, weights) == pytest.approx(expected)


def test_weighted_kappa_uses_distances_on_the_scale_not_between_observed_categories() -> None:
    # Scores 0 and 5 only: on the 0..5 scale they are 5 apart; as bare categories they would be adjacent.
    first, second = [0, 5, 0, 5, 0], [0, 5, 5, 0, 0]
    on_scale = skm.cohen_kappa_score(first, second, labels=np.arange(6), weights="linear")
    assert cohen_kappa(first, second, "linear") == pytest.approx(on_scale)
    with pytest.raises(MetricInputError, match="y_score must hold integer scores in 0..5"):
        cohen_kappa([0, 1], [0.5, 1], "linear")
    with pytest.raises(MetricInputError, match="params.weights"):
        cohen_kappa([0, 1], [0, 1], "cubic")


def test_median_cut_protocol() -> None:
    # Each rater cut at its own median with >=: [.1 .2 .3 .9] -> median .25 -> 0 0 1 1; [.5 .5 .5 .6] -> median .5.
    assert median_cut([0.1, 0.2, 0.3, 0.9]).tolist() == [0, 0, 1, 1]
    assert median_cut([0.5, 0.5, 0.5, 0.6]).tolist() == [1, 1, 1, 1]
    ratings = np.array([[0.1, 0.2, 0.3, 0.9], [0.0, 0.7, 0.8, 0.9], [0.2, 0.1, 0.6, 0.5]])
    cut = np.vstack([median_cut(row) for row in ratings])
    assert fleiss_kappa_median_cut(ratings) == pytest.approx(fleiss_kappa(cut))


def _statsmodels_fleiss(matrix: np.ndarray) -> float:
    table, _ = inter_rater.aggregate_raters(matrix.T)
    return float(inter_rater.fleiss_kappa(table, method="fleiss"))


@pytest.mark.parametrize("seed", range(8))
def test_fleiss_kappa_matches_statsmodels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, 25)
    ratings = np.where(rng.random((4, 25)) < 0.7, truth, rng.integers(0, 3, (4, 25))).astype(float)
    assert fleiss_kappa(ratings) == pytest.approx(_statsmodels_fleiss(ratings))


def test_fleiss_kappa_drops_items_with_a_missing_rating() -> None:
    ratings = np.array([[1, 0, 1, 1, np.nan], [1, 0, 0, 1, 0], [1, 1, 0, 1, 1.0]])
    assert fleiss_kappa(ratings) == pytest.approx(_statsmodels_fleiss(ratings[:, :4]))
    with pytest.raises(UndefinedMetricError, match="single|every rating"):
        fleiss_kappa(np.ones((3, 4)))
    with pytest.raises(UndefinedMetricError, match="two raters"):
        fleiss_kappa(np.ones((1, 4)))


def test_krippendorff_alpha_on_the_textbook_example_with_missing_values() -> None:
    # Krippendorff's reliability-data example (3 coders, 15 units, gaps), as in the krippendorff package docs.
    data = [
        [np.nan, np.nan, np.nan, np.nan, np.nan, 3, 4, 1, 2, 1, 1, 3, 3, np.nan, 3],
        [1, np.nan, 2, 1, 3, 3, 4, 3, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
        [np.nan, np.nan, 2, 1, 3, 4, 4, np.nan, 2, 1, 1, 3, 3, np.nan, 4],
    ]
    assert krippendorff_alpha(data, "nominal") == pytest.approx(0.691, abs=1e-3)
    assert krippendorff_alpha(data, "interval") == pytest.approx(0.811, abs=1e-3)
    assert krippendorff_alpha(data, "ordinal") == pytest.approx(
        kd.alpha(np.array(data), level_of_measurement="ordinal")
    )
    # JSON nulls are missing ratings too.
    with_nulls = [[None if np.isnan(v) else v for v in row] for row in data]
    assert krippendorff_alpha(with_nulls, "nominal") == pytest.approx(0.691, abs=1e-3)


def test_krippendorff_alpha_undefined_cases() -> None:
    with pytest.raises(UndefinedMetricError, match="every pairable rating is 2"):
        krippendorff_alpha([[2, 2, np.nan], [2, 2, 5]], "interval")
    with pytest.raises(UndefinedMetricError, match="no item has two ratings"):
        krippendorff_alpha([[1, np.nan], [np.nan, 2]], "nominal")
    with pytest.raises(MetricInputError, match="params.level"):
        krippendorff_alpha([[1, 2], [1, 2]], "ratio-ish")


def _pingouin_icc(matrix: np.ndarray, kind: str) -> float:
    """pingouin names ICC(2,1) "ICC(A,1)" (absolute agreement) and ICC(3,1) "ICC(C,1)" (consistency)."""
    raters, items = matrix.shape
    frame = pd.DataFrame(
        {
            "item": np.tile(np.arange(items), raters),
            "rater": np.repeat(np.arange(raters), items),
            "score": matrix.ravel(),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = pingouin.intraclass_corr(frame, targets="item", raters="rater", ratings="score")
    return float(table.set_index("Type").loc[kind, "ICC"])


@pytest.mark.parametrize("seed", range(5))
def test_icc_matches_pingouin(seed: int) -> None:
    rng = np.random.default_rng(seed)
    quality = rng.integers(0, 6, 30)
    runs = np.clip(quality + rng.integers(-1, 2, (5, 30)) + np.arange(5)[:, None] % 2, 0, 5).astype(float)
    assert icc(runs, "2,1") == pytest.approx(_pingouin_icc(runs, "ICC(A,1)"))
    assert icc(runs, "3,1") == pytest.approx(_pingouin_icc(runs, "ICC(C,1)"))


def test_icc_edges() -> None:
    # A run shifted as a whole: perfect consistency (3,1) but not perfect absolute agreement (2,1).
    base = np.array([0.0, 1, 2, 3, 4, 5])
    assert icc([base, base + 1], "3,1") == pytest.approx(1.0)
    assert icc([base, base + 1], "2,1") < 1.0
    with pytest.raises(UndefinedMetricError, match="no variance"):
        icc(np.full((3, 4), 2.0))
    with pytest.raises(UndefinedMetricError, match="two items"):
        icc([[1, np.nan, 3], [1, 2, np.nan]])
    with pytest.raises(MetricInputError, match="params.icc_form"):
        icc([[1, 2], [2, 1]], "1,1")


def test_entropy_and_mean() -> None:
    # Uniform over the 6 scores: S = 1. Two scores equally often: S = log_6(2).
    assert normalised_entropy([0, 1, 2, 3, 4, 5]) == pytest.approx(1.0)
    assert normalised_entropy([1, 1, 4, 4]) == pytest.approx(np.log(2) / np.log(6))
    assert normalised_entropy([3, 3, 3]) == 0.0
    assert normalised_entropy([1, 2], scale=[1, 2]) == pytest.approx(1.0)
    assert mean_score([1, 2, 6]) == 3.0
    with pytest.raises(MetricInputError, match="integer scores in 0..5"):
        normalised_entropy([0.5, 1])
    with pytest.raises(UndefinedMetricError):
        normalised_entropy([])
    with pytest.raises(UndefinedMetricError):
        mean_score([])


def test_emd_is_in_score_units() -> None:
    # Every score moved up by one point: EMD 1.
    assert emd([0, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(1.0)
    with pytest.raises(MetricInputError, match="y_true"):
        emd([0, 6], [1, 2])
    with pytest.raises(MetricInputError, match="params.scale"):
        emd([0, 1], [1, 2], scale=[3, 1])


def test_tiny_samples() -> None:
    with pytest.raises(UndefinedMetricError, match="at least two items"):
        spearman([1], [2])
    assert pearson([1, 2], [3, 1]) == pytest.approx(-1.0)
    with pytest.raises(UndefinedMetricError):
        mae([], [])
