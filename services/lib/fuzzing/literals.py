"""The literal arguments of calls in code (a problem's tests, a docstring's examples), read with `ast` and never
executed: ``ast.literal_eval`` on single argument nodes only."""

from __future__ import annotations

import ast
from typing import Any

MAX_LITERAL_CALLS = 500  # calls read from test code


def literal_calls(code: str, callees: set[str]) -> list[list[Any]]:
    """The literal positional arguments of calls to ``callees`` in ``code`` (calls with any other argument are
    skipped)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[list[Any]] = []
    for node in ast.walk(tree):
        if len(out) >= MAX_LITERAL_CALLS:
            break
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in callees):
            continue
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        try:
            out.append([ast.literal_eval(a) for a in node.args])
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue
    return out


def docstring_calls(docstring: str, name: str) -> list[list[Any]]:
    lines = [ln.strip()[4:] for ln in docstring.splitlines() if ln.strip().startswith(">>> ")]
    return literal_calls("\n".join(lines), {name})
