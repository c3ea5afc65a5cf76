"""AXIOM's representative selection (paper 000, III-C1): m representatives per data source and target score, by
farthest-point selection over normalised token edit distance (`TokenDistance`, the same quantity as
`services.lib.codesim.normalized_edit_distance`). Pure; the perturb service's synthesis job runs it on the
benchmark's programs (services/perturb/synthesis.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rapidfuzz.distance import Levenshtein

from services.lib.codesim import code_tokens
from services.perturb.axiom.disruption import ProgramRef
from services.perturb.axiom.sequences import derive_seed

PAPER_SELECT_M = 90  # IV-A: representatives per data source per target score


class TokenDistance:
    """L_ij: the token edit distance between programs i and j (Pygments tokens without comments and whitespace)
    normalised by the longer stream: exactly `services.lib.codesim.normalized_edit_distance`, with each program
    tokenised once instead of once per pair. Programs in different languages are at distance 1."""

    def __init__(self, programs: Sequence[ProgramRef]) -> None:
        self.programs = programs
        self._tokens: dict[int, list[str]] = {}

    def tokens(self, index: int) -> list[str]:
        if index not in self._tokens:
            program = self.programs[index]
            self._tokens[index] = code_tokens(program.code, program.language)
        return self._tokens[index]

    def __call__(self, i: int, j: int) -> float:
        if self.programs[i].language != self.programs[j].language:
            return 1.0
        first, second = self.tokens(i), self.tokens(j)
        longest = max(len(first), len(second))
        return 0.0 if longest == 0 else Levenshtein.distance(first, second) / longest


def farthest_point_selection(
    n: int, m: int, distance: Callable[[int, int], float], seed: str, *, start: int | None = None
) -> list[int]:
    """m of n items by the farthest-point heuristic (III-C1): start from a random item (drawn from `seed`, or
    `start`); then repeatedly add the unselected item whose minimum distance to the selected set is largest (ties:
    the lowest index). Needs only about m * n distances. Returns the indices in the order chosen (all n if m >= n)."""
    if n <= 0 or m <= 0:
        return []
    first = start if start is not None else random.Random(derive_seed("axiom-select", seed)).randrange(n)
    selected = [first]
    nearest = [distance(first, j) if j != first else 0.0 for j in range(n)]
    chosen = {first}
    while len(selected) < min(m, n):
        best = max((j for j in range(n) if j not in chosen), key=lambda j: (nearest[j], -j))
        selected.append(best)
        chosen.add(best)
        for j in range(n):
            if j not in chosen:
                nearest[j] = min(nearest[j], distance(best, j))
    return selected


@dataclass(frozen=True)
class ScoredProgram:
    """A synthesised program with its target score (and where it came from, for grouping by data source)."""

    program: ProgramRef
    target_score: int
    source: str = ""


def select_representatives(
    programs: Sequence[ScoredProgram],
    m: int = PAPER_SELECT_M,
    seed: str = "0",
    *,
    distance_factory: Callable[[Sequence[ProgramRef]], Callable[[int, int], float]] = TokenDistance,
) -> dict[tuple[str, int], list[ScoredProgram]]:
    """III-C1: for each (data source, target score), m representatives by farthest-point selection over
    normalised token edit distance. Keys are (source, score); each list is in the order chosen."""
    groups: dict[tuple[str, int], list[ScoredProgram]] = {}
    for item in programs:
        groups.setdefault((item.source, item.target_score), []).append(item)
    selected: dict[tuple[str, int], list[ScoredProgram]] = {}
    for key in sorted(groups):
        members = groups[key]
        distance = distance_factory([member.program for member in members])
        indices = farthest_point_selection(len(members), m, distance, derive_seed(seed, key[0], key[1]))
        selected[key] = [members[i] for i in indices]
    return selected
