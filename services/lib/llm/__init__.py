"""The LLM provider layer, shared by every service that asks a model for structured output (judges, the
perturbation generator): a request (messages + reply schema) to an OpenAI-compatible endpoint becomes a validated
`Answer` or a classified `Failure`, with bounded identical reissue, pacing, and a response cache.

A library layer: it imports `services.kernel` and third-party packages only, never a service.

    from services.lib.llm import Answer, DbResponseCache, Endpoint, LLMRequest, ReplySchema, Runner

    runner = Runner(Endpoint(name="rules", base_url="http://127.0.0.1:8001/v1", model="m"), cache=DbResponseCache())
    result = await runner.run(LLMRequest(messages, ReplySchema.from_model("mutant", MutantModel)))
    if isinstance(result, Answer): ...  # result.fields, validated
    else: ...  # a Failure: result.reason, e.g. "http 503", "schema: ..."
    await runner.close()
"""

from services.lib.llm.cache import CachedReply, DbResponseCache, JSONScalar, ResponseCache, cache_key
from services.lib.llm.logprobs import (
    LogprobProbe,
    ScoreDistribution,
    TokenLogprob,
    from_probabilities,
    parse_token_logprobs,
    score_distribution,
)
from services.lib.llm.provider import Message, OpenAICompatProvider, ProviderError, Reply, request_hash, request_params
from services.lib.llm.runner import Answer, Failure, LLMMetrics, LLMRequest, Result, Runner
from services.lib.llm.schema import ReplySchema, strict_json_schema
from services.lib.llm.settings import Endpoint, ResponseFormat
from services.lib.llm.validate import Accepted, Rejected, extract_json, validate

__all__ = [
    "score_distribution",
    "parse_token_logprobs",
    "from_probabilities",
    "TokenLogprob",
    "ScoreDistribution",
    "LogprobProbe",
    "Accepted",
    "Answer",
    "CachedReply",
    "DbResponseCache",
    "Endpoint",
    "Failure",
    "JSONScalar",
    "LLMMetrics",
    "LLMRequest",
    "Message",
    "OpenAICompatProvider",
    "ProviderError",
    "Rejected",
    "Reply",
    "ReplySchema",
    "ResponseCache",
    "ResponseFormat",
    "Result",
    "Runner",
    "cache_key",
    "extract_json",
    "request_hash",
    "request_params",
    "strict_json_schema",
    "validate",
]
