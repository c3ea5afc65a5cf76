"""Co-creation dynamics from verdicts alone: Success@Turn, success after an initial failure, Kaplan-Meier
time-to-success, and NED churn between consecutive turns (paper 001, IV-C3, IV-C4, V-B2).

A trajectory is a participant x problem pair (``groups``); ``turn`` is the 1-based index k of an attempt within it
and ``y_true`` its acceptance. ``T* = min{k : y_k = 1}`` is the first-success turn and ``K`` the last observed turn.

- Success@Turn(k) = share of trajectories with ``T* <= k``.
- Success after an initial failure = share, among trajectories whose first attempt failed, of those accepted later
  (the paper's "44 of the 73 trajectories unsolved at first succeed later").
- Kaplan-Meier (lifelines): durations ``T*`` for solved trajectories and ``K`` for the others, which are
  right-censored at their last observed turn; the value is the share still unsolved, S(k), at every turn.
- NED(s, t) = LD(s, t) / max(1, |s|, |t|), with LD the Levenshtein distance (rapidfuzz), between the code (or prompt)
  of consecutive turns k-1 and k of a trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from lifelines import KaplanMeierFitter
from numpy.typing import ArrayLike, NDArray
from rapidfuzz.distance import Levenshtein

from metrics.arrays import (
    BoolArray,
    IntArray,
    as_binary_vector,
    as_float_vector,
    as_label_vector,
    check_same_length,
    label_codes,
)
from metrics.errors import MetricInputError, UndefinedMetricError


@dataclass(frozen=True)
class Trajectories:
    """Per-trajectory outcome: first and last observed turn, and the first-success turn where there is one."""

    labels: NDArray[Any]
    first_turn: IntArray
    last_turn: IntArray
    solved: BoolArray
    success_turn: IntArray  # first accepted turn; meaningful only where ``solved``
    first_accepted: BoolArray  # the first attempt was accepted


def _turns(turn: ArrayLike, name: str = "params.turn") -> IntArray:
    values = as_float_vector(turn, name)
    if values.size and (not np.all(values == np.round(values)) or values.min() < 1):
        raise MetricInputError(f"{name} must hold integer turn indices >= 1")
    return values.astype(np.int64)


def trajectories(y_true: ArrayLike, groups: ArrayLike, turn: ArrayLike) -> Trajectories:
    """Group attempts into trajectories and find each one's first success.

    Raises:
        MetricInputError: labels not 0/1, turns not integers >= 1, lengths differ, a turn repeated in a trajectory.
        UndefinedMetricError: no attempt at all.
    """
    accepted = as_binary_vector(y_true, "y_true")
    group_labels = as_label_vector(groups, "groups")
    turns = _turns(turn)
    check_same_length(y_true=accepted, groups=group_labels, turn=turns)
    if accepted.size == 0:
        raise UndefinedMetricError("co-creation metrics are undefined without attempts")
    labels, codes = label_codes(group_labels)
    order = np.lexsort((turns, codes))
    codes, turns, accepted = codes[order], turns[order], accepted[order]
    if np.any((codes[1:] == codes[:-1]) & (turns[1:] == turns[:-1])):
        raise MetricInputError("params.turn repeats a turn within one trajectory (groups)")
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], codes.size] - 1
    solved = np.add.reduceat(accepted, starts) > 0
    # The first accepted turn of each trajectory: the smallest turn among its accepted attempts.
    big = np.iinfo(np.int64).max
    success_turn = np.minimum.reduceat(np.where(accepted == 1, turns, big), starts)
    return Trajectories(
        labels=labels,
        first_turn=turns[starts],
        last_turn=turns[ends],
        solved=solved,
        success_turn=np.where(solved, success_turn, 0),
        first_accepted=accepted[starts] == 1,
    )


def _turn_range(outcomes: Trajectories, max_turn: int | None) -> range:
    last = int(outcomes.last_turn.max()) if max_turn is None else int(max_turn)
    if last < 1:
        raise MetricInputError(f"params.max_turn must be >= 1, got {max_turn!r}")
    return range(1, last + 1)


def success_at_turn(
    y_true: ArrayLike, groups: ArrayLike, turn: ArrayLike, max_turn: int | None = None
) -> dict[str, float]:
    """Success@Turn: share of trajectories first accepted at or before turn k, for k = 1..max_turn.

    Args:
        y_true: acceptance of every attempt.
        groups: trajectory of every attempt.
        turn: 1-based turn of every attempt within its trajectory.
        max_turn: last k reported; the longest trajectory's last turn by default.

    Returns:
        ``{"1": share, "2": share, ...}``.
    """
    outcomes = trajectories(y_true, groups, turn)
    return {
        str(k): float(np.mean(outcomes.solved & (outcomes.success_turn <= k))) for k in _turn_range(outcomes, max_turn)
    }


def success_after_failure(y_true: ArrayLike, groups: ArrayLike, turn: ArrayLike) -> float:
    """Share of the trajectories whose first attempt failed that were accepted at a later turn.

    Raises:
        UndefinedMetricError: every trajectory's first attempt was accepted.
    """
    outcomes = trajectories(y_true, groups, turn)
    failed_first = ~outcomes.first_accepted
    if not failed_first.any():
        raise UndefinedMetricError("success after an initial failure is undefined: no trajectory failed at first")
    return float(outcomes.solved[failed_first].mean())


def kaplan_meier(
    y_true: ArrayLike, groups: ArrayLike, turn: ArrayLike, max_turn: int | None = None
) -> dict[str, float]:
    """Kaplan-Meier share of trajectories still unsolved after turn k, unsolved ones censored at their last turn.

    Returns:
        ``{"1": S(1), "2": S(2), ...}`` for k = 1..max_turn (the longest trajectory's last turn by default).
    """
    outcomes = trajectories(y_true, groups, turn)
    durations = np.where(outcomes.solved, outcomes.success_turn, outcomes.last_turn)
    fitter = KaplanMeierFitter().fit(durations, event_observed=outcomes.solved)
    turns = list(_turn_range(outcomes, max_turn))
    survival = fitter.survival_function_at_times(turns).to_numpy()
    return {str(k): float(s) for k, s in zip(turns, survival, strict=True)}


def normalised_edit_distance(first: str, second: str) -> float:
    """NED(s, t) = Levenshtein(s, t) / max(1, |s|, |t|), in [0, 1]."""
    return Levenshtein.distance(first, second) / max(1, len(first), len(second))


def ned_churn(texts: Sequence[str], groups: ArrayLike, turn: ArrayLike) -> list[tuple[Any, int, float]]:
    """NED between consecutive turns of every trajectory.

    Args:
        texts: the code (or prompt) of every attempt.
        groups: trajectory of every attempt.
        turn: turn of every attempt.

    Returns:
        ``(trajectory, k, NED(text_{k-1}, text_k))`` for every attempt that has a previous one, in trajectory and
        turn order. Consecutive means adjacent in turn order within the trajectory.
    """
    group_labels = as_label_vector(groups, "groups")
    turns = _turns(turn, "turn")
    if any(not isinstance(text, str) for text in texts):
        raise MetricInputError("texts must be strings")
    check_same_length(texts=list(texts), groups=group_labels, turn=turns)
    labels, codes = label_codes(group_labels)
    order = np.lexsort((turns, codes))
    churn: list[tuple[Any, int, float]] = []
    for previous, current in zip(order[:-1], order[1:], strict=True):
        if codes[previous] == codes[current]:
            if turns[previous] == turns[current]:
                raise MetricInputError("turn repeats a turn within one trajectory (groups)")
            value = normalised_edit_distance(texts[previous], texts[current])
            churn.append((labels[codes[current]].item(), int(turns[current]), value))
    return churn
