"""One LLM judgment: build once, send with bounded retry, validate (a)-(d), and return exactly one outcome.

Repair reissues the identical request (the same bytes), with exponential backoff and full jitter, honouring
`Retry-After` on 429, within `max_tries` and a deadline. Past either bound the outcome is `failed` with its
reason; a default score is never invented. A response cache keyed by everything that shapes the request
(provider base URL, model, rubric and prompt version, condition, messages, every generation parameter, repeat
index) means a rerun resends nothing it already has a valid answer for.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiolimiter import AsyncLimiter
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential
from tenacity.stop import stop_base

from judge.provider import OpenAICompatProvider, ProviderError, Reply, request_hash, request_params
from judge.rubrics import RubricSpec
from judge.validate import Accepted, Rejected, validate
from services.kernel import telemetry
from services.kernel.judges import LLMJudge


@dataclass
class Outcome:
    """Everything one judgment row records."""

    status: str  # ok | failed
    fields: dict[str, Any] | None = None
    p_ac: float | None = None
    score: float | None = None
    raw_response: str | None = None
    requested_model: str | None = None
    served_model: str | None = None
    tries: int = 0
    latency_ms: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    request_hash: str | None = None
    error: str | None = None
    from_cache: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CachedReply:
    content: str
    served_model: str | None
    tokens_in: int | None
    tokens_out: int | None


class ResponseCache(Protocol):
    async def get(self, key: str) -> CachedReply | None: ...

    async def put(self, key: str, reply: CachedReply) -> None: ...


class InvalidReply(Exception):
    def __init__(self, rejected: Rejected, reply: Reply) -> None:
        super().__init__(str(rejected))
        self.rejected = rejected
        self.reply = reply


def cache_key(judge: LLMJudge, rubric: RubricSpec, condition: str, repeat: int, params: dict[str, Any]) -> str:
    material = [judge.base_url.rstrip("/"), rubric.version, condition, repeat, params]
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class _Wait:
    """Retry-After when the provider sent one (429/503), else exponential backoff with full jitter."""

    def __init__(self, multiplier: float, maximum: float) -> None:
        self.backoff = wait_random_exponential(multiplier=multiplier, max=maximum)

    def __call__(self, state: RetryCallState) -> float:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        if isinstance(error, ProviderError) and error.retry_after is not None:
            return error.retry_after
        return float(self.backoff(state))


def _retryable(error: BaseException) -> bool:
    return isinstance(error, InvalidReply) or (isinstance(error, ProviderError) and error.retryable)


class LLMRunner:
    """Judgments for one configured LLM judge; concurrency and request rate bounded per process."""

    def __init__(
        self,
        judge: LLMJudge,
        cache: ResponseCache | None = None,
        backoff_multiplier: float | None = None,
        backoff_max: float | None = None,
    ) -> None:
        self.judge = judge
        self.provider = OpenAICompatProvider(judge)
        self.cache = cache
        self.semaphore = asyncio.Semaphore(judge.concurrency)
        # Pace evenly: requests_per_minute spread over the minute, not released as one burst.
        self.limiter = AsyncLimiter(max(judge.requests_per_minute / 60.0, 1e-6) * 1.0, 1.0)
        self.backoff_multiplier = backoff_multiplier if backoff_multiplier is not None else judge.backoff_s
        self.backoff_max = backoff_max if backoff_max is not None else judge.backoff_max_s

    async def close(self) -> None:
        await self.provider.close()

    async def _send(self, params: dict[str, Any], rubric: RubricSpec) -> tuple[Reply, Accepted]:
        name = self.judge.name
        async with self.semaphore:
            await self.limiter.acquire()
            try:
                reply = await self.provider.complete(params)
            except ProviderError as exc:
                telemetry.judge_requests.labels(name, exc.reason.split(":")[0].replace(" ", "_")).inc()
                raise
        telemetry.judge_latency.labels(name).observe(reply.latency_ms / 1000)
        if reply.tokens_in:
            telemetry.judge_tokens.labels(name, "in").inc(reply.tokens_in)
        if reply.tokens_out:
            telemetry.judge_tokens.labels(name, "out").inc(reply.tokens_out)
        verdict = validate(reply.content, rubric)
        if isinstance(verdict, Rejected):
            telemetry.judge_requests.labels(name, f"invalid_{verdict.reason}").inc()
            raise InvalidReply(verdict, reply)
        telemetry.judge_requests.labels(name, "ok").inc()
        accepted: Accepted = verdict
        return reply, accepted

    async def run(self, rubric: RubricSpec, messages: list[dict[str, str]], *, condition: str, repeat: int) -> Outcome:
        params = request_params(self.judge, rubric, messages)
        digest = request_hash(params)
        key = cache_key(self.judge, rubric, condition, repeat, params)
        base = Outcome(status="failed", requested_model=self.judge.model, request_hash=digest)
        if self.cache is not None:
            cached = await self.cache.get(key)
            if cached is not None:
                verdict = validate(cached.content, rubric)
                if isinstance(verdict, Accepted):
                    telemetry.judge_cache_hits.labels(self.judge.name).inc()
                    return self._ok(
                        base,
                        rubric,
                        verdict,
                        cached.content,
                        cached.served_model,
                        0,
                        None,
                        cached.tokens_in,
                        cached.tokens_out,
                        from_cache=True,
                    )
        started = time.monotonic()
        tries = 0
        last_content: str | None = None
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.judge.max_tries) | _deadline(started, self.judge.deadline_s),
            wait=_Wait(self.backoff_multiplier, self.backoff_max),
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    tries += 1
                    if tries > 1:
                        telemetry.judge_retries.labels(self.judge.name).inc()
                    try:
                        reply, accepted = await self._send(params, rubric)
                    except InvalidReply as exc:
                        last_content = exc.reply.content
                        base.served_model = exc.reply.served_model
                        raise
        except (ProviderError, InvalidReply) as exc:
            reason = exc.reason if isinstance(exc, ProviderError) else str(exc.rejected)
            telemetry.judge_failures.labels(self.judge.name, reason.split(":")[0].replace(" ", "_")).inc()
            base.tries, base.error, base.raw_response = tries, reason, last_content
            return base
        if self.cache is not None and reply.content is not None:
            await self.cache.put(key, CachedReply(reply.content, reply.served_model, reply.tokens_in, reply.tokens_out))
        return self._ok(
            base,
            rubric,
            accepted,
            reply.content,
            reply.served_model,
            tries,
            reply.latency_ms,
            reply.tokens_in,
            reply.tokens_out,
        )

    @staticmethod
    def _ok(
        base: Outcome,
        rubric: RubricSpec,
        verdict: Accepted,
        content: str | None,
        served_model: str | None,
        tries: int,
        latency_ms: int | None,
        tokens_in: int | None,
        tokens_out: int | None,
        from_cache: bool = False,
    ) -> Outcome:
        p_ac, score = rubric.headline(verdict.fields)
        base.status, base.fields, base.p_ac, base.score = "ok", verdict.fields, p_ac, score
        base.raw_response, base.served_model, base.tries, base.latency_ms = content, served_model, tries, latency_ms
        base.tokens_in, base.tokens_out, base.from_cache, base.error = tokens_in, tokens_out, from_cache, None
        return base


class _deadline(stop_base):  # noqa: N801 - reads as tenacity's own stop conditions do
    """Stop once the next wait would end past the judgment's deadline (tenacity computes the wait first)."""

    def __init__(self, started: float, deadline_s: float) -> None:
        self.started = started
        self.deadline_s = deadline_s

    def __call__(self, retry_state: RetryCallState) -> bool:
        upcoming = retry_state.upcoming_sleep or 0.0
        return time.monotonic() - self.started + upcoming > self.deadline_s
