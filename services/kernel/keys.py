"""API keys: created once, shown once, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import Literal

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.models import ApiKey, new_id

# submit: create problems, attempts, executions, judgments, reports; read: read them back; author: also see a
# problem's hidden tests; metrics: scrape the gateway's /metrics; admin: every scope, and manage keys.
Scope = Literal["submit", "read", "author", "metrics", "admin"]
SCOPES: tuple[Scope, ...] = ("submit", "read", "author", "metrics", "admin")


def has_scope(scopes: frozenset[str] | list[str], scope: Scope) -> bool:
    """Whether a key with `scopes` holds `scope` (admin holds every scope)."""
    return scope in scopes or "admin" in scopes


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


async def create_key(session: AsyncSession, *, tenant: str, scopes: list[str], name: str = "") -> tuple[ApiKey, str]:
    """Add a key to the session; returns the row and the plaintext key (never stored)."""
    plaintext = "trb_" + secrets.token_urlsafe(32)
    row = ApiKey(
        key_id=new_id("key"),
        key_hash=hash_key(plaintext),
        tenant=tenant,
        name=name,
        scopes=sorted(set(scopes)),
    )
    session.add(row)
    await session.flush()
    return row, plaintext


# Every authenticated request runs it: built once, so its cache key is computed once.
_KEY_BY_HASH = select(ApiKey).where(ApiKey.key_hash == bindparam("key_hash"))


async def find_key(session: AsyncSession, plaintext: str) -> ApiKey | None:
    row = await session.scalar(_KEY_BY_HASH, {"key_hash": hash_key(plaintext)})
    if row is None or row.revoked_at is not None:
        return None
    return row


async def ensure_admin_key(session: AsyncSession, path: Path) -> bool:
    """On first start, create an admin key and write it to `path` (mode 0600). True if one was made."""
    if path.exists():
        return False
    await _write_new_key(session, path, tenant="admin", scopes=list(SCOPES), name="bootstrap admin")
    return True


async def ensure_scrape_key(session: AsyncSession, path: Path) -> None:
    """A key with only the `metrics` scope in `path` (mode 0600), for a local Prometheus to scrape the gateway
    with: the one there is kept while it still works, replaced if it was revoked."""
    if path.exists():
        if await find_key(session, path.read_text().strip()) is not None:
            return
        path.unlink()
    await _write_new_key(session, path, tenant="ops", scopes=["metrics"], name="local prometheus")


async def _write_new_key(session: AsyncSession, path: Path, *, tenant: str, scopes: list[str], name: str) -> None:
    _, plaintext = await create_key(session, tenant=tenant, scopes=scopes, name=name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(plaintext + "\n")
