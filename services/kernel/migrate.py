"""Bring a database to the newest schema with Alembic (what `tribunal up`, `tribunal migrate` and tests call)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations
from services.kernel.settings import get_settings


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.attributes["url"] = url or get_settings().resolved_database_url
    return config


def upgrade(url: str | None = None) -> None:
    """Run every pending revision. Safe to call on every start."""
    resolved = url or get_settings().resolved_database_url
    if resolved.startswith("sqlite"):
        Path(resolved.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(resolved), "head")


async def upgrade_async(url: str | None = None) -> None:
    """`upgrade` from inside a running event loop (Alembic's env runs its own loop, so use a thread)."""
    await asyncio.to_thread(upgrade, url)
