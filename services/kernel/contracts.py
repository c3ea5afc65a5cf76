"""The contracts between services, defined once: every enumerated value and every shape that crosses a queue,
the database or the API. The gateway's request schemas, every worker and the metrics library read these; no
other module lists these values.

Enums are `StrEnum`s, so a member *is* its string: it compares equal to, serialises as, and is stored as its
value; the database columns stay plain strings.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

# A problem keeps at most this many reference solutions (an APPS record's first ones), and the first
# VALIDATED_REFERENCES of them run against its tests when it is created (gateway/validation.py): one job each.
MAX_REFERENCES = 64
VALIDATED_REFERENCES = 3


class Language(StrEnum):
    """The languages a deployment can run (api.md). The executor owns how each one compiles and runs."""

    PYTHON = "python"
    C = "c"
    CPP = "cpp"
    JAVA = "java"

    @property
    def display_name(self) -> str:
        """The name GET /v1/languages shows."""
        return _LANGUAGE_TITLES[self]


_LANGUAGE_TITLES = {
    Language.PYTHON: "Python 3",
    Language.C: "C (gcc, C17)",
    Language.CPP: "C++ (g++, C++17)",
    Language.JAVA: "Java 17",
}


class Mode(StrEnum):
    """How a problem's tests talk to the program: stdin/stdout text, or calls of one Python function."""

    STDIO = "stdio"
    FUNCTION = "function"


class Verdict(StrEnum):
    """The outcome of one test, and of a whole execution (its first non-AC test, or AC)."""

    AC = "AC"  # accepted
    WA = "WA"  # wrong answer
    TLE = "TLE"  # time limit exceeded (CPU or wall)
    MLE = "MLE"  # memory limit exceeded
    OLE = "OLE"  # output limit exceeded
    RE = "RE"  # runtime error
    CE = "CE"  # compile error (whole execution only)
    IE = "IE"  # internal error: the platform or a broken test, never the candidate


class AttemptStatus(StrEnum):
    """An attempt is `queued` until a stage claims it, `running` while any stage of its pipeline is left, then
    `done` (every stage finished, whatever the verdict), `failed` (a stage's task gave up after its last try) or
    `cancelled` (its job was cancelled before its pipeline ended: a stage running then was stopped, its jail
    killed, and nothing it was doing is reported as a verdict; what an earlier stage did, e.g. its execution,
    is kept)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Stage(StrEnum):
    """A step of an attempt's pipeline, run by one service. Which stages an attempt goes through is data: its
    `pipeline` column, chosen when it is created (services/kernel/attempts.py)."""

    EXECUTE = "execute"  # compile and run the tests (executor)
    VERIFY = "verify"  # a mutant's execution checked against its arm; a mutant that does not compile ends here
    JUDGE = "judge"  # every judge x condition x repeat it is due (judge)


LIVE_ATTEMPT_STATUSES = frozenset({AttemptStatus.QUEUED, AttemptStatus.RUNNING})
FINAL_ATTEMPT_STATUSES = frozenset({AttemptStatus.DONE, AttemptStatus.FAILED, AttemptStatus.CANCELLED})


class JobStatus(StrEnum):
    """Long work: queued -> running -> succeeded | failed | cancelled."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


LIVE_JOB_STATUSES = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})
TERMINAL_JOB_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


class PairStatus(StrEnum):
    """A similarity pair is `queued` until scored (also while its try runs), then `scored`, `failed` (it could not
    be scored: the reason is its `error`) or `cancelled` (its job was cancelled first; a try running then was
    stopped, its jails killed)."""

    QUEUED = "queued"
    SCORED = "scored"
    FAILED = "failed"
    CANCELLED = "cancelled"


class JobKind(StrEnum):
    """What a job tracks."""

    EXECUTE_ATTEMPT = "execute_attempt"
    EXECUTE_BATCH = "execute_batch"
    EXECUTE_DIRECT = "execute_direct"
    JUDGE = "judge"
    REPORT = "report"
    PERTURB = "perturb"
    SYNTHESIZE = "synthesize"
    SIMILARITY = "similarity"
    CALIBRATE = "calibrate"


# Which timed-out repetitions of differential fuzzing are excluded (services/lib/fuzzing/score.py): "paper", any
# (Algorithm 1); "strict", only those the reference ran out of time on.
TimeoutRule = Literal["paper", "strict"]


class Condition(StrEnum):
    """What a judge sees besides the code (co-creation paper, VI-A3)."""

    BLIND = "blind"
    PREFIX12K = "prefix12k"
    NONBLIND = "nonblind"


class Arm(StrEnum):
    """A mutant's arm (paper 001, V-D): a defect injected, or a behaviour-preserving control edit."""

    SEMANTIC = "semantic"
    CONTROL = "control"


class JudgmentStatus(StrEnum):
    """A judgment row is `ok` with a score, `failed` with a reason (the judge could not score it: a re-judge may),
    or `not_applicable` with a reason (the judge does not apply to the attempt: no reference solution, no public
    tests, no linter for its language; final, never retried). Failure and non-applicability are states, not
    scores; only `ok` rows are scored by the metrics."""

    OK = "ok"
    FAILED = "failed"
    NOT_APPLICABLE = "not_applicable"


# The statuses that end a judgment unit: the worker never sends it again (a re-judge job's "retry" redoes the rest).
FINAL_JUDGMENT_STATUSES: frozenset[str] = frozenset({JudgmentStatus.OK, JudgmentStatus.NOT_APPLICABLE})


class Rubric(StrEnum):
    """The built-in rubrics' names: the JSON answer an LLM judge is asked for, each a definition shipped in
    judge/rubrics/<name>.toml. A judges file may define more (services/kernel/rubrics.py); a judge's `rubric` is
    one of these or one of those."""

    COCREATION = "cocreation"
    REFINEMENT_EFFORT = "refinement_effort"
    FAULT_REPORT = "fault_report"
    ACCEPT_REJECT = "accept_reject"


class OfflineMethod(StrEnum):
    """The judges that need no network."""

    SAMPLE_TESTS = "sample_tests"
    CHRF = "chrf"
    CODEBLEU = "codebleu"
    EDIT_SIMILARITY = "edit_similarity"
    LINT = "lint"


class CheckerKind(StrEnum):
    """How stdout is compared with the expected output (executor/checkers.py)."""

    EXACT = "exact"
    LINES = "lines"
    TOKENS = "tokens"
    FLOAT = "float"


class _Contract(BaseModel):
    # Unknown fields are ignored, so that a client (or a row) written against a later minor version still reads.
    model_config = ConfigDict(extra="ignore", frozen=True)


class Limits(_Contract):
    """Per-test resource limits. `processes` counts threads too (a pids cgroup)."""

    cpu_time_s: float = Field(default=2, gt=0, le=60)
    wall_time_s: float = Field(default=5, gt=0, le=120)
    memory_mb: int = Field(default=256, ge=16, le=4096)
    output_kb: int = Field(default=1024, ge=1, le=65536)
    processes: int = Field(default=32, ge=1, le=512)


class Checker(_Contract):
    """How output is compared with the expected output; the tolerances also apply to floats in function-mode
    return values."""

    kind: CheckerKind = CheckerKind.TOKENS
    abs_tol: float = Field(default=1e-6, ge=0)
    rel_tol: float = Field(default=1e-6, ge=0)


class TestCase(_Contract):
    """One test of a problem.

    stdio mode: `input` is stdin text; `expected` the expected stdout (None: no check, the exit decides).
    function mode: either `input` = positional arguments and `expected` = the return value (JSON-equal, floats
    within the checker's tolerance; None means the function must return None), or `code` = test code defining
    `check(candidate)` that asserts (HumanEval/MBPP style).
    """

    __test__ = False  # not a pytest test class

    input: str | list[Any] | None = None
    expected: Any = None
    code: str | None = Field(default=None, max_length=1_000_000)
    public: bool = False


class TestResult(_Contract):
    """One test's outcome as stored. `cpu_time_ms` is the CPU time (user + system) of every process of the run,
    which is what the CPU limit bounds; where a test was stopped by a clock it is the CPU time spent until then.
    `wall_time_ms` is the elapsed time. (Rows written before the two were told apart have `time_ms`, CPU.)

    How the load of the machine entered (docs/sandbox.md, "Clocks under load"): `wait_time_ms` is how long the run
    waited for a CPU that another process held, `stopped_by` the clock that stopped it (`cpu`, `wall`: its own
    time, elapsed less waiting, reached the wall limit; `starved`: the load held it; null: it ended by itself or
    by a memory or output limit). A run the load held is not judged: it is run again, `runs` times in all, each
    earlier run's reason in `rerun_reasons`; if the last is still not judged the status is IE with
    `retryable: true`."""

    __test__ = False  # not a pytest test class

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    index: int
    status: Verdict
    cpu_time_ms: int = Field(default=0, validation_alias=AliasChoices("cpu_time_ms", "time_ms"))
    wall_time_ms: int = 0
    memory_kb: int = 0
    public: bool
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    message: str = ""
    wait_time_ms: int = 0
    stopped_by: Literal["cpu", "wall", "starved"] | None = None
    runs: int = 1
    rerun_reasons: list[str] = Field(default_factory=list)
    retryable: bool = False


class ExecutionResult(_Contract):
    """A whole execution: the verdict, how many tests passed, the compiler's (jail-side) output, per-test
    results, and the toolchain that ran it."""

    verdict: Verdict
    passed: int
    total: int
    compile_output: str = ""
    tests: list[TestResult] = Field(default_factory=list)
    toolchain: str = ""
    build_cached: bool = False


class JudgmentOutput(_Contract):
    """Everything one judgment row records of what one judge said of one attempt under one condition and repeat:
    `ok` with the validated fields of its rubric and the numbers the metrics read (`p_ac`, the probability of
    acceptance; `score`, the rubric's scalar), or `failed` or `not_applicable` with a reason. Neither is a score.
    `from_cache` says the reply came from the response cache (not stored)."""

    status: JudgmentStatus
    fields: dict[str, Any] | None = None
    p_ac: float | None = None
    score: float | None = None
    raw_response: str | None = None
    requested_model: str | None = None
    served_model: str | None = None
    tries: int = 0
    latency_ms: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    request_hash: str | None = None
    error: str | None = None
    # From the endpoint's token probabilities at the headline value's position (judge/rubrics, G-Eval's weighting):
    # `weighted_p_ac` the probability mass of acceptance, `weighted_score` the expected score, `score_probs` the
    # probability of each allowed value, `weighting` the method. None where the endpoint gave no logprobs.
    weighted_p_ac: float | None = None
    weighted_score: float | None = None
    score_probs: dict[str, float] | None = None
    weighting: str | None = None
    from_cache: bool = Field(default=False, exclude=True)
