"""The one async engine and session factory, tagged with the process role."""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import sqlite3
import stat
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import aiosqlite
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


class _OneHopCursor:
    """aiosqlite's cursor in one thread hop per statement instead of four.

    aiosqlite runs every call on its connection's thread and waits for the answer (~0.1 ms of CPU a hop, more on a
    busy machine), and SQLAlchemy makes four per statement: create the cursor, execute, fetch all rows, close. Here
    the cursor is made and the rows are fetched in the hop that executes, as SQLAlchemy's adapter fetches them all
    at once right after anyway (Tribunal streams no results), and the close is queued behind it without waiting:
    the thread runs its queue in order, so it is done before the connection's next statement."""

    def __init__(self, conn: _OneHopConnection) -> None:
        self._conn = conn
        self._cursor: sqlite3.Cursor | None = None
        self._rows: collections.deque[Any] = collections.deque()
        self._closed = False
        self.arraysize = 1

    async def __aenter__(self) -> _OneHopCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _run(self, method: str, sql: str, parameters: Any) -> tuple[sqlite3.Cursor, list[Any]]:
        """On the connection's thread: execute, and fetch every row a statement that returns rows has."""
        cursor = self._cursor or self._conn._conn.cursor()
        try:
            getattr(cursor, method)(sql, parameters)
            return cursor, (cursor.fetchall() if cursor.description else [])
        except BaseException:
            if cursor is not self._cursor:  # made here and never handed out: closed on its own thread
                cursor.close()
            raise

    async def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> _OneHopCursor:
        self._cursor, rows = await self._conn._execute(
            self._run, "execute", sql, [] if parameters is None else parameters
        )
        self._rows = collections.deque(rows)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> _OneHopCursor:
        self._cursor, rows = await self._conn._execute(self._run, "executemany", sql, parameters)
        self._rows = collections.deque(rows)
        return self

    async def fetchone(self) -> Any:
        return self._rows.popleft() if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        count = min(self.arraysize if size is None else size, len(self._rows))
        return [self._rows.popleft() for _ in range(count)]

    async def fetchall(self) -> list[Any]:
        rows = list(self._rows)
        self._rows.clear()
        return rows

    async def close(self) -> None:
        self._rows.clear()
        if self._cursor is not None and not self._closed:
            self._closed = True
            # Queued, not awaited: the connection's thread closes it before it runs anything queued later. The
            # sqlite3 cursor stays referenced, so description and rowcount still answer as aiosqlite's would.
            self._conn._tx.put_nowait((None, self._cursor.close))

    @property
    def description(self) -> Any:
        return self._cursor.description if self._cursor is not None else None

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount if self._cursor is not None else -1

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid if self._cursor is not None else None


class _OneHopConnection(aiosqlite.Connection):
    """An aiosqlite connection whose cursors cost one thread hop per statement (`_OneHopCursor`), and whose commit
    and rollback cost none when no transaction is open: sqlite3 does nothing then anyway, and reads (which open
    none in sqlite3's default mode) were paying two hops per session for it, the session's rollback and the pool's.
    Only the coroutine holding the connection changes its transaction state, and it is here, so the flag is
    current."""

    def cursor(self) -> _OneHopCursor:  # type: ignore[override]
        return _OneHopCursor(self)

    def _idle(self) -> bool:
        return self._connection is not None and not self._connection.in_transaction

    async def commit(self) -> None:
        if not self._idle():
            await super().commit()

    async def rollback(self) -> None:
        if not self._idle():
            await super().rollback()


async def _connect_sqlite(args: Sequence[Any], kwargs: dict[str, Any]) -> _OneHopConnection:
    connection = _OneHopConnection(partial(sqlite3.connect, *args, **kwargs), iter_chunk_size=64)
    connection._thread.daemon = True  # as SQLAlchemy's aiosqlite dialect does: a lost connection never blocks exit
    await connection
    return connection


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
        # aiosqlite's connection with one thread hop per statement (_OneHopCursor), opened with the arguments
        # SQLAlchemy's dialect derives from the URL.
        connect: dict[str, Any] = {}
        kwargs["async_creator"] = lambda: _connect_sqlite(connect["args"], connect["kwargs"])
    elif url.startswith("postgresql+asyncpg"):
        kwargs["connect_args"] = {"server_settings": {"application_name": role}}
        kwargs["pool_pre_ping"] = True
        settings = get_settings()
        kwargs["pool_size"] = settings.database_pool_size
        kwargs["max_overflow"] = settings.database_max_overflow
    engine = create_async_engine(url, **kwargs)
    if _is_sqlite(url):
        args, params = engine.dialect.create_connect_args(engine.url)
        connect.update(args=list(args), kwargs={**params, "timeout": 30})

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


@functools.lru_cache(maxsize=128)
def _upsert_statement(dialect: str, table: Any, columns: tuple[str, ...], keys: tuple[str, ...]) -> Any:
    """INSERT ... ON CONFLICT (keys) DO UPDATE of `columns`, built once per shape and executed with the rows as
    parameters: a statement built afresh per call (with the rows inlined as VALUES) was compiled afresh every time,
    which cost more than the write itself."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt: Any = pg_insert(table)
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(table)
    else:  # pragma: no cover - guarded by settings
        raise RuntimeError(f"unsupported database dialect {dialect!r}")
    updates = {name: stmt.excluded[name] for name in columns if name not in keys}
    return stmt.on_conflict_do_update(index_elements=list(keys), set_=updates)


async def upsert(session: AsyncSession, table: Any, values: dict[str, Any], keys: list[str]) -> None:
    """INSERT ... ON CONFLICT (keys) DO UPDATE: one row per natural key, the newest write wins.

    Works on SQLite and PostgreSQL, the two databases Tribunal supports.
    """
    await upsert_many(session, table, [values], keys)


async def upsert_many(session: AsyncSession, table: Any, rows: list[dict[str, Any]], keys: list[str]) -> None:
    """`upsert` of several rows with the same columns, in one round trip. Their keys must differ (each row is
    written once)."""
    if not rows:
        return
    stmt = _upsert_statement(session.get_bind().dialect.name, table, tuple(rows[0]), tuple(keys))
    await session.execute(stmt, rows if len(rows) > 1 else rows[0])
