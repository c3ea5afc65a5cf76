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


class PostgresCluster:
    """A throwaway cluster (trust auth, fsync off) on a free loopback port, which a fault test may stop and start
    again (the same data, the same port)."""

    def __init__(self) -> None:
        if not (PG_BIN / "initdb").exists():
            raise RuntimeError(f"PostgreSQL 15 is not installed ({PG_BIN}); run scripts/setup.sh")
        self.workdir = Path(tempfile.mkdtemp(prefix="tribunal-pg-"))
        self.data = self.workdir / "data"
        self.port = free_port()
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.workdir, pw.pw_uid, pw.pw_gid)
        initdb = [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync"]
        subprocess.run(_as_postgres([*initdb, "-E", "UTF8"]), check=True, capture_output=True)

    @property
    def url(self) -> str:
        """An asyncpg URL of the cluster's default database."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        pg_ctl = [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.workdir / "pg.log"), "-w", "-t", "60"]
        subprocess.run(_as_postgres([*pg_ctl, "-o", options, "start"]), check=True, capture_output=True)

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server (`immediate`: as a crash would; `fast`: closing every connection first)."""
        pg_ctl = [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]
        subprocess.run(_as_postgres(pg_ctl), capture_output=True)

    def remove(self) -> None:
        self.stop()
        time.sleep(0.1)
        shutil.rmtree(self.workdir, ignore_errors=True)


@contextmanager
def postgres_server() -> Iterator[str]:
    """A throwaway cluster for the session; yields an asyncpg URL."""
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster.url
    finally:
        cluster.remove()
