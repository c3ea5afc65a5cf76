"""Judge rubrics: one Pydantic model each, from which the JSON schema and the range checks both derive.

A rubric with a discrete headline (a 0-5 `score`, or `accepted`) also names its probe: the value whose allowed
values' probabilities a judge reads from the endpoint's logprobs, when it gives them (G-Eval's weighting:
`weighted_headline`).

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
from services.lib.llm import LogprobProbe, ReplySchema, ScoreDistribution, strict_json_schema

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


class AcceptRejectOutput(_Output):
    """Accept or reject, and nothing else: the smallest rubric, for small models. One token decides, and a reply is
    about seven tokens, which matters where each token's logprobs cost a server time (llama-cpp-python's server
    sorts the whole vocabulary for every token it reports on: ~90 ms a token with SmolLM2 on 2 cores)."""

    accepted: bool = Field(description="Whether the submission passes every hidden test.")


# The 0-5 score's allowed values, as the JSON text each is written as, and the numbers they stand for.
_SCORE_PROBE = LogprobProbe("score", tuple(str(v) for v in range(6)), tuple(float(v) for v in range(6)))
_ACCEPT_PROBE = LogprobProbe("accepted", ("true", "false"), (1.0, 0.0))
WEIGHTING = "geval:top_logprobs"


@dataclass(frozen=True)
class RubricSpec:
    name: str
    model: type[_Output]
    prompt_file: str
    probe: LogprobProbe | None = None

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
        if "accepted" in fields:
            value = 1.0 if fields["accepted"] else 0.0
            return value, value
        return None, float(fields["score"])

    def weighted_headline(self, distribution: ScoreDistribution) -> tuple[float | None, float | None]:
        """(weighted p_ac, weighted score) from the probed value's probabilities: for `accepted`, the probability
        mass of acceptance over the mass of both answers (both columns); for a 0-5 score, G-Eval's expected score
        (Liu et al. 2023: sum of p(s) * s over the allowed scores, normalised by their mass). None where the allowed
        values got no probability mass."""
        if distribution.expected is None:
            return None, None
        if self.probe is not None and self.probe.field == "accepted":
            return distribution.expected, distribution.expected
        return None, distribution.expected


RUBRICS: dict[str, RubricSpec] = {
    spec.name: spec
    for spec in (
        RubricSpec(Rubric.COCREATION, CocreationOutput, "cocreation.v1.md"),
        RubricSpec(Rubric.REFINEMENT_EFFORT, RefinementEffortOutput, "refinement_effort.v1.md", _SCORE_PROBE),
        RubricSpec(Rubric.FAULT_REPORT, FaultReportOutput, "fault_report.v1.md", _SCORE_PROBE),
        RubricSpec(Rubric.ACCEPT_REJECT, AcceptRejectOutput, "accept_reject.v1.md", _ACCEPT_PROBE),
    )
}
