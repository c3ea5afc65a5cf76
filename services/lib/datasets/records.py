"""What every loader shares: the bodies a record becomes, the error that names a bad field, and light checks.

A loader is a function `load(record, line) -> Bodies`: one native record (a JSON object, as a dict) and its line
number in the file, to Tribunal request bodies as `POST /v1/problems` and `POST /v1/attempts:batch` take them
(docs/api.md). The checks here are light on purpose: the API validates every body fully and names the field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

LANGUAGES = ("python", "c", "cpp", "java")


class RecordError(ValueError):
    """A record that cannot become request bodies: `field` names the bad field of the native record."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Bodies:
    """What one record becomes: problem bodies (`POST /v1/problems`), attempt bodies (items of
    `POST /v1/attempts:batch`) and similarity pairs (LoCaL records, `POST /v1/similarity/datasets`)."""

    problems: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    pairs: list[dict[str, Any]] = field(default_factory=list)


def optional_text(record: dict[str, Any], name: str, *, blank: bool = False) -> str | None:
    """The record's string field `name`, or None when it is absent (or null). Raises RecordError otherwise."""
    value = record.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError(name, f"expected a string, got {type(value).__name__}")
    if not blank and not value.strip():
        raise RecordError(name, "blank")
    return value


def text(record: dict[str, Any], name: str, *, blank: bool = False) -> str:
    """The record's string field `name`, which must be there (and, unless `blank`, hold a non-blank character)."""
    value = optional_text(record, name, blank=blank)
    if value is None:
        raise RecordError(name, "missing")
    return value


def identifier(record: dict[str, Any], name: str) -> str:
    """A record's id field (a string or an integer, as datasets spell task ids) as text."""
    value = record.get(name)
    if value is None:
        raise RecordError(name, "missing")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RecordError(name, f"expected a string or an integer, got {type(value).__name__}")
    if isinstance(value, str) and not value.strip():
        raise RecordError(name, "blank")
    return str(value)


def string_list(record: dict[str, Any], name: str, *, required: bool = True) -> list[str]:
    """The record's list of strings `name` (empty when absent and not required)."""
    value = record.get(name)
    if value is None:
        if required:
            raise RecordError(name, "missing")
        return []
    if not isinstance(value, list):
        raise RecordError(name, f"expected a list of strings, got {type(value).__name__}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise RecordError(f"{name}[{index}]", f"expected a string, got {type(item).__name__}")
    return value


def language(record: dict[str, Any], name: str, default: str | None = None) -> str:
    """A language id (python, c, cpp, java; also `c++`, `py`, any case)."""
    value = record.get(name, default)
    if not isinstance(value, str):
        raise RecordError(name, "missing" if value is None else f"expected a string, got {type(value).__name__}")
    spelled = {"c++": "cpp", "py": "python", "python3": "python"}.get(value.strip().lower(), value.strip().lower())
    if spelled not in LANGUAGES:
        raise RecordError(name, f"unknown language {value!r}; expected one of {', '.join(LANGUAGES)}")
    return spelled


def digest(*parts: Any) -> str:
    """A short, stable digest of JSON-able parts: what makes an attempt_uid or a problem id deterministic."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def attempt_uid(prefix: str, line: int, *content: Any) -> str:
    """A deterministic attempt_uid from the record's line and content: importing the same file again names the
    same attempts (the API makes nothing twice), and another file's line N with other content names another."""
    return f"{prefix}:{line}:{digest(*content)}"
