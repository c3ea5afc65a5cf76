"""Keys, scopes and tenants: who may do what, and who may see what."""

from __future__ import annotations

import secrets
import sqlite3
import stat
import uuid
from pathlib import Path

import httpx
import pytest

from services.kernel.db import private_dir, private_sqlite
from services.kernel.settings import get_settings
from services.launcher.migrate import upgrade
from services.launcher.stack import EmbeddedStack
from tests.helpers import add_sum_problem, submit, wait_attempt


def _client(stack: EmbeddedStack, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=stack.url, headers=headers, timeout=30)


def test_missing_or_unknown_key_is_401(stack: EmbeddedStack) -> None:
    with _client(stack, None) as anonymous:
        response = anonymous.get("/v1/languages")
        assert response.status_code == 401
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["errors"][0]["loc"] == ["header", "authorization"]
    with _client(stack, "trb_not-a-key") as stranger:
        assert stranger.get("/v1/languages").status_code == 401


def test_scopes_are_enforced(stack: EmbeddedStack, admin: httpx.Client) -> None:
    reader_key = admin.post("/v1/keys", json={"tenant": "scoped", "scopes": ["read"]}).json()["key"]
    with _client(stack, reader_key) as reader:
        assert reader.get("/v1/languages").status_code == 200
        denied = reader.post("/v1/problems", json={"statement": "x"})
        assert denied.status_code == 403
        assert reader.post("/v1/keys", json={"tenant": "x", "scopes": ["read"]}).status_code == 403


def test_tenants_never_see_each_other(stack: EmbeddedStack, admin: httpx.Client, tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    attempt = submit(tenant_client, problem_id, "python", "print(3)\n")
    other_key = admin.post("/v1/keys", json={"tenant": "other-team", "scopes": ["submit", "read"]}).json()["key"]
    with _client(stack, other_key) as other:
        assert other.get(f"/v1/attempts/{attempt['attempt_id']}").status_code == 404
        assert other.get(f"/v1/jobs/{attempt['job_id']}").status_code == 404
        assert other.delete(f"/v1/jobs/{attempt['job_id']}").status_code == 404
        assert other.get(f"/v1/problems/{problem_id}").status_code == 404
        assert all(a["attempt_id"] != attempt["attempt_id"] for a in other.get("/v1/attempts").json()["items"])
        # The same problem_id is free in another tenant.
        assert other.post("/v1/problems", json={"problem_id": problem_id, "statement": "mine"}).status_code == 201


def test_keys_are_shown_once_stored_hashed_and_revocable(stack: EmbeddedStack, admin: httpx.Client) -> None:
    created = admin.post("/v1/keys", json={"tenant": "team-a", "scopes": ["submit", "read"], "name": "ci"})
    assert created.status_code == 201
    body = created.json()
    assert body["key"].startswith("trb_") and body["scopes"] == ["read", "submit"]
    listed = admin.get("/v1/keys").json()
    assert any(k["key_id"] == body["key_id"] for k in listed)
    assert all("key" not in k for k in listed)
    if stack.database_url.startswith("sqlite"):
        db = sqlite3.connect(stack.database_url.split("///", 1)[1])
        dump = "\n".join(db.iterdump())
        db.close()
        assert body["key"] not in dump
    with _client(stack, body["key"]) as team:
        assert team.get("/v1/languages").status_code == 200
        assert admin.delete(f"/v1/keys/{body['key_id']}").status_code == 200
        assert team.get("/v1/languages").status_code == 401


def test_admin_key_file_is_private(stack: EmbeddedStack) -> None:
    mode = stat.S_IMODE(stack.admin_key_path.stat().st_mode)
    assert mode == 0o600


def test_data_dir_and_database_are_private(stack: EmbeddedStack, tenant_client: httpx.Client) -> None:
    add_sum_problem(tenant_client)  # a write, so SQLite has its -wal and -shm files
    assert stat.S_IMODE(stack.data_dir.stat().st_mode) == 0o700
    # Made by the workers, whose umask is 0077.
    assert stat.S_IMODE((stack.data_dir / "executor").stat().st_mode) == 0o700
    assert stat.S_IMODE((stack.data_dir / "executor" / "sandbox-id").stat().st_mode) == 0o600
    if stack.database_url.startswith("sqlite"):
        database = Path(stack.database_url.split("///", 1)[1])
        files = [database.with_name(database.name + suffix) for suffix in ("", "-wal", "-shm")]
        assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in files} == {path.name: 0o600 for path in files}


def test_a_wider_data_dir_and_database_are_tightened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An existing data dir (0755) and database (0644, as `tribunal up` used to make them) are tightened by
    the next start (`tribunal up`, `tribunal migrate`); a new database is created 0600."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    database = data_dir / "tribunal.db"
    url = f"sqlite+aiosqlite:///{database}"
    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(data_dir))
    get_settings.cache_clear()
    try:
        upgrade(url)
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(database.stat().st_mode) == 0o600
        data_dir.chmod(0o755)
        database.chmod(0o644)
        upgrade(url)
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(database.stat().st_mode) == 0o600
        # SQLite's side files, if a process left them behind (SQLite deletes them on a clean close).
        side_files = [database.with_name(f"tribunal.db{suffix}") for suffix in ("-wal", "-shm", "-journal")]
        for path in side_files:
            path.touch()
            path.chmod(0o644)
        private_sqlite(url)
        assert [stat.S_IMODE(path.stat().st_mode) for path in side_files] == [0o600] * 3
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    # A missing folder is created private; an existing folder that is not the data dir is left alone.
    nested = tmp_path / "new" / "db" / "tribunal.db"
    upgrade(f"sqlite+aiosqlite:///{nested}")
    assert stat.S_IMODE(nested.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(nested.stat().st_mode) == 0o600
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    upgrade(f"sqlite+aiosqlite:///{shared / 'tribunal.db'}")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    assert stat.S_IMODE((shared / "tribunal.db").stat().st_mode) == 0o600
    # `tribunal up` tightens the data dir it is given.
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    wide.chmod(0o755)
    assert stat.S_IMODE(private_dir(wide).stat().st_mode) == 0o700


def _tenant_keys(admin: httpx.Client, **scopes: list[str]) -> dict[str, str]:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    return {
        name: admin.post("/v1/keys", json={"tenant": tenant, "scopes": wanted}).json()["key"]
        for name, wanted in scopes.items()
    }


def test_hidden_tests_are_shown_only_to_authors(stack: EmbeddedStack, admin: httpx.Client) -> None:
    keys = _tenant_keys(
        admin,
        author=["submit", "read", "author"],
        reviewer=["read", "author"],
        member=["submit", "read"],
        reader=["read"],
        author_only=["author"],
    )
    secret_in, secret_out = f"{secrets.randbelow(10**9)} 7", f"hidden-{secrets.token_hex(6)}"
    problem = {
        "problem_id": "echo",
        "statement": "Print the line you read.",
        "tests": [
            {"input": "visible\n", "expected": "visible\n", "public": True},
            {"input": f"{secret_in}\n", "expected": f"{secret_out}\n"},
            {"input": "also hidden\n", "expected": "also hidden\n", "public": False},
        ],
    }
    with _client(stack, keys["member"]) as member:
        created = member.post("/v1/problems", json=problem)
        # Creating stays a `submit` action, and echoes what was just sent.
        assert created.status_code == 201 and len(created.json()["tests"]) == 3
        assert created.json()["hidden_tests"] == 2
        # The same content again (200) is still an echo: it proves the caller already knows it.
        assert member.post("/v1/problems", json=problem).json()["tests"] == created.json()["tests"]
        shown = member.get("/v1/problems/echo")
    with _client(stack, keys["reader"]) as reader:
        read_only = reader.get("/v1/problems/echo")
    for response in (shown, read_only):
        assert response.status_code == 200
        body = response.json()
        assert body["tests"] == [{**problem["tests"][0], "code": None}] and body["hidden_tests"] == 2
        assert secret_in not in response.text and secret_out not in response.text
        assert "also hidden" not in response.text
    for name in ("author", "reviewer"):
        with _client(stack, keys[name]) as author:
            full = author.get("/v1/problems/echo").json()
        assert [t["expected"] for t in full["tests"]] == [t["expected"] for t in problem["tests"]]
        assert full["hidden_tests"] == 2
    # `author` widens what `read` shows; it does not replace it.
    with _client(stack, keys["author_only"]) as author_only:
        assert author_only.get("/v1/problems/echo").status_code == 403


def test_attempts_never_echo_hidden_test_data(stack: EmbeddedStack, admin: httpx.Client) -> None:
    """A wrong answer on a hidden test: neither the attempt nor its job quotes the hidden input or the expected
    value (in function mode the WA message would say "expected X, got Y"), for any key."""
    keys = _tenant_keys(admin, member=["submit", "read"], author=["submit", "read", "author"])
    secret = f"hidden{secrets.token_hex(6)}"
    secret_arg = secrets.randbelow(10**9) + 10**9
    with _client(stack, keys["member"]) as member:
        stdio = {
            "problem_id": "echo-stdio",
            "statement": "Print the line you read.",
            "tests": [
                {"input": "shown\n", "expected": "shown\n", "public": True},
                {"input": f"{secret_arg}\n", "expected": f"{secret}\n"},
            ],
        }
        function = {
            "problem_id": "tag",
            "statement": "tag(n) returns the tag of n.",
            "mode": "function",
            "entry_point": "tag",
            "tests": [
                {"input": [1], "expected": "one", "public": True},
                {"input": [secret_arg], "expected": secret},
                {"code": f"def check(candidate):\n    assert candidate({secret_arg}) == {secret!r}, {secret!r}\n"},
            ],
        }
        for body in (stdio, function):
            assert member.post("/v1/problems", json=body).status_code == 201
        attempts = [
            submit(member, "echo-stdio", "python", "print(input())\nprint('wrong')\n"),
            submit(member, "tag", "python", "def tag(n):\n    return 'one' if n == 1 else 'nope'\n"),
        ]
        for accepted in attempts:
            view = wait_attempt(member, accepted["attempt_id"])
            assert view["verdict"] == "WA", view
        responses = [member.get(f"/v1/attempts/{a['attempt_id']}") for a in attempts]
        responses += [member.get(f"/v1/jobs/{a['job_id']}") for a in attempts]
        responses.append(member.get("/v1/attempts"))
    with _client(stack, keys["author"]) as author:
        responses += [author.get(f"/v1/attempts/{a['attempt_id']}") for a in attempts]
    for response in responses:
        assert response.status_code == 200
        assert secret not in response.text and str(secret_arg) not in response.text, response.text
    statuses = [[t["status"] for t in responses[i].json()["tests"]] for i in range(2)]
    assert statuses == [["WA", "WA"], ["AC", "WA", "WA"]]
