"""Judge rubrics: a rubric is a definition (services/kernel/rubrics.py), and from it follow the system prompt, the
strict JSON schema (through a Pydantic model made with `create_model`, which also does the range checks) and the
prompt version. The built-in rubrics are definitions shipped here (`*.toml`); a judges file may add its own.

A rubric whose headline criterion is discrete (an integer scale of single digits, or boolean) also has a probe:
the value whose allowed values' probabilities a judge reads from the endpoint's logprobs, when it gives them
(G-Eval's weighting: `weighted_headline`).

The version (`<name>.v<N>+<hash>`: the author's version and the first 8 hex of a SHA-256 over the definition, the
prompt built from it and its schema) is stored with every judgment, so rows made under different rubrics or
prompts are never mixed silently.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, create_model

from services.kernel.rubrics import (
    RATIONALE_FIELD,
    STEPS_FIELD,
    BooleanScale,
    Criterion,
    IntegerScale,
    NumberScale,
    RubricDefinition,
    parse_rubrics,
)
from services.lib.llm import LogprobProbe, Rejected, ReplySchema, ScoreDistribution, strict_json_schema, validate

BUILTIN_DIR = Path(__file__).parent
WEIGHTING = "geval:top_logprobs"

# What the judge is told it receives, per input, in the order the user message gives them (judge/request.py).
INPUT_PHRASES = {
    "statement": "the problem statement",
    "code": "the programming language and the submitted source code",
    "tests": "the problem's public tests",
    "reference": "a reference solution known to be correct",
    "context": "possibly part of the participant's log of their work with an AI assistant",
}
INPUT_ORDER = ("statement", "code", "tests", "reference", "context")


class _Output(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _scale_phrase(scale: IntegerScale | NumberScale | BooleanScale) -> str:
    if isinstance(scale, IntegerScale):
        return f"an integer from {scale.min} to {scale.max}"
    if isinstance(scale, NumberScale):
        return f"a number from {scale.min:g} to {scale.max:g}"
    return "true or false"


def _field_type(scale: IntegerScale | NumberScale | BooleanScale, description: str) -> tuple[Any, Any]:
    if isinstance(scale, IntegerScale):
        return int, Field(ge=scale.min, le=scale.max, description=description)
    if isinstance(scale, NumberScale):
        return float, Field(ge=scale.min, le=scale.max, description=description)
    return bool, Field(description=description)


def render_prompt(rubric: RubricDefinition) -> str:
    """The system prompt: the instructions, what the judge receives, the evaluation steps, then every field of
    the answer with its scale and anchors."""
    seen = [INPUT_PHRASES[i] for i in INPUT_ORDER if i in rubric.inputs]
    receives = seen[0] if len(seen) == 1 else ", ".join(seen[:-1]) + ("," if len(seen) > 2 else "") + f" and {seen[-1]}"
    parts = [rubric.instructions.strip(), f"You receive {receives}. You cannot run the code."]
    if rubric.steps:
        steps = "\n".join(f"{n}. {step}" for n, step in enumerate(rubric.steps, 1))
        parts.append(f"Follow these evaluation steps and report them:\n{steps}")
    fields: list[str] = []
    if rubric.steps:
        fields.append(f'- "{STEPS_FIELD}": a list of short strings, one per step above.')
    if rubric.faults is not None:
        severities = ", ".join(f'"{s}"' for s in rubric.faults.severities)
        fields.append(
            f'- "{rubric.faults.name}": {rubric.faults.description.strip()} A list (possibly empty) of objects, each '
            f'with "description" (a string) and "severity", one of {severities}.'
        )
    for criterion in rubric.criterion:
        scale = rubric.scale_of(criterion)
        line = f'- "{criterion.name}": {_scale_phrase(scale)}. {criterion.description.strip()}'
        anchors = "".join(f"\n  - {point}: {text.strip()}" for point, text in scale.anchors.items())
        fields.append(line + anchors)
    if rubric.rationale:
        fields.append(f'- "{RATIONALE_FIELD}": one or two sentences that justify your answer.')
    parts.append("Answer with one JSON object and nothing else, with exactly these fields:\n" + "\n".join(fields))
    if rubric.example is not None:
        parts.append(f"For example: {json.dumps(rubric.example)}")
    return "\n\n".join(parts) + "\n"


def output_model(rubric: RubricDefinition) -> type[BaseModel]:
    """The Pydantic model of a reply, fields in the order the prompt gives them."""
    fields: dict[str, Any] = {}
    if rubric.steps:
        fields[STEPS_FIELD] = (list[str], Field(min_length=1, description="The evaluation steps, in order."))
    if rubric.faults is not None:
        severity = cast(Any, Literal)[tuple(rubric.faults.severities)]
        fault = create_model(f"{rubric.name}_fault", __base__=_Output, description=(str, ...), severity=(severity, ...))
        fields[rubric.faults.name] = (list[fault], Field(description=rubric.faults.description))  # type: ignore[valid-type]
    for criterion in rubric.criterion:
        fields[criterion.name] = _field_type(rubric.scale_of(criterion), criterion.description)
    if rubric.rationale:
        fields[RATIONALE_FIELD] = (str, Field(description="A short justification."))
    return create_model(f"{rubric.name}_output", __base__=_Output, **fields)


def _checked(spec: RubricSpec) -> RubricSpec:
    """The spec, its example (if any) held to its own schema: the kernel checks fields and scales, this the rest
    (e.g. a fault's severity)."""
    if spec.definition.example is not None:
        result = validate(json.dumps(spec.definition.example), spec.reply_schema)
        if isinstance(result, Rejected):
            raise ValueError(f"rubric {spec.name}: example: {result}")
    return spec


def _probe(rubric: RubricDefinition) -> LogprobProbe | None:
    """The headline's allowed values as the JSON text each is written as: a boolean, or an integer scale whose
    points are single digits (one token each; a multi-token value cannot be read at one position)."""
    headline = rubric.headline_criterion
    scale = rubric.scale_of(headline)
    if isinstance(scale, BooleanScale):
        return LogprobProbe(headline.name, ("true", "false"), (1.0, 0.0))
    if isinstance(scale, IntegerScale) and scale.min >= 0 and scale.max <= 9:
        points = scale.points()
        return LogprobProbe(headline.name, tuple(str(p) for p in points), tuple(float(p) for p in points))
    return None


@dataclass(frozen=True, eq=False)
class RubricSpec:
    """A rubric definition with everything derived from it."""

    definition: RubricDefinition

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(self.definition.inputs)

    @cached_property
    def prompt(self) -> str:
        return render_prompt(self.definition)

    @cached_property
    def model(self) -> type[BaseModel]:
        return output_model(self.definition)

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        return strict_json_schema(self.model.model_json_schema())

    @cached_property
    def version(self) -> str:
        """e.g. `cocreation.v1+3fa9c2d1`: the definition's version and the first 8 hex of the SHA-256 of its
        content (the definition, the prompt built from it and its schema)."""
        material = {"definition": self.definition.model_dump(mode="json"), "prompt": self.prompt}
        material["schema"] = self.json_schema
        digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.name}.v{self.definition.version}+{digest}"

    @cached_property
    def reply_schema(self) -> ReplySchema:
        """What the provider layer holds a reply to: this schema, normalised by this model."""
        return ReplySchema(self.name, self.json_schema, self.model)

    @cached_property
    def probe(self) -> LogprobProbe | None:
        return _probe(self.definition)

    @cached_property
    def _headline(self) -> tuple[Criterion, IntegerScale | NumberScale | BooleanScale]:
        criterion = self.definition.headline_criterion
        return criterion, self.definition.scale_of(criterion)

    @property
    def headline_is_p_ac(self) -> bool:
        """Whether the headline is a probability of acceptance: boolean, or a number from 0 to 1."""
        scale = self._headline[1]
        return isinstance(scale, BooleanScale) or (isinstance(scale, NumberScale) and scale.is_probability)

    def headline(self, fields: dict[str, Any]) -> tuple[float | None, float]:
        """(p_ac, score) stored in their own columns: what the panel and the metrics read."""
        criterion, _scale = self._headline
        value = fields[criterion.name]
        number = (1.0 if value else 0.0) if isinstance(value, bool) else float(value)
        return (number if self.headline_is_p_ac else None), number

    def weighted_headline(self, distribution: ScoreDistribution) -> tuple[float | None, float | None]:
        """(weighted p_ac, weighted score) from the probed value's probabilities: for a boolean, the probability
        mass of acceptance over the mass of both answers (both columns); for an integer score, G-Eval's expected
        score (Liu et al. 2023: sum of p(s) * s over the allowed scores, normalised by their mass). None where the
        allowed values got no probability mass."""
        if distribution.expected is None:
            return None, None
        if self.headline_is_p_ac:
            return distribution.expected, distribution.expected
        return None, distribution.expected


def builtin_definitions() -> list[RubricDefinition]:
    """The shipped rubrics, one file each (`judge/rubrics/<name>.toml`)."""
    return [r for path in sorted(BUILTIN_DIR.glob("*.toml")) for r in parse_rubrics(path.read_text(), path.name)]


def rubric_specs(defined: Iterable[RubricDefinition] = ()) -> dict[str, RubricSpec]:
    """The built-in rubrics and a judges file's own (their names never collide: the judges file is checked)."""
    return {**RUBRICS, **{r.name: _checked(RubricSpec(r)) for r in defined}}


RUBRICS: dict[str, RubricSpec] = {r.name: _checked(RubricSpec(r)) for r in builtin_definitions()}
# The co-creation reply's model (the offline judges fill the same fields).
CocreationOutput = RUBRICS["cocreation"].model
