"""`tribunal judges check`: ask every configured LLM endpoint for one judgment of a tiny known program, and say what
it served, how fast, whether it takes structured output and gives logprobs, and the valid result or why there is
none. Nothing is written to the database: the check runs through the same provider layer the judge worker uses,
without its cache.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

import httpx

from judge.request import JudgeInput, build_messages
from judge.rubrics import RUBRICS, RubricSpec
from judge.runner import LLMRunner
from services.kernel.contracts import JudgmentStatus
from services.kernel.judges import LLMJudge, OfflineJudge
from services.lib.llm import OpenAICompatProvider, ProviderError, request_params

# A program every judge should accept: the statement and the code leave nothing to guess.
KNOWN_PROGRAM = JudgeInput(
    problem_id="check/add",
    statement="Write a function add(a, b) that returns the sum of the integers a and b.",
    language="python",
    source_code="def add(a, b):\n    return a + b\n",
    context="",
    provenance=None,
    public_tests=({"code": "def check(candidate):\n    assert candidate(2, 3) == 5\n", "public": True},),
    reference="def add(a, b):\n    return b + a\n",
)


@dataclass(frozen=True)
class CheckResult:
    judge: str
    ok: bool
    served_model: str | None
    latency_ms: int | None
    structured: str  # what the endpoint did with the judge's response_format
    logprobs: str  # whether a request for top_logprobs came back with them
    listed: str  # whether the endpoint's /models lists the judge's model
    result: str  # the validated fields, or the failure's reason
    tokens: str


async def _probe_logprobs(judge: LLMJudge, rubric: RubricSpec) -> str:
    """Whether the endpoint answers a request for top_logprobs with them (one short request)."""
    endpoint = judge.model_copy(update={"top_logprobs": 5, "max_tokens": 16, "response_format": "none"})
    provider = OpenAICompatProvider(endpoint)
    try:
        params = request_params(endpoint, rubric.reply_schema, build_messages(rubric, KNOWN_PROGRAM))
        reply = await provider.complete(params)
    except ProviderError as exc:
        return f"no ({exc.reason})"
    finally:
        await provider.close()
    return "yes" if reply.logprobs else "no (none in the reply)"


async def _listed(judge: LLMJudge) -> str:
    """Whether GET {base_url}/models lists the judge's model (a server that echoes any requested name, as
    llama-cpp-python's does, says only here which models it has)."""
    api_key = os.environ.get(judge.api_key_env, "") if judge.api_key_env else ""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=min(judge.timeout_s, 10.0)) as client:
            response = await client.get(f"{judge.base_url.rstrip('/')}/models", headers=headers)
        ids = {str(m.get("id")) for m in response.json().get("data", []) if isinstance(m, dict)}
    except (httpx.HTTPError, ValueError, AttributeError, TypeError):
        return "unknown (no model list)"
    return "yes" if judge.model in ids else "no"


async def check_judge(judge: LLMJudge, rubrics: dict[str, RubricSpec] | None = None) -> CheckResult:
    """One judgment of the known program by one judge, under its rubric (built in, or from `rubrics`)."""
    rubric = (rubrics or RUBRICS)[judge.rubric]
    runner = LLMRunner(judge, cache=None)
    started = time.perf_counter()
    try:
        outcome = await runner.run(rubric, build_messages(rubric, KNOWN_PROGRAM), condition="blind", repeat=0)
    finally:
        await runner.close()
    elapsed = int((time.perf_counter() - started) * 1000)
    ok = outcome.status == JudgmentStatus.OK
    if judge.response_format == "none":
        structured = "not asked (response_format none)"
    elif ok or (outcome.error or "").split(":")[0] in ("schema", "range", "unparseable", "empty"):
        structured = f"{judge.response_format}: accepted"
    elif (outcome.error or "").startswith("http 4"):
        structured = f"{judge.response_format}: rejected ({outcome.error})"
    else:
        structured = f"{judge.response_format}: unknown ({outcome.error})"
    if ok:
        shown = {k: v for k, v in (outcome.fields or {}).items() if k != "rationale"}
        weighted = f", weighted p_ac {outcome.weighted_p_ac:.3f}" if outcome.weighted_p_ac is not None else ""
        result = f"valid: {shown}{weighted}"
    else:
        result = f"failed: {outcome.error}"
    tokens = f"{outcome.tokens_in}/{outcome.tokens_out}" if outcome.tokens_in is not None else "-"
    return CheckResult(
        judge.name,
        ok,
        outcome.served_model,
        outcome.latency_ms if outcome.latency_ms is not None else elapsed,
        structured,
        await _probe_logprobs(judge, rubric),
        await _listed(judge),
        result,
        tokens,
    )


def check_all(judges: list[LLMJudge | OfflineJudge], rubrics: dict[str, RubricSpec] | None = None) -> list[CheckResult]:
    """One check per enabled LLM judge, one after another (a local server computes one request at a time); a
    judges file's own rubrics come in `rubrics` (judge/rubrics.rubric_specs)."""

    async def run() -> list[CheckResult]:
        return [await check_judge(j, rubrics) for j in judges if isinstance(j, LLMJudge) and j.enabled]

    return asyncio.run(run())
