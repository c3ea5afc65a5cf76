"""Rubric definitions: what an LLM judge is asked, as data. A judges file may define its own (`[[rubric]]`), and
the built-in rubrics are definitions of the same form (judge/rubrics/*.toml); judge/rubrics builds the prompt and
the strict reply schema from one.

```toml
[[rubric]]
name = "readability"                 # what a judge's `rubric = "..."` names
version = 1                          # the author's version; the content hash is added to it
instructions = "You review Python programs for readability."
inputs = ["statement", "code"]       # of statement, code, tests (public only), reference, context
scale = { type = "integer", min = 1, max = 5, anchors = { 1 = "unreadable", 5 = "clear" } }

[[rubric.criterion]]
name = "naming"                      # the reply's JSON field
description = "How well names say what they hold."
```

The checks a model cannot make field by field (a criterion without a scale, a headline that names no criterion,
a field name used twice) are `rubric_problems`: each problem comes with the key it is about, so that a judges
file's message names it (`judges.toml: rubric[0].headline: ...`).
"""

from __future__ import annotations

import tomllib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from services.kernel.contracts import Rubric

# The reply's JSON field names: what a model writes, so plain identifiers.
_FIELD = r"^[a-z][a-z0-9_]{0,39}$"
# A rubric's name is the reply schema's name (OpenAI: [A-Za-z0-9_-]{1,64}) and, with ".v<version>+<hash>", the
# judgment row's prompt_version (40 characters): hence 24 at most.
RUBRIC_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,23}$"
MAX_SCALE_POINTS = 101

RubricInput = Literal["statement", "code", "tests", "reference", "context"]
DEFAULT_INPUTS: tuple[RubricInput, ...] = ("statement", "code", "context")
# Fields every rubric may add besides its criteria: the names a criterion cannot take.
RATIONALE_FIELD = "rationale"
STEPS_FIELD = "evaluation_steps"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IntegerScale(_Strict):
    """Whole points from `min` to `max`; `anchors` says what a point means (keys are the points, as TOML keys)."""

    type: Literal["integer"]
    min: int
    max: int
    anchors: dict[str, str] = Field(default_factory=dict)

    @field_validator("max")
    @classmethod
    def _above_min(cls, value: int, info: ValidationInfo) -> int:
        low = info.data.get("min")
        if low is not None and value <= low:
            raise ValueError(f"must be greater than min ({low})")
        if low is not None and value - low + 1 > MAX_SCALE_POINTS:
            raise ValueError(f"the scale has {value - low + 1} points; at most {MAX_SCALE_POINTS}")
        return value

    @field_validator("anchors")
    @classmethod
    def _anchors_on_scale(cls, anchors: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        low, high = info.data.get("min"), info.data.get("max")
        for key in anchors:
            try:
                point = int(key)
            except ValueError:
                raise ValueError(f"anchor {key!r} is not an integer point") from None
            if low is not None and high is not None and not low <= point <= high:
                raise ValueError(f"anchor {key!r} is outside the scale {low}..{high}")
        return {str(int(k)): v for k, v in anchors.items()}  # in the order written: the prompt lists them so

    def points(self) -> list[int]:
        return list(range(self.min, self.max + 1))


class NumberScale(_Strict):
    """Any number from `min` to `max` (e.g. a probability, 0..1); anchors at chosen values."""

    type: Literal["number"]
    min: float = 0.0
    max: float = 1.0
    anchors: dict[str, str] = Field(default_factory=dict)

    @field_validator("max")
    @classmethod
    def _above_min(cls, value: float, info: ValidationInfo) -> float:
        low = info.data.get("min")
        if low is not None and value <= low:
            raise ValueError(f"must be greater than min ({low})")
        return value

    @field_validator("anchors")
    @classmethod
    def _anchors_on_scale(cls, anchors: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        low, high = info.data.get("min"), info.data.get("max")
        for key in anchors:
            try:
                point = float(key)
            except ValueError:
                raise ValueError(f"anchor {key!r} is not a number") from None
            if low is not None and high is not None and not low <= point <= high:
                raise ValueError(f"anchor {key!r} is outside the scale {low:g}..{high:g}")
        return anchors

    @property
    def is_probability(self) -> bool:
        return self.min == 0 and self.max == 1


class BooleanScale(_Strict):
    """Accept or reject: `true` or `false`, with what each means."""

    type: Literal["boolean"]
    anchors: dict[Literal["true", "false"], str] = Field(default_factory=dict)


Scale = Annotated[IntegerScale | NumberScale | BooleanScale, Field(discriminator="type")]
SCALE_TAGS = frozenset({"integer", "number", "boolean"})


class Criterion(_Strict):
    """One thing the judge scores: a field of the reply, on the criterion's scale or the rubric's."""

    name: str = Field(pattern=_FIELD)
    description: str = Field(min_length=1, max_length=2000)
    scale: Scale | None = None


class FaultList(_Strict):
    """A list of findings before the scores (CodeJudge's fault report): each a description and a severity."""

    name: str = Field(default="faults", pattern=_FIELD)
    description: str = Field(min_length=1, max_length=2000)
    severities: list[str] = Field(min_length=1, max_length=20)

    @field_validator("severities")
    @classmethod
    def _distinct(cls, severities: list[str]) -> list[str]:
        if len(set(severities)) != len(severities) or not all(s.strip() for s in severities):
            raise ValueError("severities must be distinct, non-empty strings")
        return severities


class RubricDefinition(_Strict):
    """A rubric as data. The reply has, in order: `evaluation_steps` (when `steps` are given), the fault list (when
    `faults` is), one field per criterion, and `rationale` (unless `rationale = false`). The headline criterion
    (the first unless `headline` names another) gives the row's `score`, and its `p_ac` when its scale is
    boolean or a number from 0 to 1."""

    name: str = Field(pattern=RUBRIC_NAME)
    version: int = Field(default=1, ge=1, le=9999)
    instructions: str = Field(min_length=1, max_length=20_000)
    inputs: list[RubricInput] = Field(default_factory=lambda: list(DEFAULT_INPUTS), min_length=1)
    scale: Scale | None = None
    criterion: list[Criterion] = Field(min_length=1, max_length=50)
    headline: str | None = None
    steps: list[str] = Field(default_factory=list, max_length=50)
    faults: FaultList | None = None
    rationale: bool = True
    example: dict[str, Any] | None = Field(default=None, description="A reply shown in the prompt; it must be valid.")

    @field_validator("inputs")
    @classmethod
    def _inputs_once(cls, inputs: list[RubricInput]) -> list[RubricInput]:
        seen = [i for n, i in enumerate(inputs) if i in inputs[:n]]
        if seen:
            raise ValueError(f"input {seen[0]!r} is listed twice")
        return inputs

    def scale_of(self, criterion: Criterion) -> IntegerScale | NumberScale | BooleanScale:
        """The criterion's own scale, else the rubric's (`rubric_problems` makes sure one exists)."""
        scale = criterion.scale or self.scale
        assert scale is not None, f"criterion {criterion.name} has no scale"
        return scale

    @property
    def headline_criterion(self) -> Criterion:
        return next((c for c in self.criterion if c.name == self.headline), self.criterion[0])


def rubric_problems(rubric: RubricDefinition) -> list[tuple[str, str]]:
    """(key, message) for every problem the field checks cannot see; keys relative to the rubric."""
    problems: list[tuple[str, str]] = []
    taken = {STEPS_FIELD} if rubric.steps else set()
    if rubric.faults is not None:
        if rubric.faults.name in taken:
            problems.append(("faults.name", f"{rubric.faults.name!r} is taken by the evaluation steps"))
        taken.add(rubric.faults.name)
    if rubric.rationale:
        taken.add(RATIONALE_FIELD)
    for index, criterion in enumerate(rubric.criterion):
        if criterion.name in taken:
            problems.append((f"criterion[{index}].name", f"field {criterion.name!r} is used twice"))
        taken.add(criterion.name)
        if criterion.scale is None and rubric.scale is None:
            problems.append((f"criterion[{index}].scale", "no scale: give the criterion one or the rubric a scale"))
    if rubric.headline is not None and rubric.headline not in {c.name for c in rubric.criterion}:
        problems.append(("headline", f"{rubric.headline!r} is not one of the rubric's criteria"))
    if rubric.example is not None and not problems:
        problems += [(f"example.{key}", message) for key, message in _example_problems(rubric, rubric.example)]
    return problems


def _fits(scale: IntegerScale | NumberScale | BooleanScale, value: Any) -> bool:
    if isinstance(scale, BooleanScale):
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return (isinstance(scale, NumberScale) or isinstance(value, int)) and scale.min <= value <= scale.max


def _example_problems(rubric: RubricDefinition, example: dict[str, Any]) -> list[tuple[str, str]]:
    """An example reply must have exactly the reply's fields, each of its kind and on its scale."""
    expected = ([STEPS_FIELD] if rubric.steps else []) + ([rubric.faults.name] if rubric.faults else [])
    expected += [c.name for c in rubric.criterion] + ([RATIONALE_FIELD] if rubric.rationale else [])
    problems = [(key, "not a field of the reply") for key in example if key not in expected]
    problems += [(key, "missing") for key in expected if key not in example]
    for criterion in rubric.criterion:
        if criterion.name in example and not _fits(rubric.scale_of(criterion), example[criterion.name]):
            problems.append((criterion.name, f"{example[criterion.name]!r} is not on the criterion's scale"))
    if RATIONALE_FIELD in example and rubric.rationale and not isinstance(example[RATIONALE_FIELD], str):
        problems.append((RATIONALE_FIELD, "must be a string"))
    steps = example.get(STEPS_FIELD, [])
    if rubric.steps and not (isinstance(steps, list) and steps and all(isinstance(s, str) for s in steps)):
        problems.append((STEPS_FIELD, "must be a non-empty list of strings"))
    if rubric.faults is not None:
        faults = example.get(rubric.faults.name, [])
        if not isinstance(faults, list) or not all(
            isinstance(f, dict)
            and set(f) == {"description", "severity"}
            and isinstance(f["description"], str)
            and f["severity"] in rubric.faults.severities
            for f in faults
        ):
            problems.append((rubric.faults.name, "must be a list of {description, severity} with a listed severity"))
    return problems


class RubricFileError(ValueError):
    """A rubric definition is not valid; the message names the key."""


def _loc(loc: tuple[int | str, ...], skip: frozenset[str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in skip or part == "[key]":
            continue  # a discriminator's tag, or pydantic's mark of a mapping's key: not keys the user wrote
        else:
            out += f".{part}" if out else str(part)
    return out


def error_lines(exc: ValidationError, skip: frozenset[str] = SCALE_TAGS) -> list[str]:
    """A validation error as `key: message` lines, the keys as the user wrote them."""
    return [f"{_loc(tuple(e['loc']), skip)}: {e['msg']}" for e in exc.errors()]


class _RubricsFile(_Strict):
    rubric: list[RubricDefinition] = Field(min_length=1)


def check_rubrics(rubrics: list[RubricDefinition], *, builtin: bool) -> list[str]:
    """Problems of a list of rubrics, each as `rubric[i].key: message`: per-rubric checks, names used twice, and
    (for a judges file's own rubrics) names that a built-in rubric already has."""
    problems: list[str] = []
    seen: set[str] = set()
    for index, rubric in enumerate(rubrics):
        problems += [f"rubric[{index}].{key}: {message}" for key, message in rubric_problems(rubric)]
        if rubric.name in seen:
            problems.append(f"rubric[{index}].name: rubric name {rubric.name!r} is used twice")
        elif not builtin and rubric.name in set(Rubric):
            problems.append(f"rubric[{index}].name: {rubric.name!r} is a built-in rubric; choose another name")
        seen.add(rubric.name)
    return problems


def parse_rubrics(text: str, source: str) -> list[RubricDefinition]:
    """The `[[rubric]]` entries of a TOML text holding nothing else (the built-in rubric files)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RubricFileError(f"{source}: not valid TOML: {exc}") from exc
    try:
        rubrics = list(_RubricsFile.model_validate(data).rubric)
    except ValidationError as exc:
        raise RubricFileError(f"{source}: {'; '.join(error_lines(exc))}") from exc
    problems = check_rubrics(rubrics, builtin=True)
    if problems:
        raise RubricFileError(f"{source}: {'; '.join(problems)}")
    return rubrics
