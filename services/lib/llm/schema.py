"""What a reply must be: a JSON object valid against a JSON schema, sent to the provider as the strict
`response_format` and checked again on arrival (providers without strict mode, or that ignore it, exist)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import BaseModel


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline $defs, drop titles, and make every object closed with all properties required: the shape strict
    structured output asks for. Consumes `schema` (pass a fresh one, e.g. `Model.model_json_schema()`)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[1]]))
            node = {k: walk(v) for k, v in node.items() if k != "title"}
            if node.get("type") == "object":
                node["additionalProperties"] = False
                node["required"] = list(node.get("properties", {}))
            return node
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return dict(walk(schema))


@dataclass(frozen=True, eq=False)
class ReplySchema:
    """The schema a reply is held to.

    `name` is the schema's name in the request's `response_format` (OpenAI allows `[A-Za-z0-9_-]{1,64}`).
    `model`, when given, normalises an accepted reply (e.g. `3.0` becomes the integer `3`); the schema alone
    decides acceptance, so the model must accept everything the schema does (`from_model` guarantees it).
    """

    name: str
    json_schema: dict[str, Any]
    model: type[BaseModel] | None = None

    @classmethod
    def from_model(cls, name: str, model: type[BaseModel]) -> ReplySchema:
        """The strict schema of a Pydantic model, which also normalises accepted replies."""
        return cls(name, strict_json_schema(model.model_json_schema()), model)

    @cached_property
    def validator(self) -> Draft202012Validator:
        return Draft202012Validator(self.json_schema)
