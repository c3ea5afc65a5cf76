"""The public API's request and response bodies (docs/api.md), one module per resource over a common base.

`common` holds what every request body shares: the base model `RequestBody` (it bounds every JSON value it is
given: depth, finiteness, the schema's scalar types) and the field types and checks several resources use. Each
other module is one resource's bodies: `keys` (and a key's `Quotas`), `problems`, `attempts`, `batches`, `jobs`,
`executions`, `languages`, `judges`, `reports`, `metrics`, `similarity`, `perturbations`, `benchmarks`. Routes
import from this package; the names below are its surface."""

from gateway.schemas.attempts import AttemptAccepted, AttemptIn, AttemptOut, AttemptPage, LabelIn, TestResultOut
from gateway.schemas.batches import BatchAccepted, BatchIn
from gateway.schemas.benchmarks import MAX_SEED_BYTES, SynthesizeIn
from gateway.schemas.common import (
    FROM_QUERY_STRING,
    INT32_MAX,
    INT64_MAX,
    MAX_JSON_DEPTH,
    BoundedDatetime,
    RequestBody,
    Seed,
    SourceCode,
    check_source_size,
    fail_at,
    json_problem,
    python_identifier,
    within_limit,
)
from gateway.schemas.executions import ExecutionIn
from gateway.schemas.jobs import JobOut, JobPage
from gateway.schemas.judges import JudgmentsIn
from gateway.schemas.keys import KeyCreate, KeyCreated, KeyInfo, Quotas
from gateway.schemas.languages import LanguageOut
from gateway.schemas.metrics import MetricsIn
from gateway.schemas.perturbations import PerturbationsIn
from gateway.schemas.problems import ProblemIn, ProblemOut, ProblemPage, ReferenceIn
from gateway.schemas.reports import ReportIn, ReportPage, ReportSummary
from gateway.schemas.similarity import (
    MAX_PAIRS_PER_DATASET,
    DatasetIn,
    FuzzingParams,
    MetricParams,
    PairIn,
    ProgramIn,
    RecordIn,
    Thresholds,
)

__all__ = [
    "FROM_QUERY_STRING",
    "INT32_MAX",
    "INT64_MAX",
    "MAX_JSON_DEPTH",
    "MAX_PAIRS_PER_DATASET",
    "MAX_SEED_BYTES",
    "AttemptAccepted",
    "AttemptIn",
    "AttemptOut",
    "AttemptPage",
    "BatchAccepted",
    "BatchIn",
    "BoundedDatetime",
    "DatasetIn",
    "ExecutionIn",
    "FuzzingParams",
    "JobOut",
    "JobPage",
    "JudgmentsIn",
    "KeyCreate",
    "KeyCreated",
    "KeyInfo",
    "LabelIn",
    "LanguageOut",
    "MetricParams",
    "MetricsIn",
    "PairIn",
    "PerturbationsIn",
    "ProblemIn",
    "ProblemOut",
    "ProblemPage",
    "ProgramIn",
    "Quotas",
    "RecordIn",
    "ReferenceIn",
    "ReportIn",
    "ReportPage",
    "ReportSummary",
    "RequestBody",
    "Seed",
    "SourceCode",
    "SynthesizeIn",
    "TestResultOut",
    "Thresholds",
    "check_source_size",
    "fail_at",
    "json_problem",
    "python_identifier",
    "within_limit",
]
