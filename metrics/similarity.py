"""Reference-based code evaluation metrics against functional similarity (paper 002, LoCaL): distinguishability
(3.2.2), prediction error against ``df_score`` (4.2), and the SFD/DFS threshold search (3.4, Algorithm 2).

Distinguishability (Eq. 3): ``d = mean m(intra pairs) / mean m(inter pairs)``, intra pairs being functionally
equivalent and inter pairs non-equivalent; d > 1 means the metric scores equivalent pairs higher.

Prediction error (4.2): ``MAE_k = mean |m_k(r) - y_r|`` with y = df_score.

Algorithm 2 scans every tuple (x1, x2, y1, y2) of the grid 0, step, ..., 1 with x1 < x2 and y1 < y2, partitions the
pairs into DFS = {x <= x1, y >= y2}, SFD = {x >= x2, y <= y1} and Control (the rest), x being SurfaceSim and y
df_score, and keeps the first tuple in loop order (x1, then x2, y1, y2) that strictly improves
``mean_k mean(MAE_DFS(k) - MAE_Ctrl(k), MAE_SFD(k) - MAE_Ctrl(k))``. Departures and choices:

- The pseudo-code computes ``(y_r - m_k(r))^2`` but calls it MAE, while section 4.2 defines MAE as the mean absolute
  error and argues for it over squared error. The default here is the absolute error of 4.2; ``error="squared"``
  reproduces the pseudo-code literally.
- A tuple that leaves DFS, SFD or Control empty has an undefined MAE in that region; the pseudo-code does not say
  what happens then, and such tuples are skipped.
- Speed: the objective only depends on the per-pair error averaged over metrics (every metric sees the same
  regions), and DFS depends only on (x1, y2) and SFD only on (x2, y1), so 2-D cumulative sums give every region's
  error sum and size in O(1) per tuple. The scan then evaluates all 25.5 million tuples of step 0.01 in vectorised
  blocks, one per x1, in the pseudo-code's order, so ties resolve exactly as its strict ``>`` does. Objectives that
  differ only by floating-point rounding (about 1e-15) may still rank differently from a literal per-metric loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from metrics._arrays import (
    BoolArray,
    FloatArray,
    as_binary_vector,
    as_float_vector,
    check_same_length,
    require_nonempty,
)
from metrics.errors import MetricInputError, UndefinedMetricError

ERROR_KINDS = ("absolute", "squared")


def distinguishability(y_score: ArrayLike, equivalent: ArrayLike) -> float:
    """Distinguishability d of a code evaluation metric (paper 002, Eq. 3).

    Args:
        y_score: the metric's non-negative similarity score for every code pair.
        equivalent: 1 for a functionally equivalent (intra-class) pair, 0 for a non-equivalent (inter-class) pair.

    Raises:
        MetricInputError: a negative score, labels not 0/1, lengths differ.
        UndefinedMetricError: no pair of one kind, or a zero mean score over the non-equivalent pairs.
    """
    scores = as_float_vector(y_score, "y_score")
    labels = as_binary_vector(equivalent, "y_true")
    check_same_length(y_true=labels, y_score=scores)
    if scores.size and scores.min() < 0:
        raise MetricInputError("y_score must hold non-negative similarity scores for distinguishability")
    n_intra = int(labels.sum())
    if n_intra == 0 or n_intra == labels.size:
        raise UndefinedMetricError(
            f"distinguishability needs both kinds of pair; got {n_intra} equivalent and {labels.size - n_intra} not"
        )
    inter = float(scores[labels == 0].mean())
    if inter == 0.0:
        raise UndefinedMetricError("distinguishability is undefined: the non-equivalent pairs' mean score is 0")
    return float(scores[labels == 1].mean()) / inter


def _errors(df_score: FloatArray, metric_score: FloatArray, error: str) -> FloatArray:
    if error not in ERROR_KINDS:
        raise MetricInputError(f"error must be one of {', '.join(ERROR_KINDS)}, got {error!r}")
    difference = metric_score - df_score
    return np.abs(difference) if error == "absolute" else difference**2


def prediction_error(df_score: ArrayLike, metric_score: ArrayLike, error: str = "absolute") -> float:
    """MAE of a metric against df_score (paper 002, 4.2), or the mean squared error with ``error="squared"``."""
    truth = as_float_vector(df_score, "df_score")
    scores = as_float_vector(metric_score, "metric_score")
    check_same_length(df_score=truth, metric_score=scores)
    require_nonempty(truth, "prediction error")
    return float(_errors(truth, scores, error).mean())


@dataclass(frozen=True)
class RegionThresholds:
    """The SFD/DFS boundaries chosen by Algorithm 2 and the objective they reach."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    objective: float


def region_masks(surface_sim: ArrayLike, df_score: ArrayLike, thresholds: RegionThresholds) -> dict[str, BoolArray]:
    """Membership of every pair in DFS, SFD and Control (paper 002, Eq. 4)."""
    x = as_float_vector(surface_sim, "surface_sim")
    y = as_float_vector(df_score, "df_score")
    check_same_length(surface_sim=x, df_score=y)
    dfs = (x <= thresholds.x_lo) & (y >= thresholds.y_hi)
    sfd = (x >= thresholds.x_hi) & (y <= thresholds.y_lo)
    return {"dfs": dfs, "sfd": sfd, "control": ~(dfs | sfd)}


def threshold_grid(step: float) -> FloatArray:
    """0, step, 2 step, ... up to 1 (inclusive when 1/step is whole), rounded to 12 decimals."""
    if isinstance(step, bool) or not isinstance(step, int | float) or not 0 < step <= 1:
        raise MetricInputError(f"step must be a number in (0, 1], got {step!r}")
    count = int(np.floor(1.0 / step + 1e-9))
    return np.round(np.arange(count + 1) * step, 12)


def _metric_matrix(metric_scores: ArrayLike | Mapping[str, ArrayLike], n_pairs: int) -> FloatArray:
    if isinstance(metric_scores, Mapping):
        rows = [as_float_vector(values, f"metric_scores[{name!r}]") for name, values in metric_scores.items()]
        matrix = np.vstack(rows) if rows else np.empty((0, n_pairs))
    else:
        matrix = np.atleast_2d(np.asarray(metric_scores, dtype=np.float64))
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] != n_pairs:
        raise MetricInputError(f"metric_scores must be metrics x pairs with {n_pairs} pairs, got {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise MetricInputError("metric_scores contains a missing or infinite value")
    return matrix


def select_region_thresholds(
    surface_sim: ArrayLike,
    df_score: ArrayLike,
    metric_scores: ArrayLike | Mapping[str, ArrayLike],
    step: float = 0.01,
    error: str = "absolute",
) -> RegionThresholds:
    """Algorithm 2 of paper 002: the SFD/DFS thresholds maximising the corner-versus-Control error gap.

    Args:
        surface_sim: SurfaceSim of every pair, in [0, 1].
        df_score: functional similarity of every pair, in [0, 1].
        metric_scores: metrics x pairs matrix (or name -> scores mapping) of the metrics' scores.
        step: grid step (0.01 in the paper).
        error: ``"absolute"`` (section 4.2's MAE, default) or ``"squared"`` (the pseudo-code's literal formula).

    Raises:
        MetricInputError: values outside [0, 1], mismatched lengths, bad step or error kind.
        UndefinedMetricError: no tuple leaves all three regions non-empty.
    """
    x = as_float_vector(surface_sim, "surface_sim")
    y = as_float_vector(df_score, "df_score")
    n_pairs = check_same_length(surface_sim=x, df_score=y)
    for name, values in (("surface_sim", x), ("df_score", y)):
        if values.size and (values.min() < 0 or values.max() > 1):
            raise MetricInputError(f"{name} must lie in [0, 1]")
    pair_error = np.mean([_errors(y, row, error) for row in _metric_matrix(metric_scores, n_pairs)], axis=0)
    grid = threshold_grid(step)
    size = grid.size

    # DFS(i, l) = {x <= g_i, y >= g_l}: cumulate a 2-D histogram up in i and down in l.
    dfs_error, dfs_count = np.zeros((size, size)), np.zeros((size, size))
    x_at_most = np.searchsorted(grid, x, side="left")  # x <= g_i  <=>  i >= this
    y_at_least = np.searchsorted(grid, y, side="right") - 1  # y >= g_l  <=>  l <= this
    inside = x_at_most < size
    np.add.at(dfs_error, (x_at_most[inside], y_at_least[inside]), pair_error[inside])
    np.add.at(dfs_count, (x_at_most[inside], y_at_least[inside]), 1.0)
    dfs_error = np.cumsum(np.cumsum(dfs_error, axis=0)[:, ::-1], axis=1)[:, ::-1]
    dfs_count = np.cumsum(np.cumsum(dfs_count, axis=0)[:, ::-1], axis=1)[:, ::-1]

    # SFD(j, k) = {x >= g_j, y <= g_k}: cumulate down in j and up in k.
    sfd_error, sfd_count = np.zeros((size, size)), np.zeros((size, size))
    x_at_least = np.searchsorted(grid, x, side="right") - 1  # x >= g_j  <=>  j <= this
    y_at_most = np.searchsorted(grid, y, side="left")  # y <= g_k  <=>  k >= this
    inside = y_at_most < size
    np.add.at(sfd_error, (x_at_least[inside], y_at_most[inside]), pair_error[inside])
    np.add.at(sfd_count, (x_at_least[inside], y_at_most[inside]), 1.0)
    sfd_error = np.cumsum(np.cumsum(sfd_error[::-1], axis=0)[::-1], axis=1)
    sfd_count = np.cumsum(np.cumsum(sfd_count[::-1], axis=0)[::-1], axis=1)

    total_error, total_count = float(pair_error.sum()), float(n_pairs)
    with np.errstate(invalid="ignore", divide="ignore"):
        dfs_mean = dfs_error / dfs_count
        sfd_mean = sfd_error / sfd_count
    y_order = np.triu(np.ones((size, size), dtype=bool), k=1)  # [k, l]: y1 = g_k < y2 = g_l

    best, best_tuple = -np.inf, None
    for i in range(size - 1):  # x1 = g_i; x2 = g_j with j > i
        control_count = total_count - dfs_count[i][None, None, :] - sfd_count[i + 1 :, :, None]
        control_error = total_error - dfs_error[i][None, None, :] - sfd_error[i + 1 :, :, None]
        valid = (
            y_order[None, :, :]
            & (dfs_count[i] > 0)[None, None, :]
            & (sfd_count[i + 1 :] > 0)[:, :, None]
            & (control_count > 0)
        )
        if not valid.any():
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            objective = 0.5 * (dfs_mean[i][None, None, :] + sfd_mean[i + 1 :, :, None]) - control_error / control_count
        objective = np.where(valid, objective, -np.inf)
        flat = int(np.argmax(objective))  # first maximum in (x2, y1, y2) order, as the nested loops meet it
        if objective.flat[flat] > best:
            best = float(objective.flat[flat])
            j, k, l_index = np.unravel_index(flat, objective.shape)
            best_tuple = (grid[i], grid[i + 1 + j], grid[k], grid[l_index])
    if best_tuple is None:
        raise UndefinedMetricError("no threshold tuple leaves DFS, SFD and Control all non-empty")
    x_lo, x_hi, y_lo, y_hi = (float(value) for value in best_tuple)
    return RegionThresholds(x_lo=x_lo, x_hi=x_hi, y_lo=y_lo, y_hi=y_hi, objective=best)
