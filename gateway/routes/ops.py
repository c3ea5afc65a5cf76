"""Operations: liveness, readiness (database and Redis reachable), Prometheus metrics (behind a key)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from gateway.deps import TelemetryAccess
from gateway.scrape import refresh_platform_gauges
from services.kernel import queue
from services.kernel.db import sessionmaker

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz() -> JSONResponse:
    checks: dict[str, Any] = {}
    try:
        async with sessionmaker()() as session:
            await session.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - readiness reports, it does not raise
        checks["database"] = f"unreachable: {type(exc).__name__}"
    try:
        await (await queue.get_pool()).ping()
        checks["redis"] = "ok"
    except Exception as exc:  # noqa: BLE001
        checks["redis"] = f"unreachable: {type(exc).__name__}"
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse({"status": "ready" if ready else "not ready", **checks}, status_code=200 if ready else 503)


@router.get("/metrics", dependencies=[TelemetryAccess])
async def telemetry_exposition() -> Response:
    """Prometheus text format. Needs a key with the `metrics` scope unless TRIBUNAL_TELEMETRY_PUBLIC=true."""
    await refresh_platform_gauges()
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
