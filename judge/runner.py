"""One LLM judgment: the rubric's request through the shared provider layer (services/lib/llm), turned into exactly
one `JudgmentOutput` (services/kernel/contracts.py), the row the judge worker writes.

The provider layer builds the request once, reissues it identically within `max_tries` and the deadline, and
validates the reply against the rubric's schema (conditions (a)-(d)); this module adds what is a judge's own: the
rubric, its headline score (`p_ac` or `score`), the cache scope (prompt version, condition, repeat index) and the
judge's telemetry. A failure is recorded with its reason; a default score is never invented.
"""

from __future__ import annotations

from judge.rubrics import WEIGHTING, RubricSpec
from services.kernel import telemetry
from services.kernel.contracts import JudgmentOutput, JudgmentStatus
from services.kernel.judges import LLMJudge
from services.kernel.text import clean_json, clean_text
from services.lib.llm import Failure, LLMMetrics, LLMRequest, Message, ResponseCache, Runner

JUDGE_TELEMETRY = LLMMetrics(
    requests=telemetry.judge_requests,
    retries=telemetry.judge_retries,
    failures=telemetry.judge_failures,
    latency=telemetry.judge_latency,
    tokens=telemetry.judge_tokens,
    cache_hits=telemetry.judge_cache_hits,
)


def judge_request(
    rubric: RubricSpec, messages: list[Message], *, condition: str, repeat: int, logprobs: bool = False
) -> LLMRequest:
    """A judgment as a provider-layer request; a repeat is a fresh sample, so it is its own cache entry. With
    `logprobs` (the endpoint is asked for them), the rubric's headline value is probed."""
    probe = rubric.probe if logprobs else None
    return LLMRequest(messages, rubric.reply_schema, cache_scope=(rubric.version, condition, repeat), probe=probe)


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
        telemetry.start_llm_judge_series(judge.name)
        for direction, per_million in (("in", judge.price_per_mtok_in), ("out", judge.price_per_mtok_out)):
            if per_million is not None:
                telemetry.judge_price.labels(judge.name, direction).set(per_million / 1_000_000)
        self.runner = Runner(
            judge, cache=cache, metrics=JUDGE_TELEMETRY, backoff_multiplier=backoff_multiplier, backoff_max=backoff_max
        )

    async def close(self) -> None:
        await self.runner.close()

    async def run(self, rubric: RubricSpec, messages: list[Message], *, condition: str, repeat: int) -> JudgmentOutput:
        request = judge_request(
            rubric, messages, condition=condition, repeat=repeat, logprobs=self.judge.top_logprobs > 0
        )
        result = await self.runner.run(request)
        if isinstance(result, Failure):
            return JudgmentOutput(
                status=JudgmentStatus.FAILED,
                raw_response=_clean(result.content),
                requested_model=result.requested_model,
                served_model=_clean(result.served_model),
                tries=result.tries,
                request_hash=result.request_hash,
                error=clean_text(result.reason),
            )
        p_ac, score = rubric.headline(result.fields)
        weighted_p_ac = weighted_score = score_probs = weighting = None
        if result.distribution is not None:
            weighted_p_ac, weighted_score = rubric.weighted_headline(result.distribution)
            score_probs, weighting = dict(result.distribution.probabilities), WEIGHTING
        return JudgmentOutput(
            status=JudgmentStatus.OK,
            fields=clean_json(result.fields, keep_nul=False),
            p_ac=p_ac,
            score=score,
            raw_response=clean_text(result.content),
            requested_model=result.requested_model,
            served_model=_clean(result.served_model),
            tries=result.tries,
            latency_ms=result.latency_ms,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            request_hash=result.request_hash,
            weighted_p_ac=weighted_p_ac,
            weighted_score=weighted_score,
            score_probs=score_probs,
            weighting=weighting,
            from_cache=result.from_cache,
        )


def _clean(text: str | None) -> str | None:
    """An endpoint's text as stored and answered: valid UTF-8 without NUL (services/kernel/text.py). A reply's JSON
    may spell lone surrogates (`"\\udc80"`) or NUL (`"\\u0000"`) in its rationale, its content or its model name."""
    return None if text is None else clean_text(text)
