"""What every offline method returns (`OfflineScore`) or raises (`OfflineUnavailable`, or its kind
`OfflineNotApplicable`), and the 0..5 grade."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from services.lib import codesim
from services.lib.codesim import UnsupportedLanguage


class OfflineUnavailable(Exception):
    """This judge could not score this attempt on this worker (its package or tool is missing, there is no sandbox,
    the tool timed out, ran out of memory or failed): the judgment is recorded `failed` with str(exc) as the
    reason, and a re-judge may score it."""


class OfflineNotApplicable(OfflineUnavailable):
    """This judge does not apply to this attempt, on any worker (no reference solution in its language, no public
    tests, no linter for its language, empty or oversized source, a language the method does not read): the
    judgment is recorded `not_applicable` with str(exc) as the reason, and it is never retried. A kind of
    `OfflineUnavailable`, so a caller that only asks "is there a score?" catches that one."""


@dataclass(frozen=True)
class OfflineScore:
    """One offline judgment.

    Attributes:
        p_ac: In [0, 1]: the estimate that the attempt is accepted (sample_tests), the raw similarity
            (reference-based methods) or the lint quality (lint).
        score: The 0..5 scale, an integer-valued float.
        fields: The rubric fields stored with the row (JSON-serialisable). sample_tests: exactly
            {"p_ac", "s_algo", "s_robust", "rationale"}; the others: {"raw", "score", "rationale", ...detail}.
        rationale: A short human-readable justification (also in `fields`).
    """

    p_ac: float | None
    score: float
    fields: dict[str, Any]
    rationale: str


def round_half_up(value: float) -> int:
    # The tolerance keeps float noise (e.g. 2.4999999999999996 for an exact half) from deciding a grade.
    return math.floor(value + 0.5 + 1e-9)


def grade(raw: float) -> int:
    """IV-D1's normalisation over the theoretical range [0, 1]: round(5 * raw), raw clamped."""
    return round_half_up(5 * min(1.0, max(0.0, raw)))


def check_language(language: str) -> None:
    try:
        codesim.check_language(language)
    except UnsupportedLanguage as exc:
        raise OfflineNotApplicable(str(exc)) from None
