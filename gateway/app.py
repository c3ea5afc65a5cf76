"""The FastAPI application: routers, error format, body-size limit and per-route telemetry."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import errors, openapi, testcheck
from gateway.errors import ApiError, problem_response
from gateway.routes import (
    attempts,
    benchmarks,
    calibrations,
    datasets,
    executions,
    exports,
    jobs,
    judges,
    keys,
    languages,
    metrics,
    ops,
    perturbations,
    problems,
    reports,
    similarity,
    studies,
)
from gateway.waiting import EndedAttempts
from services.kernel import queue, telemetry
from services.kernel.db import dispose_engine, init_engine
from services.kernel.judges import configured_judges
from services.kernel.ratelimit import QUOTA_NAMES
from services.kernel.settings import get_settings


class _BodyTooLarge(ApiError):
    """Raised from `receive` once a streamed body passes the limit. An ApiError, so that FastAPI's body parsing
    passes it on (it turns any other exception into 400) and the error handler answers 413."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(
            413, f"request body is larger than {max_bytes} bytes", [{"loc": ["body"], "msg": f"over {max_bytes} bytes"}]
        )


class BodyLimitMiddleware:
    """Refuse bodies over the limit with 413 before any route reads them (declared or streamed length)."""

    def __init__(self, app: ASGIApp, max_bytes: int, streamed: dict[str, int] | None = None) -> None:
        self.app = app
        self.default_bytes = max_bytes
        self.streamed = streamed or {}  # path -> its own limit: routes that read their body a line at a time

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.streamed.get(scope.get("path", ""), self.default_bytes)
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > max_bytes:
                await self._reject(scope, receive, send, max_bytes)
                return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > max_bytes:
                    raise _BodyTooLarge(max_bytes)
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _BodyTooLarge:
            await self._reject(scope, receive, send, max_bytes)

    async def _reject(self, scope: Scope, receive: Receive, send: Send, max_bytes: int) -> None:
        response = problem_response(
            413,
            f"request body is larger than {max_bytes} bytes",
            [{"loc": ["body"], "msg": f"over {max_bytes} bytes"}],
        )
        await response(scope, receive, send)


class MetricsMiddleware:
    """Count requests and time them by route template (not raw path, so ids do not explode the labels)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            method = scope.get("method", "GET")
            telemetry.http_requests.labels(method, template, str(status)).inc()
            telemetry.http_latency.labels(method, template).observe(time.perf_counter() - started)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings = get_settings()
    configured_judges(str(settings.judges_file) if settings.judges_file else None)  # a bad file stops the start
    init_engine(role="gateway")
    telemetry.start_quota_series(QUOTA_NAMES)
    app.state.ended_attempts = EndedAttempts()
    # The test-code analyser's reusable jails, made before the first problem needs them (None if it cannot jail).
    await asyncio.to_thread(testcheck.default_jail)
    yield
    await asyncio.to_thread(testcheck.close_default_jail)
    await app.state.ended_attempts.close()
    await queue.close_pool()
    await dispose_engine()


def create_app() -> FastAPI:
    app = FastAPI(
        title="Tribunal",
        version="1",
        summary="Submit programs, get sandboxed verdicts, judge scores and judge-quality reports.",
        lifespan=_lifespan,
    )
    errors.install(app)
    routers = (
        keys,
        problems,
        attempts,
        datasets,
        exports,
        jobs,
        executions,
        languages,
        judges,
        metrics,
        reports,
        perturbations,
        calibrations,
    )
    for module in (*routers, similarity, benchmarks, studies, ops):
        app.include_router(module.router)
    app.add_middleware(MetricsMiddleware)
    settings = get_settings()
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        streamed={"/v1/datasets": settings.max_dataset_bytes},
    )
    openapi.install(app)
    return app
