"""Dependencies every route shares, as `Annotated` aliases so routes read as plain signatures."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.errors import ApiError
from services.kernel.db import sessionmaker
from services.kernel.keys import Scope, find_key


async def _session() -> AsyncIterator[AsyncSession]:
    async with sessionmaker()() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(_session)]


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's id, its tenant and its scopes."""

    key_id: str
    tenant: str
    scopes: frozenset[str]


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
    return Principal(key_id=row.key_id, tenant=row.tenant, scopes=frozenset(row.scopes))


def require(scope: Scope) -> Callable[..., Coroutine[Any, Any, Principal]]:
    """A dependency that admits keys holding `scope` (admin holds every scope)."""

    async def check(principal: Annotated[Principal, Depends(_principal)]) -> Principal:
        if scope not in principal.scopes and "admin" not in principal.scopes:
            raise ApiError(403, f"this key lacks the '{scope}' scope")
        return principal

    return check


SubmitKey = Annotated[Principal, Depends(require("submit"))]
ReadKey = Annotated[Principal, Depends(require("read"))]
AdminKey = Annotated[Principal, Depends(require("admin"))]
