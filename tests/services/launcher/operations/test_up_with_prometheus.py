"""`tribunal up --prometheus-port P`, as a user runs it: Prometheus on 127.0.0.1:P scraping the gateway and every
worker with the alert rules loaded; Ctrl-C (SIGINT) stops it with everything else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from services.kernel.embedded import free_port
from services.kernel.registry import SERVICES


@pytest.mark.stack  # `tribunal up` starts its own stack and Prometheus
@pytest.mark.corpus
def test_up_runs_prometheus_scraping_every_process_and_stops_it(tmp_path: Path) -> None:
    port, prometheus_port = free_port(), free_port()
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "services.launcher.cli",
            "up",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(port),
            "--prometheus-port",
            str(prometheus_port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={key: value for key, value in os.environ.items() if not key.startswith("TRIBUNAL_")},
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{prometheus_port}"
        deadline = time.monotonic() + 120
        jobs: dict[str, str] = {}
        while time.monotonic() < deadline:
            assert up.poll() is None, up.stdout.read().decode() if up.stdout else ""
            try:
                targets = httpx.get(f"{url}/api/v1/targets", timeout=2).json()["data"]["activeTargets"]
                jobs = {target["labels"]["job"]: target["health"] for target in targets}
                if len(jobs) == 1 + len(SERVICES) and set(jobs.values()) == {"up"}:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        assert jobs == {"tribunal-gateway": "up"} | {f"tribunal-{kind}": "up" for kind in SERVICES}, jobs
        rules = httpx.get(f"{url}/api/v1/rules", timeout=5).json()["data"]["groups"]
        assert any(rule["name"] == "TribunalWorkerKindDown" for group in rules for rule in group["rules"])
        # The scrape key holds the metrics scope only: it cannot read the API.
        scrape_key = (tmp_path / "data" / "prometheus" / "scrape.key").read_text().strip()
        headers = {"Authorization": f"Bearer {scrape_key}"}
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", headers=headers, timeout=5).status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/v1/languages", headers=headers, timeout=5).status_code == 403
        assert oct((tmp_path / "data" / "prometheus" / "scrape.key").stat().st_mode & 0o777) == "0o600"
    finally:
        up.send_signal(signal.SIGINT)
        output = up.communicate(timeout=60)[0].decode()
    assert up.returncode == 0, output
    assert f"prometheus: http://127.0.0.1:{prometheus_port}" in output
    try:
        httpx.get(f"http://127.0.0.1:{prometheus_port}/-/ready", timeout=2)
        raise AssertionError("prometheus still answers after `tribunal up` stopped")
    except httpx.HTTPError:
        pass
