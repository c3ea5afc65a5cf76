"""III-B1's rule sequences: u_1..u_N with min_i c(u_i) = the target score, drawn reproducibly from a seed string.

Kept apart from synthesis.py so that drawing a sequence needs nothing but the rule file (no LLM client, no metrics).
"""

from __future__ import annotations

import random

from services.lib.mutation.axiom_rules import Rule, RuleSet

DEFAULT_MAX_RULES = 3  # rules per sequence, drawn uniformly from 1..this (the paper does not give N; see docs)


def derive_seed(*parts: object) -> str:
    """A seed string from its parts (`random.Random(str)` hashes it with SHA-512: the same in every process)."""
    return ":".join(str(part) for part in parts)


# --- III-B1: rule sequences ---------------------------------------------------------------------------------------


def sample_rule_sequence(
    rules: RuleSet, target_score: int, seed: str, *, max_rules: int = DEFAULT_MAX_RULES, length: int | None = None
) -> tuple[Rule, ...]:
    """u_1..u_N with min_i c(u_i) = target_score (III-B1): one rule of ceiling exactly `target_score` and N-1
    distinct others of ceiling >= `target_score`, in a random order. N is `length`, or uniform in 1..`max_rules`
    (capped by the rules available). Reproducible: the same arguments give the same sequence in any process.

    Raises:
        ValueError: a target outside 1..5 (0-point programs come from context disruption, III-B4), a target
            ceiling without rules, or a bad length.
    """
    if target_score not in (1, 2, 3, 4, 5):
        raise ValueError(f"a perturbation target is 1..5 (0 comes from context disruption), got {target_score}")
    exact = rules.with_ceiling(target_score)
    allowed = rules.at_least(target_score)
    if not exact:
        raise ValueError(f"no rule has ceiling {target_score}")
    rng = random.Random(derive_seed("axiom-sequence", seed, target_score))
    n = length if length is not None else rng.randint(1, max(1, max_rules))
    n = min(n, len(allowed))
    if n < 1:
        raise ValueError(f"a sequence has at least one rule, got length {length}")
    anchor = rng.choice(exact)
    others = rng.sample([rule for rule in allowed if rule.id != anchor.id], n - 1)
    sequence = [anchor, *others]
    rng.shuffle(sequence)
    assert min(rule.ceiling for rule in sequence) == target_score
    return tuple(sequence)
