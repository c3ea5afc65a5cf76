"""Any OpenAI-compatible chat-completions endpoint, through the `openai` client, with errors classified.

The client's own retries are off (`max_retries=0`): the runner owns the retry policy, so every try is counted
and bounded in one place.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import openai

from services.lib.llm.logprobs import TokenLogprob, parse_token_logprobs
from services.lib.llm.schema import ReplySchema
from services.lib.llm.settings import Endpoint

# Statuses worth reissuing the identical request for; any other 4xx would fail the same way again.
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

Message = dict[str, str]


@dataclass(frozen=True)
class Reply:
    content: str | None
    served_model: str | None
    tokens_in: int | None
    tokens_out: int | None
    latency_ms: int
    finish_reason: str | None
    logprobs: list[TokenLogprob] | None = None  # the reply's tokens with their alternatives, when asked for


class ProviderError(Exception):
    """A request that got no usable reply; `reason` is what a failure records (e.g. `http 503`, `timeout`)."""

    def __init__(self, reason: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.retry_after = retry_after


def _retry_after(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds), if the provider sent either."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from these APIs; fall back to backoff


def request_params(endpoint: Endpoint, schema: ReplySchema, messages: list[Message]) -> dict[str, Any]:
    """The complete request body: a request is reissued byte for byte from this, and hashed from it."""
    params: dict[str, Any] = {
        "model": endpoint.model,
        "messages": messages,
        "temperature": endpoint.temperature,
        "max_tokens": endpoint.max_tokens,
    }
    if endpoint.response_format == "json_schema":
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema.name, "strict": True, "schema": schema.json_schema},
        }
    elif endpoint.response_format == "json_object_schema":
        params["response_format"] = {"type": "json_object", "schema": schema.json_schema}
    elif endpoint.response_format == "json_object":
        params["response_format"] = {"type": "json_object"}
    if endpoint.top_logprobs:
        params["logprobs"] = True
        params["top_logprobs"] = endpoint.top_logprobs
    if endpoint.seed is not None:
        params["seed"] = endpoint.seed
    params.update(endpoint.extra_body)
    return params


def request_hash(params: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a request body."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _context_exceeded(error: openai.APIStatusError) -> bool:
    """Whether a 400 says the prompt does not fit the context: OpenAI's and llama-cpp-python's error code
    `context_length_exceeded`, or llama.cpp's llama-server's `exceed_context_size_error` type. Only the code is
    read; the provider's message never reaches a judgment row."""
    body = error.body if isinstance(error.body, dict) else {}
    inner = body.get("error", body)
    if not isinstance(inner, dict):
        return False
    return inner.get("code") == "context_length_exceeded" or inner.get("type") == "exceed_context_size_error"


class OpenAICompatProvider:
    """One client (one connection pool) per endpoint per process."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        api_key = os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
        self.client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=api_key or "not-set",
            max_retries=0,
            timeout=endpoint.timeout_s,
        )

    async def complete(self, params: dict[str, Any]) -> Reply:
        """Send one request once; a reply, or a ProviderError saying why there is none and whether to retry."""
        body = dict(params)
        known = (
            "model",
            "messages",
            "temperature",
            "max_tokens",
            "response_format",
            "seed",
            "logprobs",
            "top_logprobs",
        )
        standard: dict[str, Any] = {key: body.pop(key) for key in known if key in body}
        started = time.perf_counter()
        try:
            response = await self.client.chat.completions.create(**standard, extra_body=body or None)
        except openai.APITimeoutError:
            raise ProviderError("timeout", retryable=True) from None
        except openai.APIConnectionError as exc:
            raise ProviderError(
                f"connection: {type(exc.__cause__).__name__ if exc.__cause__ else 'error'}", retryable=True
            ) from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status == 400 and _context_exceeded(exc):
                # The same request would overflow again: a recorded failure, never shortened or retried.
                raise ProviderError(
                    "context: the request is longer than the model's context window", retryable=False
                ) from None
            raise ProviderError(
                f"http {status}", retryable=status in _RETRYABLE_STATUS, retry_after=_retry_after(exc.response.headers)
            ) from None
        except openai.APIResponseValidationError:
            raise ProviderError(
                "unparseable: the provider's envelope is not a chat completion", retryable=True
            ) from None
        latency_ms = int((time.perf_counter() - started) * 1000)
        try:
            # The client does not validate the envelope: a 200 with an HTML page or a malformed body arrives as
            # a string or a half-filled object, and must fail here, classified, not crash the task.
            choice = response.choices[0] if response.choices else None
            usage = response.usage
            content = choice.message.content if choice is not None else None
            if content is not None and not isinstance(content, str):
                raise TypeError("message content is not text")
            return Reply(
                content=content,
                served_model=response.model if isinstance(response.model, str) else None,
                tokens_in=usage.prompt_tokens if usage else None,
                tokens_out=usage.completion_tokens if usage else None,
                latency_ms=latency_ms,
                finish_reason=choice.finish_reason if choice is not None else None,
                logprobs=parse_token_logprobs(getattr(choice, "logprobs", None)) if choice is not None else None,
            )
        except (AttributeError, TypeError, IndexError, KeyError) as exc:
            raise ProviderError(
                f"unparseable: the reply is not a chat completion ({type(exc).__name__})", retryable=True
            ) from None

    async def close(self) -> None:
        await self.client.close()
