"""AXIOM's perturbation rules (paper 000, III-B1, Table I): loaded from `axiom_rules.toml` and validated.

A rule u is a pair <I_u, c(u)>: a natural-language instruction and a score ceiling c(u) in 1..5. Applying u to a
program p of score s(p) gives a program of score ``min(s(p), c(u))``. The category fixes the ceiling (Table I):
alternatives 5, readability 4, design 3, minor bugs 2, major defects 1. The file is the single source; this module
only reads it (pure: no database, queue or network), so the operators endpoint can list it with `catalogue()`.

It lives in the pure mutation library (not in the perturb service, which runs the LLM steps) so that the gateway can
list the rules and check calibrated scores without importing a service. Each rule also has a short code, `R01` ..
`R45`, its position in the file: a synthesised program's `operator` names its sequence with them
(`axiom:R12+R03`), since the ids of three rules do not fit the column; its record keeps the ids.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RULES_FILE = Path(__file__).with_name("axiom_rules.toml")


class Category(StrEnum):
    """Table I's five categories, one per score ceiling."""

    ALTERNATIVES = "alternatives"
    READABILITY = "readability"
    DESIGN = "design"
    MINOR_BUGS = "minor_bugs"
    MAJOR_DEFECTS = "major_defects"


# Table I: the ceiling c(u) each category stands for, and how many rules the paper's set has in it (45 in all).
CATEGORY_CEILING: dict[Category, int] = {
    Category.ALTERNATIVES: 5,
    Category.READABILITY: 4,
    Category.DESIGN: 3,
    Category.MINOR_BUGS: 2,
    Category.MAJOR_DEFECTS: 1,
}
TABLE_I_COUNTS: dict[Category, int] = {
    Category.ALTERNATIVES: 5,
    Category.READABILITY: 10,
    Category.DESIGN: 9,
    Category.MINOR_BUGS: 11,
    Category.MAJOR_DEFECTS: 10,
}
# III-B1's taxonomy, one line per ceiling (what the score means once this rule has been applied).
CEILING_MEANING: dict[int, str] = {
    5: "semantic-preserving variation: functionality and code quality stay perfect",
    4: "minor code quality degradation: perfect functionality, a minor tweak fixes readability or style",
    3: "major code quality degradation: perfect functionality, fixing the design needs a major refactoring",
    2: "minor functional defect: a localized bug a minor tweak repairs",
    1: "major functional defect: repairing it needs a structural overhaul, but not a complete rewrite",
}
MIN_RULES = 45


class Rule(BaseModel):
    """One perturbation rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$", max_length=64)
    category: Category
    ceiling: int = Field(ge=1, le=5, description="c(u): the score the perturbed program can at most reach.")
    instruction: str = Field(min_length=20, description="I_u: what the LLM is asked to do.")
    applies_when: str | None = Field(default=None, description="The precondition the applicability question names.")
    source: Literal["table-1", "tribunal"] = "tribunal"

    @model_validator(mode="after")
    def _ceiling_matches_category(self) -> Rule:
        expected = CATEGORY_CEILING[self.category]
        if self.ceiling != expected:
            raise ValueError(f"rule {self.id!r}: category {self.category} has ceiling {expected}, not {self.ceiling}")
        return self

    @property
    def functional(self) -> bool:
        """Whether the rule breaks functionality (ceilings 1-2) rather than only code quality (3-5)."""
        return self.ceiling <= 2


class RuleSet(BaseModel):
    """The whole rule file: every category of Table I present, ids unique, at least 45 rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(ge=1)
    rules: tuple[Rule, ...] = Field(alias="rule")

    @field_validator("rules")
    @classmethod
    def _complete(cls, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
        ids = [rule.id for rule in rules]
        duplicates = sorted({rule_id for rule_id in ids if ids.count(rule_id) > 1})
        if duplicates:
            raise ValueError(f"duplicate rule ids: {', '.join(duplicates)}")
        missing = [category.value for category in Category if not any(r.category == category for r in rules)]
        if missing:
            raise ValueError(f"no rule in categories: {', '.join(missing)}")
        if len(rules) < MIN_RULES:
            raise ValueError(f"{len(rules)} rules; AXIOM's set has at least {MIN_RULES}")
        return rules

    def get(self, rule_id: str) -> Rule:
        """The rule with this id. Raises KeyError."""
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)

    def code(self, rule_id: str) -> str:
        """The rule's short code: `R` and its 1-based position in the file (`R01`). Raises KeyError."""
        for position, rule in enumerate(self.rules, start=1):
            if rule.id == rule_id:
                return f"R{position:02d}"
        raise KeyError(rule_id)

    def operator(self, rule_ids: Sequence[str]) -> str:
        """The `operator` of a program made by applying these rules in order: `axiom:R12+R03`."""
        return "axiom:" + "+".join(self.code(rule_id) for rule_id in rule_ids)

    def with_ceiling(self, ceiling: int) -> tuple[Rule, ...]:
        """U_c: the rules whose ceiling is exactly `ceiling`, in file order."""
        return tuple(rule for rule in self.rules if rule.ceiling == ceiling)

    def at_least(self, ceiling: int) -> tuple[Rule, ...]:
        """The rules whose ceiling is `ceiling` or higher (those that cannot pull a score below it)."""
        return tuple(rule for rule in self.rules if rule.ceiling >= ceiling)


def parse_rules(text: str) -> RuleSet:
    """Validate a rules file's TOML text. Raises ValueError (tomllib's or pydantic's) naming what is wrong."""
    return RuleSet.model_validate(tomllib.loads(text))


@cache
def _load_default() -> RuleSet:
    return parse_rules(RULES_FILE.read_text(encoding="utf-8"))


def load_rules(path: Path | None = None) -> RuleSet:
    """The rule set from `path`, or the packaged `axiom_rules.toml` (read and validated once per process)."""
    if path is None:
        return _load_default()
    return parse_rules(path.read_text(encoding="utf-8"))


def catalogue(rules: RuleSet | None = None) -> list[dict[str, Any]]:
    """The rules as the operators endpoint lists them: one JSON object per rule, highest ceiling first."""
    rule_set = rules if rules is not None else load_rules()
    ordered = sorted(rule_set.rules, key=lambda rule: -rule.ceiling)
    return [
        {
            "name": rule.id,
            "kind": "axiom_rule",
            "code": rule_set.code(rule.id),
            # The arm a program made with it belongs to: ceilings 1-2 break behaviour, 3-5 keep it.
            "arm": "semantic" if rule.functional else "control",
            "category": rule.category.value,
            "ceiling": rule.ceiling,
            "functional": rule.functional,
            "instruction": rule.instruction,
            "applies_when": rule.applies_when,
            "meaning": CEILING_MEANING[rule.ceiling],
            "source": "paper 000 Table I" if rule.source == "table-1" else "Tribunal (after paper 000 III-B1)",
        }
        for rule in ordered
    ]


def post_perturbation_score(parent_score: int, ceilings: list[int] | tuple[int, ...]) -> int:
    """s(p') = min(s(p), c(u_1), ..., c(u_N)) (III-B1, applied once per rule of a sequence)."""
    if not 0 <= parent_score <= 5:
        raise ValueError(f"a score is 0..5, got {parent_score}")
    return min([parent_score, *ceilings])
