"""The `tribunal` HTTP commands a newcomer types, against the running stack."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import httpx

from services.stack import EmbeddedStack

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _cli(stack: EmbeddedStack, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args, "--url", stack.url, "--key", key],
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
