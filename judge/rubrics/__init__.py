"""Judge rubrics: one Pydantic model each, from which the JSON schema and the range checks both derive.

A rubric also names its versioned prompt file (`prompts/<name>.v<N>.md`); the version (file version plus a hash
of the text) is stored with every judgment, so rows made under different prompts are never mixed silently.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.kernel.contracts import Rubric
from services.lib.llm import ReplySchema, strict_json_schema

PROMPTS = Path(__file__).parent / "prompts"


class _Output(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CocreationOutput(_Output):
    """The unified judge schema of the co-creation study (IV-B1)."""

    p_ac: float = Field(ge=0, le=1, description="Probability that the submission is accepted.")
    s_algo: int = Field(ge=1, le=5, description="Algorithmic adequacy, 1..5.")
    s_robust: int = Field(ge=1, le=5, description="Robustness and constraint handling, 1..5.")
    rationale: str = Field(description="A short justification.")


class RefinementEffortOutput(_Output):
    """AXIOM's 0-5 refinement-effort scale (III-A), asked ICE-Score style: evaluation steps, then the score."""

    evaluation_steps: list[str] = Field(min_length=1, description="The evaluation steps, in order.")
    score: int = Field(ge=0, le=5, description="Refinement effort, 0 (rewrite) .. 5 (production-ready).")
    rationale: str = Field(description="A short justification.")


class Fault(_Output):
    description: str
    severity: Literal["negligible", "small", "major", "fatal"]


class FaultReportOutput(_Output):
    """CodeJudge-style fault report, then the 0-5 score decided from it (AXIOM IV-D2)."""

    faults: list[Fault] = Field(description="Every fault found, possibly none.")
    score: int = Field(ge=0, le=5, description="Refinement effort, 0 .. 5, from the fault report.")
    rationale: str = Field(description="A short justification.")


@dataclass(frozen=True)
class RubricSpec:
    name: str
    model: type[_Output]
    prompt_file: str

    @cached_property
    def prompt(self) -> str:
        return (PROMPTS / self.prompt_file).read_text()

    @cached_property
    def version(self) -> str:
        """e.g. `cocreation.v1+3fa9c2d1`: the file's version and the first 8 hex of its text's SHA-256."""
        digest = hashlib.sha256(self.prompt.encode()).hexdigest()[:8]
        return f"{self.prompt_file.removesuffix('.md')}+{digest}"

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        return strict_json_schema(self.model.model_json_schema())

    @cached_property
    def reply_schema(self) -> ReplySchema:
        """What the provider layer holds a reply to: this schema, normalised by this model."""
        return ReplySchema(self.name, self.json_schema, self.model)

    def headline(self, fields: dict[str, Any]) -> tuple[float | None, float]:
        """(p_ac, score) stored in their own columns: what the panel and the metrics read."""
        if "p_ac" in fields:
            return float(fields["p_ac"]), float(fields["p_ac"])
        return None, float(fields["score"])


RUBRICS: dict[str, RubricSpec] = {
    spec.name: spec
    for spec in (
        RubricSpec(Rubric.COCREATION, CocreationOutput, "cocreation.v1.md"),
        RubricSpec(Rubric.REFINEMENT_EFFORT, RefinementEffortOutput, "refinement_effort.v1.md"),
        RubricSpec(Rubric.FAULT_REPORT, FaultReportOutput, "fault_report.v1.md"),
    )
}
