"""Every Prometheus metric the platform exports, defined once; each process serves its own registry."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

http_requests = Counter(
    "tribunal_http_requests_total", "HTTP requests served by the gateway.", ["method", "route", "status"]
)
http_latency = Histogram(
    "tribunal_http_request_duration_seconds",
    "Gateway request latency.",
    ["method", "route"],
    buckets=_LATENCY_BUCKETS,
)
queue_depth = Gauge("tribunal_queue_depth", "Jobs waiting in a Redis queue.", ["queue"])
jobs = Counter("tribunal_jobs_total", "Job state transitions, by kind and the status reached.", ["kind", "status"])
queue_enqueued = Counter("tribunal_queue_enqueued_total", "Tasks put on the queue.", ["task"])
# By limit name only (services/kernel/ratelimit.QUOTA_NAMES): a tenant label would be unbounded.
quota_rejections = Counter(
    "tribunal_quota_rejections_total", "Requests or LLM judgments refused over a quota, by limit.", ["limit"]
)
task_duration = Histogram(
    "tribunal_task_duration_seconds",
    "Time a worker spent on one task.",
    ["task", "outcome"],
    buckets=_LATENCY_BUCKETS,
)
task_retries = Counter("tribunal_task_retries_total", "Tasks started again after a failed or lost try.", ["task"])
task_failures = Counter("tribunal_task_failures_total", "Tasks that raised.", ["task"])
reconciled = Counter("tribunal_reconciled_total", "Tasks the reconciler put back on the queue.", ["task"])
executions = Counter(
    "tribunal_executions_total", "Finished executions, by language and verdict.", ["language", "verdict"]
)
sandbox_seconds = Histogram(
    "tribunal_sandbox_seconds",
    "Wall time of one sandboxed run (compile or test).",
    ["language", "phase"],
    buckets=_LATENCY_BUCKETS,
)
build_cache = Counter("tribunal_build_cache_total", "Build cache lookups.", ["language", "outcome"])
similarity_pairs = Counter(
    "tribunal_similarity_pairs_total", "Code pairs scored by differential fuzzing, by outcome.", ["outcome"]
)


def serve_telemetry(port: int, host: str = "127.0.0.1") -> None:
    """Serve /metrics for a worker process (the gateway serves its own at /metrics). Port 0: off."""
    if port > 0:
        start_http_server(port, addr=host)


judge_requests = Counter(
    "tribunal_judge_requests_total", "Requests sent to judge providers, by outcome.", ["judge", "outcome"]
)
judge_retries = Counter("tribunal_judge_retries_total", "Judge requests reissued after a failure.", ["judge"])
judge_failures = Counter(
    "tribunal_judge_failures_total", "Judgments recorded as failed, by reason.", ["judge", "reason"]
)
judge_latency = Histogram(
    "tribunal_judge_request_seconds", "Latency of one provider request.", ["judge"], buckets=_LATENCY_BUCKETS
)
judge_tokens = Counter("tribunal_judge_tokens_total", "Tokens reported by providers.", ["judge", "direction"])
judge_cache_hits = Counter("tribunal_judge_cache_hits_total", "Judgments answered from the response cache.", ["judge"])
judgments = Counter("tribunal_judgments_total", "Judgment rows written, by status.", ["judge", "status"])
