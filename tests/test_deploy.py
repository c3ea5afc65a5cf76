"""The production compose file stays valid and names every process kind the platform has."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from services.kernel.registry import SERVICES

ROOT = Path(__file__).resolve().parents[1]


def test_compose_file_is_valid_and_runs_every_worker_kind() -> None:
    compose = shutil.which("docker-compose")
    assert compose, "scripts/setup.sh installs docker-compose to validate the compose file"
    result = subprocess.run(
        [compose, "-f", str(ROOT / "docker-compose.yml"), "config"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    commands = {name: " ".join(spec.get("command", [])) for name, spec in services.items()}
    # One compose service per registered worker kind, each running that kind.
    assert {"postgres", "redis", "gateway", *SERVICES} <= set(services)
    for kind in SERVICES:
        assert commands[kind] == f"tribunal worker {kind}"
