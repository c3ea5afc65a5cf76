"""Perturbation through the API, on the real stack: accepted seeds become mutants (attempts linked to their seed),
each executed in nsjail and verified against its arm; judged on request; and reported as paper 001 VI-B does."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.helpers import submit, wait_attempt, wait_job

# The sum and count of the values >= k among n numbers. Every paper 001 operator has sites, and the tests reach
# the defect at every one of them: values past 32 bits (TYPE_NARROW of k, x and total), a value equal to k and an
# extra loop turn that reads a 0 >= k (ROR_BOUNDARY at both comparisons), the last value (LOOP_SHORTEN), nonzero
# sums and counts (ARITH_FLIP at both additions).
CPP_SEED = """\
#include <iostream>
int main() {
    int n;
    long long k;
    std::cin >> n >> k;
    long long total = 0;
    int count = 0;
    for (int i = 0; i < n; i++) {
        long long x;
        std::cin >> x;
        if (x >= k) {
            total = total + x;
            count = count + 1;
        }
    }
    std::cout << total << " " << count << std::endl;
    return 0;
}
"""
CPP_TESTS = [
    {"input": "3 5\n1 5 9\n", "expected": "14 2\n", "public": True},
    {"input": "2 0\n3000000000 3000000000\n", "expected": "6000000000 2\n"},
    {"input": "4 2\n2 2 2 2\n", "expected": "8 4\n"},
    {"input": "1 0\n7\n", "expected": "7 1\n"},
    {"input": "2 3000000000\n3000000000 4000000000\n", "expected": "7000000000 2\n"},
]
IF_LINE = CPP_SEED.splitlines().index("        if (x >= k) {") + 1
FOR_LINE = CPP_SEED.splitlines().index("    for (int i = 0; i < n; i++) {") + 1
PAPER_001 = {"TYPE_NARROW": 1, "ROR_BOUNDARY": 2, "LOOP_SHORTEN": 3, "ARITH_FLIP": 4}


def _accepted_seed(client: httpx.Client) -> dict[str, Any]:
    problem_id = f"sum-at-least-{uuid.uuid4().hex[:8]}"
    body = {"problem_id": problem_id, "statement": "Sum the values >= k.", "tests": CPP_TESTS}
    assert client.post("/v1/problems", json=body).status_code == 201
    seed = wait_attempt(client, submit(client, problem_id, "cpp", CPP_SEED, judges=[])["attempt_id"])
    assert seed["verdict"] == "AC", seed
    return seed


def _perturb(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/perturbations", json=body)
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    job = wait_job(client, job_id, timeout_s=240)
    assert job["status"] == "succeeded", job
    view = client.get(f"/v1/perturbations/{job_id}").json()
    assert view["progress"]["done"] == view["progress"]["total"]
    return dict(view)


def test_the_catalogue_lists_the_paper_operators_and_controls(tenant_client: httpx.Client) -> None:
    catalogue = {op["name"]: op for op in tenant_client.get("/v1/perturbations/operators").json()}
    for name, severity in PAPER_001.items():
        assert catalogue[name]["arm"] == "semantic" and catalogue[name]["severity"] == severity
        assert {"c", "cpp", "java"} <= set(catalogue[name]["languages"])
        assert catalogue[name]["example"]["before"] != catalogue[name]["example"]["after"]
    assert {op["arm"] for op in catalogue.values()} == {"semantic", "control"}


@pytest.mark.timeout(300)  # its job alone may take _perturb's 240 s on a loaded machine: every mutant is compiled
def test_every_paper_operator_yields_a_verified_mutant_and_controls_keep_passing(tenant_client: httpx.Client) -> None:
    seed = _accepted_seed(tenant_client)
    job = _perturb(tenant_client, attempt_ids=[seed["attempt_id"]], all_sites=True)
    mutants = job["mutants"]
    by_operator: dict[str, list[dict[str, Any]]] = {}
    for mutant in mutants:
        by_operator.setdefault(mutant["operator"], []).append(mutant)
    assert set(PAPER_001) <= set(by_operator), sorted(by_operator)
    assert len(by_operator["TYPE_NARROW"]) == 3 and len(by_operator["ARITH_FLIP"]) == 2
    for mutant in mutants:
        assert mutant["parent_attempt_id"] == seed["attempt_id"] and mutant["status"] == "done"
        assert mutant["diff"].startswith("---") and mutant["line"] >= 1 and mutant["column"] >= 1
        assert isinstance(mutant["guard_context"], bool)
        found = mutant["verification"]
        assert found["compiles"] and found["verified"], mutant
        if mutant["arm"] == "control":
            assert mutant["verdict"] == "AC" and not found["operator_bug"], mutant
            assert mutant["severity"] is None and not mutant["guard_context"]
    for name, severity in PAPER_001.items():
        for mutant in by_operator[name]:
            assert (mutant["arm"], mutant["severity"]) == ("semantic", severity)
            # The tests reach every one of these defects.
            assert mutant["verdict"] != "AC" and not mutant["verification"]["equivalent_suspect"], mutant
    # The edit in the branch condition (x >= k) is a guard; the loop bound is not.
    guard_of = {m["line"]: m["guard_context"] for m in by_operator["ROR_BOUNDARY"]}
    assert guard_of == {IF_LINE: True, FOR_LINE: False}
    assert [m["guard_context"] for m in by_operator["LOOP_SHORTEN"]] == [False]
    # A mutant is an attempt: its own view says how it was made.
    flip = by_operator["ARITH_FLIP"][0]
    view = tenant_client.get(f"/v1/attempts/{flip['attempt_id']}").json()
    assert (view["operator"], view["arm"], view["severity"]) == ("ARITH_FLIP", "semantic", 4)
    assert view["mutation"]["diff"] == flip["diff"]


def test_the_same_seed_gives_the_same_mutants(tenant_client: httpx.Client) -> None:
    seed = _accepted_seed(tenant_client)
    first = _perturb(tenant_client, attempt_ids=[seed["attempt_id"]], seed=3, operators=["ARITH_FLIP", "TYPE_NARROW"])
    again = _perturb(tenant_client, attempt_ids=[seed["attempt_id"]], seed=3, operators=["ARITH_FLIP", "TYPE_NARROW"])
    assert {m["operator"] for m in first["mutants"]} == {"ARITH_FLIP", "TYPE_NARROW"}
    assert sorted(m["diff"] for m in first["mutants"]) == sorted(m["diff"] for m in again["mutants"])
    assert {m["attempt_id"] for m in first["mutants"]}.isdisjoint(m["attempt_id"] for m in again["mutants"])


@pytest.mark.timeout(300)  # as above, then the report
def test_judged_mutants_feed_the_perturbation_report(tenant_client: httpx.Client) -> None:
    seeds = [_accepted_seed(tenant_client) for _ in range(2)]
    job = _perturb(
        tenant_client, attempt_ids=[s["attempt_id"] for s in seeds], judge=True, judges=["sample_tests"], all_sites=True
    )
    judged = [m for m in job["mutants"] if m["verification"]["verified"]]
    assert judged
    for mutant in judged[:3]:
        view = tenant_client.get(f"/v1/attempts/{mutant['attempt_id']}").json()
        assert [(j["judge"], j["condition"], j["status"]) for j in view["judgments"]] == [
            ("sample_tests", "blind", "ok")
        ]
    for seed in seeds:
        view = tenant_client.get(f"/v1/attempts/{seed['attempt_id']}").json()
        assert ("sample_tests", "blind", "ok") in [(j["judge"], j["condition"], j["status"]) for j in view["judgments"]]
    accepted = tenant_client.post("/v1/reports", json={"kind": "perturbation", "bootstrap": 200}).json()
    wait_job(tenant_client, accepted["job_id"])
    report = tenant_client.get(f"/v1/reports/{accepted['report_id']}").json()
    row = report["result"]["tables"]["perturbation"]["rows"][0]
    assert row["judge"] == "sample_tests" and row["mutants"] == len(judged)
    assert "arm_discrimination" in row and "severity_gradient" in row, report["result"]["errors"]
    assert report["result"]["params"]["cluster"] == "seed"


def test_bad_perturbation_requests_name_their_field(tenant_client: httpx.Client) -> None:
    seed = _accepted_seed(tenant_client)
    unknown = tenant_client.post("/v1/perturbations", json={"attempt_ids": [seed["attempt_id"]], "operators": ["X"]})
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["loc"] == ["body", "operators", 0]
    python_only = tenant_client.post(
        "/v1/perturbations", json={"attempt_ids": [seed["attempt_id"]], "operators": ["BCR"]}
    )
    assert python_only.status_code == 422 and python_only.json()["errors"][0]["loc"] == ["body", "operators"]
    missing = tenant_client.post("/v1/perturbations", json={"attempt_ids": ["att_nothing"]})
    assert missing.status_code == 404 and missing.json()["errors"][0]["loc"] == ["body", "attempt_ids", 0]
    wrong = submit(tenant_client, seed["problem_id"], "cpp", CPP_SEED.replace("x >= k", "x > k"), judges=[])
    wait_attempt(tenant_client, wrong["attempt_id"])
    rejected = tenant_client.post("/v1/perturbations", json={"attempt_ids": [wrong["attempt_id"]]})
    assert rejected.status_code == 422 and rejected.json()["errors"][0]["loc"] == ["body", "attempt_ids", 0]
    assert "accepted" in rejected.json()["errors"][0]["msg"]


# A stdin template for the seed's problem: n and k, then n values (small, so that k is often met).
CPP_INPUT_SPEC = {
    "kind": "stdin",
    "lines": [
        {"tokens": [{"type": "int", "name": "n", "min": 0, "max": 6}, {"type": "int", "min": -5, "max": 5}]},
        {"tokens": [{"type": "int", "min": -5, "max": 5, "count": "n"}]},
    ],
}


@pytest.mark.timeout(400)  # the seed, its mutants, their verification, then every pair fuzzed
def test_confirm_fuzzes_every_mutant_against_its_seed(tenant_client: httpx.Client) -> None:
    problem_id = f"sum-at-least-{uuid.uuid4().hex[:8]}"
    body = {"problem_id": problem_id, "statement": "Sum the values >= k.", "tests": CPP_TESTS}
    assert tenant_client.post("/v1/problems", json={**body, "input_spec": CPP_INPUT_SPEC}).status_code == 201
    seed = wait_attempt(tenant_client, submit(tenant_client, problem_id, "cpp", CPP_SEED, judges=[])["attempt_id"])
    assert seed["verdict"] == "AC", seed
    response = tenant_client.post(
        "/v1/perturbations",
        json={"attempt_ids": [seed["attempt_id"]], "confirm": True, "confirm_inputs": 40, "confirm_repeats": 2},
    )
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert wait_job(tenant_client, accepted["job_id"], timeout_s=240)["status"] == "succeeded"
    confirmation = wait_job(tenant_client, accepted["confirm_job_id"], timeout_s=240)
    assert confirmation["status"] == "succeeded", confirmation
    view = tenant_client.get(f"/v1/perturbations/{accepted['job_id']}").json()
    assert view["confirm_job_id"] == accepted["confirm_job_id"]
    by_operator = {m["operator"]: m for m in view["mutants"]}
    for mutant in view["mutants"]:
        fuzzing = mutant["fuzzing"]
        assert fuzzing["status"] == "scored", (mutant["operator"], fuzzing)
        if mutant["arm"] == "control":  # behaviour-preserving: the same on every generated input
            assert (fuzzing["df_score"], fuzzing["confirms"]) == (1.0, True), mutant
    for defect in ("ARITH_FLIP", "LOOP_SHORTEN"):
        assert by_operator[defect]["fuzzing"]["df_score"] < 1.0 and by_operator[defect]["fuzzing"]["confirms"]
    # The pairs are a similarity job of their own: the LoCaL table over the seed's mutants.
    table = tenant_client.get(f"/v1/similarity/{accepted['confirm_job_id']}").json()
    assert table["summary"]["pairs"] == len(view["mutants"])
    assert {row["labels"]["arm"] for row in table["pairs"]} == {"semantic", "control"}


def test_cancelling_a_perturbation_cancels_its_confirmation(tenant_client: httpx.Client) -> None:
    seed = _accepted_seed(tenant_client)
    response = tenant_client.post("/v1/perturbations", json={"attempt_ids": [seed["attempt_id"]], "confirm": True})
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert tenant_client.delete(f"/v1/jobs/{accepted['job_id']}").json()["status"] == "cancelled"
    assert tenant_client.get(f"/v1/jobs/{accepted['confirm_job_id']}").json()["status"] == "cancelled"
