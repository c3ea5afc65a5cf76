"""Job plans: what a job of each kind was asked to do, one pydantic model per `JobKind`, defined once.

A route builds the plan from its request and stores it (`jobs.create_job(plan=...)`, the job's `params` column:
`plan.model_dump(mode="json")`); a worker, the reconciler's pending queries and the cancel read it back with
`Job.plan()`. Nothing else reads `Job.params` (tests/services/kernel/test_plans.py checks it).

The stored JSON is the contract with rows already in databases: every field is named as the key the earlier,
dict-built plans wrote, and every default is the value their readers assumed for a missing key. A row may carry
keys no field names (a later minor version): they are ignored, as the contracts' models do. A dump holds every
field, so a row written now may hold a key an older row lacks, always with the value that older row meant.
"""

from __future__ import annotations

from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field

from services.kernel.contracts import Checker, Condition, JobKind, Language, Limits, Mode, TestCase, TimeoutRule

# AXIOM's defaults (paper 000 IV-A): M = 2 programs per target score per requirement, m = 90 representatives per
# target score; a slot draws at most 4 times before it is given up.
PAPER_M = 2
PAPER_SELECT_M = 90
DEFAULT_MAX_DRAWS = 4
# Algorithm 1's repetitions (LoCaL 3.3.2; services/lib/fuzzing DEFAULT_REPEATS) and Algorithm 2's protocols
# (metrics/reports/similarity.py `Protocol`, which the metrics library keeps as its own: it imports nothing here).
DEFAULT_FUZZ_REPEATS = 5
SimilarityProtocol = Literal["pseudocode", "local_rq3"]


class Plan(BaseModel):
    """The base of every plan: frozen, unknown keys ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class OwnedPlan(Plan):
    """A plan of a job that grows while it runs: the key that created it, whose quotas bound its growth
    (services/kernel/ratelimit.py `job_owner_quotas`). None: a job made before keys were recorded."""

    owner_key_id: str | None = None


class JudgingPlan(Plan):
    """A plan whose job judges its attempts itself (`attempt@job` subjects: the judge worker reads these three)."""

    judges: list[str] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=lambda: [Condition.BLIND])
    repeats: int = 1


class AttemptsPlan(Plan):
    """`execute_attempt` (one submission) and `execute_batch`: the attempts the job tracks."""

    attempt_ids: list[str] = Field(default_factory=list)


class DirectExecutionPlan(Plan):
    """`execute_direct` (POST /v1/executions): a program given inline, run on stdin or on tests."""

    language: Language
    source_code: str
    stdin: str | None = None
    tests: list[TestCase] | None = None
    mode: Mode = Mode.STDIO
    entry_point: str | None = None
    checker: Checker = Field(default_factory=Checker)
    limits: Limits = Field(default_factory=Limits)
    # A problem's reference run against its own tests (gateway/validation.py): hidden tests among them, so the job's
    # result keeps each test's verdict and times only, never what the program printed (its expected output).
    validation: bool = False


class JudgePlan(JudgingPlan):
    """`judge` (POST /v1/judgments): judge these attempts again under these judges, conditions and repeats."""

    attempt_ids: list[str]
    judges: list[str]
    conditions: list[Condition]
    repeats: int


class ReportPlan(Plan):
    """`report` (POST /v1/reports): the report row the job builds (its own parameters are the report's)."""

    report_id: str


class PerturbPlan(OwnedPlan, JudgingPlan):
    """`perturb` (POST /v1/perturbations): the seeds and how their mutants are made; with `confirm`, the similarity
    job that fuzzes every mutant against its seed (one pair per mutant). Judged, the seeds are judged too."""

    attempt_ids: list[str]
    operators: list[str] | None = None
    seed: int = 0
    all_sites: bool = False
    confirm_job_id: str | None = None


class SynthesisRequirement(Plan):
    """A requirement of a synthesis job: a problem (its statement is the requirement) and its 5-point seeds."""

    problem_id: str
    problem_pk: int
    seed_ids: list[str]


class SynthesisSlot(Plan):
    """One program to synthesise (`r<requirement>:t<target>:<index>`, services/kernel/subjects.py) and the slots it
    waits for: a requirement's deteriorative slots wait for its exemplar slots (III-B2 before III-B3)."""

    slot: str
    after: list[str] = Field(default_factory=list)


class SynthesisPlan(OwnedPlan, JudgingPlan):
    """`synthesize` (POST /v1/benchmarks:synthesize): AXIOM's requirements, targets and slots. The job's state is in
    its job_unit rows (services/kernel/pending.py `synthesis_work`)."""

    requirements: list[SynthesisRequirement]
    seed_ids: list[str]
    targets: list[int]
    m: int = PAPER_M
    select: int = PAPER_SELECT_M
    max_draws: int = DEFAULT_MAX_DRAWS
    seed: int = 0
    llms: list[str]
    slots: list[SynthesisSlot]


class SimilarityPlan(Plan):
    """`similarity` (POST /v1/similarity, /v1/similarity/datasets, and a perturbation job's confirmation): how
    Algorithm 1 fuzzes each pair, CrystalBLEU's ignored n-grams per language, and, for a dataset, Algorithm 2's
    thresholds or protocol. `n_inputs` None: the mode's default (services/lib/fuzzing). A confirmation names its
    perturbation job."""

    n_inputs: int | None = None
    repeats: int = DEFAULT_FUZZ_REPEATS
    time_budget_s: float = 60.0
    per_input_timeout_s: float = 2.0
    float_tolerance: float | None = None
    seed: int = 0
    timeout_rule: TimeoutRule = "paper"
    single: bool = False
    crystal_k: int = 0
    crystal_ignore: dict[str, list[list[str]]] = Field(default_factory=dict)
    thresholds: dict[str, float] | None = None
    protocol: SimilarityProtocol = "local_rq3"
    perturbation_job_id: str | None = None


class CalibrationPlan(Plan):
    """`calibrate` (POST /v1/calibrations, and the periodic refit): learn a calibration map of one judge x condition
    from the tenant's labelled items (metrics/recalibration.py). A refit names the calibration it refits."""

    judge: str
    condition: Condition
    method: Literal["isotonic", "platt"] = "isotonic"
    cluster: Literal["problem", "trajectory"] = "trajectory"
    bootstrap: int = 2000
    seed: int = 0
    folds: int = 10
    refit_of: str | None = None


PLANS: dict[JobKind, type[Plan]] = {
    JobKind.EXECUTE_ATTEMPT: AttemptsPlan,
    JobKind.EXECUTE_BATCH: AttemptsPlan,
    JobKind.EXECUTE_DIRECT: DirectExecutionPlan,
    JobKind.JUDGE: JudgePlan,
    JobKind.REPORT: ReportPlan,
    JobKind.PERTURB: PerturbPlan,
    JobKind.SYNTHESIZE: SynthesisPlan,
    JobKind.SIMILARITY: SimilarityPlan,
    JobKind.CALIBRATE: CalibrationPlan,
}


def _check_complete() -> None:
    """Every job kind has its plan; checked on import."""
    if set(PLANS) != set(JobKind):
        raise RuntimeError("every JobKind must have a plan model in PLANS")


_check_complete()


@overload
def parse_plan(kind: str, params: dict[str, Any] | None) -> Plan: ...
@overload
def parse_plan[P: Plan](kind: str, params: dict[str, Any] | None, expected: type[P]) -> P: ...
def parse_plan(kind: str, params: dict[str, Any] | None, expected: type[Plan] = Plan) -> Plan:
    """The plan of a job of `kind` stored as `params`, as an `expected` (a plan model or one of their bases).
    Raises ValueError for an unknown kind, pydantic's ValidationError for a row that is no plan of its kind, and
    TypeError when the kind's plan is not an `expected`."""
    model = PLANS[JobKind(kind)]
    if not issubclass(model, expected):
        raise TypeError(f"a {kind} job's plan is a {model.__name__}, not a {expected.__name__}")
    return model.model_validate(params or {})


def stored(plan: Plan) -> dict[str, Any]:
    """What the job's `params` column holds of `plan`."""
    return plan.model_dump(mode="json")
