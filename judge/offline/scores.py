"""What every offline method returns (`OfflineScore`) or raises (`OfflineUnavailable`), and the 0..5 grade."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from services.lib import codesim
from services.lib.codesim import UnsupportedLanguage


class OfflineUnavailable(Exception):
    """This judge cannot score this attempt (no reference in a usable language, no public tests, unsupported
    language, tool missing); str(exc) is the recorded reason."""


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
        raise OfflineUnavailable(str(exc)) from None
