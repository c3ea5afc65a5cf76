"""A fresh, migrated database per test, on SQLite or on the session's real PostgreSQL server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from services.kernel.db import make_engine
from services.launcher.migrate import upgrade_async

BACKENDS = ["sqlite", "postgresql"]


@asynccontextmanager
async def empty_database(tmp_path: Path, postgres_url: str | None) -> AsyncIterator[str]:
    """The URL of an empty database, with no schema at all: a SQLite file under `tmp_path` (created by whoever
    connects first), or (given the server's URL) a new PostgreSQL database on that server, dropped afterwards."""
    if postgres_url is None:
        yield f"sqlite+aiosqlite:///{tmp_path / 'tribunal.db'}"
        return
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_async_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as connection:
            await connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield f"{postgres_url.rsplit('/', 1)[0]}/{name}"
    finally:
        async with admin.connect() as connection:
            await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


@asynccontextmanager
async def migrated_database(tmp_path: Path, postgres_url: str | None) -> AsyncIterator[str]:
    """The URL of an empty database brought to the newest schema: a SQLite file under `tmp_path`, or (given the
    server's URL) a new PostgreSQL database on that server, dropped afterwards."""
    async with empty_database(tmp_path, postgres_url) as url:
        await upgrade_async(url)
        yield url


@asynccontextmanager
async def database_sessions(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions on a fresh database of the backend `request.param` names ("sqlite" or "postgresql")."""
    postgres_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    async with migrated_database(tmp_path, postgres_url) as url:
        engine = make_engine(url, role="tests")
        try:
            yield async_sessionmaker(engine, expire_on_commit=False)
        finally:
            await engine.dispose()
