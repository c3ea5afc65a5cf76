"""AXIOM's hybrid score calibration support (paper 000, III-C2): the multisource report an annotator reads before
recording a program's final score, as data. The rule for what final score a program may get (`allowed_scores`,
`check_calibration`) and the body that records it (`CalibratedScore`) are in `services/lib/mutation/axiom_records.py`,
where the gateway can use them; they are re-exported here.

The report has the paper's five sources:
- the diff between the program and its 5-point pre-perturbation parent (difflib's unified diff);
- the sequence of perturbation rules (id, category, ceiling, instruction);
- a static analysis report: a typed slot. The linters (pylint, cppcheck) run in nsjail inside the judge service
  (judge/offline/), which this service may not import; `StaticAnalysis.from_lint_fields` reads the fields the
  offline `lint` judge stores on its judgment row, so a caller that has judged the program with it fills the
  slot from the database, and otherwise leaves it `not_run` with the reason;
- the full execution and test report, from the stored execution (`ExecutionResult` or its row's JSON);
- an LLM-generated code quality report (an LLM `Runner`, strict schema).

Functions take their inputs (no database, no queue); `build_calibration_report` is async only for the LLM call.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.kernel.contracts import ExecutionResult
from services.lib.llm import Failure, LLMRequest, Message, ReplySchema, Runner

# The calibration bands and body live in the pure library, where the gateway can check a recorded score too.
from services.lib.mutation.axiom_records import CalibratedScore, allowed_scores, check_calibration  # noqa: F401
from services.lib.mutation.axiom_rules import CEILING_MEANING, Rule

CALIBRATION_PROMPT_VERSION = "axiom-quality-1"
MAX_TEST_TEXT = 2000  # characters of a test's stdout/stderr/message kept in the report
MAX_COMPILE_OUTPUT = 8000
STATIC_ANALYSIS_NOT_WIRED = (
    "static analysis runs in the judge service (pylint/cppcheck in nsjail), which the perturbation service may not "
    "import; judge the program with the offline `lint` judge and pass its judgment fields to fill this slot"
)

# III-A's scale, which the annotator and the quality LLM both read.
SCALE: dict[int, str] = {
    5: "Production-ready; no effort needed.",
    4: "Perfect in functionality; requires minor tweaking to enhance code quality.",
    3: "Perfect in functionality; requires major refactoring to enhance code quality.",
    2: "Requires minor tweaking to repair functionality.",
    1: "Requires major refactoring to repair functionality.",
    0: "Fundamentally flawed; rewriting is more efficient.",
}


class Diff(BaseModel):
    """The unified diff from the parent to the program, and its size in lines."""

    unified: str
    added: int
    removed: int


def unified_diff(parent_code: str, code: str, *, context: int = 3, language: str = "") -> Diff:
    """difflib's unified diff from the 5-point parent to the program (III-C2's first source)."""
    suffix = f".{language}" if language else ""
    lines = list(
        difflib.unified_diff(
            parent_code.splitlines(keepends=True),
            code.splitlines(keepends=True),
            fromfile=f"parent{suffix}",
            tofile=f"program{suffix}",
            n=context,
        )
    )
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return Diff(unified=text, added=added, removed=removed)


class RuleView(BaseModel):
    id: str
    category: str
    ceiling: int
    instruction: str
    meaning: str


def rule_views(rules: Sequence[Rule]) -> list[RuleView]:
    """The rule sequence as the report shows it (III-C2's second source)."""
    return [
        RuleView(
            id=rule.id,
            category=rule.category.value,
            ceiling=rule.ceiling,
            instruction=rule.instruction,
            meaning=CEILING_MEANING[rule.ceiling],
        )
        for rule in rules
    ]


class StaticFinding(BaseModel):
    symbol: str
    type: str
    line: int | None = None


class StaticAnalysis(BaseModel):
    """III-C2's static analysis report: `ok` with a tool's findings, or `not_run` with the reason."""

    status: Literal["ok", "not_run"]
    tool: str | None = None
    summary: str | None = None
    findings: list[StaticFinding] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    reason: str | None = None

    @classmethod
    def not_run(cls, reason: str = STATIC_ANALYSIS_NOT_WIRED) -> StaticAnalysis:
        return cls(status="not_run", reason=reason)

    @classmethod
    def from_lint_fields(cls, fields: Mapping[str, Any]) -> StaticAnalysis:
        """From the `fields` the offline `lint` judge stores on its judgment (judge/offline/): `tool`,
        `rationale`, `messages` [{symbol, type, line}] and `message_counts` (pylint), or the cppcheck ones."""
        findings = []
        for message in fields.get("messages") or []:
            if isinstance(message, Mapping) and isinstance(message.get("symbol"), str):
                line = message.get("line")
                findings.append(
                    StaticFinding(
                        symbol=message["symbol"],
                        type=str(message.get("type") or message.get("severity") or ""),
                        line=line if isinstance(line, int) else None,
                    )
                )
        raw_counts = fields.get("message_counts") or fields.get("counts") or {}
        counts = (
            {str(k): int(v) for k, v in raw_counts.items() if isinstance(v, int)}
            if isinstance(raw_counts, Mapping)
            else {}
        )
        return cls(
            status="ok",
            tool=str(fields.get("tool") or "lint"),
            summary=str(fields.get("rationale") or ""),
            findings=findings,
            counts=counts,
        )


class ExecutionLine(BaseModel):
    """One test's outcome in the report."""

    index: int
    status: str
    public: bool
    cpu_time_ms: int
    memory_kb: int
    exit_code: int | None
    message: str
    stdout: str
    stderr: str


class ExecutionReport(BaseModel):
    """III-C2's execution and test report, from the program's stored execution."""

    verdict: str
    passed: int
    total: int
    compile_output: str
    toolchain: str
    tests: list[ExecutionLine]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... [{len(text) - limit} more characters]"


def execution_report(execution: ExecutionResult | Mapping[str, Any]) -> ExecutionReport:
    """The test report of a stored execution (an `ExecutionResult`, or an execution row's columns as a dict).

    A hidden test (`public` false) is ground truth: its status, time and memory are shown, never its stdout,
    stderr, exit code or message, which could quote its input or expected output (as the attempt view does)."""
    result = execution if isinstance(execution, ExecutionResult) else ExecutionResult.model_validate(dict(execution))
    return ExecutionReport(
        verdict=result.verdict,
        passed=result.passed,
        total=result.total,
        compile_output=_clip(result.compile_output, MAX_COMPILE_OUTPUT),
        toolchain=result.toolchain,
        tests=[
            ExecutionLine(
                index=test.index,
                status=test.status,
                public=test.public,
                cpu_time_ms=test.cpu_time_ms,
                memory_kb=test.memory_kb,
                exit_code=test.exit_code if test.public else None,
                message=_clip(test.message, MAX_TEST_TEXT) if test.public else "",
                stdout=_clip(test.stdout, MAX_TEST_TEXT) if test.public else "",
                stderr=_clip(test.stderr, MAX_TEST_TEXT) if test.public else "",
            )
            for test in result.tests
        ],
    )


class QualityIssue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    location: str = Field(description="Where: a function name, line or construct.")
    description: str
    scope: Literal["localized", "structural"] = Field(
        description="localized: a minor tweak fixes it; structural: fixing it needs a major refactoring."
    )
    concerns: Literal["functionality", "code_quality"]


class QualityReport(BaseModel):
    """The LLM's code quality report (III-C2's fifth source): observations, no score (the annotator decides)."""

    model_config = ConfigDict(extra="forbid")

    summary: str
    issues: list[QualityIssue]


QUALITY_SCHEMA = ReplySchema.from_model("axiom_quality_report", QualityReport)


class LLMQuality(BaseModel):
    status: Literal["ok", "failed", "not_run"]
    report: QualityReport | None = None
    model: str | None = None
    failure: str | None = None


def quality_messages(requirement: str, code: str, language: str, diff: Diff | None) -> list[Message]:
    """The request for a code quality report of a program (with its diff to the parent, if any)."""
    scale = "\n".join(f"- {score}/5: {text}" for score, text in sorted(SCALE.items(), reverse=True))
    diff_block = f"\n\nDiff from its production-ready parent:\n```diff\n{diff.unified}```" if diff else ""
    user = (
        f"Requirement:\n<<<\n{requirement.strip()}\n>>>\n\nProgram ({language}):\n```{language}\n{code.rstrip()}\n```"
        f"{diff_block}\n\nReview the program's code quality (readability, maintainability, design) and any "
        "functional problems you see. List each issue with where it is, what it is, whether fixing it is a "
        "localized tweak or a structural refactoring, and whether it concerns functionality or code quality. "
        "Do not give a score."
    )
    system = (
        "You are a senior code reviewer preparing notes for a human annotator, who will score the program on this "
        f"scale of refinement effort:\n{scale}\nA minor tweak is a localized change that keeps the control flow and "
        "algorithmic structure; a major refactoring alters the control flow or logical structure. Answer with one "
        "JSON object that matches the given schema, and nothing else."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


async def llm_quality_report(
    runner: Runner | None, requirement: str, code: str, language: str, diff: Diff | None = None
) -> LLMQuality:
    """Ask `runner` for the quality report; `not_run` without a runner, `failed` with the reason on failure."""
    if runner is None:
        return LLMQuality(status="not_run", failure="no LLM endpoint configured for quality reports")
    result = await runner.run(
        LLMRequest(quality_messages(requirement, code, language, diff), QUALITY_SCHEMA, (CALIBRATION_PROMPT_VERSION,))
    )
    if isinstance(result, Failure):
        return LLMQuality(status="failed", model=result.requested_model, failure=result.reason)
    return LLMQuality(
        status="ok",
        report=QualityReport.model_validate(result.fields),
        model=result.served_model or result.requested_model,
    )


def guidance(target_score: int) -> str:
    """III-C2's protocol for the annotator, for a program of this target score."""
    if target_score == 0:
        return "A context-disruption pair: its score of 0 is absolute and is not calibrated (III-B4)."
    if target_score in (1, 2):
        return (
            "The program fails at least one test. Decide from the diff whether the functional change needs a "
            "structural refactor to repair (score 1) or a localized tweak (score 2)."
        )
    return (
        "The program passes every test. First decide whether its code quality is perfect (score 5); if not, judge "
        "the scope of the changes needed: a localized tweak (score 4) or a major refactoring (score 3)."
    )


class CalibrationReport(BaseModel):
    """Everything III-C2 puts in front of the annotator for one program."""

    program_id: str
    parent_id: str | None
    language: str
    target_score: int = Field(ge=0, le=5)
    allowed_scores: list[int]
    guidance: str
    diff: Diff | None
    rules: list[RuleView]
    static_analysis: StaticAnalysis
    tests: ExecutionReport | None
    llm_quality: LLMQuality
    calibrated_score: int | None = Field(default=None, ge=0, le=5)


async def build_calibration_report(
    *,
    program_id: str,
    requirement: str,
    code: str,
    language: str,
    target_score: int,
    parent_id: str | None,
    parent_code: str | None,
    rules: Sequence[Rule],
    execution: ExecutionResult | Mapping[str, Any] | None,
    runner: Runner | None = None,
    static_analysis: StaticAnalysis | None = None,
    calibrated_score: int | None = None,
) -> CalibrationReport:
    """The multisource report of III-C2 for one program. `parent_code` is its 5-point parent's (None for a
    reference program); `execution` its stored execution; `static_analysis` the lint judge's result if the
    caller has it (else the slot says why it is empty)."""
    diff = unified_diff(parent_code, code, language=language) if parent_code is not None else None
    return CalibrationReport(
        program_id=program_id,
        parent_id=parent_id,
        language=language,
        target_score=target_score,
        allowed_scores=list(allowed_scores(target_score)),
        guidance=guidance(target_score),
        diff=diff,
        rules=rule_views(rules),
        static_analysis=static_analysis if static_analysis is not None else StaticAnalysis.not_run(),
        tests=execution_report(execution) if execution is not None else None,
        llm_quality=await llm_quality_report(runner, requirement, code, language, diff),
        calibrated_score=calibrated_score,
    )
