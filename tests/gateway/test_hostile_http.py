"""Hostile programs sent over HTTP get a verdict; the platform's own port, secrets and files stay out of reach."""

from __future__ import annotations

import os

import httpx

from services.launcher.stack import EmbeddedStack


def _run(client: httpx.Client, source: str, **extra: object) -> dict:
    response = client.post("/v1/executions", json={"language": "python", "source_code": source, "wait": True, **extra})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_program_cannot_reach_the_gateway_port(stack: EmbeddedStack, tenant_client: httpx.Client) -> None:
    port = stack.url.rsplit(":", 1)[1]
    source = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "    print('CONNECTED')\n"
        "except OSError as exc:\n"
        "    print('blocked', type(exc).__name__)\n"
    )
    result = _run(tenant_client, source)
    assert result["tests"][0]["stdout"].startswith("blocked"), result
    # The gateway is still there for the next request.
    assert httpx.get(f"{stack.url}/healthz").status_code == 200


def test_program_sees_only_loopback(tenant_client: httpx.Client) -> None:
    # (socket.if_nameindex() asks netlink, which seccomp refuses; /proc/net/dev lists the interfaces.)
    source = "print(sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:]))\n"
    result = _run(tenant_client, source)
    assert result["tests"][0]["stdout"].strip() == "['lo']"


def test_program_cannot_read_platform_secrets(stack: EmbeddedStack, tenant_client: httpx.Client) -> None:
    targets = [str(stack.admin_key_path), str(stack.data_dir / "tribunal.db"), "/proc/1/environ"]
    source = (
        "import os\n"
        "print('ENV', sorted(os.environ))\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        data = open(path, 'rb').read()\n"
        "        print('READ', path, len(data), data[:200])\n"
        "    except OSError as exc:\n"
        "        print('DENIED', path, type(exc).__name__)\n"
    )
    stdout = _run(tenant_client, source)["tests"][0]["stdout"]
    assert "TRIBUNAL" not in stdout
    key = stack.admin_key_path.read_text().strip()
    assert key not in stdout
    assert f"DENIED {stack.admin_key_path}" in stdout
    assert f"DENIED {stack.data_dir / 'tribunal.db'}" in stdout
    for name in os.environ:
        if name.startswith("TRIBUNAL_"):
            assert name not in stdout


def test_fork_bomb_gets_a_verdict_and_the_next_run_is_fine(tenant_client: httpx.Client) -> None:
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result = _run(tenant_client, bomb, limits={"cpu_time_s": 1, "wall_time_s": 2})
    assert result["verdict"] in ("TLE", "RE", "MLE")
    assert _run(tenant_client, "print('still fine')\n")["tests"][0]["stdout"] == "still fine\n"
