"""ORM models of the attempt-keyed database. The schema changes only through Alembic revisions."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any, overload

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from services.kernel.contracts import AttemptStatus, JobStatus
from services.kernel.plans import Plan, parse_plan
from services.kernel.text import clean_json, clean_text


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id(prefix: str) -> str:
    """An opaque, URL-safe id with a readable prefix (e.g. `att_3fa9...`)."""
    return f"{prefix}_{secrets.token_hex(10)}"


class UTCDateTime(TypeDecorator[datetime]):
    """Timestamps stored in UTC and always read back timezone-aware (SQLite drops the zone otherwise)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


# Every text and JSON column cleans what it stores (services/kernel/text.py): the last line of defence behind the
# cleaning where text enters (the executor's decoding of a jail's output, the judge's of an LLM's answer), so that no
# value can fail a write or, once stored, a read. Each decorates the type the migrations create (no schema change).


class CleanText(TypeDecorator[str]):
    """TEXT that holds only valid UTF-8 without NUL (PostgreSQL's text refuses NUL; no UTF-8 encoder takes a lone
    surrogate). Comparisons bind through it too, so a NUL in a path or query compares as what would be stored."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return clean_text(value) if isinstance(value, str) else value


class CleanString(TypeDecorator[str]):
    """VARCHAR(n), cleaned like CleanText: identifiers from a path, a query or a body bind as what would be stored."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return clean_text(value) if isinstance(value, str) else value


class CleanJSON(TypeDecorator[Any]):
    """JSON whose strings (keys included) are valid Unicode, on the way in and on the way out: a lone surrogate
    escape (`"\\udc80"`) is valid JSON text that SQLite and PostgreSQL's `json` store as written, but it reads
    back as a `str` no response can encode. NUL (`"\\u0000"`) is kept: it is data (a test's input), and `json`
    keeps it (`jsonb` would not: moving to jsonb means cleaning NUL here too)."""

    impl = JSON
    cache_ok = True
    # As JSON's own (none_as_null=False): a Python None is stored as JSON null, exactly as before.
    should_evaluate_none = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return clean_json(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        # Rows written before this cleaning existed may hold lone surrogate escapes.
        return clean_json(value)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: CleanJSON, list[Any]: CleanJSON, datetime: UTCDateTime()}


class ApiKey(Base):
    """A bearer key, stored only as its SHA-256; `scopes` is a subset of keys.SCOPES."""

    __tablename__ = "api_key"

    key_id: Mapped[str] = mapped_column(CleanString(40), primary_key=True)
    key_hash: Mapped[str] = mapped_column(CleanString(64), unique=True)
    tenant: Mapped[str] = mapped_column(CleanString(100), index=True)
    name: Mapped[str] = mapped_column(CleanString(200), default="")
    scopes: Mapped[list[Any]] = mapped_column(CleanJSON)
    # The key's limits (services/kernel/ratelimit.py QUOTA_NAMES); null, or a null member: the configured default.
    quotas: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class Problem(Base):
    """A task with its tests; `problem_id` is the client's natural key, unique per tenant."""

    __tablename__ = "problem"
    __table_args__ = (UniqueConstraint("tenant", "problem_id", name="uq_problem_tenant_problem_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(CleanString(100))
    problem_id: Mapped[str] = mapped_column(CleanString(200))
    title: Mapped[str] = mapped_column(CleanText, default="")
    statement: Mapped[str] = mapped_column(CleanText)
    mode: Mapped[str] = mapped_column(CleanString(16), default="stdio")
    entry_point: Mapped[str | None] = mapped_column(CleanString(200), default=None)
    tests: Mapped[list[Any]] = mapped_column(CleanJSON)
    checker: Mapped[dict[str, Any]] = mapped_column(CleanJSON)
    limits: Mapped[dict[str, Any]] = mapped_column(CleanJSON)
    references: Mapped[list[Any]] = mapped_column(CleanJSON, default=list)
    input_spec: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    content_hash: Mapped[str] = mapped_column(CleanString(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The direct-execution jobs that run each reference against the problem's tests (its `validation`, docs/api.md);
    # None: nothing to validate (no reference, or no test), or stored before validation existed.
    validation_jobs: Mapped[list[str] | None] = mapped_column(CleanJSON, default=None)


class Attempt(Base):
    """A submitted program. Trajectory = participant x problem; mutants point at their parent."""

    __tablename__ = "attempt"
    __table_args__ = (
        UniqueConstraint("tenant", "attempt_uid", name="uq_attempt_tenant_uid"),
        Index("ix_attempt_tenant_problem", "tenant", "problem_pk"),
        Index("ix_attempt_tenant_participant", "tenant", "participant"),
        Index("ix_attempt_tenant_created", "tenant", "created_at", "attempt_id"),
        Index("ix_attempt_status_stage", "status", "stage"),
        Index("ix_attempt_parent", "parent_attempt_id"),
    )

    attempt_id: Mapped[str] = mapped_column(CleanString(40), primary_key=True)
    attempt_uid: Mapped[str | None] = mapped_column(CleanString(200), default=None)
    tenant: Mapped[str] = mapped_column(CleanString(100))
    problem_pk: Mapped[int] = mapped_column(ForeignKey("problem.id"))
    language: Mapped[str] = mapped_column(CleanString(16))
    source_code: Mapped[str] = mapped_column(CleanText)
    source_hash: Mapped[str] = mapped_column(CleanString(64))
    content_hash: Mapped[str] = mapped_column(CleanString(64))
    participant: Mapped[str | None] = mapped_column(CleanString(200), default=None)
    turn: Mapped[int | None] = mapped_column(Integer, default=None)
    submitted_at: Mapped[datetime | None] = mapped_column(default=None)
    context: Mapped[str | None] = mapped_column(CleanText, default=None)
    label: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    judges: Mapped[list[Any] | None] = mapped_column(CleanJSON, default=None)
    conditions: Mapped[list[Any] | None] = mapped_column(CleanJSON, default=None)
    repeats: Mapped[int] = mapped_column(Integer, default=1)
    # Perturbation provenance: a mutant is an attempt with a parent and the operator that made it.
    parent_attempt_id: Mapped[str | None] = mapped_column(ForeignKey("attempt.attempt_id"), default=None)
    operator: Mapped[str | None] = mapped_column(CleanString(100), default=None)
    arm: Mapped[str | None] = mapped_column(CleanString(16), default=None)
    severity: Mapped[float | None] = mapped_column(Float, default=None)
    guard_context: Mapped[bool | None] = mapped_column(Boolean, default=None)
    # A mutant's record: seed, site, diff, and what verification found (services/perturb).
    mutation: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    job_id: Mapped[str | None] = mapped_column(CleanString(40), default=None, index=True)
    status: Mapped[str] = mapped_column(CleanString(16), default=AttemptStatus.QUEUED)
    # The stages it goes through, in order (contracts.Stage), and the one it is at (None once it has ended).
    pipeline: Mapped[list[Any]] = mapped_column(CleanJSON, default=list)
    stage: Mapped[str | None] = mapped_column(CleanString(16), default=None)
    verdict: Mapped[str | None] = mapped_column(CleanString(4), default=None)
    passed: Mapped[int | None] = mapped_column(Integer, default=None)
    total: Mapped[int | None] = mapped_column(Integer, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class Execution(Base):
    """One row per attempt and run; a retried run overwrites its row (upsert on attempt_id, run)."""

    __tablename__ = "execution"
    __table_args__ = (UniqueConstraint("attempt_id", "run", name="uq_execution_attempt_run"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    attempt_id: Mapped[str] = mapped_column(ForeignKey("attempt.attempt_id", ondelete="CASCADE"))
    run: Mapped[int] = mapped_column(Integer, default=0)
    verdict: Mapped[str] = mapped_column(CleanString(4))
    passed: Mapped[int] = mapped_column(Integer)
    total: Mapped[int] = mapped_column(Integer)
    compile_output: Mapped[str] = mapped_column(CleanText, default="")
    tests: Mapped[list[Any]] = mapped_column(CleanJSON)
    toolchain: Mapped[str] = mapped_column(CleanString(200), default="")
    build_cached: Mapped[bool] = mapped_column(Boolean, default=False)
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Judgment(Base):
    """Exactly one row per (attempt, judge, condition, repeat), upserted; failure is a state, not a score."""

    __tablename__ = "judgment"
    __table_args__ = (UniqueConstraint("attempt_id", "judge", "condition", "repeat", name="uq_judgment_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    attempt_id: Mapped[str] = mapped_column(ForeignKey("attempt.attempt_id", ondelete="CASCADE"), index=True)
    judge: Mapped[str] = mapped_column(CleanString(100))
    condition: Mapped[str] = mapped_column(CleanString(16))
    repeat: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(CleanString(16))  # JudgmentStatus: ok | failed | not_applicable
    rubric: Mapped[str] = mapped_column(CleanString(40), default="")
    prompt_version: Mapped[str] = mapped_column(CleanString(40), default="")
    fields: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    p_ac: Mapped[float | None] = mapped_column(Float, default=None)
    score: Mapped[float | None] = mapped_column(Float, default=None)
    raw_response: Mapped[str | None] = mapped_column(CleanText, default=None)
    requested_model: Mapped[str | None] = mapped_column(CleanString(200), default=None)
    served_model: Mapped[str | None] = mapped_column(CleanString(200), default=None)
    provenance: Mapped[str | None] = mapped_column(CleanString(16), default=None)
    tries: Mapped[int] = mapped_column(Integer, default=0)
    latency_ms: Mapped[int | None] = mapped_column(Integer, default=None)
    tokens_in: Mapped[int | None] = mapped_column(Integer, default=None)
    tokens_out: Mapped[int | None] = mapped_column(Integer, default=None)
    request_hash: Mapped[str | None] = mapped_column(CleanString(64), default=None)
    error: Mapped[str | None] = mapped_column(CleanText, default=None)
    weighted_p_ac: Mapped[float | None] = mapped_column(Float, default=None)
    weighted_score: Mapped[float | None] = mapped_column(Float, default=None)
    score_probs: Mapped[dict[str, float] | None] = mapped_column(CleanJSON, default=None)
    weighting: Mapped[str | None] = mapped_column(CleanString(40), default=None)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class JudgeResponseCache(Base):
    """Validated provider answers, keyed by everything that shapes a request (services/lib/llm/cache.py)."""

    __tablename__ = "judge_response_cache"

    cache_key: Mapped[str] = mapped_column(CleanString(64), primary_key=True)
    content: Mapped[str] = mapped_column(CleanText)
    served_model: Mapped[str | None] = mapped_column(CleanString(200), default=None)
    tokens_in: Mapped[int | None] = mapped_column(Integer, default=None)
    tokens_out: Mapped[int | None] = mapped_column(Integer, default=None)
    # The probabilities read from the reply's logprobs at the probed value (services/lib/llm/logprobs.py), if any.
    score_probs: Mapped[dict[str, float] | None] = mapped_column(CleanJSON, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class JobUnit(Base):
    """A unit of a job already counted in its progress: inserting it first is what makes counting exactly-once."""

    __tablename__ = "job_unit"

    job_id: Mapped[str] = mapped_column(ForeignKey("job.job_id", ondelete="CASCADE"), primary_key=True)
    unit: Mapped[str] = mapped_column(CleanString(300), primary_key=True)


class SimilarityPair(Base):
    """One code pair of a similarity job (POST /v1/similarity): two programs, how to drive them, and, once scored,
    their functional similarity (differential fuzzing) and surface metrics. Keyed by job and position."""

    __tablename__ = "similarity_pair"

    job_id: Mapped[str] = mapped_column(ForeignKey("job.job_id", ondelete="CASCADE"), primary_key=True)
    ordinal: Mapped[int] = mapped_column(Integer, primary_key=True)
    pair_key: Mapped[str] = mapped_column(CleanString(200))  # the client's id of the pair (LoCaL's `id`)
    problem_pk: Mapped[int | None] = mapped_column(ForeignKey("problem.id"), default=None)
    mode: Mapped[str] = mapped_column(CleanString(16))
    entry_point: Mapped[str | None] = mapped_column(CleanString(200), default=None)
    reference_language: Mapped[str] = mapped_column(CleanString(16))
    reference_source: Mapped[str] = mapped_column(CleanText)
    candidate_language: Mapped[str] = mapped_column(CleanString(16))
    candidate_source: Mapped[str] = mapped_column(CleanText)
    input_spec: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    labels: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)  # client fields carried through
    status: Mapped[str] = mapped_column(CleanString(16), default="queued")  # queued | scored | failed
    result: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    error: Mapped[str | None] = mapped_column(CleanText, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class Report(Base):
    """A meta-evaluation report over stored judgments: parameters, the result JSON and its HTML page."""

    __tablename__ = "report"

    report_id: Mapped[str] = mapped_column(CleanString(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(CleanString(100), index=True)
    kind: Mapped[str] = mapped_column(CleanString(40))
    params: Mapped[dict[str, Any]] = mapped_column(CleanJSON)
    job_id: Mapped[str] = mapped_column(CleanString(40))
    result: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    html: Mapped[str | None] = mapped_column(CleanText, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class Study(Base):
    """A study (docs/studies.md): its validated spec, as `tribunal study run` posted it, and the state of each of
    its stages. The problems it imported are its scope: its attempts are theirs. A stage that creates a job (the
    perturbations, each report) records the job's id in the same transaction that creates it, so that a resumed
    run finds it and never creates it twice."""

    __tablename__ = "study"
    __table_args__ = (UniqueConstraint("tenant", "name", name="uq_study_tenant_name"),)

    study_id: Mapped[str] = mapped_column(CleanString(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(CleanString(100), index=True)
    name: Mapped[str] = mapped_column(CleanString(64))
    spec: Mapped[dict[str, Any]] = mapped_column(CleanJSON)
    spec_hash: Mapped[str] = mapped_column(CleanString(64))
    state: Mapped[dict[str, Any]] = mapped_column(CleanJSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class Calibration(Base):
    """A calibration of one judge x condition (metrics/recalibration.py): the map fitted on all the tenant's
    labelled items (`fitted_map`: isotonic thresholds X/y or Platt coef/intercept), what it was fitted on, its
    out-of-fold figures (`result`), and whether it is `applied` (served as `p_ac_calibrated`). `version` counts the
    tenant's calibrations of this judge x condition from 1; the newest applied one is served. Never rewritten: a
    refit is a new row."""

    __tablename__ = "calibration"
    __table_args__ = (Index("ix_calibration_scope", "tenant", "judge", "condition", "created_at"),)

    calibration_id: Mapped[str] = mapped_column(CleanString(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(CleanString(100))
    judge: Mapped[str] = mapped_column(CleanString(100))
    condition: Mapped[str] = mapped_column(CleanString(16))
    method: Mapped[str] = mapped_column(CleanString(16))
    cluster: Mapped[str] = mapped_column(CleanString(16))
    version: Mapped[int] = mapped_column(Integer)
    applied: Mapped[bool] = mapped_column(Boolean)
    fitted_on: Mapped[dict[str, Any]] = mapped_column(CleanJSON)
    fitted_map: Mapped[dict[str, Any]] = mapped_column(CleanJSON)
    result: Mapped[dict[str, Any]] = mapped_column(CleanJSON)
    job_id: Mapped[str] = mapped_column(CleanString(40))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ReportPlot(Base):
    """One PNG of a report."""

    __tablename__ = "report_plot"

    report_id: Mapped[str] = mapped_column(ForeignKey("report.report_id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(CleanString(100), primary_key=True)
    png: Mapped[bytes] = mapped_column(LargeBinary)


class Job(Base):
    """Long work. The database, not Redis, is the truth of a job's state."""

    __tablename__ = "job"
    __table_args__ = (Index("ix_job_status_created", "status", "created_at"),)

    job_id: Mapped[str] = mapped_column(CleanString(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(CleanString(100), index=True)
    kind: Mapped[str] = mapped_column(CleanString(40))
    status: Mapped[str] = mapped_column(CleanString(16), default=JobStatus.QUEUED)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    # The job's plan as stored (services/kernel/plans.py): written by jobs.create_job, read through `plan()`.
    params: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    result: Mapped[dict[str, Any] | None] = mapped_column(CleanJSON, default=None)
    error: Mapped[str | None] = mapped_column(CleanText, default=None)
    tries: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)

    @overload
    def plan(self) -> Plan: ...
    @overload
    def plan[P: Plan](self, expected: type[P]) -> P: ...
    def plan(self, expected: type[Plan] = Plan) -> Plan:
        """The job's typed plan (services/kernel/plans.py), read from `params`; `expected` names the plan model, or
        a base of the plans a reader accepts (e.g. JudgingPlan). The only reader of `params`."""
        return parse_plan(self.kind, self.params, expected)
