"""Agreement, correlation and distribution metrics between raters, runs or a judge and its labels.

Sources: Cohen's and Fleiss' kappa and the median-cut protocol (paper 001, V-B1 and VI-A9); Spearman, Kendall,
Krippendorff's alpha, EMD, mean score (paper 000, V-A); alpha and ICC across repeated runs (000, V-C); normalised
Shannon entropy (000, IV-B).

Choices the papers leave open, fixed here:
- Median cut (VI-A9): each rater's continuous output becomes ``I[x >= median(x)]``, the same ``>=`` rule paper 001
  uses for every threshold. A rater with more than half its outputs at its maximum is cut into one class only.
- Fleiss' kappa needs the same raters on every item, and ICC needs a complete items x raters table: items with a
  missing rating are left out of both (Krippendorff's alpha uses every pairable value instead).
- ICC: ICC(2,1) (two-way random effects, absolute agreement, single rater) and ICC(3,1) (two-way mixed, consistency,
  single rater) from the two-way ANOVA mean squares (Shrout & Fleiss 1979; McGraw & Wong 1996, cases 2A and 3).
  Paper 000 does not name its form; ICC(2,1) is the default because it penalises a run that is shifted as a whole.
- Fleiss' kappa and ICC are written by hand: they are a few lines of arithmetic over a count table or ANOVA sums,
  and the libraries that have them (statsmodels, pingouin) are large dependencies; the tests check both against
  statsmodels and pingouin.
- EMD is the 1-D Wasserstein distance between the two score distributions in score units (scipy), unnormalised, as
  paper 000's Table III values show (EMD equals the gap in mean scores when one distribution dominates the other).
"""

from __future__ import annotations

from typing import Literal

import krippendorff
import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from sklearn import metrics as skm

from metrics.arrays import (
    FloatArray,
    as_float_vector,
    as_ratings_matrix,
    check_same_length,
    require_nonempty,
    require_not_constant,
)
from metrics.errors import MetricInputError, UndefinedMetricError

DEFAULT_SCALE = (0, 5)
KAPPA_WEIGHTS = ("none", "linear", "quadratic")
ALPHA_LEVELS = ("nominal", "ordinal", "interval")
ICC_FORMS = ("2,1", "3,1")


def _pair(a: ArrayLike, b: ArrayLike, name_a: str = "y_true", name_b: str = "y_score") -> tuple[FloatArray, FloatArray]:
    first = as_float_vector(a, name_a)
    second = as_float_vector(b, name_b)
    check_same_length(**{name_a: first, name_b: second})
    return first, second


def check_scale(scale: ArrayLike | None) -> tuple[int, int]:
    """The integer score support ``(lo, hi)`` (default 0..5), or MetricInputError naming ``params.scale``."""
    if scale is None:
        return DEFAULT_SCALE
    values = np.asarray(scale)
    if values.shape != (2,) or not all(float(v).is_integer() for v in values) or values[0] >= values[1]:
        raise MetricInputError(f"params.scale must be [lo, hi] with integers lo < hi, got {scale!r}")
    return int(values[0]), int(values[1])


def _check_on_scale(values: FloatArray, name: str, scale: tuple[int, int]) -> None:
    lo, hi = scale
    if values.size and (not np.all(values == np.round(values)) or values.min() < lo or values.max() > hi):
        raise MetricInputError(f"{name} must hold integer scores in {lo}..{hi} (params.scale)")


def median_cut(values: ArrayLike, name: str = "y_score") -> FloatArray:
    """``I[x >= median(x)]``: a rater's continuous output cut at its own median (paper 001, VI-A9)."""
    array = as_float_vector(values, name)
    require_nonempty(array, "median cut")
    return (array >= np.median(array)).astype(np.float64)


def cohen_kappa(y_true: ArrayLike, y_score: ArrayLike, weights: str = "none", scale: ArrayLike | None = None) -> float:
    """Cohen's kappa between two raters, plain or with linear/quadratic disagreement weights (scikit-learn).

    Plain kappa treats every distinct value as a category. Weighted kappa needs ordinal categories: both raters'
    values must be integers on ``scale`` (default 0..5), and every point of the scale is a category, so that the
    weight between two scores is their distance on the scale even when a score in between never occurs.

    Raises:
        MetricInputError: unknown weights, lengths differ, weighted kappa on values off the scale.
        UndefinedMetricError: empty input, or both raters use one and the same category (p_e = 1).
    """
    if weights not in KAPPA_WEIGHTS:
        raise MetricInputError(f"params.weights must be one of {', '.join(KAPPA_WEIGHTS)}, got {weights!r}")
    first, second = _pair(y_true, y_score)
    require_nonempty(first, "Cohen's kappa")
    if weights == "none":
        labels = np.union1d(first, second)
    else:
        support = check_scale(scale)
        _check_on_scale(first, "y_true", support)
        _check_on_scale(second, "y_score", support)
        labels = np.arange(support[0], support[1] + 1, dtype=np.float64)
    categories = np.union1d(first, second)
    if categories.size == 1:
        raise UndefinedMetricError(
            f"Cohen's kappa is undefined: both raters give {categories[0]:g} to every item, so chance agreement is 1"
        )
    # Category codes: scikit-learn reads float labels such as 0.3 as a continuous target and refuses them.
    first_codes, second_codes = np.searchsorted(labels, first), np.searchsorted(labels, second)
    return float(
        skm.cohen_kappa_score(
            first_codes,
            second_codes,
            labels=np.arange(labels.size),
            weights=None if weights == "none" else weights,
        )
    )


def _complete_items(matrix: FloatArray, what: str) -> FloatArray:
    if matrix.shape[0] < 2:
        raise UndefinedMetricError(f"{what} needs at least two raters; got {matrix.shape[0]}")
    complete = matrix[:, ~np.isnan(matrix).any(axis=0)]
    if complete.shape[1] < 2:
        raise UndefinedMetricError(
            f"{what} needs at least two items rated by every rater; got {complete.shape[1]} of {matrix.shape[1]}"
        )
    return complete


def fleiss_kappa(ratings: ArrayLike) -> float:
    """Fleiss' kappa over a raters x items matrix of categorical ratings; items with a missing rating are dropped.

    Raises:
        MetricInputError: not a matrix.
        UndefinedMetricError: fewer than two raters or complete items, or a single category used throughout.
    """
    matrix = _complete_items(as_ratings_matrix(ratings), "Fleiss' kappa")
    n_raters = matrix.shape[0]
    categories, codes = np.unique(matrix, return_inverse=True)
    if categories.size == 1:
        raise UndefinedMetricError(f"Fleiss' kappa is undefined: every rating is {categories[0]:g}")
    codes = codes.reshape(matrix.shape)
    counts = np.stack([(codes == c).sum(axis=0) for c in range(categories.size)], axis=1)  # items x categories
    agreement = ((counts**2).sum(axis=1) - n_raters) / (n_raters * (n_raters - 1))
    shares = counts.sum(axis=0) / counts.sum()
    chance = float((shares**2).sum())
    return float((agreement.mean() - chance) / (1.0 - chance))


def fleiss_kappa_median_cut(ratings: ArrayLike) -> float:
    """Fleiss' kappa after cutting each rater's row at its own median (paper 001, VI-A9; missing stays missing)."""
    matrix = as_ratings_matrix(ratings)
    cut = np.full(matrix.shape, np.nan)
    for row in range(matrix.shape[0]):
        present = ~np.isnan(matrix[row])
        if present.any():
            cut[row, present] = median_cut(matrix[row, present], f"ratings[{row}]")
    return fleiss_kappa(cut)


def krippendorff_alpha(ratings: ArrayLike, level: str = "interval") -> float:
    """Krippendorff's alpha over a raters x items matrix, NaN/None marking missing ratings (``krippendorff``).

    Raises:
        MetricInputError: unknown level, not a matrix.
        UndefinedMetricError: no item with two ratings, or every pairable rating the same value.
    """
    if level not in ALPHA_LEVELS:
        raise MetricInputError(f"params.level must be one of {', '.join(ALPHA_LEVELS)}, got {level!r}")
    matrix = as_ratings_matrix(ratings)
    pairable = matrix[:, (~np.isnan(matrix)).sum(axis=0) >= 2]
    values = pairable[~np.isnan(pairable)]
    if values.size == 0:
        raise UndefinedMetricError("Krippendorff's alpha is undefined: no item has two ratings")
    if np.unique(values).size == 1:
        raise UndefinedMetricError(f"Krippendorff's alpha is undefined: every pairable rating is {values[0]:g}")
    level_of_measurement: Literal["nominal", "ordinal", "interval"] = level  # type: ignore[assignment]
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level_of_measurement))


def icc(ratings: ArrayLike, form: str = "2,1") -> float:
    """Intraclass correlation ICC(2,1) or ICC(3,1) over a raters x items matrix (module docstring).

    Raises:
        MetricInputError: unknown form, not a matrix.
        UndefinedMetricError: fewer than two raters or complete items, or no variance at all.
    """
    if form not in ICC_FORMS:
        raise MetricInputError(f"params.icc_form must be one of {', '.join(ICC_FORMS)}, got {form!r}")
    table = _complete_items(as_ratings_matrix(ratings), "ICC").T  # items x raters
    n_items, n_raters = table.shape
    grand = table.mean()
    ss_rows = n_raters * ((table.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n_items * ((table.mean(axis=0) - grand) ** 2).sum()
    ss_error = ((table - grand) ** 2).sum() - ss_rows - ss_cols
    ms_rows = ss_rows / (n_items - 1)
    ms_cols = ss_cols / (n_raters - 1)
    ms_error = ss_error / ((n_items - 1) * (n_raters - 1))
    if form == "2,1":
        denominator = ms_rows + (n_raters - 1) * ms_error + n_raters * (ms_cols - ms_error) / n_items
    else:
        denominator = ms_rows + (n_raters - 1) * ms_error
    if not denominator > 1e-12 * max(1.0, float(np.abs(table).max()) ** 2):
        raise UndefinedMetricError("ICC is undefined: the ratings have no variance between or within items")
    return float((ms_rows - ms_error) / denominator)


def _correlation_inputs(
    y_true: ArrayLike, y_score: ArrayLike, what: str, names: tuple[str, str] = ("y_true", "y_score")
) -> tuple[FloatArray, FloatArray]:
    first, second = _pair(y_true, y_score, *names)
    if first.size < 2:
        raise UndefinedMetricError(f"{what} needs at least two items; got {first.size}")
    require_not_constant(first, names[0], what)
    require_not_constant(second, names[1], what)
    return first, second


def spearman(y_true: ArrayLike, y_score: ArrayLike, names: tuple[str, str] = ("y_true", "y_score")) -> float:
    """Spearman's rank correlation (scipy; average ranks for ties). Undefined for constant input or n < 2.

    ``names`` are the argument names used in error messages.
    """
    first, second = _correlation_inputs(y_true, y_score, "Spearman's rho", names)
    return float(stats.spearmanr(first, second).statistic)


def kendall_tau(y_true: ArrayLike, y_score: ArrayLike) -> float:
    """Kendall's tau-b (scipy), which corrects for ties in either ranking. Undefined for constant input or n < 2."""
    first, second = _correlation_inputs(y_true, y_score, "Kendall's tau")
    return float(stats.kendalltau(first, second, variant="b").statistic)


def pearson(y_true: ArrayLike, y_score: ArrayLike) -> float:
    """Pearson's correlation (scipy). Undefined for constant input or n < 2."""
    first, second = _correlation_inputs(y_true, y_score, "Pearson's r")
    return float(stats.pearsonr(first, second).statistic)


def mae(y_true: ArrayLike, y_score: ArrayLike) -> float:
    """Mean absolute error ``mean |y_score - y_true|`` (paper 002, 4.2; scikit-learn). Undefined when empty."""
    first, second = _pair(y_true, y_score)
    require_nonempty(first, "MAE")
    return float(skm.mean_absolute_error(first, second))


def mean_score(values: ArrayLike, name: str = "y_score") -> float:
    """Mean of the scores (paper 000's Mean column). Undefined when empty."""
    array = as_float_vector(values, name)
    require_nonempty(array, "the mean score")
    return float(array.mean())


def emd(y_true: ArrayLike, y_score: ArrayLike, scale: ArrayLike | None = None) -> float:
    """Earth mover's distance between the two score distributions on the integer support ``scale`` (default 0..5).

    The two samples may differ in size only when called directly; through the registry they are paired arrays.

    Raises:
        MetricInputError: a value off the scale.
        UndefinedMetricError: either sample empty.
    """
    support = check_scale(scale)
    first = as_float_vector(y_true, "y_true")
    second = as_float_vector(y_score, "y_score")
    _check_on_scale(first, "y_true", support)
    _check_on_scale(second, "y_score", support)
    if first.size == 0 or second.size == 0:
        raise UndefinedMetricError("EMD is undefined on an empty sample")
    return float(stats.wasserstein_distance(first, second))


def normalised_entropy(values: ArrayLike, scale: ArrayLike | None = None, name: str = "y_score") -> float:
    """Normalised Shannon entropy ``-sum p_k log_N p_k`` over the N possible scores of ``scale`` (paper 000, IV-B).

    1 means every score of the scale is equally frequent; 0 means one score only.

    Raises:
        MetricInputError: a value off the scale.
        UndefinedMetricError: empty input.
    """
    support = check_scale(scale)
    array = as_float_vector(values, name)
    _check_on_scale(array, name, support)
    require_nonempty(array, "entropy")
    counts = np.bincount((array - support[0]).astype(np.int64), minlength=support[1] - support[0] + 1)
    return float(stats.entropy(counts, base=counts.size))


__all__ = [
    "cohen_kappa",
    "emd",
    "fleiss_kappa",
    "fleiss_kappa_median_cut",
    "icc",
    "kendall_tau",
    "krippendorff_alpha",
    "mae",
    "mean_score",
    "median_cut",
    "normalised_entropy",
    "pearson",
    "spearman",
]
