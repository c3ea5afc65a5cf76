"""One settings object for every process, read from `TRIBUNAL_*` environment variables."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, computed_field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Deployment settings. Every field can be set as `TRIBUNAL_<FIELD>` in the environment."""

    model_config = SettingsConfigDict(env_prefix="TRIBUNAL_", extra="ignore")

    data_dir: Path = Field(default=Path(".tribunal"), description="Where the SQLite file, builds and keys live.")
    database_url: str | None = Field(default=None, description="SQLAlchemy async URL; SQLite under data_dir if unset.")
    redis_url: str | None = Field(default=None, description="Redis URL; the embedded launcher starts one if unset.")

    # Gateway limits, enforced before any work starts.
    max_body_bytes: int = 8 * 1024 * 1024
    max_source_bytes: int = 256 * 1024
    max_tests_per_problem: int = 512
    max_batch_size: int = 1000
    max_stdin_bytes: int = 4 * 1024 * 1024
    wait_timeout_s: float = 120.0

    # Executor.
    # One more than the cores: part of a jail's ~8 ms setup waits in the kernel (namespaces, cgroups), so an
    # extra slot overlaps one jail's setup with the others' runs (75-79 % -> 84-88 % of direct, docs/performance.md).
    executor_slots: int = Field(default_factory=lambda: (os.cpu_count() or 1) + 1)
    nsjail_path: Path | None = None
    sandbox_uid: int = 65534
    job_timeout_s: int = 600
    job_max_tries: int = 3

    # Judges: a TOML file (services/kernel/judges.py); without one, the offline judges run.
    judges_file: Path | None = None
    default_conditions: list[str] = Field(default_factory=lambda: ["blind"])
    judge_slots: int = Field(default=32, description="Attempts one judge worker judges at once.")

    # Metrics. The gateway's /metrics needs a key with the `metrics` scope unless this is true (for a
    # deployment that serves the gateway's port only on a private network).
    metrics_public: bool = False

    # Worker polling: small delays make an idle stack answer in milliseconds.
    worker_poll_delay_s: float = 0.01
    # A worker's own /metrics server (port 0: none). It has no authentication, so it listens on loopback
    # unless a deployment binds it to a private network on purpose.
    worker_metrics_port: int = 0
    worker_metrics_host: str = "127.0.0.1"
    reconcile_interval_s: float = 30.0
    reconcile_grace_s: float = 10.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def resolved_database_url(self) -> str:
        """The database URL in force: the configured one, or a SQLite file under data_dir."""
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'tribunal.db').resolve()}"


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings instance (cached; tests clear it with `get_settings.cache_clear()`)."""
    return Settings()
