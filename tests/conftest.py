"""Shared fixtures: real Redis, real PostgreSQL, and the real embedded stack (gateway + executor workers); and the
tiers (README, "Tests"): each test is marked by what it starts, from the fixtures it uses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.launcher.stack import EmbeddedStack
from tests.fake_llm import Behaviour, ScriptedLLM
from tests.servers import postgres_server, redis_server

# The tiers. A test that uses one of these fixtures gets its tier's marker; a module that starts a jail or a server
# by itself (not through these fixtures) says so with `pytestmark`. `corpus` is only ever explicit.
JAIL_FIXTURES = frozenset({"executor", "tool_jail"})
STACK_FIXTURES = frozenset({"stack", "stacks", "redis_url", "postgres_url"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with the tiers its fixtures put it in: `jail` (it runs nsjail), `stack` (it starts a server:
    Redis, PostgreSQL, the process stack). A fixture parametrized over the databases (tests/databases.py) asks for
    the PostgreSQL server only on its "postgresql" parameter, so that parameter is what marks it."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        on_postgresql = callspec is not None and any(
            isinstance(value, str) and value == "postgresql" for value in callspec.params.values()
        )
        if fixtures & JAIL_FIXTURES:
            item.add_marker(pytest.mark.jail)
        if fixtures & STACK_FIXTURES or on_postgresql:
            item.add_marker(pytest.mark.stack)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


# Short reconciler and job-timeout periods, so that fault-recovery tests finish in seconds. The task limit is 30 s,
# not less: a similarity pair's budget is at most one try's limit less a margin (24 s here), and two C++ builds plus
# 80 jailed runs of a confirmation pair took past 8 s on a machine loaded by two test workers.
STACK_ENV = {
    "TRIBUNAL_RECONCILE_INTERVAL_S": "1",
    "TRIBUNAL_RECONCILE_GRACE_S": "2",
    "TRIBUNAL_JOB_TIMEOUT_S": "30",
}


# What the scripted LLM's hostile behaviours answer with (the server's JSON spells it with escapes).
HOSTILE_LLM_TEXT = "<\ud800|\udc80|\udc80\ud800|\x00|\x85\x9b|\uffff\ufffe|\u202e>"


def _marker_script(request: dict, nth: int) -> Behaviour:
    """Behaviour chosen by a marker in the judged source (`judge-script: a,b,c`): the n-th try gets the n-th."""
    text = request["messages"][-1]["content"]
    marker = "judge-script: "
    if marker not in text:
        return Behaviour()
    names = text.split(marker, 1)[1].split("\n", 1)[0].strip().split(",")
    name = names[min(nth, len(names)) - 1]
    scripted = {
        "valid": Behaviour(),
        "fenced": Behaviour(kind="fenced"),
        "truncated": Behaviour(kind="raw", content='{"p_ac": 0.9, "s_al'),
        "range": Behaviour(payload={"p_ac": 1.3, "s_algo": 3, "s_robust": 3, "rationale": "x"}),
        "http500": Behaviour(kind="status", status=500),
        "http429": Behaviour(kind="status", status=429, retry_after=0.2),
        "renamed": Behaviour(served_model="scripted-model-2026-06-01"),
        "low": Behaviour(payload={"p_ac": 0.1, "s_algo": 1, "s_robust": 2, "rationale": "wrong"}),
        # Hostile text (tests/gateway/test_hostile_text.py): a valid answer whose rationale holds lone surrogates,
        # NUL, C1 controls, noncharacters and a bidi override; an invalid one whose raw content (and so its key,
        # the schema's error) does; a served model named with them.
        "hostile_rationale": Behaviour(
            payload={"p_ac": 0.5, "s_algo": 3, "s_robust": 3, "rationale": HOSTILE_LLM_TEXT}
        ),
        "hostile_raw": Behaviour(kind="raw", content=f'{{"p_ac": 0.5, "{HOSTILE_LLM_TEXT}": 1}}'),
        "hostile_model": Behaviour(served_model=f"scripted{HOSTILE_LLM_TEXT}"),
    }
    return scripted[name]


@pytest.fixture(scope="session")
def scripted_llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM(script=_marker_script) as server:
        yield server


@pytest.fixture(scope="session")
def judges_file(tmp_path_factory: pytest.TempPathFactory, scripted_llm: ScriptedLLM) -> Path:
    """Cheap offline judges and one LLM judge served by the scripted server (lint and CodeBLEU are tested apart)."""
    path = tmp_path_factory.mktemp("judges") / "judges.toml"
    path.write_text(
        '[[judge]]\nname = "sample_tests"\nkind = "offline"\nmethod = "sample_tests"\n\n'
        '[[judge]]\nname = "edit_similarity"\nkind = "offline"\nmethod = "edit_similarity"\n\n'
        f'[[judge]]\nname = "scripted"\nkind = "llm"\nrubric = "cocreation"\nbase_url = "{scripted_llm.base_url}"\n'
        'model = "scripted-model"\nmax_tries = 3\ntimeout_s = 5\nbackoff_s = 0.02\nbackoff_max_s = 0.1\n'
    )
    return path


class Stacks:
    """The session's process stacks, one per database backend, each started the first time a module asks for it
    and stopped at the end of the session (so that modules on either backend may run in any order, or side by side
    on xdist's workers, each of which has its own)."""

    def __init__(
        self,
        request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory,
        redis_url: str,
        judges_file: Path,
    ) -> None:
        self.request = request
        self.tmp_path_factory = tmp_path_factory
        self.redis_url = redis_url
        self.judges_file = judges_file
        self.started: dict[str, EmbeddedStack] = {}

    def get(self, backend: str) -> EmbeddedStack:
        if backend not in self.started:
            database_url = self.request.getfixturevalue("postgres_url") if backend == "postgresql" else None
            # Each backend gets its own Redis database number so that their queues never mix.
            db_number = 1 if backend == "sqlite" else 2
            stack = EmbeddedStack(
                self.tmp_path_factory.mktemp(f"stack-{backend}"),
                database_url=database_url,
                redis_url=f"{self.redis_url.rsplit('/', 1)[0]}/{db_number}",
                judges_file=self.judges_file,
                extra_env=STACK_ENV,
            )
            stack.start()
            self.started[backend] = stack
        return self.started[backend]

    def stop(self) -> None:
        for stack in self.started.values():
            stack.stop()


@pytest.fixture(scope="session")
def stacks(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, redis_url: str, judges_file: Path
) -> Iterator[Stacks]:
    started = Stacks(request, tmp_path_factory, redis_url, judges_file)
    yield started
    started.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(request: pytest.FixtureRequest, stacks: Stacks) -> EmbeddedStack:
    """The whole platform as separate processes, once on SQLite and once on PostgreSQL (the session's own, shared by
    every module)."""
    return stacks.get(request.param)


@pytest.fixture(scope="module")
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
