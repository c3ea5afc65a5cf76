"""Operations endpoints: liveness, readiness, Prometheus metrics from the gateway and from workers, docs."""

from __future__ import annotations

import inspect
import subprocess
import sys
import time

import httpx
import pytest

from services.kernel import telemetry
from services.kernel.embedded import free_port
from services.kernel.settings import Settings
from services.launcher.stack import EmbeddedStack
from tests.helpers import add_sum_problem, submit, wait_attempt


def test_health_and_readiness(stack: EmbeddedStack) -> None:
    assert httpx.get(f"{stack.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{stack.url}/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "database": "ok", "redis": "ok"}


def test_openapi_and_docs_are_served(stack: EmbeddedStack) -> None:
    spec = httpx.get(f"{stack.url}/openapi.json").json()
    for path in ("/v1/attempts", "/v1/attempts:batch", "/v1/jobs/{job_id}", "/v1/executions", "/v1/keys"):
        assert path in spec["paths"]
    assert httpx.get(f"{stack.url}/docs").status_code == 200


def test_gateway_and_worker_export_metrics(
    stack: EmbeddedStack, admin: httpx.Client, tenant_client: httpx.Client
) -> None:
    problem_id = add_sum_problem(tenant_client)
    wait_attempt(tenant_client, submit(tenant_client, problem_id, "python", "print(3)\n")["attempt_id"])
    metrics_key = admin.post("/v1/keys", json={"tenant": "ops", "scopes": ["metrics"]}).json()["key"]
    scraped = httpx.get(f"{stack.url}/metrics", headers={"Authorization": f"Bearer {metrics_key}"})
    assert scraped.status_code == 200
    gateway = scraped.text
    assert 'tribunal_http_requests_total{method="POST",route="/v1/attempts",status="202"}' in gateway
    assert "tribunal_http_request_duration_seconds_bucket" in gateway
    assert 'tribunal_queue_depth{queue="tribunal:executor"}' in gateway
    assert 'tribunal_jobs_total{kind="execute_attempt",status="queued"}' in gateway
    worker_text = ""
    for port in stack.worker_telemetry_ports:
        try:
            worker_text += httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        except httpx.HTTPError:
            continue  # a worker restarted by a fault test no longer listens on its old port
    assert 'tribunal_executions_total{language="python",origin="attempt",verdict="WA"}' in worker_text
    assert 'tribunal_sandbox_duration_seconds_bucket{language="python",le="0.005",phase="test"}' in worker_text
    assert 'tribunal_sandbox_memory_bytes_count{language="python"}' in worker_text
    assert 'tribunal_task_duration_seconds_count{outcome="ok",task="execute_attempt"}' in worker_text
    assert 'tribunal_jobs_total{kind="execute_attempt",status="succeeded"}' in worker_text
    assert 'tribunal_judge_requests_total{judge="scripted",outcome="ok"}' in worker_text
    assert 'tribunal_judgments_total{condition="blind",judge="sample_tests",status="ok"}' in worker_text
    assert 'tribunal_judge_request_duration_seconds_bucket{judge="scripted"' in worker_text


def test_gateway_metrics_need_the_metrics_scope(stack: EmbeddedStack, admin: httpx.Client) -> None:
    def scrape(key: str | None) -> httpx.Response:
        return httpx.get(f"{stack.url}/metrics", headers={"Authorization": f"Bearer {key}"} if key else {})

    assert scrape(None).status_code == 401
    assert scrape("trb_not-a-key").status_code == 401
    reader = admin.post("/v1/keys", json={"tenant": "ops", "scopes": ["submit", "read"]}).json()["key"]
    denied = scrape(reader)
    assert denied.status_code == 403 and "metrics" in denied.json()["title"] + denied.json().get("detail", "")
    scraper = admin.post("/v1/keys", json={"tenant": "ops", "scopes": ["metrics"]}).json()
    assert scrape(scraper["key"]).status_code == 200
    assert admin.get("/metrics").status_code == 200  # admin holds every scope
    # A metrics key is for scraping only.
    with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {scraper['key']}"}) as ops:
        assert ops.get("/v1/languages").status_code == 403
    assert admin.delete(f"/v1/keys/{scraper['key_id']}").status_code == 200
    assert scrape(scraper["key"]).status_code == 401


def test_metrics_public_opts_out_of_the_key(stack: EmbeddedStack) -> None:
    """TRIBUNAL_TELEMETRY_PUBLIC=true: for a gateway whose port only a private network reaches."""
    port = free_port()
    env = stack.env() | {"TRIBUNAL_TELEMETRY_PUBLIC": "true"}
    process = subprocess.Popen(
        [sys.executable, "-m", "services.launcher.cli", "gateway", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
                break
            except httpx.HTTPError:
                assert process.poll() is None and time.monotonic() < deadline, "the gateway did not start"
                time.sleep(0.1)
        assert response.status_code == 200
        assert "tribunal_http_requests_total" in response.text
        # Only /metrics opts out: every other route still needs its key.
        assert httpx.get(f"http://127.0.0.1:{port}/v1/languages", timeout=5).status_code == 401
    finally:
        process.terminate()
        process.wait(15)


def _listening_addresses(port: int) -> set[str]:
    """The local IPv4/IPv6 addresses a TCP socket listens on at `port` (from /proc/net/tcp{,6})."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                address, hex_port = fields[1].rsplit(":", 1)
                if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                    found.add(address)
    return found


def test_telemetry_settings_still_read_their_older_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deployments written before telemetry was told apart from metrics keep working."""
    monkeypatch.setenv("TRIBUNAL_METRICS_PUBLIC", "true")
    monkeypatch.setenv("TRIBUNAL_WORKER_METRICS_PORT", "9199")
    monkeypatch.setenv("TRIBUNAL_WORKER_METRICS_HOST", "10.0.0.7")
    settings = Settings()
    assert (settings.telemetry_public, settings.worker_telemetry_port, settings.worker_telemetry_host) == (
        True,
        9199,
        "10.0.0.7",
    )
    monkeypatch.setenv("TRIBUNAL_WORKER_TELEMETRY_PORT", "9200")
    assert Settings().worker_telemetry_port == 9200


def test_worker_metrics_listen_on_loopback_only(stack: EmbeddedStack) -> None:
    """A worker's metrics server has no authentication: by default it binds 127.0.0.1, never all addresses."""
    assert Settings.model_fields["worker_telemetry_host"].default == "127.0.0.1"
    assert inspect.signature(telemetry.serve_telemetry).parameters["host"].default == "127.0.0.1"
    listening = [_listening_addresses(port) for port in stack.worker_telemetry_ports]
    assert any(listening), "no worker metrics server is listening"
    assert all(addresses <= {"0100007F"} for addresses in listening), listening  # 127.0.0.1, little-endian
