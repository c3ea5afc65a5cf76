"""The embedded stack: Redis, migrations, the admin key, executor workers and the gateway as local processes.

Part of the launcher: it may import every service, and nothing imports it but the CLI, the demo and tests.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from services.kernel.db import dispose_engine, init_engine, private_dir, session_scope
from services.kernel.embedded import EmbeddedRedis, free_port
from services.kernel.judges import load_judges
from services.kernel.keys import ensure_admin_key
from services.kernel.registry import SERVICES
from services.migrate import upgrade


async def _bootstrap_admin_key(path: Path, database_url: str) -> bool:
    init_engine(role="launcher", url=database_url)
    try:
        async with session_scope() as session:
            return await ensure_admin_key(session, path)
    finally:
        await dispose_engine()


class EmbeddedStack:
    """Everything Tribunal needs on one machine, started by `start()` and stopped by `stop()`."""

    def __init__(
        self,
        data_dir: Path,
        host: str = "127.0.0.1",
        port: int | None = None,
        workers: int = 1,
        database_url: str | None = None,
        redis_url: str | None = None,
        judges_file: Path | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.database_url = (
            database_url
            or os.environ.get("TRIBUNAL_DATABASE_URL")
            or (f"sqlite+aiosqlite:///{self.data_dir / 'tribunal.db'}")
        )
        self.host = host
        self.port = port or free_port()
        self.workers = workers
        judges = judges_file or os.environ.get("TRIBUNAL_JUDGES_FILE")
        self.judges_file = Path(judges).resolve() if judges else None
        self.extra_env = extra_env or {}
        self.redis: EmbeddedRedis | None = None
        self.redis_url = redis_url or os.environ.get("TRIBUNAL_REDIS_URL")
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.worker_telemetry_ports: list[int] = []

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    @property
    def admin_key_path(self) -> Path:
        return self.data_dir / "admin.key"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["TRIBUNAL_DATA_DIR"] = str(self.data_dir)
        env["TRIBUNAL_DATABASE_URL"] = self.database_url
        if self.judges_file is not None:
            env["TRIBUNAL_JUDGES_FILE"] = str(self.judges_file)
        else:
            env.pop("TRIBUNAL_JUDGES_FILE", None)
        assert self.redis_url
        env["TRIBUNAL_REDIS_URL"] = self.redis_url
        return env

    def start(self, timeout_s: float = 60.0) -> None:
        # A bad judges file stops everything before anything starts, with a message naming the key.
        self.judges = load_judges(self.judges_file)
        # Private (0700, tightened if it exists wider): it holds admin.key, the database and the logs.
        private_dir(self.data_dir)
        if not self.redis_url:
            self.redis = EmbeddedRedis(self.data_dir / "redis")
            self.redis_url = self.redis.start()
        upgrade(self.database_url)
        self.created_admin_key = asyncio.run(_bootstrap_admin_key(self.admin_key_path, self.database_url))
        for index in range(self.workers):
            for service in SERVICES:
                self.start_worker(f"{service}-{index}")
        self.start_gateway()
        self.wait_ready(timeout_s)

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        """Start (or restart) one worker process, `SERVICE-N` for a registered service, logging under
        data_dir/logs."""
        kind = name.split("-", 1)[0]
        port = free_port()
        self.worker_telemetry_ports.append(port)
        env = self.env() | {"TRIBUNAL_WORKER_TELEMETRY_PORT": str(port)}
        self.processes[name] = self._spawn(name, [sys.executable, "-m", "services.cli", "worker", kind], env)
        return self.processes[name]

    def start_gateway(self) -> None:
        self.processes["gateway"] = self._spawn(
            "gateway",
            [sys.executable, "-m", "services.cli", "gateway", "--host", self.host, "--port", str(self.port)],
            self.env(),
        )

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{name}.log", "ab") as log:
            return subprocess.Popen(
                argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the gateway says ready and the workers have reported their languages and judges."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode}; see {self.data_dir}/logs/{name}.log")
            try:
                ready = httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
                if ready and self._workers_reported():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"the stack was not ready within {timeout_s} s; logs are in {self.data_dir}/logs")

    def _workers_reported(self) -> bool:
        import redis

        from services.kernel.judges import JUDGES_KEY
        from services.kernel.registry import LANGUAGES_KEY

        assert self.redis_url
        client = redis.Redis.from_url(self.redis_url)
        try:
            return bool(client.exists(LANGUAGES_KEY)) and bool(client.exists(JUDGES_KEY))
        finally:
            client.close()

    def stop_process(self, name: str, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def stop(self) -> None:
        for name in list(self.processes):
            self.stop_process(name)
        if self.redis is not None:
            self.redis.stop()
            self.redis = None

    def __enter__(self) -> EmbeddedStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
