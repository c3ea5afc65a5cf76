"""MBPP rows (task_id, text, code, test_list, optional test_setup_code and challenge_test_list) as function-mode
problems.

The tests are code tests (docs/api.md, "Function-mode tests"): MBPP's bare asserts call the function by name, and
test code sees the entry point by its name, so `test_setup_code` + the asserts run as they are. The entry point
is the first function `code` defines that the first assert calls; `code` is the problem's reference.
"""

from __future__ import annotations

import ast
from typing import Any

from services.lib.datasets.records import Bodies, RecordError, identifier, optional_text, string_list, text


def _parse(source: str, field: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise RecordError(field, f"not Python: {exc.msg} (line {exc.lineno})") from None


def _entry_point(code: str, tests: list[str]) -> str:
    defined = {node.name for node in _parse(code, "code").body if isinstance(node, ast.FunctionDef)}
    for index, test in enumerate(tests):
        for node in ast.walk(_parse(test, f"test_list[{index}]")):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defined:
                return node.func.id
    raise RecordError("test_list", "no assert calls a function that `code` defines")


def load(record: dict[str, Any], line: int) -> Bodies:
    """One MBPP row as a problem: `MBPP/<task_id>`, its asserts as one hidden code test (the challenge asserts, if
    any, as a second), `code` as the reference.

    Raises:
        RecordError: a field is missing or of the wrong type, `code` or an assert is not Python, or no assert
            calls a function `code` defines.
    """
    task_id = identifier(record, "task_id")
    statement = text(record, "text")
    code = text(record, "code")
    tests = string_list(record, "test_list")
    if not tests:
        raise RecordError("test_list", "no asserts")
    setup = optional_text(record, "test_setup_code", blank=True) or ""
    challenge = string_list(record, "challenge_test_list", required=False)
    for index, test in enumerate(challenge):
        _parse(test, f"challenge_test_list[{index}]")
    _parse(setup, "test_setup_code")
    entry_point = _entry_point(code, tests)
    prefix = f"{setup.rstrip()}\n\n" if setup.strip() else ""
    problem = {
        "problem_id": f"MBPP/{task_id}",
        "title": f"MBPP/{task_id}",
        "statement": statement,
        "mode": "function",
        "entry_point": entry_point,
        "tests": [{"code": prefix + "\n".join(group)} for group in (tests, challenge) if group],
        "references": [{"language": "python", "source_code": code}],
    }
    return Bodies(problems=[problem])
