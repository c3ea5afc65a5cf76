"""The unweighted percentile-rank panel: a judge-agnostic consensus score (paper 001, IV-C3 and VI-A10).

``q = (1/|J|) sum_j F_j(p^(j))`` where ``F_j`` maps judge j's output to its percentile rank among that judge's outputs
over the same items. The paper does not define the percentile rank under ties; here it is the average rank divided by
the number of ranked items (pandas ``rank(pct=True)``, scipy ``percentileofscore(kind="rank") / 100``), in (0, 1].
A judge without an output for an item (NaN) is left out of that item's mean and of its own ranking.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from metrics._arrays import FloatArray, as_float_vector, as_ratings_matrix
from metrics.errors import MetricInputError


def percentile_ranks(scores: ArrayLike) -> FloatArray:
    """Average rank / n of every non-missing score among the non-missing scores; NaN stays NaN."""
    values = as_float_vector(scores, "scores", allow_missing=True)
    present = ~np.isnan(values)
    ranks = np.full(values.shape, np.nan)
    ranks[present] = stats.rankdata(values[present], method="average") / present.sum()
    return ranks


def panel_consensus(scores: ArrayLike) -> FloatArray:
    """Mean percentile rank across judges for every item.

    Args:
        scores: judges x items matrix of outputs (e.g. acceptance probabilities), NaN/None where missing.

    Raises:
        MetricInputError: not a matrix, or an item that no judge scored.
    """
    matrix = as_ratings_matrix(scores, "scores")
    ranks = np.vstack([percentile_ranks(row) for row in matrix]) if matrix.shape[0] else matrix
    counts = (~np.isnan(ranks)).sum(axis=0)
    if matrix.shape[0] == 0 or np.any(counts == 0):
        raise MetricInputError("scores must hold at least one judge's output for every item")
    return np.nansum(ranks, axis=0) / counts
