"""registry.compute: every api.md metric, inputs by convention, reasons instead of NaN, named input errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics import METRIC_NAMES, MetricInputError, compute

API_METRICS = [
    "roc_auc", "pr_auc", "log_loss", "brier", "ece", "mcc", "mcc_oof", "scale_validity", "spearman", "kendall_tau",
    "pearson", "krippendorff_alpha", "cohen_kappa", "fleiss_kappa", "icc", "emd", "mae", "mean", "entropy",
    "arm_discrimination", "severity_gradient", "success_at_turn", "kaplan_meier", "distinguishability",
]  # fmt: skip


def test_every_api_metric_is_served() -> None:
    assert set(API_METRICS) <= set(METRIC_NAMES)


def _all_inputs(n: int, rng: np.random.Generator, labels: np.ndarray, scores: np.ndarray) -> dict[str, Any]:
    ratings = rng.integers(0, 6, size=(3, n)).astype(object)
    ratings[rng.random((3, n)) < 0.2] = None
    return {
        "y_true": labels,
        "y_score": scores,
        "groups": np.arange(n) // 2,
        "surface_sim": scores,
        "metric_scores": {"m": scores},
        "ratings": ratings.tolist(),
        "params": {
            "folds": 2,
            "seed_score": np.clip(scores + 0.3, 0, 1),
            "arm": np.where(np.arange(n) % 3 == 0, "control", "semantic"),
            "severity": [None if i % 3 == 0 else 1 + i % 4 for i in range(n)],
            "turn": np.arange(n) % 2 + 1,
        },
    }


def _assert_no_made_up_numbers(result: dict[str, Any], names: list[str]) -> None:
    assert set(result["values"]) | set(result["errors"]) == set(names)
    assert not set(result["values"]) & set(result["errors"])
    for name, value in result["values"].items():
        numbers = value.values() if isinstance(value, dict) else [value]
        assert all(isinstance(v, int | float) and math.isfinite(v) for v in numbers), (name, value)
    assert all(isinstance(reason, str) and reason for reason in result["errors"].values())
    for name, interval in result["ci"].items():
        bounds = interval.values() if isinstance(interval, dict) else [interval]
        assert all(len(b) == 2 and all(math.isfinite(x) for x in b) for b in bounds), name


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    st.integers(0, 14),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["random", "constant", "one_class", "binary_scores"]),
)
def test_every_metric_gives_a_finite_value_or_a_reason(n: int, seed: int, shape: str) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    scores = np.round(rng.random(n), 1)
    if shape == "constant":
        scores = np.full(n, 0.5)
    elif shape == "one_class":
        labels = np.ones(n, dtype=int)
    elif shape == "binary_scores":
        scores = rng.integers(0, 2, n).astype(float)
    # Probabilities are not scores on the 0..5 scale, which emd, entropy and the AXIOM subtasks require.
    names = [name for name in METRIC_NAMES if name not in ORDINAL_ONLY]
    result = compute(names, **_all_inputs(n, rng, labels, scores))
    _assert_no_made_up_numbers(result, names)


ORDINAL_ONLY = {"emd", "entropy", "axiom_gating", "axiom_functionality", "axiom_quality", "axiom_effort"}


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=12), st.booleans())
def test_ordinal_metrics_give_a_finite_value_or_a_reason(pairs: list[tuple[int, int]], constant: bool) -> None:
    truth = [a for a, _ in pairs]
    judged = [3] * len(pairs) if constant else [b for _, b in pairs]
    names = sorted(ORDINAL_ONLY | {"spearman", "kendall_tau", "pearson", "mae", "mean", "krippendorff_alpha", "icc",
                                   "fleiss_kappa", "cohen_kappa"})  # fmt: skip
    for weights in ("none", "quadratic"):
        result = compute(names, truth, judged, params={"weights": weights, "level": "ordinal"})
        _assert_no_made_up_numbers(result, names)


def test_ordinal_metrics_and_axiom_subtasks_through_the_registry() -> None:
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 6, 40)
    judged = np.clip(truth + rng.integers(-1, 2, 40), 0, 5)
    names = ["spearman", "kendall_tau", "krippendorff_alpha", "emd", "mean", "entropy", "mae", "icc",
             "axiom_gating", "axiom_functionality", "axiom_quality", "axiom_effort"]  # fmt: skip
    result = compute(names, truth, judged, params={"level": "ordinal", "target": "y_true"}, bootstrap=50, seed=1)
    _assert_no_made_up_numbers(result, names)
    assert result["values"]["mean"] == pytest.approx(truth.mean())  # target y_true
    assert result["values"]["krippendorff_alpha"] > 0.5


def test_one_class_is_a_reason_not_a_number() -> None:
    result = compute(["roc_auc", "pr_auc", "mcc", "brier"], [1, 1, 1], [0.2, 0.5, 0.9])
    assert "both classes" in result["errors"]["roc_auc"]
    assert "both classes" in result["errors"]["mcc"]
    assert result["values"] == {"brier": pytest.approx((0.64 + 0.25 + 0.01) / 3)}


def test_constant_scores_for_a_correlation_is_a_reason() -> None:
    result = compute(["spearman", "pearson", "kendall_tau"], [1, 2, 3], [4, 4, 4])
    assert all("constant" in reason for reason in result["errors"].values())
    assert result["values"] == {}


def test_empty_input_is_a_reason() -> None:
    result = compute(["roc_auc", "mean", "ece", "scale_validity"], [], [])
    assert set(result["errors"]) == {"roc_auc", "mean", "ece", "scale_validity"}


def test_cohen_kappa_median_cut_and_fleiss_through_the_registry() -> None:
    judges = [[0.1, 0.9, 0.4, 0.8, 0.2, 0.7], [0.2, 0.8, 0.6, 0.9, 0.1, 0.4], [0.0, 1.0, 0.5, 0.6, 0.3, 0.9]]
    result = compute(["fleiss_kappa"], ratings=judges, params={"median_cut": True})
    assert -1 <= result["values"]["fleiss_kappa"] <= 1
    pair = compute(["cohen_kappa"], judges[0], judges[1], params={"median_cut": True})
    # Medians .55 and .5, cut with >=: 0 1 0 1 0 1 and 0 1 1 1 0 0 -> p_o = 4/6, p_e = 1/2 -> kappa = 1/3.
    assert pair["values"]["cohen_kappa"] == pytest.approx(1 / 3)


def test_success_at_turn_and_kaplan_meier_through_the_registry_with_whole_trajectories() -> None:
    groups = ["a", "a", "b", "c", "c", "d"]
    turns = [1, 2, 1, 1, 2, 1]
    accepted = [0, 1, 1, 0, 0, 1]
    result = compute(
        ["success_at_turn", "kaplan_meier", "success_after_failure"],
        y_true=accepted,
        groups=groups,
        params={"turn": turns},
        bootstrap=40,
        cluster=groups,
    )
    assert result["values"]["success_at_turn"] == {"1": 0.5, "2": 0.75}
    assert result["values"]["success_after_failure"] == 0.5
    assert set(result["ci"]["success_at_turn"]) == {"1", "2"}
    # Every resample reports the full sample's turns, even one that lacks the two-turn trajectories.
    assert "success_at_turn" not in result["bootstrap"]["dropped"]
    assert set(result["ci"]["kaplan_meier"]) == {"1", "2"}
    with pytest.raises(MetricInputError, match="splits a trajectory"):
        compute(["success_at_turn"], y_true=accepted, groups=groups, params={"turn": turns}, bootstrap=10)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"metrics": ["roc_auc"], "y_true": [0, 1, 1], "y_score": [0.1, 0.2]}, "y_score"),
        ({"metrics": ["roc_auc"], "y_true": [0, 2], "y_score": [0.1, 0.2]}, "y_true"),
        ({"metrics": ["roc_auc"], "y_true": [0, "yes"], "y_score": [0.1, 0.2]}, "y_true"),
        ({"metrics": ["auc"], "y_true": [0, 1], "y_score": [0.1, 0.2]}, "metrics"),
        ({"metrics": ["mcc"], "y_true": [0, 1], "y_score": [0.1, 0.2], "params": {"treshold": 0.3}}, "params.treshold"),
        ({"metrics": ["ece"], "y_true": [0, 1], "y_score": [0.1, 0.2], "params": {"bins": 2.5}}, "params.bins"),
        ({"metrics": ["mcc_oof"], "y_true": [0, 1], "y_score": [0.1, 0.2]}, "groups"),
        ({"metrics": ["log_loss"], "y_true": [0, 1], "y_score": [0.1, 1.2]}, "y_score"),
        ({"metrics": ["icc"], "y_true": [0, 1]}, "ratings"),
        ({"metrics": ["success_at_turn"], "y_true": [0, 1], "groups": [1, 1]}, "params.turn"),
        ({"metrics": ["icc"], "ratings": [[1, 2], [1, 2]], "params": {"icc_form": "1"}}, "params.icc_form"),
        (
            {"metrics": ["cohen_kappa"], "y_true": [0, 1], "y_score": [0, 1], "params": {"median_cut": "yes"}},
            "params.median_cut",
        ),
        ({"metrics": ["mean"], "y_score": [0.1], "params": {"target": "labels"}}, "params.target"),
    ],
)
def test_malformed_input_raises_naming_the_argument(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(MetricInputError, match=named.replace(".", r"\.")):
        compute(**kwargs)


def test_metric_input_error_is_a_value_error() -> None:
    assert issubclass(MetricInputError, ValueError)
