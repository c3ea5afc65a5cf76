"""The one async engine and session factory, tagged with the process role."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from services.kernel.settings import get_settings

_engine: AsyncEngine | None = None
_sessionmaker: async_sessionmaker[AsyncSession] | None = None


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


# The SQLite database and the files SQLite keeps beside it.
_SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) mode 0700, or tighten an existing one to 0700: the data dir holds
    admin.key and the database, and nobody else on the machine has anything to read or list there."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) != 0o700:
        path.chmod(0o700)
    return path


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (None for another database, or an in-memory one)."""
    if not _is_sqlite(url) or "///" not in url:
        return None
    path = url.split("///", 1)[1].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def private_sqlite(url: str) -> None:
    """For a SQLite URL: its folder exists (created 0700 if missing, tightened to 0700 if it is the data dir;
    any other existing folder is the operator's and left alone), and the database file exists with mode
    0600 (created so, or tightened), as do its -wal/-shm/-journal files if present. SQLite creates those with
    the database file's mode, so a 0600 database keeps them private too."""
    path = sqlite_path(url)
    if path is None:
        return
    if not path.parent.exists() or path.parent.resolve() == get_settings().data_dir.resolve():
        private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    for suffix in _SQLITE_SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            companion = path.with_name(path.name + suffix)
            if stat.S_IMODE(companion.stat().st_mode) & 0o077:
                companion.chmod(0o600)


def make_engine(url: str, role: str = "tribunal", *, foreign_keys: bool = True) -> AsyncEngine:
    """An engine for `url`; SQLite gets WAL and a busy timeout so several processes can share the file, and
    enforces foreign keys unless `foreign_keys` is False (migrations: a table rebuild must not cascade)."""
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
            cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
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


async def upsert_many(session: AsyncSession, table: Any, rows: list[dict[str, Any]], keys: list[str]) -> None:
    """`upsert` of several rows with the same columns in one statement. Their keys must differ (a statement may
    not update one row twice)."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt: Any = pg_insert(table).values(rows)
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(table).values(rows)
    else:  # pragma: no cover - guarded by settings
        raise RuntimeError(f"unsupported database dialect {dialect!r}")
    updates = {name: stmt.excluded[name] for name in rows[0] if name not in keys}
    await session.execute(stmt.on_conflict_do_update(index_elements=keys, set_=updates))
