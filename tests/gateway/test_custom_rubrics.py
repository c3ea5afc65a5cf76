"""A judges file's own rubric, through the whole stack: the judge worker builds its prompt from the definition and
the problem (the reference reaches the model only because the rubric sees it; hidden tests never do), stores the
rubric's version on the row, and records a problem without a reference as not applicable."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from services.launcher.stack import EmbeddedStack
from tests.conftest import STACK_ENV
from tests.fake_llm import Behaviour, ScriptedLLM
from tests.helpers import wait_attempt

pytestmark = pytest.mark.stack

REPLY = {"correct": True, "fidelity": 2, "rationale": "Matches the reference."}
JUDGES = """
[[judge]]
name = "reviewer"
kind = "llm"
rubric = "against_reference"
base_url = "{base_url}"
model = "scripted-model"
max_tries = 2
timeout_s = 5
backoff_s = 0.02
backoff_max_s = 0.1

[[rubric]]
name = "against_reference"
instructions = "You compare a submitted program with a reference solution of the same problem."
inputs = ["statement", "code", "reference"]

[[rubric.criterion]]
name = "correct"
description = "Whether the program computes what the reference computes, for every valid input."
scale = {{ type = "boolean", anchors = {{ true = "same results", false = "some input differs" }} }}

[[rubric.criterion]]
name = "fidelity"
description = "How closely the program follows the reference's method."
scale = {{ type = "integer", min = 0, max = 2, anchors = {{ 0 = "another method", 2 = "the same method" }} }}
"""
HIDDEN_INPUT = "90817 12"  # a hidden test's input: never sent to a judge


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(script=lambda _request, _nth: Behaviour(payload=REPLY)) as server:
        yield server


@pytest.fixture(scope="module")
def rubric_stack(
    tmp_path_factory: pytest.TempPathFactory, redis_url: str, scripted: ScriptedLLM
) -> Iterator[EmbeddedStack]:
    judges = tmp_path_factory.mktemp("rubric-judges") / "judges.toml"
    judges.write_text(JUDGES.format(base_url=scripted.base_url))
    stack = EmbeddedStack(
        tmp_path_factory.mktemp("stack-rubric"),
        redis_url=f"{redis_url.rsplit('/', 1)[0]}/13",
        judges_file=judges,
        extra_env=STACK_ENV,
    )
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture()
def client(rubric_stack: EmbeddedStack) -> Iterator[httpx.Client]:
    key = rubric_stack.admin_key_path.read_text().strip()
    with httpx.Client(base_url=rubric_stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as admin:
        tenant = f"t-{uuid.uuid4().hex[:10]}"
        tenant_key = admin.post("/v1/keys", json={"tenant": tenant, "scopes": ["submit", "read"]}).json()["key"]
    with httpx.Client(base_url=rubric_stack.url, headers={"Authorization": f"Bearer {tenant_key}"}, timeout=60) as c:
        yield c


def _judged(client: httpx.Client, references: list[dict[str, str]], marker: str) -> dict[str, Any]:
    problem_id = f"sum-{uuid.uuid4().hex[:8]}"
    problem = {
        "problem_id": problem_id,
        "title": "Sum",
        "statement": "Print the sum of two integers read from stdin.",
        "tests": [{"input": "1 2\n", "expected": "3\n", "public": True}, {"input": HIDDEN_INPUT, "expected": "90829"}],
        "references": references,
    }
    response = client.post("/v1/problems", json=problem)
    assert response.status_code == 201, response.text
    source = f"# {marker}\nprint(sum(map(int, input().split())))\n"
    body = {"problem_id": problem_id, "language": "python", "source_code": source}
    submitted = client.post("/v1/attempts", json=body)
    assert submitted.status_code == 202, submitted.text
    view = wait_attempt(client, submitted.json()["attempt_id"])
    assert view["status"] == "done", view
    (row,) = [j for j in view["judgments"] if j["judge"] == "reviewer"]
    return row


def _sent(scripted: ScriptedLLM, marker: str) -> list[str]:
    return [json.dumps(r.json["messages"]) for r in scripted.requests if marker in json.dumps(r.json["messages"])]


def test_the_rubric_sees_the_reference_and_not_the_hidden_tests(client: httpx.Client, scripted: ScriptedLLM) -> None:
    marker = uuid.uuid4().hex
    reference = "a, b = map(int, input().split())\nprint(a + b)  # THE-REFERENCE\n"
    row = _judged(client, [{"language": "python", "source_code": reference}], marker)
    assert row["status"] == "ok" and row["fields"] == REPLY
    assert (row["p_ac"], row["score"]) == (1.0, 1.0)  # the headline (first) criterion is boolean
    assert row["rubric"] == "against_reference" and row["prompt_version"].startswith("against_reference.v1+")
    (sent,) = _sent(scripted, marker)
    assert "THE-REFERENCE" in sent and "the same method" in sent and "some input differs" in sent
    assert HIDDEN_INPUT not in sent and "Participant context" not in sent


def test_a_problem_without_a_reference_is_not_applicable(client: httpx.Client, scripted: ScriptedLLM) -> None:
    marker = uuid.uuid4().hex
    row = _judged(client, [], marker)
    assert row["status"] == "not_applicable" and row["score"] is None
    assert row["error"].startswith("rubric ") and "reference" in row["error"]
    assert _sent(scripted, marker) == []  # nothing was asked
