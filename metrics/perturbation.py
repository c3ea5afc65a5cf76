"""Defect sensitivity from the perturbation study: arm discrimination, reactions, severity gradient (paper 001, VI-B).

For every mutant the shift is ``delta = p(mutant) - p(seed)`` and the drop is ``-delta``, both under the same judge
and condition. The analysis is restricted to the primary subset: mutants whose seed the same judge scored at or above
0.5 (V-D), because a judge that misjudged the original can be neither credited nor blamed for the mutant.

- Arm discrimination ``A_j`` = P(control shift > semantic shift), ties counting one half: the ROC-AUC of the drop
  as a separator of the semantic arm (positive) from the control arm (scikit-learn).
- Reactions: per arm, the mutants whose probability drops by more than 0.05, of those scored. Drops are rounded to
  12 decimals before the comparison so that a decimal drop of exactly 0.05 (0.90 - 0.85 evaluates to
  0.05000000000000004 in binary) is not counted as "more than 0.05".
- Confirmed-defect ``A_j`` (:func:`confirmed_mask`): the same A_j over the mutants that differential fuzzing
  confirms, i.e. semantic mutants with ``df_score < 1`` (they behave differently from their seed on some test) and
  control mutants with ``df_score == 1`` (they behave the same on every test); a semantic mutant that behaves like
  its seed is an equivalent mutant, not a defect, and a mutant without a df_score is not confirmed either way.
- Severity gradient ``rho_j``: Spearman's correlation between operator severity (1..4) and the drop over the
  semantic arm; control mutants carry no severity and are left out.

Intervals resample seeds (the bootstrap's clusters), since the mutants of one program are not independent.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from sklearn import metrics as skm

from metrics.agreement import spearman
from metrics.arrays import BoolArray, FloatArray, as_float_vector, as_label_vector, check_same_length
from metrics.errors import MetricInputError, UndefinedMetricError

# The arms by their string values (the platform's `Arm` enumeration; this library imports nothing of the platform).
SEMANTIC = "semantic"
CONTROL = "control"
PRIMARY_THRESHOLD = 0.5
REACTION_DROP = 0.05


def primary_subset(seed_score: ArrayLike, threshold: float = PRIMARY_THRESHOLD) -> BoolArray:
    """Mask of the mutants whose seed the judge scored ``>= threshold``."""
    return as_float_vector(seed_score, "seed_score") >= threshold


def score_drop(mutant_score: ArrayLike, seed_score: ArrayLike) -> FloatArray:
    """``p(seed) - p(mutant)`` for every mutant: positive when the judge's probability fell."""
    mutant = as_float_vector(mutant_score, "y_score")
    seed = as_float_vector(seed_score, "seed_score")
    check_same_length(y_score=mutant, seed_score=seed)
    return seed - mutant


def semantic_mask(arm: ArrayLike) -> BoolArray:
    """True for semantic-arm mutants, False for controls; MetricInputError for any other arm name."""
    arms = as_label_vector(arm, "arm").astype(str)
    unknown = sorted(set(arms.tolist()) - {SEMANTIC, CONTROL})
    if unknown:
        raise MetricInputError(f"arm must hold 'semantic' or 'control', found {unknown[0]!r}")
    return arms == SEMANTIC


def confirmed_mask(arm: ArrayLike, df_score: ArrayLike) -> BoolArray:
    """True for the mutants differential fuzzing confirms: semantic with ``df_score < 1``, control with ``df_score ==
    1``; False for the rest, and for a mutant without a df_score (None/NaN)."""
    semantic = semantic_mask(arm)
    scores = as_float_vector(df_score, "df_score", allow_missing=True)
    check_same_length(arm=semantic, df_score=scores)
    known = ~np.isnan(scores)
    confirmed: BoolArray = known & np.where(semantic, scores < 1.0, scores == 1.0)
    return confirmed


def arm_discrimination(drop: ArrayLike, arm: ArrayLike) -> float:
    """``A_j``: the ROC-AUC of the drop separating semantic mutants from controls.

    Raises:
        MetricInputError: lengths differ, unknown arm.
        UndefinedMetricError: either arm empty.
    """
    drops = as_float_vector(drop, "drop")
    semantic = semantic_mask(arm)
    check_same_length(drop=drops, arm=semantic)
    n_semantic = int(semantic.sum())
    if n_semantic == 0 or n_semantic == semantic.size:
        raise UndefinedMetricError(
            f"arm discrimination needs both arms; got {n_semantic} semantic and {semantic.size - n_semantic} control"
        )
    return float(skm.roc_auc_score(semantic.astype(np.int64), drops))


def reactions(drop: ArrayLike, arm: ArrayLike, min_drop: float = REACTION_DROP) -> dict[str, float]:
    """Per arm: how many mutants dropped by more than ``min_drop``, how many were scored, and the share.

    Keys: ``semantic_reacted``, ``semantic_scored``, ``semantic_share``, and the same for ``control``; an arm with
    no scored mutant has no share key (its share is undefined).

    Raises:
        UndefinedMetricError: no mutant at all.
    """
    drops = as_float_vector(drop, "drop")
    semantic = semantic_mask(arm)
    check_same_length(drop=drops, arm=semantic)
    if drops.size == 0:
        raise UndefinedMetricError("reactions are undefined: no mutant in the subset")
    reacted = np.round(drops, 12) > min_drop
    result: dict[str, float] = {}
    for name, members in ((SEMANTIC, semantic), (CONTROL, ~semantic)):
        scored = int(members.sum())
        result[f"{name}_reacted"] = int(reacted[members].sum())
        result[f"{name}_scored"] = scored
        if scored:
            result[f"{name}_share"] = float(reacted[members].mean())
    return result


def severity_gradient(drop: ArrayLike, severity: ArrayLike) -> float:
    """``rho_j``: Spearman's correlation between severity and drop over the mutants that have a severity.

    Args:
        drop: score drop of every mutant.
        severity: operator severity (1..4) of every mutant, NaN/None for control mutants.

    Raises:
        UndefinedMetricError: fewer than two semantic mutants, or constant severity or drop.
    """
    drops = as_float_vector(drop, "drop")
    severities = as_float_vector(severity, "severity", allow_missing=True)
    check_same_length(drop=drops, severity=severities)
    rated = ~np.isnan(severities)
    return spearman(severities[rated], drops[rated], names=("severity", "drop"))
