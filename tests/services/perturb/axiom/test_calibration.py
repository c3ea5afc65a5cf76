"""III-C2's multisource calibration report (diff, rules, static analysis slot, test report, LLM quality report) and
the rule for which final scores calibration may record."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from services.kernel.contracts import ExecutionResult, TestResult, Verdict
from services.lib.llm import Endpoint, Runner
from services.lib.mutation.axiom_rules import load_rules
from services.perturb.axiom.calibration import (
    CalibratedScore,
    StaticAnalysis,
    allowed_scores,
    build_calibration_report,
    check_calibration,
    execution_report,
    unified_diff,
)
from tests.fake_llm import Behaviour, ScriptedLLM

PARENT = "def total(xs):\n    result = 0\n    for x in xs:\n        result += x\n    return result\n"
CHILD = "def total(xs):\n    result = 0\n    for x in xs[1:]:\n        result += x\n    return result\n"
EXECUTION = ExecutionResult(
    verdict=Verdict.WA,
    passed=2,
    total=3,
    tests=[
        TestResult(index=0, status=Verdict.AC, public=True, cpu_time_ms=3),
        TestResult(index=1, status=Verdict.AC, public=False),
        TestResult(index=2, status=Verdict.WA, public=False, stdout="5\n", message="expected 6, got 5"),
    ],
    toolchain="python 3.11",
)
QUALITY = {
    "summary": "Skips the first element; otherwise clean.",
    "issues": [
        {
            "location": "for loop",
            "description": "The slice xs[1:] drops the first element.",
            "scope": "localized",
            "concerns": "functionality",
        }
    ],
}


def _runner(server: ScriptedLLM) -> Runner:
    endpoint = Endpoint(name="quality", base_url=server.base_url, model="reviewer", max_tries=2, timeout_s=5)
    return Runner(endpoint, backoff_multiplier=0.01, backoff_max=0.05)


def test_the_diff_to_the_parent_is_a_unified_diff_with_its_size() -> None:
    diff = unified_diff(PARENT, CHILD, language="python")
    assert diff.unified.startswith("--- parent.python\n+++ program.python\n")
    assert "-    for x in xs:\n+    for x in xs[1:]:\n" in diff.unified
    assert (diff.added, diff.removed) == (1, 1)
    assert unified_diff(PARENT, PARENT).unified == ""
    assert "No newline at end of file" in unified_diff("a\n", "b").unified


def test_the_test_report_comes_from_the_stored_execution_as_model_or_row() -> None:
    report = execution_report(EXECUTION)
    assert (report.verdict, report.passed, report.total) == ("WA", 2, 3)
    # A hidden test's verdict is shown, never what it printed or its message (they quote the expected output).
    assert (report.tests[2].status, report.tests[2].message, report.tests[2].stdout) == ("WA", "", "")
    public = ExecutionResult(
        verdict=Verdict.WA,
        passed=0,
        total=1,
        tests=[TestResult(index=0, status=Verdict.WA, public=True, stdout="5\n", message="expected 6, got 5")],
    )
    assert (execution_report(public).tests[0].message, execution_report(public).tests[0].stdout) == (
        "expected 6, got 5",
        "5\n",
    )
    row = {
        "verdict": "AC",
        "passed": 1,
        "total": 1,
        "compile_output": "",
        "toolchain": "g++",
        "tests": [{"index": 0, "status": "AC", "public": True, "time_ms": 4}],
    }
    assert execution_report(row).tests[0].cpu_time_ms == 4  # rows written before cpu/wall were told apart


def test_the_static_analysis_slot_is_empty_with_its_reason_or_filled_from_the_lint_judges_fields() -> None:
    empty = StaticAnalysis.not_run()
    assert empty.status == "not_run" and "judge" in (empty.reason or "")
    fields: dict[str, Any] = {
        "raw": 0.8,
        "score": 4,
        "rationale": "pylint 8.00/10 (1 convention)",
        "tool": "pylint",
        "message_counts": {"convention": 1},
        "messages": [{"symbol": "missing-function-docstring", "type": "convention", "line": 1}],
    }
    filled = StaticAnalysis.from_lint_fields(fields)
    assert filled.status == "ok" and filled.tool == "pylint" and filled.counts == {"convention": 1}
    assert filled.findings[0].symbol == "missing-function-docstring" and filled.findings[0].line == 1


async def test_the_report_holds_all_five_sources(server: ScriptedLLM) -> None:
    server.script = lambda _request, _nth: Behaviour(payload=QUALITY)
    runner = _runner(server)
    try:
        report = await build_calibration_report(
            program_id="att_2",
            requirement="Return the sum of a list.",
            code=CHILD,
            language="python",
            target_score=2,
            parent_id="att_1",
            parent_code=PARENT,
            rules=[load_rules().get("bug-off-by-one")],
            execution=EXECUTION,
            runner=runner,
        )
    finally:
        await runner.close()
    assert report.diff is not None and report.diff.added == 1
    assert [rule.id for rule in report.rules] == ["bug-off-by-one"] and report.rules[0].ceiling == 2
    assert report.static_analysis.status == "not_run"
    assert report.tests is not None and report.tests.verdict == "WA"
    assert report.llm_quality.status == "ok" and report.llm_quality.report is not None
    assert report.llm_quality.report.issues[0].scope == "localized"
    assert report.allowed_scores == [1, 2] and "localized tweak (score 2)" in report.guidance
    request = server.requests[0].json
    assert request["response_format"]["json_schema"]["name"] == "axiom_quality_report"
    assert "xs[1:]" in request["messages"][-1]["content"]  # the program and its diff are shown
    report.model_dump_json()


async def test_a_failed_or_missing_quality_llm_leaves_the_rest_of_the_report(server: ScriptedLLM) -> None:
    server.script = lambda _request, _nth: Behaviour(kind="status", status=500)
    runner = _runner(server)
    arguments: dict[str, Any] = {
        "program_id": "att_3",
        "requirement": "r",
        "code": PARENT,
        "language": "python",
        "target_score": 5,
        "parent_id": None,
        "parent_code": None,
        "rules": [],
        "execution": None,
    }
    try:
        failed = await build_calibration_report(**arguments, runner=runner)
    finally:
        await runner.close()
    assert failed.llm_quality.status == "failed" and failed.llm_quality.failure == "http 500"
    assert failed.diff is None and failed.tests is None
    missing = await build_calibration_report(**arguments)
    assert missing.llm_quality.status == "not_run"


def test_calibration_moves_a_score_only_within_its_functional_band() -> None:
    assert allowed_scores(0) == (0,)
    assert allowed_scores(1) == allowed_scores(2) == (1, 2)
    assert allowed_scores(3) == allowed_scores(4) == allowed_scores(5) == (3, 4, 5)
    assert check_calibration(4, 3) is None and check_calibration(2, 1) is None
    assert "3, 4, 5" in (check_calibration(4, 2) or "")
    assert check_calibration(0, 1) is not None
    with pytest.raises(ValueError):
        allowed_scores(7)
    assert CalibratedScore(score=3, annotator="expert-1").score == 3
    with pytest.raises(ValidationError):
        CalibratedScore(score=6, annotator="expert-1")
