"""A scripted OpenAI-compatible chat-completions server on a real loopback socket, that misbehaves on purpose.

Tests and benchmarks point judges at it. Each request gets a `Behaviour`, chosen by a script: the default
answers at once with valid JSON; a script can answer in code fences, with malformed or truncated JSON, empty
content, out-of-range or missing fields, 429 with Retry-After, 500, slowly, or with a different served model; and
a reply can carry scripted per-token logprobs (`scripted_logprobs`), as with `logprobs=True, top_logprobs=k`.
Every request is recorded (raw body bytes included) so tests can check counts and byte-identical reissues.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

VALID_COCREATION = {"p_ac": 0.75, "s_algo": 4, "s_robust": 3, "rationale": "Looks right; misses one edge case."}


@dataclass
class Behaviour:
    """What the server does with one request."""

    kind: str = "valid"  # valid | fenced | raw | status | garbage (a 200 whose body is not a chat completion)
    payload: dict[str, Any] | None = None  # the JSON object to answer with (valid, fenced, slow)
    content: str | None = None  # raw message content (raw), e.g. malformed or truncated JSON, or ""
    status: int = 200
    retry_after: float | None = None
    delay_s: float = 0.0
    served_model: str | None = None  # None: echo the requested model
    # OpenAI's `choices[0].logprobs.content` list (see `scripted_logprobs`); None: the choice carries no logprobs
    logprobs: list[dict[str, Any]] | None = None


@dataclass
class RecordedRequest:
    body: bytes
    json: dict[str, Any]
    headers: dict[str, str]
    at: float
    behaviour: Behaviour
    nth_for_body: int  # 1 for the first time this exact body arrived, 2 for its first reissue, ...


Script = Callable[[dict[str, Any], int], Behaviour]


@dataclass
class ScriptedLLM:
    """Start with `start()`; point a judge's base_url at `base_url`; inspect `requests` afterwards."""

    script: Script = field(default=lambda _request, _nth: Behaviour())
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._seen: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self.port = _free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _chat(self, request: Request) -> Response:
        body = await request.body()
        try:
            parsed = json.loads(body)
        except ValueError:
            return JSONResponse({"error": {"message": "bad json"}}, status_code=400)
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            self._seen[digest] += 1
            nth = self._seen[digest]
            behaviour = self.script(parsed, nth)
            self.requests.append(RecordedRequest(body, parsed, dict(request.headers), time.time(), behaviour, nth))
        if behaviour.delay_s:
            await asyncio.sleep(behaviour.delay_s)
        if behaviour.kind == "status":
            headers = {"retry-after": f"{behaviour.retry_after:g}"} if behaviour.retry_after is not None else {}
            return JSONResponse(
                {"error": {"message": f"scripted {behaviour.status}", "type": "scripted"}},
                status_code=behaviour.status,
                headers=headers,
            )
        if behaviour.kind == "garbage":
            return Response(behaviour.content or "<html>upstream hiccup</html>", media_type="text/html")
        payload = behaviour.payload if behaviour.payload is not None else VALID_COCREATION
        if behaviour.kind == "raw":
            content = behaviour.content or ""
        elif behaviour.kind == "fenced":
            content = "Here is my verdict:\n```json\n" + json.dumps(payload, indent=2) + "\n```\n"
        else:
            content = json.dumps(payload)
        model = behaviour.served_model or parsed.get("model", "unknown")
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }
        if behaviour.logprobs is not None:
            choice["logprobs"] = {"content": behaviour.logprobs}
        return _AsciiJSONResponse(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [choice],
                "usage": {
                    "prompt_tokens": len(body) // 4,
                    "completion_tokens": len(content) // 4,
                    "total_tokens": len(body) // 4 + len(content) // 4,
                },
            }
        )

    def start(self) -> ScriptedLLM:
        app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="error", access_log=False, timeout_keep_alive=30
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("scripted LLM server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def scripted_logprobs(
    tokens: list[str], alternatives: dict[int, list[tuple[str, float]]], sampled_logprob: float = -0.01
) -> list[dict[str, Any]]:
    """OpenAI's wire form of a reply's per-token logprobs, for `Behaviour.logprobs`: token i's `top_logprobs` are
    `alternatives[i]`, with the sampled token itself first at `sampled_logprob` when it is not listed there; a
    token without alternatives lists only itself. A token's own logprob is its listed one, else `sampled_logprob`.
    The tokens must concatenate to the reply's content for a reader to align them (split the content string)."""
    items: list[dict[str, Any]] = []
    for i, token in enumerate(tokens):
        listed = alternatives.get(i, [])
        own = next((logprob for text, logprob in listed if text == token), sampled_logprob)
        top = listed if any(text == token for text, _ in listed) else [(token, sampled_logprob), *listed]
        items.append(
            {
                "token": token,
                "logprob": own,
                "bytes": None,
                "top_logprobs": [{"token": text, "logprob": logprob, "bytes": None} for text, logprob in top],
            }
        )
    return items


class _AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: valid JSON for any `str`, so a script can answer with lone
    surrogates (`"\\ud800"`), which a strict UTF-8 body could not carry, as a hostile provider's JSON can."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
