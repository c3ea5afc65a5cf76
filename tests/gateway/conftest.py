"""The gateway alone, in this process: the real app (gateway.app:create_app) served by uvicorn on a loopback port, on
a real SQLite database and the session's real Redis, with no worker behind it.

For request validation and reads that never reach SQL that differs between the databases (tests/gateway/
test_bad_input.py): they need neither the workers nor a second run on PostgreSQL, which the process stack
(tests/conftest.py's `stack`) would give them.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from services.kernel.db import make_engine, private_dir
from services.kernel.embedded import free_port
from services.kernel.keys import ensure_admin_key
from services.kernel.settings import get_settings
from services.launcher.migrate import upgrade
from tests.conftest import STACK_ENV


async def _make_admin_key(database_url: str, path: Path) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession

    engine = make_engine(database_url, role="tests")
    try:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            await ensure_admin_key(session, path)
            await session.commit()
    finally:
        await engine.dispose()


class InProcessGateway:
    """The gateway app on `url`, its SQLite database at `database_url`, its admin key in `admin_key_path`: the
    gateway's part of an EmbeddedStack (services/launcher/stack.py), started the same way, in a thread."""

    def __init__(self, data_dir: Path, redis_url: str, judges_file: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.database_url = f"sqlite+aiosqlite:///{self.data_dir / 'tribunal.db'}"
        self.redis_url = redis_url
        self.judges_file = judges_file
        self.port = free_port()
        self._environment = pytest.MonkeyPatch()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_key_path(self) -> Path:
        return self.data_dir / "admin.key"

    def start(self, timeout_s: float = 60.0) -> None:
        # The settings the gateway process of a stack gets from its environment (EmbeddedStack.env).
        for name, value in {
            **STACK_ENV,
            "TRIBUNAL_DATA_DIR": str(self.data_dir),
            "TRIBUNAL_DATABASE_URL": self.database_url,
            "TRIBUNAL_REDIS_URL": self.redis_url,
            "TRIBUNAL_JUDGES_FILE": str(self.judges_file),
        }.items():
            self._environment.setenv(name, value)
        get_settings.cache_clear()
        private_dir(self.data_dir)
        upgrade(self.database_url)
        asyncio.run(_make_admin_key(self.database_url, self.admin_key_path))
        # As `tribunal gateway` runs it (services/launcher/cli.py), in a thread of its own with its own event loop.
        config = uvicorn.Config(
            "gateway.app:create_app",
            factory=True,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            access_log=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the in-process gateway did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)
        self._environment.undo()
        get_settings.cache_clear()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, redis_url: str, judges_file: Path) -> Iterator[InProcessGateway]:
    # A Redis database number of its own (the stacks' are 1 and 2).
    app = InProcessGateway(tmp_path_factory.mktemp("gateway"), f"{redis_url.rsplit('/', 1)[0]}/3", judges_file)
    app.start()
    yield app
    app.stop()


@pytest.fixture()
def gateway_tenant(gateway: InProcessGateway) -> Iterator[httpx.Client]:
    """A fresh tenant with submit+read on the in-process gateway (as tests/conftest.py's `tenant_client`)."""
    admin_key = gateway.admin_key_path.read_text().strip()
    with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as admin:
        response = admin.post("/v1/keys", json={"tenant": f"t-{uuid.uuid4().hex[:10]}", "scopes": ["submit", "read"]})
        key = response.json()["key"]
    with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        yield client
