"""Behaving differently under fuzzing cannot pay (issue #20): a pair scored against a problem with tests has the
problem's own test inputs in every repetition (services/lib/fuzzing/mix.py), on the real stack. A candidate that tells
its tests' inputs from generated ones by their values, and answers them wrongly, loses matches there; and the
inputs really are there: a candidate right on the tests' inputs only scores exactly their share."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.helpers import wait_job

ADD = "def add(a, b):\n    return a + b\n"
# The problem's tests use numbers no generated input has (the spec draws from -50..50): argument tests and the
# literal calls of a code test.
ARGUMENT_TESTS = [([1000, 2000], 3000), ([-700, 5000], 4300)]
CODE_TEST = "def check(candidate):\n    assert candidate(800, 900) == 1700\n    assert candidate(-600, -650) == -1250\n"
TEST_INPUTS = {(1000, 2000), (-700, 5000), (800, 900), (-600, -650)}
SPEC = {
    "kind": "function",
    "args": [
        {"name": "a", "type": {"type": "int", "min": -50, "max": 50}},
        {"name": "b", "type": {"type": "int", "min": -50, "max": 50}},
    ],
}
# Tells a test's input by its size: right on generated inputs, wrong on the tests'.
WRONG_ON_TESTS = "def add(a, b):\n    return a + b + 1 if abs(a) > 100 or abs(b) > 100 else a + b\n"
# The converse: right only on the tests' inputs.
RIGHT_ON_TESTS = "def add(a, b):\n    return a + b if abs(a) > 100 or abs(b) > 100 else a + b + 1\n"
N, R = 60, 2


def _problem(client: httpx.Client) -> str:
    problem_id = f"add-{uuid.uuid4().hex[:8]}"
    tests: list[dict[str, Any]] = [{"input": args, "expected": out} for args, out in ARGUMENT_TESTS]
    tests.append({"code": CODE_TEST})
    body = {
        "problem_id": problem_id,
        "statement": "Return a + b.",
        "mode": "function",
        "entry_point": "add",
        "tests": tests,
        "references": [{"language": "python", "source_code": ADD}],
    }
    response = client.post("/v1/problems", json=body)
    assert response.status_code == 201, response.text
    return problem_id


def _score(client: httpx.Client, candidate: str, **fields: Any) -> dict[str, Any]:
    body = {
        "reference": {"language": "python", "source_code": ADD},
        "candidate": {"language": "python", "source_code": candidate},
        "input_spec": SPEC,
        "n_inputs": N,
        "repeats": R,
        "time_budget_s": 30,
        **fields,
    }
    response = client.post("/v1/similarity", json=body)
    assert response.status_code == 202, response.text
    job = wait_job(client, response.json()["job_id"], timeout_s=240)
    assert job["status"] == "succeeded", job
    result: dict[str, Any] = job["result"]
    return result


def test_a_candidate_wrong_only_on_the_tests_inputs_does_not_score_one(tenant_client: httpx.Client) -> None:
    problem_id = _problem(tenant_client)
    # Without the problem (Algorithm 1 alone, generated inputs only) it would look equivalent to the reference...
    alone = _score(tenant_client, WRONG_ON_TESTS, entry_point="add")
    assert alone["df_score"] == 1.0 and alone["test_inputs"] == 0
    # ...but graded against the problem, its tests' inputs are in every repetition, and there it is wrong.
    graded = _score(tenant_client, WRONG_ON_TESTS, problem_id=problem_id)
    assert graded["df_score"] < 1.0, graded
    k = len(TEST_INPUTS)
    assert graded["test_inputs"] == k
    for run in graded["runs"]:
        assert (run["n"], run["test_inputs"], run["test_matches"], run["matches"]) == (N + k, k, 0, N)
    assert graded["df_score"] == N / (N + k)
    example = graded["counterexamples"][0]
    assert example["test_input"] is True
    assert tuple(int(x) for x in example["input"].split(", ")) in TEST_INPUTS


def test_the_tests_inputs_are_among_the_runs_inputs(tenant_client: httpx.Client) -> None:
    problem_id = _problem(tenant_client)
    # Right on exactly the tests' inputs and wrong on every generated one: its matches are the test inputs, one
    # each per repetition, so all of them were run, on both programs.
    graded = _score(tenant_client, RIGHT_ON_TESTS, problem_id=problem_id)
    k = len(TEST_INPUTS)
    for run in graded["runs"]:
        assert (run["matches"], run["test_matches"], run["n"]) == (k, k, N + k), run
    assert graded["df_score"] == k / (N + k)
    assert all(not example["test_input"] for example in graded["counterexamples"])
    # The equivalent program still scores 1.0 with the tests mixed in.
    assert _score(tenant_client, "def add(a, b):\n    return b + a\n", problem_id=problem_id)["df_score"] == 1.0
