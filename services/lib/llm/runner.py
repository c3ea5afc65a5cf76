"""One structured LLM call: a request (messages + reply schema) to one endpoint, answered by a validated reply or
a classified failure, never anything in between.

The request body is built once. A reply that fails, or fails validation, is repaired by reissuing the identical
request (the same bytes), with exponential backoff and full jitter (or after the provider's `Retry-After`), within
`max_tries` and the endpoint's deadline; a 4xx other than 408/409/425/429 is not retried (it would fail the same
way). Past either bound the result is a `Failure` with the reason of the last try. Concurrency and request rate
are bounded per runner, that is per endpoint per process. With a response cache, a request already answered
validly is not sent again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from aiolimiter import AsyncLimiter
from prometheus_client import Counter, Histogram
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential
from tenacity.stop import stop_base

from services.kernel.fair import FairSlots
from services.lib.llm.cache import CachedReply, JSONScalar, ResponseCache, cache_key
from services.lib.llm.logprobs import LogprobProbe, ScoreDistribution, from_probabilities, score_distribution
from services.lib.llm.provider import Message, OpenAICompatProvider, ProviderError, Reply, request_hash, request_params
from services.lib.llm.schema import ReplySchema
from services.lib.llm.settings import Endpoint
from services.lib.llm.validate import Accepted, Rejected, validate


@dataclass(frozen=True)
class LLMRequest:
    """What to ask: the chat messages and the schema the reply must satisfy.

    `cache_scope` holds what, beside the endpoint and the request body, makes two answers different cache entries
    (e.g. a prompt version, or a repeat index to draw a fresh sample of the same request); JSON scalars only.
    `probe`, when the endpoint gives logprobs, names the reply's value whose allowed values' probabilities the
    answer carries (services/lib/llm/logprobs.py).
    """

    messages: list[Message]
    schema: ReplySchema
    cache_scope: tuple[JSONScalar, ...] = ()
    probe: LogprobProbe | None = None


@dataclass(frozen=True)
class Answer:
    """A validated reply. `tries` is 0 and `latency_ms` None when it came from the cache."""

    fields: dict[str, Any]
    content: str
    requested_model: str
    served_model: str | None
    tries: int
    latency_ms: int | None
    tokens_in: int | None
    tokens_out: int | None
    request_hash: str
    from_cache: bool = False
    distribution: ScoreDistribution | None = None  # the probed value's probabilities, when there were logprobs


@dataclass(frozen=True)
class Failure:
    """No valid reply within the bounds. `reason` is the last try's: `http 500`, `http 429`, `timeout`,
    `connection: ...`, `unparseable: ...`, `empty: ...`, `schema: ...` or `range: ...`. `content` and
    `served_model` are those of the last reply that arrived but did not validate, if any."""

    reason: str
    requested_model: str
    served_model: str | None
    tries: int
    request_hash: str
    content: str | None = None

    @property
    def kind(self) -> str:
        """The reason's class: `http 500`, `timeout`, `connection`, `unparseable`, `empty`, `schema`, `range`."""
        return self.reason.split(":")[0]


Result = Answer | Failure


@dataclass(frozen=True)
class LLMMetrics:
    """The Prometheus metrics a runner updates, all labelled first by the endpoint's `name`: requests (name,
    outcome), retries (name), failures (name, reason class), latency (name), tokens (name, in|out), cache hits
    (name). Callers pass their own set (judges: judge/runner.py); a runner without one records none."""

    requests: Counter
    retries: Counter
    failures: Counter
    latency: Histogram
    tokens: Counter
    cache_hits: Counter


class InvalidReply(Exception):
    """A reply that arrived but did not validate: retried like a provider error."""

    def __init__(self, rejected: Rejected, reply: Reply) -> None:
        super().__init__(str(rejected))
        self.rejected = rejected
        self.reply = reply


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


def _label(reason: str) -> str:
    return reason.split(":")[0].replace(" ", "_")


class Runner:
    """Structured calls to one endpoint; concurrency and request rate bounded per runner (create one per endpoint
    per process, and `close()` it)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        cache: ResponseCache | None = None,
        metrics: LLMMetrics | None = None,
        backoff_multiplier: float | None = None,
        backoff_max: float | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.provider = OpenAICompatProvider(endpoint)
        self.cache = cache
        self.metrics = metrics
        # Requests of the jobs a worker runs at once: waiting tenants are served in turn (services/kernel/fair.py).
        self.semaphore = FairSlots(endpoint.concurrency)
        # Pace evenly: requests_per_minute spread over the minute, not released as one burst.
        self.limiter = AsyncLimiter(max(endpoint.requests_per_minute / 60.0, 1e-6) * 1.0, 1.0)
        self.backoff_multiplier = backoff_multiplier if backoff_multiplier is not None else endpoint.backoff_s
        self.backoff_max = backoff_max if backoff_max is not None else endpoint.backoff_max_s

    async def close(self) -> None:
        await self.provider.close()

    def params(self, request: LLMRequest) -> dict[str, Any]:
        """The request body `run` sends (and hashes, and keys the cache with)."""
        return request_params(self.endpoint, request.schema, request.messages)

    async def _send(self, params: dict[str, Any], schema: ReplySchema) -> tuple[Reply, Accepted]:
        name, metrics = self.endpoint.name, self.metrics
        async with self.semaphore:
            await self.limiter.acquire()
            try:
                reply = await self.provider.complete(params)
            except ProviderError as exc:
                if metrics is not None:
                    metrics.requests.labels(name, _label(exc.reason)).inc()
                raise
        if metrics is not None:
            metrics.latency.labels(name).observe(reply.latency_ms / 1000)
            if reply.tokens_in:
                metrics.tokens.labels(name, "in").inc(reply.tokens_in)
            if reply.tokens_out:
                metrics.tokens.labels(name, "out").inc(reply.tokens_out)
        verdict = validate(reply.content, schema)
        if isinstance(verdict, Rejected):
            if metrics is not None:
                metrics.requests.labels(name, f"invalid_{verdict.reason}").inc()
            raise InvalidReply(verdict, reply)
        if metrics is not None:
            metrics.requests.labels(name, "ok").inc()
        accepted: Accepted = verdict
        return reply, accepted

    async def run(self, request: LLMRequest) -> Result:
        """Ask once, within the bounds: an `Answer` or a `Failure`. Raises only on a bug or a cache error."""
        endpoint, metrics = self.endpoint, self.metrics
        params = self.params(request)
        digest = request_hash(params)
        key = cache_key(endpoint.base_url, request.cache_scope, params)
        if self.cache is not None:
            cached = await self.cache.get(key)
            if cached is not None:
                verdict = validate(cached.content, request.schema)
                if isinstance(verdict, Accepted):
                    if metrics is not None:
                        metrics.cache_hits.labels(endpoint.name).inc()
                    probe = request.probe
                    cached_distribution = (
                        from_probabilities(cached.score_probs, probe)
                        if probe is not None and cached.score_probs is not None
                        else None
                    )
                    return Answer(
                        fields=verdict.fields,
                        content=cached.content,
                        requested_model=endpoint.model,
                        served_model=cached.served_model,
                        tries=0,
                        latency_ms=None,
                        tokens_in=cached.tokens_in,
                        tokens_out=cached.tokens_out,
                        request_hash=digest,
                        from_cache=True,
                        distribution=cached_distribution,
                    )
        started = time.monotonic()
        tries = 0
        last_content: str | None = None
        last_served_model: str | None = None
        retrying = AsyncRetrying(
            stop=stop_after_attempt(endpoint.max_tries) | _deadline(started, endpoint.deadline_s),
            wait=_Wait(self.backoff_multiplier, self.backoff_max),
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    tries += 1
                    if tries > 1 and metrics is not None:
                        metrics.retries.labels(endpoint.name).inc()
                    try:
                        reply, accepted = await self._send(params, request.schema)
                    except InvalidReply as exc:
                        last_content = exc.reply.content
                        last_served_model = exc.reply.served_model
                        raise
        except (ProviderError, InvalidReply) as exc:
            reason = exc.reason if isinstance(exc, ProviderError) else str(exc.rejected)
            if metrics is not None:
                metrics.failures.labels(endpoint.name, _label(reason)).inc()
            return Failure(reason, endpoint.model, last_served_model, tries, digest, last_content)
        assert reply.content is not None  # validate() rejects a reply without content
        distribution = (
            score_distribution(reply.content, reply.logprobs, request.probe)
            if request.probe is not None and reply.logprobs
            else None
        )
        if self.cache is not None:
            probabilities = dict(distribution.probabilities) if distribution is not None else None
            await self.cache.put(
                key, CachedReply(reply.content, reply.served_model, reply.tokens_in, reply.tokens_out, probabilities)
            )
        return Answer(
            fields=accepted.fields,
            content=reply.content,
            requested_model=endpoint.model,
            served_model=reply.served_model,
            tries=tries,
            latency_ms=reply.latency_ms,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            request_hash=digest,
            distribution=distribution,
        )


class _deadline(stop_base):  # noqa: N801 - reads as tenacity's own stop conditions do
    """Stop once the next wait would end past the call's deadline (tenacity computes the wait first)."""

    def __init__(self, started: float, deadline_s: float) -> None:
        self.started = started
        self.deadline_s = deadline_s

    def __call__(self, retry_state: RetryCallState) -> bool:
        upcoming = retry_state.upcoming_sleep or 0.0
        return time.monotonic() - self.started + upcoming > self.deadline_s
