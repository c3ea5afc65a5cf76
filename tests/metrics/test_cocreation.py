"""Success@Turn, success after an initial failure, Kaplan-Meier time-to-success and NED churn."""

from __future__ import annotations

import numpy as np
import pytest
from lifelines import KaplanMeierFitter
from rapidfuzz.distance import Levenshtein

from metrics import MetricInputError, UndefinedMetricError
from metrics.cocreation import (
    kaplan_meier,
    ned_churn,
    normalised_edit_distance,
    success_after_failure,
    success_at_turn,
)

# A: fail, accept (T* = 2). B: accept (T* = 1). C: fail x3 (never; last turn 3). D: fail, fail, accept, accept (T* = 3).
# Rows deliberately out of turn order.
GROUPS = ["A", "A", "B", "C", "C", "C", "D", "D", "D", "D"]
TURNS = [2, 1, 1, 1, 3, 2, 4, 3, 2, 1]
ACCEPTED = [1, 0, 1, 0, 0, 0, 1, 1, 0, 0]


def test_success_at_turn_worked_example() -> None:
    # Solved by turn 1: B; by 2: A, B; by 3 and 4: A, B, D -> 1/4, 2/4, 3/4, 3/4.
    assert success_at_turn(ACCEPTED, GROUPS, TURNS) == {"1": 0.25, "2": 0.5, "3": 0.75, "4": 0.75}
    assert success_at_turn(ACCEPTED, GROUPS, TURNS, max_turn=2) == {"1": 0.25, "2": 0.5}


def test_success_after_initial_failure() -> None:
    # A, C, D failed at first; A and D were accepted later.
    assert success_after_failure(ACCEPTED, GROUPS, TURNS) == pytest.approx(2 / 3)
    with pytest.raises(UndefinedMetricError, match="no trajectory failed at first"):
        success_after_failure([1, 1], ["a", "b"], [1, 1])


def test_kaplan_meier_worked_example_with_censoring() -> None:
    # Durations A 2, B 1, D 3 (events) and C 3 (censored at its last turn).
    # t=1: 4 at risk, 1 event -> .75; t=2: 3 at risk, 1 event -> .5; t=3: 2 at risk, 1 event -> .25.
    assert kaplan_meier(ACCEPTED, GROUPS, TURNS) == pytest.approx({"1": 0.75, "2": 0.5, "3": 0.25, "4": 0.25})


def test_kaplan_meier_matches_lifelines_on_random_trajectories() -> None:
    rng = np.random.default_rng(4)
    groups, turns, accepted, durations, events = [], [], [], [], []
    for trajectory in range(60):
        length = int(rng.integers(1, 7))
        outcome = (rng.random(length) < 0.3).astype(int)
        groups += [trajectory] * length
        turns += list(range(1, length + 1))
        accepted += outcome.tolist()
        hit = np.flatnonzero(outcome)
        durations.append(hit[0] + 1 if hit.size else length)
        events.append(bool(hit.size))
    reference = KaplanMeierFitter().fit(durations, events).survival_function_at_times(range(1, 7)).to_numpy()
    assert list(kaplan_meier(accepted, groups, turns).values()) == pytest.approx(reference.tolist())


def test_trajectory_input_errors() -> None:
    with pytest.raises(MetricInputError, match="repeats a turn"):
        success_at_turn([0, 1], ["a", "a"], [1, 1])
    with pytest.raises(MetricInputError, match="params.turn"):
        success_at_turn([0, 1], ["a", "a"], [0, 1])
    with pytest.raises(MetricInputError, match="y_true"):
        success_at_turn([0, 2], ["a", "a"], [1, 2])
    with pytest.raises(UndefinedMetricError):
        success_at_turn([], [], [])


def test_ned_and_churn() -> None:
    assert normalised_edit_distance("kitten", "sitting") == pytest.approx(3 / 7)
    assert normalised_edit_distance("", "") == 0.0
    assert normalised_edit_distance("abc", "") == 1.0
    texts = ["print(1)", "print(2)", "x", "print(22)"]
    churn = ned_churn(texts, ["t", "t", "u", "t"], [1, 2, 1, 3])
    assert churn == [
        ("t", 2, Levenshtein.distance("print(1)", "print(2)") / 8),
        ("t", 3, Levenshtein.distance("print(2)", "print(22)") / 9),
    ]
