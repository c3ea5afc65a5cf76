"""What the loader tests share: their fixtures, read as the importer reads them, and an in-process stand-in for a
function-mode code test (the executor's harness runs it in a jail; here only the loader's output is in question)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"


def records(name: str) -> list[dict[str, Any]]:
    """The records of fixtures/<name>.jsonl, in order."""
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def passes(source: str, test_code: str, entry_point: str) -> bool:
    """Whether `source` passes `test_code` as a function-mode code test sees it: the entry point by its name and as
    `candidate`, and `check(candidate)` called if the test defines it."""
    program: dict[str, Any] = {"__name__": "__candidate__"}
    exec(source, program)  # noqa: S102 - the fixtures' and HumanEval's own programs
    function = program[entry_point]
    namespace: dict[str, Any] = {"__name__": "__test__", entry_point: function, "candidate": function}
    try:
        exec(test_code, namespace)  # noqa: S102
        if callable(namespace.get("check")):
            namespace["check"](function)
    except AssertionError:
        return False
    return True
