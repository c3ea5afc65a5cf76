"""APPS problems (problem_id, question, input_output, solutions, optional fn_name) as stdio or function problems.

`input_output` is a JSON string (or object) with `inputs` and `outputs` lists, and sometimes `fn_name`; with a
`fn_name` (on the record or in `input_output`) the problem is a Python function-mode problem whose tests are
argument tests, else a stdio problem. `solutions` is a JSON string (or list) of Python programs: the references.
"""

from __future__ import annotations

import json
from typing import Any

from services.kernel.contracts import MAX_REFERENCES
from services.lib.datasets.records import Bodies, RecordError, identifier, text


def _json_field(record: dict[str, Any], field: str, kind: type) -> Any:
    value = record.get(field)
    if isinstance(value, str):
        if not value.strip():
            return kind()
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RecordError(field, f"not JSON: {exc.msg}") from None
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise RecordError(field, f"expected a {kind.__name__} (or its JSON text), got {type(value).__name__}")
    return value


def _stdio_text(value: Any, field: str) -> str:
    # APPS spells most inputs and outputs as one string, a few as a list of lines.
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return "\n".join(value)
    if not isinstance(value, str):
        raise RecordError(field, f"expected text, got {type(value).__name__}")
    return value


def load(record: dict[str, Any], line: int) -> Bodies:
    """One APPS problem as a problem body `APPS/<problem_id>`.

    Function mode: each input is the argument list; an output wrapped in a one-element list (APPS's convention for
    call-based problems) is unwrapped to the return value.

    Raises:
        RecordError: a field is missing or malformed (`input_output` not JSON, lists of different lengths, ...).
    """
    problem_id = identifier(record, "problem_id")
    question = text(record, "question")
    io = _json_field(record, "input_output", dict)
    inputs, outputs = io.get("inputs"), io.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise RecordError("input_output", "needs an `inputs` list and an `outputs` list")
    if len(inputs) != len(outputs):
        raise RecordError("input_output", f"{len(inputs)} inputs but {len(outputs)} outputs")
    solutions = _json_field(record, "solutions", list)
    for index, solution in enumerate(solutions):
        if not isinstance(solution, str):
            raise RecordError(f"solutions[{index}]", f"expected a program, got {type(solution).__name__}")
    fn_name = record.get("fn_name") or io.get("fn_name")
    problem: dict[str, Any] = {"problem_id": f"APPS/{problem_id}", "title": f"APPS/{problem_id}", "statement": question}
    if fn_name is not None:
        if not isinstance(fn_name, str) or not fn_name.isidentifier():
            raise RecordError("fn_name", f"not a Python identifier: {fn_name!r}")
        tests = []
        for index, (args, expected) in enumerate(zip(inputs, outputs, strict=True)):
            if not isinstance(args, list):
                raise RecordError(f"input_output.inputs[{index}]", "expected the list of arguments")
            if isinstance(expected, list) and len(expected) == 1:
                expected = expected[0]
            tests.append({"input": args, "expected": expected})
        problem |= {"mode": "function", "entry_point": fn_name, "tests": tests}
    else:
        problem |= {
            "mode": "stdio",
            "tests": [
                {
                    "input": _stdio_text(given, f"input_output.inputs[{index}]"),
                    "expected": _stdio_text(wanted, f"input_output.outputs[{index}]"),
                }
                for index, (given, wanted) in enumerate(zip(inputs, outputs, strict=True))
            ],
        }
    kept = [s for s in solutions if s.strip()][:MAX_REFERENCES]  # the API keeps at most that many
    problem["references"] = [{"language": "python", "source_code": s} for s in kept]
    return Bodies(problems=[problem])
