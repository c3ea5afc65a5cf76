"""HumanEval problems (task_id, prompt, canonical_solution, test, entry_point) as function-mode problems.

The problem's test is HumanEval's `check` with the prompt's imports and helpers in front of it, so that every
canonical solution is AC; the canonical solution (prompt + canonical_solution) is the problem's reference.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from services.lib.datasets.records import Bodies, RecordError, text

# The limits HumanEval problems get: generous for its programs, tight enough to catch an endless loop quickly.
HUMANEVAL_LIMITS = {"cpu_time_s": 4, "wall_time_s": 8, "memory_mb": 512, "output_kb": 1024, "processes": 16}


def docstring_examples(prompt: str, entry_point: str) -> list[dict[str, Any]]:
    """The prompt's worked examples (`>>> f(1)` then `2`, or `f(1) == 2`) as public function-mode tests.

    Only examples whose call has literal arguments and whose answer is a literal are kept. They are what a
    participant sees, so the offline `sample_tests` judge may use them; the hidden `check` never leaves the tests.
    """
    arrow = re.compile(rf"^\s*({re.escape(entry_point)}\(.*\))\s*(?:==|➞|=>|->|should return)\s*(.+?)\s*$")
    lines = prompt.splitlines()
    tests = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(">>> ") and index + 1 < len(lines):
            call, answer = stripped[4:], lines[index + 1].strip()
        elif match := arrow.match(line):
            call, answer = match.group(1), match.group(2).rstrip(".,")
        else:
            continue
        try:
            node = ast.parse(call, mode="eval").body
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point):
                continue
            args = [ast.literal_eval(arg) for arg in node.args]
            if node.keywords:
                continue
            expected = ast.literal_eval(answer)
        except (SyntaxError, ValueError, TypeError):
            continue
        tests.append({"input": args, "expected": expected, "public": True})
    return tests


def humaneval_test_code(item: dict[str, Any]) -> str:
    """HumanEval's `check` with the prompt's imports and helper functions in front of it.

    Test code runs in its own process and sees only `candidate` (docs/sandbox.md), so a check that calls a
    helper the prompt defines (`poly` in HumanEval/32, `encode_cyclic` in /38, `encode_shift` in /50) gets the
    prompt's own definition, never the candidate's (which a wrong solution could rewrite to agree with it).
    """
    tree = ast.parse(item["prompt"])
    kept: list[ast.stmt] = [
        node
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        or (isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name != item["entry_point"])
    ]
    helpers = ast.unparse(ast.Module(body=kept, type_ignores=[])) if kept else ""
    return f"{helpers}\n\n{item['test']}" if helpers else str(item["test"])


def humaneval_problem(record: dict[str, Any], *, examples: bool = False) -> dict[str, Any]:
    """A HumanEval record as a `POST /v1/problems` body, its canonical solution as the reference.

    With `examples`, the prompt's docstring examples are public tests too (the demo's problems); a few HumanEval
    docstrings are wrong, so a caller that adds them should check them against the reference first.

    Raises:
        RecordError: a field is missing, not text, or the prompt is not Python.
    """
    task_id = text(record, "task_id")
    prompt = text(record, "prompt")
    canonical = text(record, "canonical_solution")
    text(record, "test")
    entry_point = text(record, "entry_point")
    try:
        test_code = humaneval_test_code(record)
    except SyntaxError as exc:
        raise RecordError("prompt", f"not Python: {exc.msg} (line {exc.lineno})") from None
    return {
        "problem_id": task_id,
        "title": task_id,
        "statement": prompt,
        "mode": "function",
        "entry_point": entry_point,
        "tests": [{"code": test_code}, *(docstring_examples(prompt, entry_point) if examples else [])],
        "limits": HUMANEVAL_LIMITS,
        "references": [{"language": "python", "source_code": prompt + canonical}],
    }


def load(record: dict[str, Any], line: int) -> Bodies:
    """One HumanEval problem: a function-mode problem with its hidden `check` and its reference."""
    return Bodies(problems=[humaneval_problem(record)])
