"""Perturbations: accepted attempts to perturb into verified mutants (paper 001), optionally judged and confirmed
by differential fuzzing (paper 002)."""

from __future__ import annotations

from pydantic import Field, field_validator

from gateway.schemas.common import INT64_MAX, RequestBody, within_limit

# One request's work is bounded: this many seeds, and (services/perturb/perturbation.py) at most
# MAX_MUTANTS_PER_SEED mutants of each, even with all_sites. Its mutants are attempts: the worker creates them as
# the tenant's queued_attempts (and, judged, judgments_per_day; confirmed, queued_pairs) leave room, and waits.
MAX_SEEDS_PER_JOB = 200


class PerturbationsIn(RequestBody):
    attempt_ids: list[str] = Field(min_length=1, description="Accepted attempts (verdict AC) to use as seeds.")
    operators: list[str] | None = Field(
        default=None, min_length=1, description="Operator names; default: every one that applies."
    )
    seed: int = Field(
        default=0,
        ge=-INT64_MAX,
        le=INT64_MAX,
        description="Chooses each operator's site reproducibly (paper 001: one per seed).",
    )
    all_sites: bool = Field(default=False, description="Every site of every operator instead of one.")
    judge: bool = Field(default=False, description="Judge every verified mutant and its seed under blind.")
    judges: list[str] | None = Field(default=None, description="With judge: these judges (default: all enabled).")
    confirm: bool = Field(
        default=False,
        description="Also confirm every mutant by differential fuzzing against its seed (paper 002, Algorithm 1), "
        "on inputs from the problem's input_spec or derived from its tests: a control must behave as its seed on "
        "every input, a semantic mutant must not. Runs as a similarity job (`confirm_job_id`).",
    )
    confirm_inputs: int = Field(default=500, ge=1, le=10_000, description="With confirm: N inputs per repetition.")
    confirm_repeats: int = Field(default=2, ge=1, le=20, description="With confirm: R repetitions.")

    @field_validator("attempt_ids")
    @classmethod
    def _within_limit(cls, ids: list[str]) -> list[str]:
        return list(dict.fromkeys(within_limit(ids, MAX_SEEDS_PER_JOB, "seeds", "perturbation job")))
