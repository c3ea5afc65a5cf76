"""A problem's references run against its own tests before it counts as ready (gateway/validation.py), in the
executor over the queue, on the real stack: a passing reference makes it `ready`, a failing one `invalid` with the
failing tests by index and verdict (never what they printed), and submissions stay accepted either way."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from tests.helpers import SUM_SOURCES, add_sum_problem, submit, wait_attempt

SQUARE = "def square(x):\n    return x * x\n"
# Right while a < 5: the first test (1 2) passes, the other two do not.
HALF_SUM = "a, b = map(int, input().split())\nprint(a + b if a < 5 else a - b)\n"


def _settled(client: httpx.Client, problem_id: str, timeout_s: float = 120) -> dict[str, Any]:
    """The problem once every validation run ended (one failing run makes it invalid before the others end)."""
    deadline = time.monotonic() + timeout_s
    while True:
        problem = client.get(f"/v1/problems/{problem_id}").json()
        runs = problem["validation"]["references"]
        if all(run["status"] not in ("queued", "running") for run in runs):
            assert problem["validation"]["status"] != "pending"
            return dict(problem)
        if time.monotonic() > deadline:
            raise AssertionError(f"problem {problem_id} still pending after {timeout_s} s")
        time.sleep(0.1)


def test_a_reference_that_passes_every_test_makes_the_problem_ready(tenant_client: httpx.Client) -> None:
    body = {
        "problem_id": f"square-{uuid.uuid4().hex[:8]}",
        "statement": "Return the square.",
        "mode": "function",
        "entry_point": "square",
        "tests": [
            {"input": [3], "expected": 9, "public": True},
            {"code": "def check(candidate):\n    assert candidate(-4) == 16\n"},
        ],
        "references": [{"language": "python", "source_code": SQUARE}],
    }
    created = tenant_client.post("/v1/problems", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["validation"]["status"] in ("pending", "ready")
    validation = _settled(tenant_client, body["problem_id"])["validation"]
    assert validation["status"] == "ready" and validation["failing_tests"] == []
    (run,) = validation["references"]
    assert run["reference"] == 0 and run["verdict"] == "AC" and (run["passed"], run["total"]) == (2, 2)
    job = tenant_client.get(f"/v1/jobs/{run['job_id']}").json()
    assert job["status"] == "succeeded"
    # The run's result keeps each test's verdict, never what the reference printed: on a hidden test, its output
    # is the expected value, and any key that reads the problem may read this job.
    assert [test["status"] for test in job["result"]["tests"]] == ["AC", "AC"]
    assert not {"stdout", "stderr", "message"} & {key for test in job["result"]["tests"] for key in test}
    # Sent again, the same problem: no second validation.
    again = tenant_client.post("/v1/problems", json=body)
    assert again.status_code == 200 and again.json()["validation"]["references"][0]["job_id"] == run["job_id"]


def test_a_failing_reference_makes_the_problem_invalid_naming_the_failing_tests(tenant_client: httpx.Client) -> None:
    references = [
        {"language": "python", "source_code": SUM_SOURCES["python"]},
        {"language": "python", "source_code": HALF_SUM},
    ]
    problem_id = add_sum_problem(tenant_client, references=references)
    problem = _settled(tenant_client, problem_id)
    validation = problem["validation"]
    assert validation["status"] == "invalid"
    assert validation["failing_tests"] == [
        {"reference": 1, "index": 1, "status": "WA"},
        {"reference": 1, "index": 2, "status": "WA"},
    ]
    assert [(run["reference"], run["verdict"], run["passed"]) for run in validation["references"]] == [
        (0, "AC", 3),
        (1, "WA", 1),
    ]
    # Verdicts only: nothing a test printed or expected (the hidden tests' data) is in the state.
    assert "4000000000" not in str(validation) and "expected" not in str(validation)
    # Listed the same way.
    (listed,) = [item for item in tenant_client.get("/v1/problems").json()["items"] if item["problem_id"] == problem_id]
    assert listed["validation"] == validation
    # Submissions are still accepted: the state is the problem's, the verdicts the attempt's (docs/api.md).
    accepted = submit(tenant_client, problem_id, "python", SUM_SOURCES["python"])
    assert wait_attempt(tenant_client, accepted["attempt_id"])["verdict"] == "AC"


def test_a_reference_that_does_not_compile_is_invalid(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client, references=[{"language": "c", "source_code": "int main( {"}])
    validation = _settled(tenant_client, problem_id)["validation"]
    assert validation["status"] == "invalid" and validation["references"][0]["verdict"] == "CE"


def test_a_problem_without_a_reference_is_unchecked(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    validation = tenant_client.get(f"/v1/problems/{problem_id}").json()["validation"]
    assert validation == {
        "status": "unchecked",
        "reason": "the problem has no reference solution",
        "references": [],
        "failing_tests": [],
    }


def test_a_reference_the_executor_cannot_run_as_given_is_invalid_with_the_reason(tenant_client: httpx.Client) -> None:
    """A C reference of a function-mode problem: the executor refuses the run (function mode is Python's), which is
    the reference's fault, not the platform's, so the problem is invalid, not unchecked."""
    body = {
        "problem_id": f"square-{uuid.uuid4().hex[:8]}",
        "statement": "Return the square.",
        "mode": "function",
        "entry_point": "square",
        "tests": [{"input": [3], "expected": 9}],
        "references": [
            {"language": "python", "source_code": SQUARE},
            {"language": "c", "source_code": "int square(int x) { return x * x; }\n"},
        ],
    }
    assert tenant_client.post("/v1/problems", json=body).status_code == 201
    validation = _settled(tenant_client, body["problem_id"])["validation"]
    assert validation["status"] == "invalid" and validation["failing_tests"] == []
    python, c = validation["references"]
    assert python["verdict"] == "AC" and "error" not in python
    assert c["status"] == "failed" and c["error"].startswith("invalid request: ")
