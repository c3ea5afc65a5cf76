"""LoCaL pairs (id, golden_code, generated_code, optional language, mode, entry_point, problem_id, input_spec; any
other field a label) passed through, checked: they are scored as similarity pairs (`POST /v1/similarity/datasets`,
`tribunal similarity FILE`), not stored as problems or attempts."""

from __future__ import annotations

from typing import Any

from services.lib.datasets.records import Bodies, RecordError, language, optional_text, text


def load(record: dict[str, Any], line: int) -> Bodies:
    """One pair, as it is, after the checks the API would make first.

    Raises:
        RecordError: `id`, `golden_code` or `generated_code` missing or not text; an unknown `language` or `mode`.
    """
    text(record, "id")
    text(record, "golden_code")
    text(record, "generated_code")
    if "language" in record:
        language(record, "language")
    mode = optional_text(record, "mode")
    if mode is not None and mode not in ("function", "stdio"):
        raise RecordError("mode", f"expected function or stdio, got {mode!r}")
    if record.get("input_spec") is not None and not isinstance(record["input_spec"], dict):
        raise RecordError("input_spec", "expected an object")
    return Bodies(pairs=[record])
