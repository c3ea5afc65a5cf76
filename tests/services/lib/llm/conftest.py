"""Fixtures for the provider-layer tests: a fresh real database per test (SQLite and PostgreSQL) and a scripted
OpenAI-compatible server on a real socket."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.kernel.db import make_engine
from tests.databases import BACKENDS, migrated_database
from tests.fake_llm import ScriptedLLM


@pytest.fixture(params=BACKENDS)
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    postgres_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    async with migrated_database(tmp_path, postgres_url) as url:
        yield url


@pytest.fixture()
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = make_engine(database_url, role="tests")
    try:
        yield async_sessionmaker(engine, expire_on_commit=False)
    finally:
        await engine.dispose()


@pytest.fixture()
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as scripted:
        yield scripted
