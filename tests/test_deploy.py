"""The production compose file stays valid and names every process kind the platform has."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from services.kernel.registry import SERVICES

ROOT = Path(__file__).resolve().parents[1]


def _compose_services() -> dict[str, dict[str, Any]]:
    """The services as `docker-compose config` resolves them (anchors merged), which also validates the file."""
    compose = shutil.which("docker-compose")
    assert compose, "scripts/setup.sh installs docker-compose to validate the compose file"
    result = subprocess.run(
        [compose, "-f", str(ROOT / "docker-compose.yml"), "config"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    services: dict[str, dict[str, Any]] = yaml.safe_load(result.stdout)["services"]
    return services


def test_compose_file_is_valid_and_runs_every_worker_kind() -> None:
    services = _compose_services()
    commands = {name: " ".join(spec.get("command", [])) for name, spec in services.items()}
    # One compose service per registered worker kind, each running that kind.
    assert {"postgres", "redis", "gateway", *SERVICES} <= set(services)
    for kind in SERVICES:
        assert commands[kind] == f"tribunal worker {kind}"


def test_every_long_running_service_restarts_and_one_shots_do_not() -> None:
    services = _compose_services()
    # A one-shot is a service others wait on to complete (migrate); everything else runs until stopped.
    one_shots = {
        name
        for spec in services.values()
        for name, condition in (spec.get("depends_on") or {}).items()
        if condition.get("condition") == "service_completed_successfully"
    }
    assert one_shots == {"migrate"}
    for name, spec in services.items():
        assert "restart" in spec, f"{name} has no restart policy"
        if name in one_shots:
            assert spec["restart"] == "no", f"{name} is a one-shot: a restart would loop a failed run"
        else:
            assert spec["restart"] in ("unless-stopped", "on-failure"), f"{name}: restart {spec['restart']!r}"
    # The gateway and every worker say whether they are up; their dependents and operators read it.
    for name in ("gateway", *SERVICES):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
