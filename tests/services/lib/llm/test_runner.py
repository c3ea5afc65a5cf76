"""The shared runner as a caller that is not a judge uses it (no rubric, no p_ac), against the scripted
OpenAI-compatible server on a real socket, with the response cache in a real database."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.lib.llm import (
    Answer,
    CachedReply,
    DbResponseCache,
    Endpoint,
    Failure,
    LLMMetrics,
    LLMRequest,
    ReplySchema,
    Result,
    Runner,
    cache_key,
    request_hash,
)
from tests.fake_llm import Behaviour, ScriptedLLM


class Mutant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    severity: int = Field(ge=1, le=3)


MUTANT = ReplySchema.from_model("mutant", Mutant)
PLAIN = ReplySchema(
    "verdict",
    {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False},
)
MESSAGES = [{"role": "system", "content": "Write one mutant."}, {"role": "user", "content": "def f(): return 1"}]
GOOD = {"code": "def f(): return 2", "severity": 2}


def _endpoint(server: ScriptedLLM, **overrides: Any) -> Endpoint:
    config: dict[str, Any] = {
        "name": "rules",
        "base_url": server.base_url,
        "model": "gen-1",
        "timeout_s": 5,
        "max_tries": 3,
        "requests_per_minute": 60_000,
        **overrides,
    }
    return Endpoint.model_validate(config)


def _sequence(*behaviours: Behaviour) -> Any:
    return lambda _request, nth: behaviours[min(nth, len(behaviours)) - 1]


async def _ask(
    server: ScriptedLLM,
    request: LLMRequest,
    *,
    cache: DbResponseCache | None = None,
    metrics: LLMMetrics | None = None,
    **overrides: Any,
) -> Result:
    runner = Runner(
        _endpoint(server, **overrides), cache=cache, metrics=metrics, backoff_multiplier=0.01, backoff_max=0.05
    )
    try:
        return await runner.run(request)
    finally:
        await runner.close()


async def test_a_reply_is_validated_against_the_callers_schema_and_normalised(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(payload={**GOOD, "severity": 2.0}, served_model="gen-1-2026"))
    request = LLMRequest(MESSAGES, MUTANT)
    result = await _ask(server, request)
    assert isinstance(result, Answer)
    assert result.fields == GOOD and isinstance(result.fields["severity"], int)  # 2.0 -> 2 by the model
    assert (result.requested_model, result.served_model, result.tries, result.from_cache) == (
        "gen-1",
        "gen-1-2026",
        1,
        False,
    )
    assert result.tokens_in and result.latency_ms is not None and result.content
    sent = server.requests[0].json
    assert sent["messages"] == MESSAGES and sent["model"] == "gen-1" and sent["temperature"] == 0
    assert sent["response_format"]["json_schema"]["name"] == "mutant"
    assert sent["response_format"]["json_schema"]["strict"] is True
    assert sent["response_format"]["json_schema"]["schema"] == MUTANT.json_schema
    assert MUTANT.json_schema["additionalProperties"] is False and MUTANT.json_schema["required"] == [
        "code",
        "severity",
    ]
    runner = Runner(_endpoint(server))
    assert result.request_hash == request_hash(runner.params(request))
    await runner.close()


async def test_a_schema_without_a_model_returns_the_object_as_is(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(kind="fenced", payload={"ok": True}))
    result = await _ask(server, LLMRequest(MESSAGES, PLAIN))
    assert isinstance(result, Answer) and result.fields == {"ok": True}


async def test_response_format_seed_and_extra_body_follow_the_endpoint(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(payload={"ok": False}))
    await _ask(server, LLMRequest(MESSAGES, PLAIN), response_format="json_object", seed=7, extra_body={"top_k": 3})
    await _ask(server, LLMRequest(MESSAGES, PLAIN), response_format="none")
    first, second = (r.json for r in server.requests)
    assert first["response_format"] == {"type": "json_object"} and first["seed"] == 7 and first["top_k"] == 3
    assert "response_format" not in second and "seed" not in second


async def test_failures_are_classified_and_carry_the_last_invalid_reply(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(kind="status", status=400))
    refused = await _ask(server, LLMRequest(MESSAGES, MUTANT))
    assert isinstance(refused, Failure)
    assert (refused.reason, refused.kind, refused.tries, refused.content) == ("http 400", "http 400", 1, None)
    assert len(server.requests) == 1  # a client error is not retried

    server.script = _sequence(Behaviour(payload={**GOOD, "severity": 9}, served_model="gen-1-x"))
    out_of_range = await _ask(server, LLMRequest(MESSAGES, MUTANT))
    assert isinstance(out_of_range, Failure)
    assert out_of_range.kind == "range" and out_of_range.reason.startswith("range: severity")
    assert out_of_range.tries == 3 and out_of_range.served_model == "gen-1-x"
    assert out_of_range.content is not None and '"severity": 9' in out_of_range.content
    assert len({r.body for r in server.requests[1:]}) == 1 and len(server.requests) == 4

    server.script = _sequence(Behaviour(kind="raw", content="sure, here it is"))
    unparseable = await _ask(server, LLMRequest(MESSAGES, MUTANT), max_tries=1)
    assert isinstance(unparseable, Failure) and unparseable.kind == "unparseable"


async def test_a_bad_reply_is_repaired_by_the_identical_request(server: ScriptedLLM) -> None:
    server.script = _sequence(Behaviour(kind="status", status=503), Behaviour(payload={"code": 1}), Behaviour())
    result = await _ask(server, LLMRequest(MESSAGES, PLAIN))
    assert isinstance(result, Failure) and result.kind == "schema"  # the scripted default is not a `verdict`
    server.script = _sequence(Behaviour(kind="status", status=503), Behaviour(payload=GOOD))
    repaired = await _ask(server, LLMRequest(MESSAGES, MUTANT))
    assert isinstance(repaired, Answer) and repaired.tries == 2 and repaired.fields == GOOD
    assert server.requests[-1].body == server.requests[-2].body


async def test_the_cache_answers_a_repeated_request_within_its_scope(
    server: ScriptedLLM, sessions: async_sessionmaker[AsyncSession]
) -> None:
    cache = DbResponseCache(sessions)
    server.script = _sequence(Behaviour(payload=GOOD))
    first = await _ask(server, LLMRequest(MESSAGES, MUTANT, cache_scope=("rule-a", 0)), cache=cache)
    again = await _ask(server, LLMRequest(MESSAGES, MUTANT, cache_scope=("rule-a", 0)), cache=cache)
    assert isinstance(first, Answer) and isinstance(again, Answer)
    assert again.from_cache and again.tries == 0 and again.latency_ms is None
    assert (again.fields, again.content, again.request_hash) == (first.fields, first.content, first.request_hash)
    assert len(server.requests) == 1
    other_scope = await _ask(server, LLMRequest(MESSAGES, MUTANT, cache_scope=("rule-a", 1)), cache=cache)
    assert isinstance(other_scope, Answer) and not other_scope.from_cache and len(server.requests) == 2


async def test_a_cached_reply_that_no_longer_validates_is_resent_and_replaced(
    server: ScriptedLLM, sessions: async_sessionmaker[AsyncSession]
) -> None:
    cache = DbResponseCache(sessions)
    request = LLMRequest(MESSAGES, MUTANT, cache_scope=("v2",))
    runner = Runner(_endpoint(server))
    key = cache_key(server.base_url, request.cache_scope, runner.params(request))
    await runner.close()
    await cache.put(key, CachedReply('{"code": "x", "severity": 7}', "old", 1, 1))
    server.script = _sequence(Behaviour(payload=GOOD))
    result = await _ask(server, request, cache=cache)
    assert isinstance(result, Answer) and not result.from_cache and len(server.requests) == 1
    stored = await cache.get(key)
    assert stored is not None and stored.content == result.content


def _metrics() -> tuple[LLMMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = LLMMetrics(
        requests=Counter("t_requests", "", ["caller", "outcome"], registry=registry),
        retries=Counter("t_retries", "", ["caller"], registry=registry),
        failures=Counter("t_failures", "", ["caller", "reason"], registry=registry),
        latency=Histogram("t_latency", "", ["caller"], registry=registry),
        tokens=Counter("t_tokens", "", ["caller", "direction"], registry=registry),
        cache_hits=Counter("t_cache_hits", "", ["caller"], registry=registry),
    )
    return metrics, registry


async def test_the_callers_metrics_are_updated_under_its_name(
    server: ScriptedLLM, sessions: async_sessionmaker[AsyncSession]
) -> None:
    metrics, registry = _metrics()

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, {"caller": "rules", **labels}) or 0.0

    cache = DbResponseCache(sessions)
    server.script = _sequence(Behaviour(kind="status", status=500), Behaviour(payload=GOOD))
    await _ask(server, LLMRequest(MESSAGES, MUTANT), cache=cache, metrics=metrics)
    await _ask(server, LLMRequest(MESSAGES, MUTANT), cache=cache, metrics=metrics)
    assert value("t_requests_total", outcome="http_500") == 1 and value("t_requests_total", outcome="ok") == 1
    assert value("t_retries_total") == 1 and value("t_cache_hits_total") == 1
    assert value("t_tokens_total", direction="in") > 0 and value("t_latency_count") == 1
    server.script = _sequence(Behaviour(payload={**GOOD, "severity": 0}))
    await _ask(server, LLMRequest(MESSAGES, MUTANT, cache_scope=("x",)), metrics=metrics, max_tries=1)
    assert value("t_requests_total", outcome="invalid_range") == 1 and value("t_failures_total", reason="range") == 1
