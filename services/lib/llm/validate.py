"""Verification of a reply against its `ReplySchema` (conditions (a)-(d) of the co-creation paper's IV-B2).

(a) the content parses as JSON (the whole reply, or the body of a ```json fence; NaN and Infinity are rejected),
(b) it is an object of the schema's shape (with a strict schema: every field present and no other), (c)/(d) every
value is in its range. A failure comes back as a `Rejected` with the reason class a caller records (`empty`,
`unparseable`, `schema`, `range`); nothing is ever filled in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from services.lib.llm.schema import ReplySchema

# Keywords whose failure means "a value outside its range" rather than "not the right shape".
_RANGE_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum"})
JSON_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Accepted:
    fields: dict[str, Any]


@dataclass(frozen=True)
class Rejected:
    reason: str  # empty | unparseable | schema | range
    detail: str

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


def extract_json(content: str) -> Any:
    """The JSON object in a reply: the whole text, or the body of a ```json fence. Raises ValueError."""
    text = content.strip()
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        fenced = JSON_FENCE.search(text)
        if fenced is None:
            raise
        return json.loads(fenced.group(1), parse_constant=_reject_constant)


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON, and NaN would slip through every range check.
    raise ValueError(f"{name} is not a JSON number")


def validate(content: str | None, schema: ReplySchema) -> Accepted | Rejected:
    """Check one reply against `schema`; Accepted carries the fields (normalised by the schema's model, if any)."""
    if content is None or not content.strip():
        return Rejected("empty", "the reply has no content")
    try:
        data = extract_json(content)
    except ValueError as exc:
        return Rejected("unparseable", f"not JSON ({exc}); starts {content.strip()[:60]!r}")
    if not isinstance(data, dict):
        return Rejected("schema", f"expected a JSON object, got {type(data).__name__}")
    errors = sorted(schema.validator.iter_errors(data), key=lambda e: (list(e.absolute_path), e.validator))
    if errors:
        worst = next((e for e in errors if e.validator not in _RANGE_KEYWORDS), errors[0])
        where = "/".join(str(p) for p in worst.absolute_path) or "(root)"
        reason = "range" if worst.validator in _RANGE_KEYWORDS else "schema"
        return Rejected(reason, f"{where}: {worst.message}")
    if schema.model is None:
        return Accepted(data)
    # The schema accepted it, so the model's own validation only normalises (e.g. 3.0 -> 3 for an integer).
    return Accepted(schema.model.model_validate(data).model_dump(mode="json"))
