"""Every attempt judged by every configured judge: one verified row per unit, failures and judges that do not apply
recorded with reasons."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from services.kernel.judges import JudgesFileError
from services.launcher.stack import EmbeddedStack
from tests.fake_llm import ScriptedLLM
from tests.helpers import SUM_SOURCES, add_sum_problem, count_rows, fetch_rows, submit, wait_attempt, wait_job


def _source(script: str | None = None) -> str:
    """The A+B solution with a unique tag (so its requests can be told apart) and an optional script marker."""
    tag = f"# attempt {uuid.uuid4().hex}\n"
    marker = f"# judge-script: {script}\n" if script else ""
    return tag + marker + SUM_SOURCES["python"]


def _requests_for(server: ScriptedLLM, source: str) -> list[bytes]:
    tag = source.split("\n", 1)[0]
    return [r.body for r in server.requests if tag in r.json["messages"][-1]["content"]]


def _rows(view: dict, judge: str) -> list[dict]:
    return [j for j in view["judgments"] if j["judge"] == judge]


def test_every_configured_judge_judges_every_attempt(tenant_client: httpx.Client, scripted_llm: ScriptedLLM) -> None:
    problem_id = add_sum_problem(tenant_client)
    source = _source()
    view = wait_attempt(tenant_client, submit(tenant_client, problem_id, "python", source)["attempt_id"])
    assert view["status"] == "done" and view["verdict"] == "AC"
    by_judge = {j["judge"]: j for j in view["judgments"]}
    assert set(by_judge) == {"sample_tests", "edit_similarity", "scripted"}
    # One public test, passed: Laplace's rule gives (1 + 1) / (1 + 2).
    assert by_judge["sample_tests"]["status"] == "ok"
    assert by_judge["sample_tests"]["p_ac"] == pytest.approx(2 / 3)
    # No reference solution: the judge does not apply, recorded with its reason, never a made-up score.
    assert by_judge["edit_similarity"]["status"] == "not_applicable"
    assert by_judge["edit_similarity"]["error"] == "no reference solution in python"
    assert by_judge["edit_similarity"]["score"] is None and by_judge["edit_similarity"]["p_ac"] is None
    llm = by_judge["scripted"]
    assert (llm["status"], llm["p_ac"], llm["s_algo"], llm["s_robust"]) == ("ok", 0.75, 4, 3)
    assert llm["served_model"] == "scripted-model" and llm["requested_model"] == "scripted-model"
    assert llm["prompt_version"].startswith("cocreation.v1+") and llm["tries"] == 1
    assert all(j["condition"] == "blind" and j["repeat"] == 0 for j in view["judgments"])
    assert view["panel"]["judges"] == 2 and 0 < view["panel"]["consensus"] <= 1
    assert len(_requests_for(scripted_llm, source)) == 1


def test_judges_are_listed_without_secrets(tenant_client: httpx.Client) -> None:
    judges = {j["name"]: j for j in tenant_client.get("/v1/judges").json()}
    assert judges["scripted"] == {
        "name": "scripted",
        "kind": "llm",
        "rubric": "cocreation",
        "provider": "openai-compatible",
        "model": "scripted-model",
        "enabled": True,
        "max_tokens": 1024,
        "price_per_mtok_in": None,
        "price_per_mtok_out": None,
    }
    assert judges["sample_tests"]["kind"] == "offline" and judges["sample_tests"]["max_tokens"] is None


def test_a_repaired_answer_is_recorded_once_with_its_tries(
    tenant_client: httpx.Client, scripted_llm: ScriptedLLM
) -> None:
    problem_id = add_sum_problem(tenant_client)
    source = _source("truncated,http429,renamed")
    view = wait_attempt(tenant_client, submit(tenant_client, problem_id, "python", source)["attempt_id"])
    (row,) = _rows(view, "scripted")
    assert (row["status"], row["tries"], row["error"]) == ("ok", 3, None)
    assert row["served_model"] == "scripted-model-2026-06-01"  # what the provider said it served
    bodies = _requests_for(scripted_llm, source)
    assert len(bodies) == 3 and len(set(bodies)) == 1  # the identical request, reissued


def test_a_persistent_failure_is_recorded_within_the_bound(
    tenant_client: httpx.Client, scripted_llm: ScriptedLLM, stack: EmbeddedStack
) -> None:
    problem_id = add_sum_problem(tenant_client)
    source = _source("http500")
    accepted = submit(tenant_client, problem_id, "python", source)
    view = wait_attempt(tenant_client, accepted["attempt_id"])
    (row,) = _rows(view, "scripted")
    assert (row["status"], row["error"], row["tries"], row["p_ac"]) == ("failed", "http 500", 3, None)
    assert len(_requests_for(scripted_llm, source)) == 3  # max_tries, not one more
    sql = "SELECT COUNT(*) FROM judgment WHERE attempt_id = :a AND judge = 'scripted'"
    assert count_rows(stack.database_url, sql, a=accepted["attempt_id"]) == 1


def test_rejudging_retries_failures_and_adds_fresh_repeats_only(
    tenant_client: httpx.Client, scripted_llm: ScriptedLLM, stack: EmbeddedStack
) -> None:
    problem_id = add_sum_problem(tenant_client)
    source = _source("range,range,range,valid")
    accepted = submit(tenant_client, problem_id, "python", source)
    first = wait_attempt(tenant_client, accepted["attempt_id"])
    assert _rows(first, "scripted")[0]["error"].startswith("range")
    job = tenant_client.post("/v1/judgments", json={"attempt_ids": [accepted["attempt_id"]], "judges": ["scripted"]})
    assert job.status_code == 202
    assert wait_job(tenant_client, job.json()["job_id"])["progress"] == {"done": 1, "total": 1}
    (row,) = _rows(tenant_client.get(f"/v1/attempts/{accepted['attempt_id']}").json(), "scripted")
    assert row["status"] == "ok" and row["error"] is None  # the success overwrote the failure
    assert len(_requests_for(scripted_llm, source)) == 4
    # Nothing is resent for an ok row; a second repeat is a fresh request.
    again = tenant_client.post(
        "/v1/judgments", json={"attempt_ids": [accepted["attempt_id"]], "judges": ["scripted"], "repeats": 2}
    )
    assert wait_job(tenant_client, again.json()["job_id"])["status"] == "succeeded"
    rows = _rows(tenant_client.get(f"/v1/attempts/{accepted['attempt_id']}").json(), "scripted")
    assert sorted(r["repeat"] for r in rows) == [0, 1] and all(r["status"] == "ok" for r in rows)
    assert len(_requests_for(scripted_llm, source)) == 5
    sql = "SELECT COUNT(*) FROM judgment WHERE attempt_id = :a AND judge = 'scripted'"
    assert count_rows(stack.database_url, sql, a=accepted["attempt_id"]) == 2


def test_three_conditions_with_provenance_and_no_labels(tenant_client: httpx.Client, scripted_llm: ScriptedLLM) -> None:
    problem_id = add_sum_problem(tenant_client)
    other_problem = add_sum_problem(tenant_client)
    participant = f"u-{uuid.uuid4().hex[:6]}"
    anchored_source = _source()
    other = submit(
        tenant_client,
        other_problem,
        "python",
        _source(),
        participant=participant,
        turn=1,
        context="OTHER-PROBLEM-LOG: how do I read input?",
        judges=[],
    )
    wait_attempt(tenant_client, other["attempt_id"])
    conditions = ["blind", "prefix12k", "nonblind"]
    anchored = submit(
        tenant_client,
        problem_id,
        "python",
        anchored_source,
        participant=participant,
        turn=1,
        context=f"PRE-ANCHOR: write a+b\nassistant:\n{anchored_source}\nPOST-ANCHOR: thanks",
        conditions=conditions,
        judges=["scripted"],
        label={"verdict": "AC", "score": 5},
    )
    segmented_source = _source()
    segmented = submit(
        tenant_client,
        problem_id,
        "python",
        segmented_source,
        participant=participant,
        turn=2,
        context="SEGMENT-ONLY: now handle negatives",
        conditions=conditions,
        judges=["scripted"],
    )
    views = {k: wait_attempt(tenant_client, a["attempt_id"]) for k, a in (("a", anchored), ("s", segmented))}
    provenance = {(k, j["condition"]): j["provenance"] for k, v in views.items() for j in v["judgments"]}
    assert provenance[("a", "blind")] is None and provenance[("a", "prefix12k")] == "prefix"
    assert provenance[("a", "nonblind")] == "anchored" and provenance[("s", "nonblind")] == "segmented"
    contexts: dict[str, list[str]] = {"a": [], "s": []}
    for request in scripted_llm.requests:
        user = request.json["messages"][-1]["content"]
        if "## Source code\n" not in user:
            continue  # another test's use of the shared server (AXIOM synthesis asks it for code, not a judgment)
        code, context = user.split("## Source code\n", 1)[1].split("## Participant context\n", 1)
        for key, source in (("a", anchored_source), ("s", segmented_source)):
            if source.split("\n", 1)[0] in code:
                contexts[key].append(context)
                assert '"label"' not in request.body.decode() and "verdict" not in user
    assert len(contexts["a"]) == len(contexts["s"]) == 3
    assert "(none)\n" in contexts["a"]  # blind
    # nonblind, anchored: only what strictly precedes the code's first appearance, and only this problem.
    (anchored_ctx,) = [c for c in contexts["a"] if c.startswith("PRE-ANCHOR") and "OTHER-PROBLEM" not in c]
    assert "POST-ANCHOR" not in anchored_ctx and "SEGMENT-ONLY" not in anchored_ctx
    # prefix12k: the participant's log across problems, whatever the anchor.
    assert any("OTHER-PROBLEM-LOG" in c and "PRE-ANCHOR" in c for c in contexts["a"])
    # nonblind, segmented: this problem's log up to this attempt, never another problem's.
    assert any("SEGMENT-ONLY" in c and "OTHER-PROBLEM" not in c for c in contexts["s"])


def test_unknown_judge_is_named(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    response = tenant_client.post(
        "/v1/attempts",
        json={"problem_id": problem_id, "language": "python", "source_code": "print(3)", "judges": ["gpt-9"]},
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "judges"]


def test_code_over_budget_is_a_failure_never_truncated(tenant_client: httpx.Client, scripted_llm: ScriptedLLM) -> None:
    problem_id = add_sum_problem(tenant_client)
    source = _source() + "# " + "x" * 12_100 + "\n"
    view = wait_attempt(
        tenant_client, submit(tenant_client, problem_id, "python", source, judges=["scripted"])["attempt_id"]
    )
    (row,) = _rows(view, "scripted")
    assert row["status"] == "failed" and row["error"].startswith("budget:")
    assert _requests_for(scripted_llm, source) == []


@pytest.mark.stack  # an EmbeddedStack's start, refused
def test_invalid_judges_file_stops_the_start_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "judges.toml"
    bad.write_text(
        '[[judge]]\nname = "g"\nkind = "llm"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\ntemprature = 0\n'
    )
    with pytest.raises(JudgesFileError, match=r"judge\[0\]\.temprature"):
        EmbeddedStack(tmp_path / "data", judges_file=bad).start()
    result = subprocess.run(
        [sys.executable, "-m", "services.launcher.cli", "up", "--data-dir", str(tmp_path / "d2"), "--judges", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "temprature" in result.stderr


def test_a_judge_that_does_not_apply_is_final_and_one_that_applies_scores(
    tenant_client: httpx.Client, stack: EmbeddedStack
) -> None:
    """A problem without public tests or references: both offline judges do not apply, the attempt still ends done,
    and a re-judge of those judges sends nothing again (the job ends, its unit counted) and leaves the rows as they
    were. The same source on a problem with a Python reference is scored by the reference judge."""
    bare = add_sum_problem(
        tenant_client, tests=[{"input": "1 2\n", "expected": "3\n"}, {"input": "10 -4\n", "expected": "6\n"}]
    )
    source = _source()
    attempt_id = submit(tenant_client, bare, "python", source)["attempt_id"]
    view = wait_attempt(tenant_client, attempt_id)
    assert view["status"] == "done" and view["verdict"] == "AC"
    by_judge = {j["judge"]: j for j in view["judgments"]}
    assert {
        name: (by_judge[name]["status"], by_judge[name]["error"]) for name in ("sample_tests", "edit_similarity")
    } == {
        "sample_tests": ("not_applicable", "no public tests"),
        "edit_similarity": ("not_applicable", "no reference solution in python"),
    }
    sql = "SELECT updated_at FROM judgment WHERE attempt_id = :a AND judge IN ('sample_tests', 'edit_similarity')"
    before = sorted(str(r["updated_at"]) for r in fetch_rows(stack.database_url, sql, a=attempt_id))

    job = tenant_client.post(
        "/v1/judgments", json={"attempt_ids": [attempt_id], "judges": ["sample_tests", "edit_similarity"]}
    )
    assert job.status_code == 202
    finished = wait_job(tenant_client, job.json()["job_id"])
    assert (finished["status"], finished["progress"]) == ("succeeded", {"done": 1, "total": 1})
    assert sorted(str(r["updated_at"]) for r in fetch_rows(stack.database_url, sql, a=attempt_id)) == before

    referenced = add_sum_problem(
        tenant_client, references=[{"language": "python", "source_code": SUM_SOURCES["python"]}]
    )
    scored = wait_attempt(tenant_client, submit(tenant_client, referenced, "python", source)["attempt_id"])
    (row,) = _rows(scored, "edit_similarity")
    # The same tokens as the reference (comments are discarded): similarity 1.
    assert (row["status"], row["error"], row["p_ac"], row["score"]) == ("ok", None, 1.0, 5.0)


def test_every_stored_judgment_keeps_the_invariants(stack: EmbeddedStack, tenant_client: httpx.Client) -> None:
    """Over every row the tests above produced: ok rows satisfy (a)-(d), failed rows say why, keys are unique."""
    import json

    from judge.rubrics import RUBRICS
    from services.lib.llm import Accepted, validate

    rows = fetch_rows(stack.database_url, "SELECT * FROM judgment")
    assert rows, "the judging tests above stored rows"
    keys = [(r["attempt_id"], r["judge"], r["condition"], r["repeat"]) for r in rows]
    assert len(keys) == len(set(keys))
    for row in rows:
        if row["status"] in ("failed", "not_applicable"):
            assert row["error"] and row["score"] is None and row["p_ac"] is None
            continue
        assert row["status"] == "ok" and row["error"] is None
        if row["judge"] == "scripted":
            fields = row["fields"] if isinstance(row["fields"], dict) else json.loads(row["fields"])
            assert isinstance(validate(json.dumps(fields), RUBRICS["cocreation"].reply_schema), Accepted)
            assert row["served_model"] and row["requested_model"] == "scripted-model" and row["request_hash"]
        if row["p_ac"] is not None:
            assert 0 <= row["p_ac"] <= 1
