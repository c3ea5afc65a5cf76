"""The local model server, for real: llama.cpp (llama-cpp-python's server) with SmolLM2-135M from the installed
package, started by the stack as `tribunal up --local-llm` starts it, judged through and killed mid-batch.

Each test bounds its own time (a judgment takes the model 1 to 4 s on 2 cores, idle). What the model answers is
not scripted, so the tests check what must hold whatever it says: one row per unit, a served model and tokens on
every row that reached it, a valid output or a recorded reason, probabilities in range.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from judge.request import JudgeInput, build_messages
from judge.rubrics import RUBRICS, WEIGHTING
from judge.runner import LLMRunner
from services.kernel import telemetry
from services.kernel.contracts import JudgmentStatus
from services.kernel.embedded import free_port
from services.kernel.judges import LLMJudge
from services.launcher.local_llm import LOCAL_JUDGE, LocalModelServer
from services.launcher.stack import LOCAL_LLM, EmbeddedStack
from tests.conftest import STACK_ENV
from tests.helpers import wait_attempt

pytestmark = pytest.mark.stack

PROBLEM = {
    "title": "Add",
    "statement": "Write a function add(a, b) that returns the sum of the integers a and b.",
    "mode": "function",
    "entry_point": "add",
    "tests": [
        {"input": [1, 2], "expected": 3, "public": True},
        {"input": [-5, 5], "expected": 0},
        {"input": [10**12, 1], "expected": 10**12 + 1},
    ],
}
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[EmbeddedStack]:
    """A stack started as `tribunal up --local-llm` starts one, with one offline judge beside `local`; the judge
    sends two requests at once (TRIBUNAL_LOCAL_LLM_PARALLEL)."""
    base = tmp_path_factory.mktemp("local-judges") / "judges.toml"
    base.write_text('[[judge]]\nname = "sample_tests"\nkind = "offline"\nmethod = "sample_tests"\n')
    stack = EmbeddedStack(
        tmp_path_factory.mktemp("stack-local-llm"),
        redis_url=f"{redis_url.rsplit('/', 1)[0]}/3",
        judges_file=base,
        # One thread: beside two test workers, llama.cpp's threads would wait on each other for a busy core.
        extra_env=STACK_ENV | {"TRIBUNAL_LOCAL_LLM_PARALLEL": "2", "TRIBUNAL_LOCAL_LLM_THREADS": "1"},
        local_llm=True,
    )
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture()
def client(local_stack: EmbeddedStack) -> Iterator[httpx.Client]:
    import uuid

    key = local_stack.admin_key_path.read_text().strip()
    with httpx.Client(base_url=local_stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as admin:
        tenant = f"t-{uuid.uuid4().hex[:10]}"
        tenant_key = admin.post("/v1/keys", json={"tenant": tenant, "scopes": ["submit", "read"]}).json()["key"]
    with httpx.Client(
        base_url=local_stack.url, headers={"Authorization": f"Bearer {tenant_key}"}, timeout=60
    ) as tenant_client:
        yield tenant_client


def _problem(client: httpx.Client) -> str:
    import uuid

    problem_id = f"add-{uuid.uuid4().hex[:8]}"
    response = client.post("/v1/problems", json={"problem_id": problem_id, **PROBLEM})
    assert response.status_code == 201, response.text
    return problem_id


def _submit_batch(client: httpx.Client, problem_id: str, sources: list[str]) -> list[str]:
    response = client.post(
        "/v1/attempts:batch",
        json={
            "attempts": [
                {"problem_id": problem_id, "language": "python", "source_code": s, "judges": [LOCAL_JUDGE]}
                for s in sources
            ]
        },
    )
    assert response.status_code == 202, response.text
    return list(response.json()["attempt_ids"])


def _local_rows(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [j for j in view["judgments"] if j["judge"] == LOCAL_JUDGE]


def _check_row(row: dict[str, Any], served: str) -> None:
    """What every row of `local` must carry, whatever the model said."""
    if row["status"] == JudgmentStatus.OK:
        assert row["served_model"] == served
        assert row["tokens_in"] and row["tokens_in"] > 0 and row["tokens_out"] and row["tokens_out"] > 0
        assert row["fields"] is not None and isinstance(row["fields"]["accepted"], bool)
        assert row["p_ac"] in (0.0, 1.0)
        if row["weighting"] is not None:
            assert row["weighting"] == WEIGHTING
            probs = row["score_probs"]
            assert set(probs) == {"true", "false"}
            assert all(0.0 <= p <= 1.0 for p in probs.values())
            assert sum(probs.values()) <= 1.0 + 1e-9
            assert 0.0 <= row["weighted_p_ac"] <= 1.0
            assert math.isclose(row["weighted_p_ac"], probs["true"] / (probs["true"] + probs["false"]))
    else:
        assert row["error"], row
        assert row["p_ac"] is None and row["score"] is None and row["weighted_p_ac"] is None


@pytest.mark.timeout(600)
def test_the_stack_serves_the_packaged_model_behind_the_judge_local(local_stack: EmbeddedStack) -> None:
    server = local_stack.local_llm_server
    assert server.model.startswith("SmolLM2-135M-Instruct.Q4_1.gguf@sha256:")
    assert server.serves()
    assert (local_stack.data_dir / "logs" / f"{LOCAL_LLM}.log").is_file()
    judges = {j.name: j for j in local_stack.judges}
    local = judges[LOCAL_JUDGE]
    assert isinstance(local, LLMJudge) and local.model == server.model and local.concurrency == 2
    assert local.base_url == server.base_url and local.top_logprobs > 0
    assert "sample_tests" in judges  # the base file's judges stay


@pytest.mark.timeout(600)
def test_one_row_per_attempt_judge_and_condition_with_the_served_model_and_tokens(
    local_stack: EmbeddedStack, client: httpx.Client
) -> None:
    problem_id = _problem(client)
    ids = _submit_batch(client, problem_id, [RIGHT, WRONG, RIGHT.replace("a + b", "b + a"), WRONG + "# off\n"])
    ok = 0
    for attempt_id in ids:
        view = wait_attempt(client, attempt_id, timeout_s=300)
        rows = _local_rows(view)
        assert [(r["condition"], r["repeat"]) for r in rows] == [("blind", 0)]
        _check_row(rows[0], local_stack.local_llm_server.model)
        ok += rows[0]["status"] == JudgmentStatus.OK
    assert ok >= 1, "grammar-constrained output from the real model never validated"

    # The same request again is answered from the response cache: no try, no latency.
    again = _submit_batch(client, problem_id, [RIGHT])
    view = wait_attempt(client, again[0], timeout_s=300)
    first = wait_attempt(client, ids[0], timeout_s=10)
    if _local_rows(first)[0]["status"] == JudgmentStatus.OK:
        row = _local_rows(view)[0]
        assert row["status"] == JudgmentStatus.OK and row["tries"] == 0 and row["latency_ms"] is None
        assert row["fields"] == _local_rows(first)[0]["fields"]
        assert row["weighted_p_ac"] == _local_rows(first)[0]["weighted_p_ac"]


@pytest.mark.timeout(600)
def test_a_source_longer_than_the_context_is_a_recorded_failure(
    local_stack: EmbeddedStack, client: httpx.Client
) -> None:
    # Under the 12,000-character budget, but past the 2,048-token context.
    padding = "".join(f"# filler line {i} to make the program long, and longer still\n" for i in range(170))
    assert len(padding) < 12_000
    (attempt_id,) = _submit_batch(client, _problem(client), [padding + RIGHT])
    view = wait_attempt(client, attempt_id, timeout_s=120)
    (row,) = _local_rows(view)
    assert row["status"] == JudgmentStatus.FAILED
    assert row["error"].startswith("context:"), row["error"]
    assert row["tries"] == 1  # the same request would overflow again: not retried


@pytest.mark.timeout(600)
def test_the_server_killed_mid_batch_loses_and_duplicates_nothing(
    local_stack: EmbeddedStack, client: httpx.Client
) -> None:
    problem_id = _problem(client)
    sources = [RIGHT + f"# variant {i}\n" if i % 2 else WRONG + f"# variant {i}\n" for i in range(5)]
    ids = _submit_batch(client, problem_id, sources)
    # Kill the server once the batch is under way, then supervise as `tribunal up` does: restart what died.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        views = [client.get(f"/v1/attempts/{a}").json() for a in ids]
        if any(_local_rows(v) for v in views):
            break
        time.sleep(0.2)
    local_stack.local_llm_server.kill()
    restarted: list[str] = []
    while not restarted and time.monotonic() < deadline + 30:
        restarted = local_stack.restart_dead()
        time.sleep(0.1)
    assert restarted == [LOCAL_LLM]
    reasons = []
    for attempt_id in ids:
        view = wait_attempt(client, attempt_id, timeout_s=300)
        rows = _local_rows(view)
        assert len(rows) == 1, rows  # one row per unit: a retry overwrote, never added
        _check_row(rows[0], local_stack.local_llm_server.model)
        if rows[0]["status"] != JudgmentStatus.OK:
            reasons.append(rows[0]["error"])
    assert all(r.split(":")[0] in ("connection", "timeout", "http 500", "http 503") for r in reasons), reasons
    local_stack.local_llm_server.wait_ready(120)
    assert local_stack.local_llm_server.serves()


# The provider layer straight against the real server: both ways of asking for JSON, logprobs, the cap.


@pytest.fixture(scope="module")
def model_server(local_stack: EmbeddedStack) -> LocalModelServer:
    return local_stack.local_llm_server


def _inputs() -> list[JudgeInput]:
    programs = [RIGHT, WRONG, "def add(a, b):\n    return sum([a, b])\n", "def add(a, b):\n    return a * b\n"]
    return [JudgeInput("add", str(PROBLEM["statement"]), "python", p, "", None) for p in programs]


async def _judge_all(judge: LLMJudge, inputs: list[JudgeInput]) -> list[Any]:
    rubric = RUBRICS[judge.rubric]
    runner = LLMRunner(judge, cache=None, backoff_multiplier=0.05, backoff_max=0.2)
    try:
        return list(
            await asyncio.gather(
                *(runner.run(rubric, build_messages(rubric, i), condition="blind", repeat=0) for i in inputs)
            )
        )
    finally:
        await runner.close()


def _judge(server: LocalModelServer, **overrides: Any) -> LLMJudge:
    config = {
        "name": "local-test",
        "kind": "llm",
        "rubric": "accept_reject",
        "base_url": server.base_url,
        "model": server.model,
        "response_format": "json_object_schema",
        "top_logprobs": 10,
        "max_tokens": 96,
        "timeout_s": 60,
        "max_tries": 2,
        **overrides,
    }
    return LLMJudge.model_validate(config)


def _failures(judge: str) -> float:
    return sum(
        sample.value
        for metric in telemetry.judge_failures.collect()
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels.get("judge") == judge
    )


@pytest.mark.timeout(600)
@pytest.mark.parametrize("response_format", ["json_object_schema", "none"])
def test_both_ways_of_asking_for_json_validate_or_record_why(
    model_server: LocalModelServer, response_format: str
) -> None:
    name = f"local-{response_format.replace('_', '-')}"
    # Without logprobs: llama-cpp-python's server costs ~90 ms a reported token, and these replies run long.
    judge = _judge(model_server, name=name, response_format=response_format, rubric="refinement_effort", top_logprobs=0)
    before = _failures(name)
    outcomes = asyncio.run(_judge_all(judge, _inputs()))
    failed = [o for o in outcomes if o.status == JudgmentStatus.FAILED]
    for outcome in outcomes:
        assert outcome.served_model in (model_server.model, None)
        if outcome.status == JudgmentStatus.OK:
            assert 0 <= outcome.score <= 5 and outcome.fields["evaluation_steps"]
            assert outcome.tokens_in > 0 and outcome.tokens_out > 0
        else:
            # An invalid output of the model: recorded with its reason class, never scored.
            assert outcome.error.split(":")[0] in ("unparseable", "schema", "range", "empty"), outcome.error
            assert outcome.score is None and outcome.p_ac is None
    assert _failures(name) - before == len(failed)  # every invalid output is counted
    if response_format == "json_object_schema":
        assert len(failed) < len(outcomes), [o.error for o in failed]


@pytest.mark.timeout(600)
def test_score_probabilities_from_the_real_model_are_in_range(model_server: LocalModelServer) -> None:
    # accept_reject only: the 0-5 rubrics' replies run to a few hundred tokens (their evaluation steps), each ~90 ms
    # with logprobs on an idle machine and several times that beside other tests. Their arithmetic is tested exactly
    # against scripted logprobs (tests/judge/test_runner.py).
    for rubric, inputs, max_tokens in (("accept_reject", _inputs(), 32),):
        judge = _judge(model_server, rubric=rubric, max_tokens=max_tokens, timeout_s=120)
        outcomes = asyncio.run(_judge_all(judge, inputs))
        weighted = [o for o in outcomes if o.status == JudgmentStatus.OK and o.weighting is not None]
        assert weighted, [o.error for o in outcomes]
        for outcome in weighted:
            probs = outcome.score_probs
            assert all(0.0 <= p <= 1.0 for p in probs.values())
            assert sum(probs.values()) <= 1.0 + 1e-9
            if rubric == "accept_reject":
                assert set(probs) == {"true", "false"} and 0.0 <= outcome.weighted_p_ac <= 1.0
            else:
                assert set(probs) == {str(s) for s in range(6)}
                assert outcome.weighted_p_ac is None and 0.0 <= outcome.weighted_score <= 5.0


class _CountingProxy:
    """A loopback reverse proxy in front of the real server that records how many requests are in flight."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.in_flight = 0
        self.most = 0
        self.seen = 0
        self.lock = threading.Lock()
        self.port = free_port()
        app = Starlette(routes=[Route("/v1/chat/completions", self.forward, methods=["POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def forward(self, request: Request) -> Response:
        with self.lock:
            self.in_flight += 1
            self.seen += 1
            self.most = max(self.most, self.in_flight)
        try:
            async with httpx.AsyncClient(timeout=120) as upstream:
                answer = await upstream.post(
                    f"{self.upstream}/chat/completions",
                    content=await request.body(),
                    headers={"content-type": "application/json"},
                )
            return Response(answer.content, status_code=answer.status_code, media_type="application/json")
        finally:
            with self.lock:
                self.in_flight -= 1

    def __enter__(self) -> _CountingProxy:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.mark.timeout(600)
def test_the_concurrency_cap_is_respected(model_server: LocalModelServer) -> None:
    with _CountingProxy(model_server.base_url) as proxy:
        judge = _judge(model_server, base_url=f"http://127.0.0.1:{proxy.port}/v1", concurrency=2, max_tokens=48)
        outcomes = asyncio.run(_judge_all(judge, _inputs() * 2))
    assert proxy.seen >= len(outcomes)
    assert proxy.most == 2, proxy.most  # eight asked at once, two let through at a time
    assert all(o.served_model in (model_server.model, None) for o in outcomes)


@pytest.mark.timeout(600)
def test_judges_check_reports_the_local_endpoint(local_stack: EmbeddedStack, tmp_path: Path) -> None:
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-m", "services.launcher.cli", "judges", "check", "--judges", str(local_stack.judges_file)],
        capture_output=True,
        text=True,
        timeout=180,
        env={"COLUMNS": "250", "PATH": "/usr/bin:/bin", "TRIBUNAL_DATA_DIR": str(tmp_path)},
    )
    out = completed.stdout
    assert LOCAL_JUDGE in out and local_stack.local_llm_server.model[:30] in out, (out, completed.stderr[-2000:])
    assert "json_object_schema: accepted" in out and "yes" in out, out
    assert completed.returncode in (0, 1)
    assert (completed.returncode == 0) == ("valid:" in out), out
