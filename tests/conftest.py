"""Shared fixtures: real Redis, real PostgreSQL, and the real embedded stack (gateway + executor workers)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from services.stack import EmbeddedStack
from tests.servers import postgres_server, redis_server


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


# Short reconciler and job-timeout periods, so that fault-recovery tests finish in seconds.
STACK_ENV = {
    "TRIBUNAL_RECONCILE_INTERVAL_S": "1",
    "TRIBUNAL_RECONCILE_GRACE_S": "2",
    "TRIBUNAL_JOB_TIMEOUT_S": "10",
}


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, redis_url: str
) -> Iterator[EmbeddedStack]:
    """The whole platform as separate processes, once on SQLite and once on PostgreSQL."""
    database_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    # Each backend gets its own Redis database number so that their queues never mix.
    db_number = 1 if request.param == "sqlite" else 2
    stack = EmbeddedStack(
        tmp_path_factory.mktemp(f"stack-{request.param}"),
        database_url=database_url,
        redis_url=f"{redis_url.rsplit('/', 1)[0]}/{db_number}",
        extra_env=STACK_ENV,
    )
    stack.start()
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def admin_key(stack: EmbeddedStack) -> str:
    return stack.admin_key_path.read_text().strip()


@pytest.fixture()
def admin(stack: EmbeddedStack, admin_key: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as client:
        yield client


@pytest.fixture()
def tenant_client(stack: EmbeddedStack, admin: httpx.Client) -> Iterator[httpx.Client]:
    """A fresh tenant with submit+read, so tests never see each other's objects."""
    import uuid

    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = admin.post("/v1/keys", json={"tenant": tenant, "scopes": ["submit", "read"]}).json()["key"]
    with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        yield client
