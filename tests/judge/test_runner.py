"""The LLM judgment runner against a scripted OpenAI-compatible server on a real socket, and its response cache
in a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from judge.request import JudgeInput, build_messages
from judge.rubrics import RUBRICS
from judge.runner import LLMRunner
from services.kernel.contracts import JudgmentOutput
from services.kernel.judges import LLMJudge
from services.kernel.models import JudgeResponseCache
from services.lib.llm import DbResponseCache, request_params
from tests.databases import BACKENDS, database_sessions
from tests.fake_llm import VALID_COCREATION, Behaviour, ScriptedLLM, scripted_logprobs

INPUT = JudgeInput("p-1", "Print a + b.", "python", "print(sum(map(int, input().split())))", "", None)
MESSAGES = build_messages(RUBRICS["cocreation"], INPUT)


@pytest.fixture(params=BACKENDS)
async def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    async with database_sessions(request, tmp_path) as factory:
        yield factory


async def _cached_rows(sessions: async_sessionmaker[AsyncSession]) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(JudgeResponseCache)) or 0)


def _judge(server: ScriptedLLM, **overrides: Any) -> LLMJudge:
    config = {
        "name": "scripted",
        "kind": "llm",
        "base_url": server.base_url,
        "model": "judge-model-1",
        "max_tries": 4,
        "timeout_s": 5,
        "requests_per_minute": 60_000,
        **overrides,
    }
    return LLMJudge.model_validate(config)


@pytest.fixture()
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as scripted:
        yield scripted


async def _run(
    server: ScriptedLLM, cache: DbResponseCache | None = None, repeat: int = 0, **overrides: Any
) -> JudgmentOutput:
    judge = _judge(server, **overrides)
    runner = LLMRunner(judge, cache=cache, backoff_multiplier=0.01, backoff_max=0.05)
    rubric = RUBRICS[judge.rubric]
    try:
        return await runner.run(rubric, build_messages(rubric, INPUT), condition="blind", repeat=repeat)
    finally:
        await runner.close()


def _sequence(*behaviours: Behaviour) -> Any:
    """Answer the n-th arrival of a request with the n-th behaviour (the last one repeats)."""
    return lambda _request, nth: behaviours[min(nth, len(behaviours)) - 1]


async def test_valid_answer_is_one_ok_row_with_the_served_model(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(served_model="judge-model-1-2026-01-01"))
    outcome = await _run(server)
    assert outcome.status == "ok" and outcome.error is None
    assert outcome.fields == VALID_COCREATION
    assert (outcome.p_ac, outcome.score) == (0.75, 0.75)
    assert outcome.requested_model == "judge-model-1"
    assert outcome.served_model == "judge-model-1-2026-01-01"
    assert outcome.tries == 1 and outcome.tokens_in and outcome.latency_ms is not None
    assert len(server.requests) == 1
    sent = server.requests[0].json
    assert sent["temperature"] == 0 and sent["model"] == "judge-model-1"
    assert sent["response_format"]["json_schema"]["strict"] is True
    assert sent["response_format"]["json_schema"]["schema"]["additionalProperties"] is False


async def test_code_fenced_json_is_accepted(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(kind="fenced"))
    outcome = await _run(server)
    assert outcome.status == "ok" and outcome.fields == VALID_COCREATION


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (Behaviour(kind="raw", content='{"p_ac": 0.4, "s_algo": 3, "s_rob'), "unparseable"),
        (Behaviour(kind="raw", content="I think it is fine."), "unparseable"),
        (Behaviour(kind="raw", content=""), "empty"),
        (Behaviour(payload={**VALID_COCREATION, "p_ac": 1.3}), "range"),
        (Behaviour(payload={**VALID_COCREATION, "s_algo": 0}), "range"),
        (Behaviour(payload={**VALID_COCREATION, "s_algo": 6}), "range"),
        (Behaviour(payload={**VALID_COCREATION, "s_algo": 3.5}), "schema"),
        (Behaviour(payload={k: v for k, v in VALID_COCREATION.items() if k != "s_robust"}), "schema"),
        (Behaviour(payload={**VALID_COCREATION, "confidence": "high"}), "schema"),
        (Behaviour(kind="status", status=500), "http 500"),
        (Behaviour(kind="garbage"), "unparseable"),
        (Behaviour(kind="garbage", content='{"choices": "nope"}'), "unparseable"),
    ],
)
async def test_bad_answers_are_repaired_by_reissuing_the_identical_request(
    server: ScriptedLLM, bad: Behaviour, reason: str
) -> None:
    server.script = _sequence(bad, Behaviour())
    outcome = await _run(server)
    assert outcome.status == "ok" and outcome.tries == 2
    assert outcome.fields == VALID_COCREATION
    assert [r.behaviour.kind for r in server.requests] == [bad.kind, "valid"]
    assert server.requests[0].body == server.requests[1].body  # byte-identical reissue


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (Behaviour(kind="raw", content='{"p_ac": 0.4'), "unparseable"),
        (Behaviour(payload={**VALID_COCREATION, "p_ac": 1.3}), "range"),
        (Behaviour(payload={**VALID_COCREATION, "s_algo": 3.5}), "schema"),
        (Behaviour(kind="status", status=500), "http 500"),
        (Behaviour(kind="raw", content=""), "empty"),
    ],
)
async def test_persistent_failure_is_recorded_with_its_reason_within_the_bound(
    server: ScriptedLLM, bad: Behaviour, reason: str
) -> None:
    server.script = _sequence(bad)
    outcome = await _run(server, max_tries=3)
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error.startswith(reason)
    assert outcome.fields is None and outcome.p_ac is None and outcome.score is None  # never a default score
    assert outcome.tries == 3 and len(server.requests) == 3
    assert len({r.body for r in server.requests}) == 1


async def test_a_client_error_is_not_retried(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(kind="status", status=400))
    outcome = await _run(server)
    assert (outcome.status, outcome.error, outcome.tries, len(server.requests)) == ("failed", "http 400", 1, 1)


async def test_429_waits_for_retry_after(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(kind="status", status=429, retry_after=1), Behaviour())
    outcome = await _run(server)
    assert outcome.status == "ok" and outcome.tries == 2
    gap = server.requests[1].at - server.requests[0].at
    assert gap >= 0.95  # a lower bound the runner guarantees, not a speed claim


async def test_retry_after_past_the_deadline_fails_at_once(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(kind="status", status=429, retry_after=120))
    outcome = await _run(server, deadline_s=5)
    assert outcome.status == "failed" and outcome.error == "http 429"
    assert len(server.requests) == 1


async def test_slow_reply_times_out_and_is_retried(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(delay_s=3), Behaviour())
    outcome = await _run(server, timeout_s=0.5)
    assert outcome.status == "ok" and outcome.tries == 2


async def test_timeouts_until_the_bound(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(delay_s=2))
    outcome = await _run(server, timeout_s=0.3, max_tries=2)
    assert (outcome.status, outcome.error, outcome.tries) == ("failed", "timeout", 2)


async def test_cache_resends_nothing_unless_a_fresh_repeat_is_asked_for(
    server: ScriptedLLM, sessions: async_sessionmaker[AsyncSession]
) -> None:
    cache = DbResponseCache(sessions)
    first = await _run(server, cache=cache)
    again = await _run(server, cache=cache)
    assert first.status == again.status == "ok"
    assert again.from_cache and again.tries == 0
    assert len(server.requests) == 1
    assert again.request_hash == first.request_hash
    fresh = await _run(server, cache=cache, repeat=1)
    assert fresh.status == "ok" and not fresh.from_cache and len(server.requests) == 2
    # Another model is another cache entry: the key includes the model and every generation parameter.
    await _run(server, cache=cache, model="judge-model-2")
    await _run(server, cache=cache, temperature=0.7)
    assert len(server.requests) == 4
    assert await _cached_rows(sessions) == 4
    # What came back from the cache is what was stored: the same fields, tokens and served model.
    assert (again.fields, again.raw_response, again.served_model) == (
        first.fields,
        first.raw_response,
        first.served_model,
    )
    assert (again.tokens_in, again.tokens_out) == (first.tokens_in, first.tokens_out)


async def test_cache_keys_are_those_earlier_versions_stored(
    server: ScriptedLLM, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """The key is SHA-256 of [base URL, prompt version, condition, repeat, request body]: rows cached before the
    provider layer moved to services/lib/llm still answer."""
    judge, rubric = _judge(server), RUBRICS["cocreation"]
    params = request_params(judge, rubric.reply_schema, MESSAGES)
    material = [judge.base_url.rstrip("/"), rubric.version, "blind", 0, params]
    key = hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    first = await _run(server, cache=DbResponseCache(sessions))
    async with sessions() as session:
        row = await session.get(JudgeResponseCache, key)
    assert row is not None and row.content == first.raw_response and row.served_model == first.served_model
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":")).encode()
    assert first.request_hash == hashlib.sha256(canonical).hexdigest()
    assert server.requests[0].json == params  # the body sent is the body hashed and keyed


async def test_failures_are_not_cached(server: ScriptedLLM, sessions: async_sessionmaker[AsyncSession]) -> None:
    cache = DbResponseCache(sessions)
    server.script = _sequence(Behaviour(kind="status", status=500))
    assert (await _run(server, cache=cache, max_tries=1)).status == "failed"
    server.script = _sequence(Behaviour(payload={**VALID_COCREATION, "p_ac": 1.3}))
    assert (await _run(server, cache=cache, max_tries=1)).status == "failed"
    assert await _cached_rows(sessions) == 0
    server.script = _sequence(Behaviour())
    assert (await _run(server, cache=cache, max_tries=1)).status == "ok"
    assert await _cached_rows(sessions) == 1
    assert len(server.requests) == 3


def test_requests_carry_statement_language_code_and_never_labels() -> None:
    user = MESSAGES[1]["content"]
    assert "Print a + b." in user and "language: python" in user and INPUT.source_code in user
    assert json.dumps(MESSAGES).count("label") == 0


def _split(content: str, *pieces: str) -> list[str]:
    """`content` cut into tokens after each of `pieces` in turn (the rest is the last token)."""
    tokens, rest = [], content
    for piece in pieces:
        assert rest.startswith(piece), (rest, piece)
        tokens.append(piece)
        rest = rest[len(piece) :]
    return [*tokens, rest] if rest else tokens


async def test_weighted_acceptance_is_exact_from_known_logprobs(
    server: ScriptedLLM, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """accept_reject: the probabilities of `true` and `false` at the value's token, as the scripted server gives
    them, and p(true) / (p(true) + p(false)); the same figures again from the cache."""
    payload = {"accepted": True}
    content = json.dumps(payload)
    tokens = _split(content, '{"', "accepted", '":', " true")
    alternatives = {3: [(" true", math.log(0.55)), (" false", math.log(0.30)), (" tr", math.log(0.05)), (" x", -1.0)]}
    server.script = lambda _request, _nth: Behaviour(payload=payload, logprobs=scripted_logprobs(tokens, alternatives))
    cache = DbResponseCache(sessions)
    outcome = await _run(server, cache=cache, rubric="accept_reject", top_logprobs=5)
    assert server.requests[0].json["logprobs"] is True and server.requests[0].json["top_logprobs"] == 5
    assert outcome.p_ac == 1.0 and outcome.weighting == "geval:top_logprobs"
    assert outcome.score_probs == pytest.approx({"true": 0.60, "false": 0.30}, rel=1e-12)
    assert outcome.weighted_p_ac == pytest.approx(0.60 / 0.90, rel=1e-12)
    assert outcome.weighted_score == outcome.weighted_p_ac
    again = await _run(server, cache=cache, rubric="accept_reject", top_logprobs=5)
    assert len(server.requests) == 1 and again.tries == 0
    assert (again.score_probs, again.weighted_p_ac) == (outcome.score_probs, outcome.weighted_p_ac)


async def test_expected_score_is_g_evals_weighting_from_known_logprobs(server: ScriptedLLM) -> None:
    """A 0-5 score: Σ p(s)·s / Σ p(s) over the allowed scores, whatever other tokens take the rest."""
    payload = {"evaluation_steps": ["read it"], "score": 4, "rationale": "Nearly there."}
    content = json.dumps(payload)
    tokens = _split(content, '{"evaluation_steps": ["read it"], "', "score", '":', " 4", ",")
    probs = {" 4": 0.5, " 3": 0.2, " 5": 0.15, " 2": 0.05, " four": 0.05}
    alternatives = {3: [(text, math.log(p)) for text, p in probs.items()]}
    server.script = lambda _request, _nth: Behaviour(payload=payload, logprobs=scripted_logprobs(tokens, alternatives))
    outcome = await _run(server, rubric="refinement_effort", top_logprobs=5)
    assert outcome.score == 4.0 and outcome.p_ac is None
    expected = {"0": 0.0, "1": 0.0, "2": 0.05, "3": 0.2, "4": 0.5, "5": 0.15}
    assert outcome.score_probs == pytest.approx(expected, rel=1e-12)
    assert outcome.weighted_score == pytest.approx((2 * 0.05 + 3 * 0.2 + 4 * 0.5 + 5 * 0.15) / 0.9, rel=1e-12)
    assert outcome.weighted_p_ac is None


async def test_without_logprobs_nothing_is_weighted(server: ScriptedLLM) -> None:
    """An endpoint asked for top_logprobs that sends none: the sampled score stands alone; nothing is guessed."""
    server.script = lambda _request, _nth: Behaviour(payload={"accepted": False})
    outcome = await _run(server, rubric="accept_reject", top_logprobs=5)
    assert outcome.status == "ok" and outcome.p_ac == 0.0
    assert (outcome.weighted_p_ac, outcome.weighted_score, outcome.score_probs, outcome.weighting) == (None,) * 4
    plain = await _run(server, rubric="accept_reject")
    assert "logprobs" not in server.requests[-1].json and plain.weighting is None
