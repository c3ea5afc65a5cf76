"""Panels that know their judges: shared errors, the effective number of judges, learned and selected panels.

The platform's panel (:mod:`metrics.panel`, paper 001 VI-A10) is the unweighted mean percentile rank of the judges
that scored an item. Paper 001 VIII leaves weighted panels to future work; this module supplies them, and the
figures that say whether a panel of N judges is worth N votes.

Error against ground truth (:func:`judge_errors`)
    For judge ``j`` and item ``i`` with label ``y_i`` (1 accepted) and probability ``p_ji``: the *probability error*
    ``e_ji = p_ji - y_i`` (default), or the *decision error* ``e_ji = 1[p_ji >= threshold] - y_i`` (in {-1, 0, 1}).

Error correlation (:func:`error_correlation`)
    The pooled within-class Pearson correlation of two judges' errors over the items both scored: each judge's
    errors are centred on their mean within each label class (accepted, rejected) and then correlated,
    ``r_ab = sum_i d_ai d_bi / sqrt(sum_i d_ai^2 sum_i d_bi^2)`` with ``d_ji = e_ji - mean_{i' : y_i' = y_i} e_ji'``.
    Centring within class is what makes "independent" mean "independent given the truth": every error ``p - y``
    holds ``-y``, so two judges whose mistakes are unrelated would still look correlated through the label alone
    (two good judges' raw error correlation is near 1); the within-class correlation is the residual dependence that
    latent-class models of raters call conditional dependence. On decision errors within one class it is the phi
    coefficient. A judge whose error is constant within both classes has no correlation (NaN), reported as such,
    not as 0. Hand-written: numpy/scipy correlate, but none pools within groups.

Effective number of independent judges (:func:`effective_judges`)
    The participation ratio of the error-correlation matrix ``R`` (N x N):
    ``N_eff = (sum_k lambda_k)^2 / sum_k lambda_k^2 = N^2 / sum_ij r_ij^2`` (trace R = N, and the sum of squared
    eigenvalues of a symmetric matrix is its squared Frobenius norm). It is 1 when every pair's errors are perfectly
    correlated (R all ones, one eigenvalue N), N when they are uncorrelated (R = I), and always within [1, N]. It is
    chosen over the design-effect form ``N / (1 + (N - 1) mean_{i != j} r_ij)`` because that one leaves [1, N] as
    soon as errors are negatively correlated (it exceeds N, and is infinite at mean r = -1/(N - 1)), and because
    anti-correlated errors are as shared as correlated ones when a panel averages them away: the participation ratio
    counts both, through r^2. Written by hand: numpy gives the matrix, no library names this ratio.

Panels learned out of fold (:func:`fit_panels`)
    Folds are grouped by cluster (scikit-learn ``StratifiedGroupKFold``), so that no rule is learned from an item it
    then scores. Every panel below is fitted on the training folds and scores only the held-out fold:

    - ``panel``: the unweighted mean percentile rank over all judges (:func:`metrics.panel.panel_consensus`; ranks
      use no label, so it needs no fitting).
    - ``weighted``: ``sum_j w_j p_j`` with weights from each judge's training log-loss, ``w_j proportional to
      max(0, L_0 - L_j)``: the judge's log-loss improvement over ``L_0``, the log-loss of always predicting the
      training folds' acceptance rate (a log-loss skill score). A judge no better than the base rate gets weight 0;
      if none is better, the weights are equal. No library offers skill weights; hand-written.
    - ``stacked``: scikit-learn ``LogisticRegression`` on the judges' logits ``log(p / (1 - p))`` (p clipped to
      [1e-6, 1 - 1e-6]), default L2 penalty.
    - ``selected_k``: the unweighted percentile-rank panel of the subset of at most ``k`` judges (and within the
      ``costs`` budget when one is given) with the highest training ROC-AUC; ties go to fewer judges, then to the
      judges' order. Exhaustive over subsets (at most ``MAX_SELECTION_JUDGES`` judges), which no library does for a
      panel's rank mean.

    ``weighted`` and ``stacked`` are probabilities (log-loss applies); ``panel`` and ``selected_k`` are ranks
    (ROC-AUC only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.model_selection import StratifiedGroupKFold

from metrics.arrays import FloatArray, IntArray, as_label_vector
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.panel import percentile_ranks

ErrorKind = Literal["probability", "decision"]
ERROR_KINDS: tuple[str, ...] = ("probability", "decision")
MAX_SELECTION_JUDGES = 12
CLIP = 1e-6


def _matrix(probabilities: ArrayLike, name: str = "probabilities") -> FloatArray:
    matrix = np.asarray(probabilities, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise MetricInputError(f"{name} must be a non-empty judges x items matrix")
    present = matrix[~np.isnan(matrix)]
    if present.size and (present.min() < 0 or present.max() > 1):
        raise MetricInputError(f"{name} must lie in [0, 1]")
    return matrix


def _labels(y_true: ArrayLike, items: int) -> IntArray:
    labels = np.asarray(y_true, dtype=np.float64)
    if labels.ndim != 1 or labels.size != items:
        raise MetricInputError(f"y_true must hold one label per item ({items}), got {labels.size}")
    if not np.isin(labels, (0.0, 1.0)).all():
        raise MetricInputError("y_true must hold 0 or 1")
    return labels.astype(np.int64)


def judge_errors(
    probabilities: ArrayLike, y_true: ArrayLike, kind: ErrorKind = "probability", threshold: float = 0.5
) -> FloatArray:
    """Judges x items errors against the labels: ``p - y`` (``probability``) or ``1[p >= threshold] - y``
    (``decision``); NaN where the judge has no probability."""
    matrix = _matrix(probabilities)
    labels = _labels(y_true, matrix.shape[1])
    if kind not in ERROR_KINDS:
        raise MetricInputError(f"kind must be one of {', '.join(ERROR_KINDS)}, got {kind!r}")
    values = matrix if kind == "probability" else np.where(np.isnan(matrix), np.nan, (matrix >= threshold) * 1.0)
    errors: FloatArray = values - labels[None, :]
    return errors


def _within_class(values: FloatArray, labels: IntArray) -> FloatArray:
    centred = values.copy()
    for label in (0, 1):
        members = labels == label
        if members.any():
            centred[members] -= values[members].mean()
    return centred


def error_correlation(errors: ArrayLike, y_true: ArrayLike) -> FloatArray:
    """The pooled within-class correlation of every pair of judges' errors over the items both have (module
    docstring; 1 on the diagonal of a judge whose error varies within a class); NaN where either judge's error is
    constant within every class on those items."""
    matrix = np.asarray(errors, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise MetricInputError("errors must be a non-empty judges x items matrix")
    labels = _labels(y_true, matrix.shape[1])
    judges = matrix.shape[0]
    result = np.full((judges, judges), np.nan)
    for a in range(judges):
        for b in range(a, judges):
            both = ~np.isnan(matrix[a]) & ~np.isnan(matrix[b])
            x = _within_class(matrix[a, both], labels[both])
            y = _within_class(matrix[b, both], labels[both])
            scale = float(np.sqrt(np.sum(x**2) * np.sum(y**2)))
            if scale <= 1e-300:
                continue
            result[a, b] = result[b, a] = float(np.clip(np.sum(x * y) / scale, -1.0, 1.0))
    return result


def effective_judges(correlation: ArrayLike) -> float:
    """The participation ratio ``N^2 / sum_ij r_ij^2`` of an N x N correlation matrix (module docstring).

    Raises:
        MetricInputError: not a square matrix.
        UndefinedMetricError: a correlation is undefined (NaN).
    """
    matrix = np.asarray(correlation, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise MetricInputError("correlation must be a non-empty square matrix")
    if np.isnan(matrix).any():
        raise UndefinedMetricError("the effective number of judges needs every pair's error correlation")
    judges = matrix.shape[0]
    return float(judges**2 / np.sum(matrix**2))


def skill_weights(probabilities: ArrayLike, y_true: ArrayLike) -> FloatArray:
    """Each judge's weight ``max(0, L_0 - L_j)`` normalised to sum 1 (equal when no judge beats the base rate).

    Raises:
        UndefinedMetricError: the labels hold one class (no base-rate log-loss to improve on).
    """
    matrix = _matrix(probabilities)
    labels = _labels(y_true, matrix.shape[1])
    if np.isnan(matrix).any():
        raise MetricInputError("probabilities must be complete to learn weights")
    rate = float(labels.mean())
    if rate in (0.0, 1.0):
        raise UndefinedMetricError("weights need both classes among the training items")
    base = float(log_loss(labels, np.full(labels.size, rate), labels=[0, 1]))
    losses = np.array([log_loss(labels, np.clip(row, CLIP, 1 - CLIP), labels=[0, 1]) for row in matrix])
    skill = np.maximum(0.0, base - losses)
    total = float(skill.sum())
    weights: FloatArray = skill / total if total > 0 else np.full(matrix.shape[0], 1.0 / matrix.shape[0])
    return weights


def _logits(matrix: FloatArray) -> FloatArray:
    clipped = np.clip(matrix, CLIP, 1 - CLIP)
    logits: FloatArray = np.log(clipped / (1 - clipped)).T
    return logits


def _rank_panel(ranks: FloatArray, members: Sequence[int]) -> FloatArray:
    panel: FloatArray = ranks[list(members)].mean(axis=0)
    return panel


def select_subset(
    ranks: ArrayLike,
    y_true: ArrayLike,
    max_judges: int,
    costs: Sequence[float] | None = None,
    budget: float | None = None,
) -> tuple[int, ...]:
    """The subset of at most ``max_judges`` judges (and total cost <= ``budget`` when given) whose unweighted mean
    percentile rank has the highest ROC-AUC on these items; ties to fewer judges, then the judges' order.

    Raises:
        MetricInputError: a bad budget, or more than ``MAX_SELECTION_JUDGES`` judges.
        UndefinedMetricError: one class only, or no subset within the budget.
    """
    matrix = np.asarray(ranks, dtype=np.float64)
    labels = _labels(y_true, matrix.shape[1])
    judges = matrix.shape[0]
    if isinstance(max_judges, bool) or not isinstance(max_judges, int) or max_judges < 1:
        raise MetricInputError(f"max_judges must be a positive integer, got {max_judges!r}")
    if judges > MAX_SELECTION_JUDGES:
        raise MetricInputError(f"a selected panel chooses among at most {MAX_SELECTION_JUDGES} judges, got {judges}")
    if costs is not None and len(costs) != judges:
        raise MetricInputError(f"costs must hold one cost per judge ({judges}), got {len(costs)}")
    if labels.min() == labels.max():
        raise UndefinedMetricError("selecting a panel needs both classes among the training items")
    best: tuple[float, tuple[int, ...]] | None = None
    for size in range(1, min(max_judges, judges) + 1):
        for members in combinations(range(judges), size):
            if costs is not None and budget is not None and sum(costs[m] for m in members) > budget:
                continue
            auc = float(roc_auc_score(labels, _rank_panel(matrix, members)))
            if best is None or auc > best[0]:
                best = (auc, members)
    if best is None:
        raise UndefinedMetricError(f"no subset of judges fits the budget {budget!r}")
    return best[1]


@dataclass
class PanelFit:
    """Out-of-fold scores of every panel (``scores[name]``, one per item), which are probabilities, and what each
    fold learned: ``weights[fold]`` (per judge), ``stacked[fold]`` (coefficients per judge), ``selections[name]
    [fold]`` (judge indices)."""

    scores: dict[str, FloatArray]
    probabilistic: list[str]
    folds: int
    weights: list[FloatArray] = field(default_factory=list)
    stacked: list[FloatArray] = field(default_factory=list)
    selections: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)


def grouped_folds(y_true: ArrayLike, groups: ArrayLike, folds: int, seed: int = 0) -> list[tuple[IntArray, IntArray]]:
    """``(train, test)`` index pairs of ``StratifiedGroupKFold`` (shuffled with ``seed``), at most one fold per
    group; every training part holds both classes.

    Raises:
        MetricInputError: fewer than 2 folds asked.
        UndefinedMetricError: fewer than 2 groups, or a training part with one class.
    """
    labels = np.asarray(y_true, dtype=np.int64)
    group_labels = as_label_vector(groups, "groups")
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise MetricInputError(f"folds must be an integer of at least 2, got {folds!r}")
    splits = min(folds, int(np.unique(group_labels).size))
    if splits < 2:
        raise UndefinedMetricError("out-of-fold panels need at least 2 clusters")
    splitter = StratifiedGroupKFold(n_splits=splits, shuffle=True, random_state=seed)
    pairs = []
    for train, test in splitter.split(np.zeros(labels.size), labels, group_labels):
        if labels[train].min() == labels[train].max():
            raise UndefinedMetricError("a training fold holds one class only; fewer folds or more clusters needed")
        pairs.append((train.astype(np.int64), test.astype(np.int64)))
    return pairs


def fit_panels(
    probabilities: ArrayLike,
    y_true: ArrayLike,
    groups: ArrayLike,
    folds: int = 5,
    seed: int = 0,
    max_judges: Sequence[int] = (2,),
    costs: Sequence[float] | None = None,
    budget: float | None = None,
) -> PanelFit:
    """Every panel of the module docstring, out of fold, on a complete judges x items probability matrix.

    Raises:
        MetricInputError: malformed inputs (a missing probability: align the items first).
        UndefinedMetricError: too few clusters, or a training fold with one class.
    """
    matrix = _matrix(probabilities)
    if np.isnan(matrix).any():
        raise MetricInputError("probabilities must be complete: every judge must score every item")
    labels = _labels(y_true, matrix.shape[1])
    ranks = np.vstack([percentile_ranks(row) for row in matrix])
    pairs = grouped_folds(labels, groups, folds, seed)
    items = matrix.shape[1]
    weighted, stacked = np.full(items, np.nan), np.full(items, np.nan)
    budgets = sorted({int(k) for k in max_judges})
    selected = {f"selected_{k}": np.full(items, np.nan) for k in budgets}
    fit = PanelFit({}, ["weighted", "stacked"], len(pairs), selections={name: [] for name in selected})
    features = _logits(matrix)
    for train, test in pairs:
        weights = skill_weights(matrix[:, train], labels[train])
        fit.weights.append(weights)
        weighted[test] = weights @ matrix[:, test]
        model = LogisticRegression().fit(features[train], labels[train])
        fit.stacked.append(model.coef_[0].astype(np.float64))
        stacked[test] = model.predict_proba(features[test])[:, 1]
        for k in budgets:
            members = select_subset(ranks[:, train], labels[train], k, costs, budget)
            fit.selections[f"selected_{k}"].append(members)
            selected[f"selected_{k}"][test] = _rank_panel(ranks[:, test], members)
    fit.scores = {"panel": ranks.mean(axis=0), "weighted": weighted, "stacked": stacked, **selected}
    return fit


def best_single(probabilities: ArrayLike, y_true: ArrayLike) -> int:
    """Index of the judge with the highest ROC-AUC on these items (in sample, which favours the single judge in a
    comparison with out-of-fold panels); ties to the first.

    Raises:
        UndefinedMetricError: one class only.
    """
    matrix = _matrix(probabilities)
    labels = _labels(y_true, matrix.shape[1])
    if labels.min() == labels.max():
        raise UndefinedMetricError("ROC-AUC needs both classes")
    aucs = [float(roc_auc_score(labels, row)) for row in matrix]
    return int(np.argmax(aucs))


def member_names(members: Sequence[int], judges: Sequence[str]) -> list[str]:
    """The judge names of a subset of judge indices."""
    return [judges[m] for m in members]


def most_chosen(selections: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """The subset chosen in the most folds (ties to the earliest fold's)."""
    if not selections:
        raise UndefinedMetricError("no fold chose a subset")
    counts: Mapping[tuple[int, ...], int] = {s: list(selections).count(s) for s in selections}
    return max(counts, key=lambda s: counts[s])
