"""III-B1's rule sequences: min ceiling = target, reproducible across processes (no `hash()`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.lib.mutation.axiom_rules import load_rules
from services.perturb.axiom.sequences import sample_rule_sequence

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("target", [1, 2, 3, 4, 5])
def test_the_minimum_ceiling_of_every_sampled_sequence_is_the_target(target: int) -> None:
    rules = load_rules()
    lengths = set()
    for draw in range(200):
        sequence = sample_rule_sequence(rules, target, f"job-1:req-7:{draw}")
        assert min(rule.ceiling for rule in sequence) == target
        assert all(rule.ceiling >= target for rule in sequence)
        assert len({rule.id for rule in sequence}) == len(sequence)  # distinct rules
        lengths.add(len(sequence))
    assert lengths == {1, 2, 3}
    if target == 5:
        # Exemplar augmentation uses U_5 only (III-B2).
        assert all(rule.ceiling == 5 for draw in range(20) for rule in sample_rule_sequence(rules, 5, str(draw)))


def test_a_sequence_is_a_function_of_its_seed() -> None:
    rules = load_rules()
    first = [rule.id for rule in sample_rule_sequence(rules, 2, "seed-a")]
    assert [rule.id for rule in sample_rule_sequence(rules, 2, "seed-a")] == first
    others = {tuple(rule.id for rule in sample_rule_sequence(rules, 2, f"seed-{i}")) for i in range(30)}
    assert len(others) > 20
    assert len(sample_rule_sequence(rules, 3, "x", length=2)) == 2


def test_targets_outside_1_to_5_are_refused() -> None:
    rules = load_rules()
    for target in (0, 6):
        with pytest.raises(ValueError):
            sample_rule_sequence(rules, target, "s")


_PRINT_SEQUENCES = """
import json
from services.lib.mutation.axiom_rules import load_rules
from services.perturb.axiom.sequences import sample_rule_sequence
rules = load_rules()
drawn = [sample_rule_sequence(rules, t, f"job:{t}:{d}") for t in range(1, 6) for d in range(5)]
print(json.dumps([[rule.id for rule in sequence] for sequence in drawn]))
"""


def test_sequences_are_the_same_in_processes_with_different_hash_seeds() -> None:
    outputs = []
    for hash_seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", _PRINT_SEQUENCES], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1] == outputs[2]
    rules = load_rules()
    here = [[r.id for r in sample_rule_sequence(rules, t, f"job:{t}:{d}")] for t in range(1, 6) for d in range(5)]
    assert here == outputs[0]
