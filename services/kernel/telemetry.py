"""Every Prometheus metric the platform exports, defined once: the one `tribunal_` vocabulary.

The scheme (docs/operations.md has the table; tests/services/launcher/operations/test_vocabulary.py holds this
module, the docs and the dashboards to it):
- `tribunal_<area>_<what>[_<unit>]`, areas `http`, `queue`, `platform`, `worker`, `task`, `jobs`, `executions`,
  `sandbox`, `build_cache`, `judge`, `judgments`, `mutants`, `similarity`, `report`, `quota`;
- base units in the name (`_seconds`, `_bytes`, `_dollars`); counters end in `_total`;
- bounded labels only: enums of the platform (verdicts, statuses, job kinds, tasks, queues, languages), route
  templates, and judge names and conditions (fixed by the judges file). Never a tenant, an id or free text.

Where each is exported: every process serves its own registry (the gateway at /metrics on its HTTP port, each
worker on its telemetry port), so two workers of one kind on one machine are two scrape targets whose series
Prometheus tells apart by `instance`: nothing is shared between processes, nothing overwrites. The platform-wide
gauges (queues, live workers, live jobs, judge trust) are read from Redis and the database by the gateway at each
scrape (gateway/scrape.py); with several gateways, dashboards take their `max`.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from services.kernel.contracts import Arm, Condition, JobKind, JobStatus, JudgmentStatus, Verdict

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_MEMORY_BUCKETS = tuple(float(2**power) for power in range(20, 34))  # 1 MiB .. 8 GiB
_TRIES_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10)

# ---- HTTP (the gateway) --------------------------------------------------------------------------------------------
http_requests = Counter(
    "tribunal_http_requests_total", "HTTP requests served by the gateway.", ["method", "route", "status"]
)
http_latency = Histogram(
    "tribunal_http_request_duration_seconds",
    "Gateway request latency, by route template.",
    ["method", "route"],
    buckets=_LATENCY_BUCKETS,
)
# By limit name only (services/kernel/ratelimit.QUOTA_NAMES): a tenant label would be unbounded.
quota_rejections = Counter(
    "tribunal_quota_rejections_total", "Requests or LLM judgments refused over a quota, by limit.", ["limit"]
)

# ---- Queues and workers (platform-wide: the gateway reads them from Redis at each scrape) --------------------------
queue_depth = Gauge("tribunal_queue_depth", "Tasks in a Redis queue (waiting, deferred or running).", ["queue"])
queue_oldest_age = Gauge(
    "tribunal_queue_oldest_age_seconds",
    "Age of the oldest task in a queue that is due and not running (0: none waits).",
    ["queue"],
)
worker_processes = Gauge(
    "tribunal_worker_processes", "Worker processes of a kind whose heartbeat is alive in Redis.", ["kind"]
)
queue_enqueued = Counter("tribunal_queue_enqueued_total", "Tasks put on the queue.", ["task"])
platform_source_up = Gauge(
    "tribunal_platform_source_up",
    "Whether the gateway could read a source of the platform-wide gauges (`redis`, `database`) at its last scrape.",
    ["source"],
)

# ---- Worker processes (each its own) ---------------------------------------------------------------------------------
worker_jobs_running = Gauge("tribunal_worker_jobs_running", "Tasks this worker process is running.", ["kind"])
worker_jobs_capacity = Gauge(
    "tribunal_worker_jobs_capacity", "Tasks this worker process runs at most at once.", ["kind"]
)
task_duration = Histogram(
    "tribunal_task_duration_seconds",
    "Time a worker spent on one try of a task, by outcome.",
    ["task", "outcome"],
    buckets=_LATENCY_BUCKETS,
)
task_retries = Counter("tribunal_task_retries_total", "Tasks started again after a failed or lost try.", ["task"])
task_failures = Counter("tribunal_task_failures_total", "Tries of a task that raised.", ["task"])
task_give_ups = Counter(
    "tribunal_task_give_ups_total", "Tasks given up after their last try, their subject ended as failed.", ["task"]
)
reconciled = Counter("tribunal_task_reconciled_total", "Tasks the reconciler put back on the queue.", ["task"])

# ---- Jobs ----------------------------------------------------------------------------------------------------------
jobs = Counter("tribunal_jobs_total", "Job state transitions, by kind and the status reached.", ["kind", "status"])
jobs_live = Gauge("tribunal_jobs_live", "Jobs queued or running now, from the database.", ["kind", "status"])

# ---- Executions and the sandbox (executor workers) -----------------------------------------------------------------
executions = Counter(
    "tribunal_executions_total",
    "Finished executions by language and verdict; origin `attempt` (an attempt's run) or `direct`.",
    ["language", "verdict", "origin"],
)
sandbox_duration = Histogram(
    "tribunal_sandbox_duration_seconds",
    "Wall time of one sandboxed run: a compile, or one test.",
    ["language", "phase"],
    buckets=_LATENCY_BUCKETS,
)
sandbox_cpu = Histogram(
    "tribunal_sandbox_cpu_seconds",
    "CPU time (user + system) of one test's run.",
    ["language"],
    buckets=_LATENCY_BUCKETS,
)
sandbox_memory = Histogram(
    "tribunal_sandbox_memory_bytes", "Peak memory of one test's run.", ["language"], buckets=_MEMORY_BUCKETS
)
build_cache_lookups = Counter(
    "tribunal_build_cache_lookups_total", "Build cache lookups, by outcome (hit or miss).", ["language", "outcome"]
)
build_cache_bytes = Gauge(
    "tribunal_build_cache_bytes", "Bytes of published builds in this machine's build cache, as last seen."
)
build_cache_evictions = Counter("tribunal_build_cache_evictions_total", "Builds evicted from the build cache.")

# ---- Judges (judge workers) ------------------------------------------------------------------------------------------
judge_requests = Counter(
    "tribunal_judge_requests_total", "Requests sent to judge providers, by outcome.", ["judge", "outcome"]
)
judge_retries = Counter("tribunal_judge_retries_total", "Judge requests reissued after a failure.", ["judge"])
judge_failures = Counter(
    "tribunal_judge_failures_total", "Judgments recorded as failed, by reason.", ["judge", "reason"]
)
judge_latency = Histogram(
    "tribunal_judge_request_duration_seconds",
    "Latency of one provider request.",
    ["judge"],
    buckets=_LATENCY_BUCKETS,
)
judge_tokens = Counter("tribunal_judge_tokens_total", "Tokens reported by providers.", ["judge", "direction"])
judge_price = Gauge(
    "tribunal_judge_price_dollars_per_token",
    "A judge's price per token (judges file: price_per_mtok_in/out), for cost panels.",
    ["judge", "direction"],
)
judge_cache_hits = Counter("tribunal_judge_cache_hits_total", "Judgments answered from the response cache.", ["judge"])
judgments = Counter(
    "tribunal_judgments_total",
    "Judgment rows written, by status (ok, failed, not_applicable).",
    ["judge", "condition", "status"],
)
judgment_tries = Histogram(
    "tribunal_judge_tries", "Provider tries one judgment took.", ["judge"], buckets=_TRIES_BUCKETS
)

# ---- Judge trust (the gateway, from the newest judge_quality report, at each scrape) -------------------------------
# `estimate` is `value`, `ci_low` or `ci_high` (the report's cluster-bootstrap interval); `trust` is `ok`, or
# `too_few` when the figure comes from fewer items or clusters than TRIBUNAL_MIN_ITEMS / TRIBUNAL_MIN_CLUSTERS.
TRUST_VALUES = ("ok", "too_few")
_TRUST_LABELS = ["judge", "condition", "estimate", "trust"]
judge_roc_auc = Gauge("tribunal_judge_roc_auc", "ROC-AUC of the newest judge_quality report.", _TRUST_LABELS)
judge_ece = Gauge("tribunal_judge_ece", "Expected calibration error of the newest judge_quality report.", _TRUST_LABELS)
judge_mcc_oof = Gauge("tribunal_judge_mcc_oof", "Out-of-fold MCC of the newest judge_quality report.", _TRUST_LABELS)
judge_trust_items = Gauge(
    "tribunal_judge_trust_items",
    "Attempts (n) behind the trust gauges' figures of a judge and condition.",
    ["judge", "condition"],
)
judge_trust_clusters = Gauge(
    "tribunal_judge_trust_clusters",
    "Bootstrap clusters behind the trust gauges' figures of a judge and condition.",
    ["judge", "condition"],
)
judge_trust_report_time = Gauge(
    "tribunal_judge_trust_report_timestamp_seconds", "When the judge_quality report the trust gauges show finished."
)

# ---- Trust cards (the gateway, each time GET /v1/judges/{name}/trust answers) ---------------------------------------
# 1 for a card's current verdict (`fit`, `unfit`, `too_few`, `no_data`), 0 for the others; n and clusters are values of
# their own gauges, not labels (unbounded).
TRUST_CARD_VERDICTS = ("fit", "unfit", "too_few", "no_data")
judge_trust = Gauge(
    "tribunal_judge_trust",
    "A trust card's verdict (1 = current) per judge, condition and use.",
    ["judge", "condition", "use", "verdict"],
)
judge_trust_card_items = Gauge(
    "tribunal_judge_trust_card_items", "Items (n) behind a trust card's verdict figure.", ["judge", "condition", "use"]
)
judge_trust_card_clusters = Gauge(
    "tribunal_judge_trust_card_clusters",
    "Clusters behind a trust card's verdict figure.",
    ["judge", "condition", "use"],
)

# ---- Perturbations, similarity, reports ----------------------------------------------------------------------------
mutants_created = Counter(
    "tribunal_mutants_created_total", "Mutants made by the perturbation generator, by arm.", ["language", "arm"]
)
# What verifying a mutant found (services/perturb/verification.py): it did not build, it hit an internal error, its
# arm held (`confirmed`), a semantic mutant still passes every test (`equivalent_suspect`) or a control fails
# (`operator_bug`).
MUTANT_OUTCOMES = ("unbuilt", "internal_error", "confirmed", "equivalent_suspect", "operator_bug")
mutants_verified = Counter(
    "tribunal_mutants_verified_total",
    "Mutants checked against their arm by execution, by outcome.",
    ["arm", "outcome"],
)
similarity_pairs = Counter(
    "tribunal_similarity_pairs_total", "Code pairs scored by differential fuzzing, by outcome.", ["outcome"]
)
report_duration = Histogram(
    "tribunal_report_build_duration_seconds",
    "Time to build one report, by kind and outcome (built or failed).",
    ["kind", "outcome"],
    buckets=_LATENCY_BUCKETS,
)


# ---- Series that exist before their first event -------------------------------------------------------------------
# A counter's labelled series appears at its first increment; a rate over one that never happened (no internal
# error yet, no failed report) would be no data rather than 0. The series the alert rules divide or sum over are
# created at 0 up front (their labels are known enums), so an alert reads "0 per second", not "no data".


def start_job_series() -> None:
    for kind in JobKind:
        for status in JobStatus:
            jobs.labels(kind.value, status.value)


def start_execution_series(languages: Iterable[str]) -> None:
    for language in languages:
        for verdict in Verdict:
            for origin in ("attempt", "direct"):
                executions.labels(language, verdict.value, origin)


def start_judgment_series(judges: Iterable[str]) -> None:
    for judge in judges:
        for condition in Condition:
            for status in JudgmentStatus:
                judgments.labels(judge, condition.value, status.value)


def start_llm_judge_series(judge: str) -> None:
    for direction in ("in", "out"):
        judge_tokens.labels(judge, direction)
    judge_retries.labels(judge)
    judge_cache_hits.labels(judge)


def start_report_series(kinds: Iterable[str]) -> None:
    for kind in kinds:
        for outcome in ("built", "failed"):
            report_duration.labels(kind, outcome)


def start_quota_series(limits: Iterable[str]) -> None:
    for limit in limits:
        quota_rejections.labels(limit)


def start_task_series(tasks: Iterable[str]) -> None:
    for task in tasks:
        for counter in (task_retries, task_failures, task_give_ups, reconciled):
            counter.labels(task)


def start_mutant_series(languages: Iterable[str]) -> None:
    languages = list(languages)  # read once per arm
    for arm in Arm:
        for language in languages:
            mutants_created.labels(language, arm.value)
        for outcome in MUTANT_OUTCOMES:
            mutants_verified.labels(arm.value, outcome)


def start_similarity_series() -> None:
    for outcome in ("scored", "failed"):
        similarity_pairs.labels(outcome)


start_job_series()  # job transitions happen in the gateway and in every worker


def serve_telemetry(port: int, host: str = "127.0.0.1") -> None:
    """Serve /metrics for a worker process (the gateway serves its own at /metrics). Port 0: off."""
    if port > 0:
        start_http_server(port, addr=host)
