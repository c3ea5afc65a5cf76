"""What a mutant's execution says about it, checked against its arm (goes beyond paper 001, whose defects were only
intended, VII(iv)): a mutant that does not compile is discarded, a semantic mutant that still passes every test is
a suspected equivalent mutant, and a control that fails any test is an operator bug (controls must preserve
behaviour).

`verify_mutant` is the verify stage of every mutant (services/kernel/registry.py): it reads the mutant's execution
and records what it says against the arm (`verify`); a mutant that did not build or run to a verdict ends there,
unjudged. A program synthesised by AXIOM is kept only if its test outcome matches its target score (`axiom_kept`);
one that does not is marked not kept and ends there, unjudged, and its slot draws again (synthesis.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select

from services.kernel import attempts, queue, telemetry
from services.kernel.contracts import Arm, Stage, Verdict
from services.kernel.db import session_scope
from services.kernel.models import Execution
from services.kernel.registry import Task
from services.perturb.axiom.synthesis import target_matches
from services.perturb.synthesis import advance, settle_draw


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


@queue.task(Task.VERIFY_MUTANT)
async def verify_mutant(ctx: dict[str, Any], attempt_id: str) -> None:
    """The verify stage of a mutant: its execution checked against its arm; unbuilt or unrun mutants end here.
    A synthesised program (an `axiom` record) is kept only if its test outcome matches its target score; if not, it
    ends here unjudged, marked not kept, and its slot draws again."""
    synthesis_job: str | None = None
    async with session_scope() as session:
        mutant = await attempts.claim(session, attempt_id, Stage.VERIFY)
        if mutant is None:
            return
        verdict = await session.scalar(
            select(Execution.verdict).where(Execution.attempt_id == attempt_id, Execution.run == 0)
        )
        findings = verify(mutant.arm, verdict)
        arm = mutant.arm or "none"
        mutation = {**(mutant.mutation or {}), "verification": findings.as_json()}
        record = mutation.get("axiom")
        values: dict[str, Any] = {}
        if isinstance(record, dict):
            kept = axiom_kept(record, verdict)
            mutation["axiom"] = {**record, "kept": kept}
            last = not kept
            if kept:  # the ground-truth score the `axiom` report reads (`label_score`)
                values["label"] = {**(mutant.label or {}), "score": int(record["target_score"])}
        else:
            last = not findings.verified
        moved, following = await attempts.finish_stage(
            session, attempt_id, Stage.VERIFY, last=last, mutation=mutation, **values
        )
        # A program drawn for a slot settles its draw (0-point pairs are not drawn: they fill no slot).
        if moved and isinstance(record, dict) and record.get("draw") is not None and mutant.job_id is not None:
            synthesis_job = mutant.job_id
            await settle_draw(session, synthesis_job, str(record["slot"]), int(record["draw"]), kept=not last)
    await attempts.after_stage(attempt_id, moved, following, tenant=mutant.tenant)
    if moved:
        telemetry.mutants_verified.labels(arm, _verification_outcome(findings)).inc()
    if synthesis_job is not None:
        await advance(synthesis_job)


def _verification_outcome(findings: Verification) -> str:
    """One bounded word for a mutant's verification (telemetry): did it run, and did its arm hold."""
    if not findings.verified:
        return "unbuilt" if not findings.compiles else "internal_error"
    if findings.equivalent_suspect:
        return "equivalent_suspect"
    if findings.operator_bug:
        return "operator_bug"
    return "confirmed"
