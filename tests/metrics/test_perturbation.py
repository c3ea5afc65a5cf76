"""Arm discrimination A_j, reactions and the severity gradient rho_j (paper 001, VI-B)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from metrics import MetricInputError, UndefinedMetricError, compute
from metrics.perturbation import CONTROL, SEMANTIC, arm_discrimination, reactions, score_drop, severity_gradient
from services.kernel.contracts import Arm


def test_the_arms_are_the_platforms_arm_values() -> None:
    """The library names the arms by their string values; they are the kernel's `Arm` values, all of them."""
    assert {SEMANTIC, CONTROL} == {arm.value for arm in Arm}
    assert (SEMANTIC, CONTROL) == (Arm.SEMANTIC.value, Arm.CONTROL.value)


def test_arm_discrimination_worked_example() -> None:
    # Semantic drops .3 .1 .0, control drops .0 -.05. Of the 6 (semantic, control) pairs the semantic drop is larger
    # in 5 and tied in 1 (.0 vs .0): A = (5 + 0.5) / 6.
    drops = [0.3, 0.1, 0.0, 0.0, -0.05]
    arms = ["semantic", "semantic", "semantic", "control", "control"]
    assert arm_discrimination(drops, arms) == pytest.approx(5.5 / 6)


def test_arm_discrimination_is_the_probability_a_control_shift_exceeds_a_semantic_shift() -> None:
    rng = np.random.default_rng(0)
    shift = np.round(rng.normal(-0.1, 0.2, 80), 2)
    arms = np.where(rng.random(80) < 0.6, "semantic", "control")
    control, semantic = shift[arms == "control"], shift[arms == "semantic"]
    greater = (control[:, None] > semantic[None, :]).mean() + 0.5 * (control[:, None] == semantic[None, :]).mean()
    assert arm_discrimination(-shift, arms) == pytest.approx(greater)
    assert arm_discrimination(-shift, arms) == pytest.approx(skm.roc_auc_score(arms == "semantic", -shift))


def test_reactions_count_drops_strictly_above_005_in_decimal_terms() -> None:
    # 0.90 - 0.85 is 0.05000000000000004 in binary floating point, and must not count as "more than 0.05".
    drops = score_drop([0.85, 0.80, 0.90, 0.95], [0.90, 0.90, 0.90, 0.90])
    result = reactions(drops, ["semantic", "semantic", "control", "control"])
    assert result == {
        "semantic_reacted": 1,
        "semantic_scored": 2,
        "semantic_share": 0.5,
        "control_reacted": 0,
        "control_scored": 2,
        "control_share": 0.0,
    }
    assert "control_share" not in reactions([0.2], ["semantic"])


def test_severity_gradient_matches_scipy_and_ignores_controls() -> None:
    drops = [0.0, 0.1, 0.05, 0.3, 0.4, 0.9]
    severity = [1, 2, 2, 3, 4, np.nan]
    assert severity_gradient(drops, severity) == pytest.approx(stats.spearmanr([1, 2, 2, 3, 4], drops[:5]).statistic)
    with pytest.raises(UndefinedMetricError, match="severity is constant"):
        severity_gradient([0.1, 0.2], [2, 2])


def test_registry_restricts_to_the_primary_subset() -> None:
    seed = [0.9, 0.9, 0.9, 0.4, 0.4, 0.9]
    mutant = [0.2, 0.9, 0.7, 0.4, 0.0, 0.9]
    arm = ["semantic", "control", "semantic", "semantic", "control", "control"]
    severity = [3, None, 1, 2, None, None]
    result = compute(
        ["arm_discrimination", "reactions", "severity_gradient"],
        y_score=mutant,
        params={"seed_score": seed, "arm": arm, "severity": severity},
    )
    # Primary subset (seed >= .5): drops .7 (sem, sev 3), 0 (ctl), .2 (sem, sev 1), 0 (ctl) -> A = 1.
    assert result["values"]["arm_discrimination"] == 1.0
    assert result["values"]["reactions"]["semantic_reacted"] == 2
    assert result["values"]["reactions"]["control_scored"] == 2
    assert result["values"]["severity_gradient"] == pytest.approx(1.0)
    only_controls = compute(
        ["arm_discrimination"], y_score=mutant, params={"seed_score": seed, "arm": arm, "primary_threshold": 0.95}
    )
    assert "both arms" in only_controls["errors"]["arm_discrimination"]


def test_malformed_perturbation_input() -> None:
    with pytest.raises(MetricInputError, match="arm"):
        arm_discrimination([0.1, 0.2], ["semantic", "mutant"])
    with pytest.raises(MetricInputError, match="params.seed_score is required"):
        compute(["arm_discrimination"], y_score=[0.1], params={"arm": ["semantic"]})
    with pytest.raises(MetricInputError, match="params.severity is missing for a semantic mutant"):
        compute(
            ["severity_gradient"],
            y_score=[0.1, 0.2],
            params={"seed_score": [0.9, 0.9], "arm": ["semantic", "semantic"], "severity": [1, None]},
        )
