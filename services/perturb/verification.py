"""What a mutant's execution says about it, checked against its arm (goes beyond paper 001, whose defects were only
intended, VII(iv)): a mutant that does not compile is discarded, a semantic mutant that still passes every test is
a suspected equivalent mutant, and a control that fails any test is an operator bug (controls must preserve
behaviour)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from services.kernel.contracts import Arm, Verdict
from services.perturb.axiom.synthesis import target_matches


@dataclass(frozen=True)
class Verification:
    """The findings stored in a mutant's `mutation["verification"]`."""

    verdict: str | None
    compiles: bool  # it built (CE: discarded, never judged)
    verified: bool  # its tests ran to a verdict (not CE, not an internal error)
    equivalent_suspect: bool  # semantic arm, yet it passes every test
    operator_bug: bool  # control arm, yet it fails a test

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def verify(arm: str | None, verdict: str | None) -> Verification:
    """The findings for a mutant of `arm` whose execution ended with `verdict` (None: no execution stored)."""
    compiles = verdict is not None and verdict != Verdict.CE
    verified = compiles and verdict != Verdict.IE
    passes = verdict == Verdict.AC
    return Verification(
        verdict=verdict,
        compiles=compiles,
        verified=verified,
        equivalent_suspect=verified and arm == Arm.SEMANTIC and passes,
        operator_bug=verified and arm == Arm.CONTROL and not passes,
    )


def axiom_kept(record: Mapping[str, Any], verdict: str | None) -> bool:
    """Whether a program AXIOM synthesised is kept (paper 000 III-B2, III-B3): its test outcome must match its
    target score (`target_matches`: 3-5 pass every test, 1-2 ran and failed at least one; a build failure matches
    nothing). A 0-point pair (III-B4) is kept whatever its execution says: it is incorrect by definition."""
    target = int(record["target_score"])
    return True if target == 0 else target_matches(target, verdict)
