"""A real Prometheus beside the embedded stack (`tribunal up --prometheus-port P`, and the integration tests).

Debian's `prometheus` package (scripts/setup.sh) provides the server; we start it ourselves on 127.0.0.1:P with a
configuration written into the stack's data dir: the gateway is one scrape job (`tribunal-gateway`, with a key that
has only the `metrics` scope), and every worker kind another (`tribunal-<kind>`), its processes' telemetry ports
listed in a file-discovery file that the stack rewrites whenever a worker starts, so Prometheus follows restarts
and added workers without being restarted. The alert rules are the ones operators deploy
(deploy/prometheus/rules/), loaded unchanged.

Part of the launcher: only services.launcher.stack uses it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import yaml

# The rules shipped in the repository (deploy/prometheus/rules/*.yml), the same files production loads.
RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules"
GATEWAY_JOB = "tribunal-gateway"


def job_name(kind: str) -> str:
    """The scrape job of a process kind: `tribunal-gateway`, `tribunal-executor`, ... (deploy/ uses the same)."""
    return f"tribunal-{kind}"


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        raise RuntimeError("the prometheus server is not installed (scripts/setup.sh installs Debian's package)")
    return found


class LocalPrometheus:
    """One Prometheus server under `workdir`, scraping the stack's processes every `interval_s`."""

    def __init__(self, workdir: Path, port: int, *, interval_s: float = 2.0) -> None:
        self.workdir = workdir
        self.port = port
        self.interval_s = interval_s
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def targets_dir(self) -> Path:
        return self.workdir / "targets"

    def configure(self, gateway: str, scrape_key_file: Path, kinds: list[str]) -> Path:
        """Write the configuration: the gateway at `gateway` (host:port) and every worker kind in `kinds`, whose
        processes `set_targets` lists."""
        self.targets_dir.mkdir(parents=True, exist_ok=True)
        interval = f"{self.interval_s:g}s"
        jobs: list[dict[str, object]] = [
            {
                "job_name": GATEWAY_JOB,
                "authorization": {"type": "Bearer", "credentials_file": str(scrape_key_file)},
                "static_configs": [{"targets": [gateway]}],
            }
        ]
        for kind in kinds:
            targets = self.targets_dir / f"{kind}.json"  # written by set_targets
            jobs.append({"job_name": job_name(kind), "file_sd_configs": [{"files": [str(targets)]}]})
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval},
            "rule_files": [str(RULES_DIR / "*.yml")],
            "scrape_configs": jobs,
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def set_targets(self, kind: str, targets: list[str]) -> None:
        """The telemetry endpoints (host:port) of a worker kind's processes; Prometheus notices the change."""
        self.targets_dir.mkdir(parents=True, exist_ok=True)
        path = self.targets_dir / f"{kind}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps([{"targets": targets}] if targets else []))
        os.replace(temporary, path)  # atomic: Prometheus never reads half a file

    def start(self, log_path: Path, timeout_s: float = 30.0) -> None:
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    prometheus_binary(),
                    f"--config.file={self.workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=2d",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}; see {log_path}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"prometheus was not ready within {timeout_s} s; see {log_path}")

    def wait_scraped(self, targets: int, timeout_s: float = 30.0) -> None:
        """Block until `targets` targets have been scraped successfully once: Prometheus starts scraping a few
        seconds after it says ready, and what happened before its first scrape of a counter would not show in
        rates."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                active = httpx.get(f"{self.url}/api/v1/targets", timeout=2).json()["data"]["activeTargets"]
                if sum(1 for target in active if target["health"] == "up") >= targets:
                    return
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"prometheus had not scraped {targets} targets within {timeout_s} s")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
