"""The database response cache against real databases: get, put, overwrite, and concurrent puts of one key."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.kernel import db
from services.kernel.db import make_engine
from services.kernel.models import JudgeResponseCache
from services.lib.llm import CachedReply, DbResponseCache, cache_key
from tests.databases import migrated_database

KEY = cache_key("http://127.0.0.1:1/v1/", ("scope", 0), {"model": "m", "messages": []})


async def _rows(sessions: async_sessionmaker[AsyncSession]) -> list[JudgeResponseCache]:
    async with sessions() as session:
        return list((await session.scalars(select(JudgeResponseCache))).all())


def test_keys_are_sha256_hex_and_separate_what_shapes_a_request() -> None:
    assert len(KEY) == 64 and int(KEY, 16) >= 0
    # A trailing slash on the base URL does not make another entry; anything else that differs does.
    assert KEY == cache_key("http://127.0.0.1:1/v1", ("scope", 0), {"messages": [], "model": "m"})
    others = {
        cache_key("http://127.0.0.1:2/v1", ("scope", 0), {"model": "m", "messages": []}),
        cache_key("http://127.0.0.1:1/v1", ("scope", 1), {"model": "m", "messages": []}),
        cache_key("http://127.0.0.1:1/v1", ("other", 0), {"model": "m", "messages": []}),
        cache_key("http://127.0.0.1:1/v1", (), {"model": "m", "messages": []}),
        cache_key("http://127.0.0.1:1/v1", ("scope", 0), {"model": "m2", "messages": []}),
        cache_key("http://127.0.0.1:1/v1", ("scope", 0), {"model": "m", "messages": [], "temperature": 0}),
    }
    assert KEY not in others and len(others) == 6


async def test_get_of_an_unknown_key_is_none(sessions: async_sessionmaker[AsyncSession]) -> None:
    assert await DbResponseCache(sessions).get(KEY) is None


async def test_put_then_get_returns_what_was_stored(sessions: async_sessionmaker[AsyncSession]) -> None:
    cache = DbResponseCache(sessions)
    reply = CachedReply('{"p_ac": 0.5, "note": "é ✓"}', "served-2026-01-01", 1234, 56)
    await cache.put(KEY, reply)
    assert await cache.get(KEY) == reply
    # Optional columns stay None rather than becoming zeros or empty strings.
    bare = CachedReply("{}", None, None, None)
    other = cache_key("http://127.0.0.1:1/v1", ("bare",), {})
    await cache.put(other, bare)
    assert await cache.get(other) == bare
    # A fresh cache on the same database (another worker) sees both.
    assert await DbResponseCache(sessions).get(KEY) == reply
    rows = await _rows(sessions)
    assert sorted(r.cache_key for r in rows) == sorted([KEY, other])
    assert all(r.created_at is not None and r.created_at.tzinfo is not None for r in rows)


async def test_put_of_an_existing_key_overwrites_it(sessions: async_sessionmaker[AsyncSession]) -> None:
    cache = DbResponseCache(sessions)
    await cache.put(KEY, CachedReply("first", "model-a", 10, 1))
    [before] = await _rows(sessions)
    await cache.put(KEY, CachedReply("second", None, None, 2))
    assert await cache.get(KEY) == CachedReply("second", None, None, 2)
    [after] = await _rows(sessions)
    assert after.cache_key == KEY and after.created_at >= before.created_at


async def test_concurrent_puts_of_one_key_leave_one_whole_row(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """Two workers (two engines, each with its own pool) racing on one key: no error, one row, and that row is one
    put's reply entire, never columns mixed from two."""
    second_engine = make_engine(database_url, role="tests")
    try:
        caches = [DbResponseCache(sessions), DbResponseCache(async_sessionmaker(second_engine))]
        replies = [CachedReply(f"reply-{i}", f"model-{i}", i, 1000 + i) for i in range(24)]
        await asyncio.gather(*(caches[i % 2].put(KEY, reply) for i, reply in enumerate(replies)))
        rows = await _rows(sessions)
        assert [r.cache_key for r in rows] == [KEY]
        stored = await caches[1].get(KEY)
        assert stored in replies
        async with sessions() as session:
            assert await session.scalar(select(func.count()).select_from(JudgeResponseCache)) == 1
    finally:
        await second_engine.dispose()


async def test_without_a_factory_it_uses_the_process_database(tmp_path: Path) -> None:
    """What the judge worker constructs: `DbResponseCache()` on the process's own engine (services/kernel/db.py)."""
    async with migrated_database(tmp_path, None) as url:
        await db.dispose_engine()
        db.init_engine("tests", url)
        try:
            cache = DbResponseCache()
            await cache.put(KEY, CachedReply("x", None, 1, 2))
            assert await cache.get(KEY) == CachedReply("x", None, 1, 2)
        finally:
            await db.dispose_engine()
