"""Real servers for the tests: a private Redis and a private PostgreSQL cluster on loopback."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from services.kernel.embedded import EmbeddedRedis, free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


@contextmanager
def redis_server() -> Iterator[str]:
    with (
        tempfile.TemporaryDirectory(prefix="tribunal-redis-") as workdir,
        EmbeddedRedis(Path(workdir)) as redis,
    ):
        yield redis.url


def _as_postgres(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the `postgres` user when we are root."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@contextmanager
def postgres_server() -> Iterator[str]:
    """A throwaway cluster (trust auth, fsync off) on a free loopback port; yields an asyncpg URL."""
    if not (PG_BIN / "initdb").exists():
        raise RuntimeError(f"PostgreSQL 15 is not installed ({PG_BIN}); run scripts/setup.sh")
    workdir = Path(tempfile.mkdtemp(prefix="tribunal-pg-"))
    data = workdir / "data"
    port = free_port()
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(workdir, pw.pw_uid, pw.pw_gid)
    try:
        subprocess.run(
            _as_postgres(
                [
                    str(PG_BIN / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ]
            ),
            check=True,
            capture_output=True,
        )
        subprocess.run(
            _as_postgres(
                [
                    str(PG_BIN / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(workdir / "pg.log"),
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                    "-c full_page_writes=off -c max_connections=200",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
        )
        time.sleep(0.1)
        shutil.rmtree(workdir, ignore_errors=True)
