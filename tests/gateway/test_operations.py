"""Operations endpoints: liveness, readiness, Prometheus metrics from the gateway and from workers, docs."""

from __future__ import annotations

import httpx

from services.stack import EmbeddedStack
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


def test_gateway_and_worker_export_metrics(stack: EmbeddedStack, tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    wait_attempt(tenant_client, submit(tenant_client, problem_id, "python", "print(3)\n")["attempt_id"])
    gateway = httpx.get(f"{stack.url}/metrics").text
    assert 'tribunal_http_requests_total{method="POST",route="/v1/attempts",status="202"}' in gateway
    assert "tribunal_http_request_duration_seconds_bucket" in gateway
    assert 'tribunal_queue_depth{queue="tribunal:executor"}' in gateway
    assert 'tribunal_jobs_total{kind="execute_attempt",status="queued"}' in gateway
    worker_text = ""
    for port in stack.worker_metrics_ports:
        try:
            worker_text += httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        except httpx.HTTPError:
            continue  # a worker restarted by a fault test no longer listens on its old port
    assert 'tribunal_executions_total{language="python",verdict="WA"}' in worker_text
    assert 'tribunal_sandbox_seconds_bucket{language="python"' in worker_text
    assert 'tribunal_task_duration_seconds_count{outcome="ok",task="execute_attempt"}' in worker_text
    assert 'tribunal_jobs_total{kind="execute_attempt",status="succeeded"}' in worker_text
    assert 'tribunal_judge_requests_total{judge="scripted",outcome="ok"}' in worker_text
    assert 'tribunal_judgments_total{judge="sample_tests",status="ok"}' in worker_text
    assert 'tribunal_judge_request_seconds_bucket{judge="scripted"' in worker_text
