"""Alembic environment: runs revisions over the async engine of the configured database."""

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from services.kernel.db import make_engine
from services.kernel.models import Base
from services.kernel.settings import get_settings

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    return config.attributes.get("url") or get_settings().resolved_database_url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def run_migrations_online() -> None:
    # Foreign keys off on SQLite while revisions run: a batch operation rebuilds a table by dropping it, which
    # would otherwise cascade into every row that refers to it. Checked once the revisions are done.
    engine = make_engine(_url(), role="migrate", foreign_keys=False)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
        if connection.dialect.name == "sqlite":
            broken = (await connection.exec_driver_sql("PRAGMA foreign_key_check")).all()
            if broken:
                raise RuntimeError(f"the migration left {len(broken)} row(s) that break a foreign key: {broken[:5]}")
    await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(run_migrations_online())
