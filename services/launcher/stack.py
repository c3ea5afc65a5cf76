"""The embedded stack: Redis, migrations, the admin key, the workers and the gateway as local processes, and on
request a local Prometheus and a local model server (services/launcher/local_llm.py) behind the judge `local`.

Part of the launcher: it may import every service, and nothing imports it but the CLI, the demo and tests.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel.db import dispose_engine, init_engine, private_dir, session_scope
from services.kernel.embedded import EmbeddedRedis, free_port, port_is_free
from services.kernel.judges import JudgesFileError, load_judges
from services.kernel.keys import ensure_admin_key, ensure_scrape_key
from services.kernel.registry import SERVICES
from services.kernel.settings import Settings
from services.launcher.local_llm import LOCAL_JUDGE, LocalModelServer, LocalModelUnavailable, judges_file_with_local
from services.launcher.migrate import upgrade
from services.launcher.observability import LocalPrometheus

LOCAL_LLM = "local-llm"  # the local model server's process name (and log file)


async def _in_launcher_session[T](database_url: str, action: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run `action` in one committed session on the stack's database, from the launcher (before any service)."""
    init_engine(role="launcher", url=database_url)
    try:
        async with session_scope() as session:
            return await action(session)
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
        prometheus_port: int | None = None,
        local_llm: bool = False,
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
        # The judges file given; `judges_file` is the one the processes read (with --local-llm, a written one).
        self.base_judges_file = Path(judges).resolve() if judges else None
        self.judges_file = self.base_judges_file
        self.extra_env = extra_env or {}
        self.redis: EmbeddedRedis | None = None
        self.redis_url = redis_url or os.environ.get("TRIBUNAL_REDIS_URL")
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        # Each worker process's telemetry port, kept across its restarts (its scrape target stays the same).
        self.telemetry_ports: dict[str, int] = {}
        self.prometheus = (
            LocalPrometheus(self.data_dir / "prometheus", prometheus_port) if prometheus_port is not None else None
        )
        # Settings from the environment and extra_env (TRIBUNAL_LOCAL_LLM_*); the server is made at start.
        self.local_llm_wanted = local_llm
        self.local_llm: LocalModelServer | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    @property
    def admin_key_path(self) -> Path:
        return self.data_dir / "admin.key"

    @property
    def scrape_key_path(self) -> Path:
        """The key (scope `metrics` only) the local Prometheus scrapes the gateway with."""
        return self.data_dir / "prometheus" / "scrape.key"

    @property
    def worker_telemetry_ports(self) -> list[int]:
        return list(self.telemetry_ports.values())

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
        self.judges = load_judges(self.base_judges_file)
        self.judges_file = self.base_judges_file
        if self.local_llm_wanted:
            if any(judge.name == LOCAL_JUDGE for judge in self.judges):
                raise JudgesFileError(
                    f"{self.base_judges_file}: a judge is named {LOCAL_JUDGE!r}, the name --local-llm gives its own"
                )
            self.start_local_llm()
            self.judges_file = judges_file_with_local(
                self.base_judges_file, self.local_llm_server, self.data_dir / "judges.local.toml"
            )
            self.judges = load_judges(self.judges_file)
        # Private (0700, tightened if it exists wider): it holds admin.key, the database and the logs.
        private_dir(self.data_dir)
        if not self.redis_url:
            self.redis = EmbeddedRedis(self.data_dir / "redis")
            self.redis_url = self.redis.start()
        upgrade(self.database_url)
        self.created_admin_key = asyncio.run(
            _in_launcher_session(self.database_url, lambda session: ensure_admin_key(session, self.admin_key_path))
        )
        for index in range(self.workers):
            for service in SERVICES:
                self.start_worker(f"{service}-{index}")
        self.start_gateway()
        self.wait_ready(timeout_s)
        if self.prometheus is not None:
            self.start_prometheus()

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        """Start (or restart) one worker process, `SERVICE-N` for a registered service, logging under
        data_dir/logs."""
        kind = name.split("-", 1)[0]
        # The same port as before, so its scrape target stays the same, unless something else took it meanwhile.
        port = self.telemetry_ports.get(name)
        if port is None or not port_is_free(port):
            port = self.telemetry_ports[name] = free_port()
        env = self.env() | {"TRIBUNAL_WORKER_TELEMETRY_PORT": str(port)}
        self.processes[name] = self._spawn(name, [sys.executable, "-m", "services.launcher.cli", "worker", kind], env)
        if self.prometheus is not None:
            self._publish_targets(kind)
        return self.processes[name]

    @property
    def local_llm_server(self) -> LocalModelServer:
        assert self.local_llm is not None, "the stack was not started with local_llm=True"
        return self.local_llm

    def start_local_llm(self, timeout_s: float | None = 120.0) -> None:
        """Start (or restart, on the same port) the local model server, and wait until it serves its model (no wait
        with `timeout_s` None: the judge retries while it loads). The process is the stack's as soon as it exists,
        so that `stop()` ends it whatever happens next."""
        if self.local_llm is None:
            # The environment's TRIBUNAL_LOCAL_LLM_* settings, overridden by the stack's extra_env.
            overrides: dict[str, Any] = {
                key.removeprefix("TRIBUNAL_").lower(): value
                for key, value in self.extra_env.items()
                if key.startswith("TRIBUNAL_LOCAL_LLM_")
            }
            settings = Settings(**overrides)
            self.local_llm = LocalModelServer(settings, self.data_dir / "logs" / f"{LOCAL_LLM}.log")
        self.processes[LOCAL_LLM] = self.local_llm.spawn()
        if timeout_s is not None:
            self.local_llm.wait_ready(timeout_s)

    def restart_dead(self) -> list[str]:
        """Restart every process of the stack that has exited (the supervisor's step: `tribunal up` calls it
        twice a second); the names restarted."""
        restarted = []
        for name, process in list(self.processes.items()):
            if process.poll() is None:
                continue
            if name == "gateway":
                self.start_gateway()
            elif name == LOCAL_LLM:
                try:
                    self.start_local_llm(timeout_s=None)  # not waited for: the supervisor goes on watching
                except LocalModelUnavailable:
                    continue  # its port is taken for now: tried again at the next step
            else:
                self.start_worker(name)
            restarted.append(name)
        return restarted

    def start_prometheus(self, *, wait_scraped: bool = True) -> None:
        """Start the local Prometheus (see services/launcher/observability.py), scraping every process of the stack; by
        default, wait until it has scraped each once (a restart need not: a worker may be down meanwhile)."""
        assert self.prometheus is not None
        asyncio.run(
            _in_launcher_session(self.database_url, lambda session: ensure_scrape_key(session, self.scrape_key_path))
        )
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        self.prometheus.configure(f"{host}:{self.port}", self.scrape_key_path, list(SERVICES))
        for kind in SERVICES:
            self._publish_targets(kind)
        self.prometheus.start(self.data_dir / "logs" / "prometheus.log")
        if wait_scraped:
            self.prometheus.wait_scraped(1 + len(self.telemetry_ports))

    def _publish_targets(self, kind: str) -> None:
        assert self.prometheus is not None
        ports = [port for name, port in self.telemetry_ports.items() if name.split("-", 1)[0] == kind]
        self.prometheus.set_targets(kind, [f"127.0.0.1:{port}" for port in ports])

    def start_gateway(self) -> None:
        self.processes["gateway"] = self._spawn(
            "gateway",
            [sys.executable, "-m", "services.launcher.cli", "gateway", "--host", self.host, "--port", str(self.port)],
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
        if self.prometheus is not None:
            self.prometheus.stop()
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
