"""Benchmarks: an AXIOM synthesis job as requested (paper 000 III-B, III-C; docs/axiom.md): the seeds, the target
scores, M and m, and the LLM that generates."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from gateway.schemas.common import INT64_MAX, RequestBody, within_limit
from services.kernel.plans import DEFAULT_MAX_DRAWS, PAPER_M, PAPER_SELECT_M

# Bounds on what one request may cost (LLM calls, sandbox runs, and representative selection, whose token edit
# distances grow with the square of the programs' length): seeds per job, and a seed's size.
MAX_SEEDS_PER_JOB = 50
MAX_SEED_BYTES = 32 * 1024

Target = Annotated[int, Field(ge=0, le=4)]


class SynthesizeIn(RequestBody):
    attempt_ids: list[str] = Field(
        default_factory=list,
        description="Accepted attempts (done, verdict AC): the 5-point programs to perturb. Their problem's "
        "statement is the requirement.",
    )
    problem_ids: list[str] = Field(
        default_factory=list, description="Problems: each one's oldest accepted attempt is its 5-point reference."
    )
    targets: list[Target] | None = Field(
        default=None,
        description="Target scores: 1-4 by deteriorative perturbation (III-B3), 0 by context disruption (III-B4, "
        "needs two requirements). Default 0-4, or 1-4 with one requirement. 5-point programs are the seeds plus "
        "exemplar augmentation (III-B2), which always tops each requirement's pool up to m.",
    )
    # Paper 000 IV-A's M and m, and the draws per slot: the plan's defaults (services/kernel/plans.py).
    m: int = Field(default=PAPER_M, ge=1, le=20, description="Programs per target score per requirement (M).")
    select: int = Field(
        default=PAPER_SELECT_M, ge=1, le=500, description="Representatives per target score (III-C1's m)."
    )
    max_draws: int = Field(
        default=DEFAULT_MAX_DRAWS,
        ge=1,
        le=10,
        description="Draws per program before it is given up (the generation-validation cycle's bound).",
    )
    seed: int = Field(
        default=0,
        ge=-INT64_MAX,
        le=INT64_MAX,
        description="Makes every draw reproducible (rule sequences, parents, samples).",
    )
    llm: str | list[str] = Field(
        description="A configured LLM judge (or several: one is sampled per step) whose endpoint generates."
    )
    judge: bool = Field(default=False, description="Judge every kept program and every seed under blind.")
    judges: list[str] | None = Field(default=None, description="With judge: these judges (default: all enabled).")

    @field_validator("attempt_ids", "problem_ids")
    @classmethod
    def _within_limit(cls, ids: list[str]) -> list[str]:
        return list(dict.fromkeys(within_limit(ids, MAX_SEEDS_PER_JOB, "ids", "synthesis job")))

    @field_validator("targets")
    @classmethod
    def _distinct(cls, targets: list[int] | None) -> list[int] | None:
        if targets is not None and not targets:
            raise ValueError("name at least one target score")
        return sorted(set(targets), reverse=True) if targets is not None else None
