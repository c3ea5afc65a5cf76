"""PostgreSQL's connection pool per process is set by TRIBUNAL_DATABASE_POOL_SIZE and _MAX_OVERFLOW
(docs/operations.md sizes a deployment with them); bad values are refused with the setting's name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.kernel.db import make_engine
from services.kernel.settings import Settings, get_settings


async def test_the_pool_follows_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_DATABASE_POOL_SIZE", "3")
    monkeypatch.setenv("TRIBUNAL_DATABASE_MAX_OVERFLOW", "2")
    get_settings.cache_clear()
    try:
        # Creating an engine connects to nothing: the pool is only configured.
        engine = make_engine("postgresql+asyncpg://tribunal@127.0.0.1:1/tribunal")
        pool = engine.sync_engine.pool
        assert (pool.size(), pool._max_overflow) == (3, 2)  # type: ignore[attr-defined]
        await engine.dispose()
    finally:
        get_settings.cache_clear()


def test_a_pool_of_nothing_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_DATABASE_POOL_SIZE", "0")
    with pytest.raises(ValidationError, match="database_pool_size"):
        Settings()
