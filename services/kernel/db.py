"""The one async engine and session factory, tagged with the process role."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from services.kernel.settings import get_settings

_engine: AsyncEngine | None = None
_sessionmaker: async_sessionmaker[AsyncSession] | None = None


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def make_engine(url: str, role: str = "tribunal") -> AsyncEngine:
    """An engine for `url`; SQLite gets WAL and a busy timeout so several processes can share the file."""
    kwargs: dict[str, Any] = {}
    if _is_sqlite(url):
        # Pooled: opening an aiosqlite connection starts a thread and runs the pragmas (about 4 ms), which
        # dominated a judgment's write. WAL lets the pooled readers and the serialised writers of several
        # processes share the file; busy_timeout makes a writer wait for the lock instead of failing.
        kwargs["pool_size"] = 8
        kwargs["max_overflow"] = 16
        kwargs["connect_args"] = {"timeout": 30}
    elif url.startswith("postgresql+asyncpg"):
        kwargs["connect_args"] = {"server_settings": {"application_name": role}}
        kwargs["pool_pre_ping"] = True
    engine = create_async_engine(url, **kwargs)
    if _is_sqlite(url):

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

    return engine


def init_engine(role: str = "tribunal", url: str | None = None) -> AsyncEngine:
    """Create the process-wide engine (idempotent per process)."""
    global _engine, _sessionmaker
    if _engine is None:
        _engine = make_engine(url or get_settings().resolved_database_url, role)
        _sessionmaker = async_sessionmaker(_engine, expire_on_commit=False)
    return _engine


async def dispose_engine() -> None:
    global _engine, _sessionmaker
    if _engine is not None:
        await _engine.dispose()
    _engine = None
    _sessionmaker = None


def sessionmaker() -> async_sessionmaker[AsyncSession]:
    if _sessionmaker is None:
        init_engine()
    assert _sessionmaker is not None
    return _sessionmaker


@asynccontextmanager
async def session_scope() -> AsyncIterator[AsyncSession]:
    """A session that commits on success and rolls back on error."""
    async with sessionmaker()() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


async def upsert(session: AsyncSession, table: Any, values: dict[str, Any], keys: list[str]) -> None:
    """INSERT ... ON CONFLICT (keys) DO UPDATE: one row per natural key, the newest write wins.

    Works on SQLite and PostgreSQL, the two databases Tribunal supports.
    """
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt: Any = pg_insert(table).values(**values)
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(table).values(**values)
    else:  # pragma: no cover - guarded by settings
        raise RuntimeError(f"unsupported database dialect {dialect!r}")
    updates = {name: stmt.excluded[name] for name in values if name not in keys}
    await session.execute(stmt.on_conflict_do_update(index_elements=keys, set_=updates))
