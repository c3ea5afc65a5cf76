"""Algorithm 1 of paper 002 (LoCaL, 3.3.2): the differential fuzzing similarity of a code pair.

R repetitions; repetition i draws N fresh inputs, runs both programs on each within a time budget T, and scores
``matches / N``. A repetition that ran out of its budget is excluded; the result is the mean of the others, or -1
when every repetition timed out. Running the programs is the executor's (in nsjail); this module only scores.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from services.kernel.contracts import TimeoutRule as TimeoutRule

# LoCaL's settings (3.3.2): 2,000 inputs for a function-level pair, 1,000 for a program-level pair, 5 repetitions.
DEFAULT_INPUTS_FUNCTION = 2000
DEFAULT_INPUTS_PROGRAM = 1000
DEFAULT_REPEATS = 5
ALL_TIMED_OUT = -1.0
# Which timed-out repetitions are excluded: "paper", any (Algorithm 1); "strict", only those the reference ran out
# of time on, the candidate's unanswered inputs then counting as mismatches (a program cannot have the repetitions
# it would get wrong excluded by stalling on them). The rule is a contract (a plan stores it): defined there.
TIMEOUT_RULES: tuple[str, ...] = ("paper", "strict")


@dataclass(frozen=True)
class Repetition:
    """One repetition of Algorithm 1: ``matches`` of ``n`` inputs gave identical results; ``timed_out`` when the
    repetition's time budget ran out (it is then excluded, whatever it matched)."""

    index: int
    n: int
    matches: int
    timed_out: bool

    @property
    def score(self) -> float | None:
        """``matches / n``, or None for a timed-out repetition."""
        return None if self.timed_out or self.n == 0 else self.matches / self.n


def df_score(repetitions: Sequence[Repetition]) -> float:
    """The mean of the repetitions' scores, timed-out ones excluded; -1 when none finished (Algorithm 1)."""
    scores = [s for s in (r.score for r in repetitions) if s is not None]
    if not scores:
        return ALL_TIMED_OUT
    return sum(scores) / len(scores)


def repetition_seed(seed: int, index: int) -> int:
    """The input-generation seed of repetition ``index`` of a pair scored with ``seed``: fresh inputs for every
    repetition (as Algorithm 1 generates them inside the loop), the same ones for the same seed in any process."""
    digest = hashlib.sha256(f"tribunal-df:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")
