"""Bring a database to the newest schema with Alembic (what `tribunal up`, `tribunal migrate` and tests call).

Part of the launcher: it runs the `migrations` package, which imports the kernel's models; the kernel never
imports either."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations
from services.kernel.db import private_sqlite
from services.kernel.settings import get_settings


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.attributes["url"] = url or get_settings().resolved_database_url
    return config


def upgrade(url: str | None = None) -> None:
    """Run every pending revision. Safe to call on every start."""
    resolved = url or get_settings().resolved_database_url
    # A SQLite database is created 0600 in a 0700 folder (or tightened), before and after the migration
    # that may create its -wal/-shm files.
    private_sqlite(resolved)
    command.upgrade(alembic_config(resolved), "head")
    private_sqlite(resolved)


async def upgrade_async(url: str | None = None) -> None:
    """`upgrade` from inside a running event loop (Alembic's env runs its own loop, so use a thread)."""
    await asyncio.to_thread(upgrade, url)
