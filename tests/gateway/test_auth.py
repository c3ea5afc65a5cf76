"""Keys, scopes and tenants: who may do what, and who may see what."""

from __future__ import annotations

import sqlite3
import stat

import httpx

from services.stack import EmbeddedStack
from tests.helpers import add_sum_problem, submit


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
