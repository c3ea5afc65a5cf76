"""The `tribunal` HTTP commands a newcomer types, against the running stack."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import httpx

from services.launcher.stack import EmbeddedStack

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _cli(stack: EmbeddedStack, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.launcher.cli", *args, "--url", stack.url, "--key", key],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_problems_add_then_submit_and_wait(stack: EmbeddedStack, admin: httpx.Client, tmp_path: Path) -> None:
    key = admin.post("/v1/keys", json={"tenant": f"cli-{uuid.uuid4().hex[:6]}", "scopes": ["submit", "read"]}).json()
    added = _cli(stack, key["key"], "problems", "add", str(EXAMPLES / "sum.json"))
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout) == {"problem_id": "sum"}
    accepted = _cli(stack, key["key"], "submit", str(EXAMPLES / "sum.cpp"), "--problem", "sum", "--wait")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    view = json.loads(accepted.stdout)
    assert view["verdict"] == "AC" and view["language"] == "cpp"
    wrong = tmp_path / "wrong.py"
    wrong.write_text("print(0)\n")
    rejected = _cli(stack, key["key"], "submit", str(wrong), "--problem", "sum", "--wait")
    assert rejected.returncode == 2 and json.loads(rejected.stdout)["verdict"] == "WA"


def test_keys_create_accepts_the_metrics_and_author_scopes(stack: EmbeddedStack) -> None:
    def create(*scopes: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "services.launcher.cli", "keys", "create", "--tenant", "ops", "--scopes", *scopes],
            capture_output=True,
            text=True,
            timeout=120,
            env=stack.env(),
        )

    created = create("metrics")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    assert key["scopes"] == ["metrics"]
    scraped = httpx.get(f"{stack.url}/metrics", headers={"Authorization": f"Bearer {key['key']}"})
    assert scraped.status_code == 200
    assert create("read", "author").returncode == 0
    unknown = create("read", "superuser")
    assert unknown.returncode == 2 and "superuser" in unknown.stderr
