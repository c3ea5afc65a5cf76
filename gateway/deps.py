"""Dependencies every route shares, as `Annotated` aliases so routes read as plain signatures."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.errors import ApiError
from gateway.principal import Principal
from gateway.quotas import meter_request
from services.kernel.db import sessionmaker
from services.kernel.keys import Scope, find_key, has_scope
from services.kernel.settings import get_settings


async def open_session() -> AsyncIterator[AsyncSession]:
    """A database session for one request (a test may override this dependency to hand the app its own)."""
    async with sessionmaker()() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(open_session)]


async def _principal(request: Request, session: SessionDep) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401,
            "missing bearer API key (Authorization: Bearer <key>)",
            [{"loc": ["header", "authorization"], "msg": "missing or malformed"}],
            headers={"WWW-Authenticate": "Bearer"},
        )
    row = await find_key(session, token.strip())
    if row is None:
        raise ApiError(
            401,
            "unknown or revoked API key",
            [{"loc": ["header", "authorization"], "msg": "unknown key"}],
            headers={"WWW-Authenticate": "Bearer"},
        )
    principal = Principal(key_id=row.key_id, tenant=row.tenant, scopes=frozenset(row.scopes), quotas=row.quotas or {})
    await meter_request(principal)
    return principal


def check_scope(principal: Principal, scope: Scope) -> Principal:
    """`principal` if it holds `scope` (admin holds every scope), else 403."""
    if not has_scope(principal.scopes, scope):
        raise ApiError(403, f"this key lacks the '{scope}' scope")
    return principal


def require(scope: Scope) -> Callable[..., Coroutine[Any, Any, Principal]]:
    """A dependency that admits keys holding `scope` (admin holds every scope)."""

    async def check(principal: Annotated[Principal, Depends(_principal)]) -> Principal:
        return check_scope(principal, scope)

    return check


async def _telemetry_access(request: Request) -> None:
    """/metrics needs a key with the `metrics` scope, unless TRIBUNAL_TELEMETRY_PUBLIC opts out (for a
    deployment that serves it only on a private network)."""
    if get_settings().telemetry_public:
        return
    async with sessionmaker()() as session:
        principal = await _principal(request, session)
    check_scope(principal, "metrics")


SubmitKey = Annotated[Principal, Depends(require("submit"))]
ReadKey = Annotated[Principal, Depends(require("read"))]
AdminKey = Annotated[Principal, Depends(require("admin"))]
TelemetryAccess = Depends(_telemetry_access)
