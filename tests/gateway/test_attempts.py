"""Submitting programs over HTTP and reading their verdicts, as api.md promises."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import SUM_SOURCES, add_sum_problem, submit, wait_attempt, wait_job


@pytest.mark.parametrize("language", ["python", "c", "cpp", "java"])
def test_a_correct_program_is_accepted_in_every_language(tenant_client: httpx.Client, language: str) -> None:
    problem_id = add_sum_problem(tenant_client)
    accepted = submit(tenant_client, problem_id, language, SUM_SOURCES[language])
    assert accepted["status"] == "queued"
    view = wait_attempt(tenant_client, accepted["attempt_id"])
    assert view["verdict"] == "AC", view
    assert (view["passed"], view["total"]) == (3, 3)
    assert [t["index"] for t in view["tests"]] == [0, 1, 2]
    assert [t["public"] for t in view["tests"]] == [True, False, False]
    assert all(t["status"] == "AC" and t["time_ms"] >= 0 for t in view["tests"])


def test_verdict_is_the_first_failing_test_in_order(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    # Overflows 32 bits on the third test only: tests 0 and 1 pass, test 2 is WA.
    source = '#include <stdio.h>\nint main(void){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);return 0;}\n'
    view = wait_attempt(tenant_client, submit(tenant_client, problem_id, "c", source)["attempt_id"])
    assert view["verdict"] == "WA"
    assert [t["status"] for t in view["tests"]] == ["AC", "AC", "WA"]
    assert (view["passed"], view["total"]) == (2, 3)


def test_compile_error_reports_the_compiler_output(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    view = wait_attempt(
        tenant_client, submit(tenant_client, problem_id, "cpp", "int main( { return 0; }\n")["attempt_id"]
    )
    assert view["verdict"] == "CE"
    assert "error" in view["compile_output"]
    assert view["tests"] == []


def test_function_mode_accepts_both_test_forms(tenant_client: httpx.Client) -> None:
    problem = {
        "problem_id": "add-fn",
        "statement": "Return a + b.",
        "mode": "function",
        "entry_point": "add",
        "tests": [
            {"input": [1, 2], "expected": 3, "public": True},
            {"input": [0.1, 0.2], "expected": 0.3},
            {"code": "def check(candidate):\n    assert candidate(2, 2) == 4\n    assert candidate(-1, 1) == 0\n"},
        ],
        "checker": {"kind": "float", "abs_tol": 1e-9},
    }
    assert tenant_client.post("/v1/problems", json=problem).status_code == 201
    good = wait_attempt(
        tenant_client,
        submit(tenant_client, "add-fn", "python", "def add(a, b):\n    return a + b\n")["attempt_id"],
    )
    assert good["verdict"] == "AC", good
    bad = wait_attempt(
        tenant_client,
        submit(tenant_client, "add-fn", "python", "def add(a, b):\n    return a - b\n")["attempt_id"],
    )
    assert bad["verdict"] == "WA"
    crash = wait_attempt(
        tenant_client,
        submit(tenant_client, "add-fn", "python", "def add(a, b):\n    raise ValueError('no')\n")["attempt_id"],
    )
    assert crash["verdict"] == "RE"


def test_inline_problem_is_stored_once(tenant_client: httpx.Client) -> None:
    problem = {"statement": "Echo.", "tests": [{"input": "hi\n", "expected": "hi\n"}]}
    body = {"problem": problem, "language": "python", "source_code": "print(input())\n"}
    first = tenant_client.post("/v1/attempts", json=body).json()
    second = tenant_client.post("/v1/attempts", json=body).json()
    a, b = wait_attempt(tenant_client, first["attempt_id"]), wait_attempt(tenant_client, second["attempt_id"])
    assert a["verdict"] == b["verdict"] == "AC"
    assert a["problem_id"] == b["problem_id"]


def test_attempt_uid_is_idempotent(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    body = {
        "attempt_uid": "u1-p1-k1",
        "problem_id": problem_id,
        "language": "python",
        "source_code": SUM_SOURCES["python"],
        "participant": "u1",
        "turn": 1,
    }
    first = tenant_client.post("/v1/attempts", json=body)
    again = tenant_client.post("/v1/attempts", json=body)
    assert first.status_code == again.status_code == 202
    assert first.json()["attempt_id"] == again.json()["attempt_id"]
    assert first.json()["job_id"] == again.json()["job_id"]
    changed = tenant_client.post("/v1/attempts", json={**body, "source_code": "print(0)\n"})
    assert changed.status_code == 409
    assert changed.headers["content-type"].startswith("application/problem+json")
    assert changed.json()["errors"][0]["loc"] == ["body", "attempt_uid"]
    wait_attempt(tenant_client, first.json()["attempt_id"])
    listed = tenant_client.get("/v1/attempts", params={"problem_id": problem_id}).json()["items"]
    assert len(listed) == 1


def test_batch_runs_every_attempt_and_counts_progress(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    sources = [SUM_SOURCES["python"], "print(0)\n", "import sys\nsys.exit(3)\n", SUM_SOURCES["c"]]
    languages = ["python", "python", "python", "c"]
    response = tenant_client.post(
        "/v1/attempts:batch",
        json={
            "attempts": [
                {
                    "problem_id": problem_id,
                    "language": lang,
                    "source_code": src,
                    "participant": "p",
                    "turn": i,
                }
                for i, (lang, src) in enumerate(zip(languages, sources, strict=True))
            ]
        },
    )
    assert response.status_code == 202, response.text
    batch = response.json()
    assert len(batch["attempt_ids"]) == 4
    job = wait_job(tenant_client, batch["job_id"])
    assert job["status"] == "succeeded"
    assert job["progress"] == {"done": 4, "total": 4}
    assert job["kind"] == "execute_batch"
    verdicts = [tenant_client.get(f"/v1/attempts/{i}").json()["verdict"] for i in batch["attempt_ids"]]
    assert verdicts == ["AC", "WA", "RE", "AC"]


def test_a_batch_answers_duplicates_and_inline_problems_as_single_submissions(tenant_client: httpx.Client) -> None:
    """The batch is stored in one INSERT: a uid repeated in it, or stored before, is the same attempt; a problem
    given inline can be named by id further on; a conflict names its item."""
    problem_id = add_sum_problem(tenant_client)
    before = submit(tenant_client, problem_id, "python", "print(7)\n", attempt_uid="b-1")
    inline = {"problem_id": "inline-sum", "statement": "Print 3.", "tests": [{"input": "", "expected": "3\n"}]}
    items: list[dict[str, Any]] = [
        {"problem_id": problem_id, "language": "python", "source_code": "print(7)\n", "attempt_uid": "b-1"},
        {"problem": inline, "language": "python", "source_code": "print(3)\n", "attempt_uid": "b-2"},
        {"problem_id": "inline-sum", "language": "python", "source_code": "print(3)\n", "attempt_uid": "b-2"},
        {"problem_id": "inline-sum", "language": "python", "source_code": "print(4)\n"},
    ]
    response = tenant_client.post("/v1/attempts:batch", json={"attempts": items})
    assert response.status_code == 202, response.text
    ids = response.json()["attempt_ids"]
    assert ids[0] == before["attempt_id"] and ids[1] == ids[2] and len(set(ids)) == 3
    job = wait_job(tenant_client, response.json()["job_id"])
    assert job["progress"] == {"done": 2, "total": 2}
    assert [tenant_client.get(f"/v1/attempts/{i}").json()["verdict"] for i in ids[1:]] == ["AC", "AC", "WA"]
    conflict = tenant_client.post(
        "/v1/attempts:batch", json={"attempts": [items[3], {**items[2], "source_code": "print(5)\n"}]}
    )
    assert conflict.status_code == 409
    assert conflict.json()["errors"][0]["loc"] == ["body", "attempts", 1, "attempt_uid"]
    unknown = tenant_client.post("/v1/attempts:batch", json={"attempts": [{**items[3], "problem_id": "nope"}]})
    assert unknown.status_code == 404 and unknown.json()["errors"][0]["loc"] == ["body", "attempts", 0, "problem_id"]


def test_listing_pages_with_a_cursor_and_filters(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    ids = [
        submit(tenant_client, problem_id, "python", f"print({i})\n", participant=f"p{i % 2}")["attempt_id"]
        for i in range(5)
    ]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"problem_id": problem_id, "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = tenant_client.get("/v1/attempts", params=params).json()
        seen += [item["attempt_id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    only_p0 = tenant_client.get("/v1/attempts", params={"problem_id": problem_id, "participant": "p0"}).json()
    assert len(only_p0["items"]) == 3
    bad = tenant_client.get("/v1/attempts", params={"cursor": "!!!"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["loc"] == ["query", "cursor"]


def test_direct_execution_waits_and_returns_output(tenant_client: httpx.Client) -> None:
    response = tenant_client.post(
        "/v1/executions",
        json={
            "language": "python",
            "source_code": "import sys\nprint(sys.stdin.read().upper(), end='')\n",
            "stdin": "hello\n",
            "wait": True,
        },
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["verdict"] == "AC"
    assert result["tests"][0]["stdout"] == "HELLO\n"
    job = tenant_client.get(f"/v1/jobs/{result['job_id']}").json()
    assert job["status"] == "succeeded" and job["kind"] == "execute_direct"


def test_direct_execution_without_wait_is_a_job(tenant_client: httpx.Client) -> None:
    response = tenant_client.post(
        "/v1/executions",
        json={
            "language": "cpp",
            "source_code": '#include <cstdio>\nint main(){int x;scanf("%d",&x);printf("%d\\n",x*2);}',
            "tests": [{"input": "21\n", "expected": "42\n"}, {"input": "2\n", "expected": "5\n"}],
        },
    )
    assert response.status_code == 202
    job = wait_job(tenant_client, response.json()["job_id"])
    assert job["result"]["verdict"] == "WA"
    assert [t["status"] for t in job["result"]["tests"]] == ["AC", "WA"]


def test_cancel_stops_queued_work(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client, limits={"cpu_time_s": 1, "wall_time_s": 2})
    slow = "while True:\n    pass\n"
    response = tenant_client.post(
        "/v1/attempts:batch",
        json={
            "attempts": [
                {"problem_id": problem_id, "language": "python", "source_code": slow + f"# {i}\n"} for i in range(12)
            ]
        },
    )
    job_id = response.json()["job_id"]
    cancelled = tenant_client.delete(f"/v1/jobs/{job_id}")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    wait = wait_job(tenant_client, job_id)
    assert wait["status"] == "cancelled"
    # Work that had not ended never gets a verdict: those attempts end cancelled (tests/gateway/test_cancel.py).
    views = [tenant_client.get(f"/v1/attempts/{i}").json() for i in response.json()["attempt_ids"]]
    assert any(v["status"] == "cancelled" and v["verdict"] is None for v in views)
    assert all(v["status"] in ("cancelled", "done") for v in views)
    # Cancelling a finished job changes nothing.
    again = tenant_client.delete(f"/v1/jobs/{job_id}")
    assert again.json()["status"] == "cancelled"


def test_languages_report_real_toolchain_versions(tenant_client: httpx.Client) -> None:
    languages = {item["id"]: item for item in tenant_client.get("/v1/languages").json()}
    assert set(languages) == {"python", "c", "cpp", "java"}
    assert languages["python"]["version"].startswith("3.")
    assert languages["java"]["version"].startswith("17")
    assert languages["cpp"]["version"]


def test_problem_can_be_read_back_and_conflicts_on_change(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    stored = tenant_client.get(f"/v1/problems/{problem_id}").json()
    # A key without the author scope reads the public tests and the number of hidden ones.
    assert stored["problem_id"] == problem_id and len(stored["tests"]) == 1 and stored["hidden_tests"] == 2
    assert stored["checker"]["kind"] == "tokens"
    changed = tenant_client.post("/v1/problems", json={"problem_id": problem_id, "statement": "different"})
    assert changed.status_code == 409
    assert changed.json()["errors"][0]["loc"] == ["body", "problem_id"]
