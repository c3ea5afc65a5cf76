"""Every place where a tool's or a jailed program's output is read, and every place a process is started,
enumerated and reviewed.

A hostile tenant controls what compilers, linters and its own program print, and nsjail's log names host paths.
Each place in the platform that reads such output is listed below with the reason its use is safe (what it keeps,
and whether any of it can reach an API response). A new reader fails this test until it is reviewed and listed:
that is the point. tests/gateway/test_exfiltration.py checks the same property end to end, with planted secrets.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("executor", "judge", "gateway", "services", "metrics")
# Attributes that hold tool or program output (RunResult, CompletedProcess, Build, Execution).
OUTPUT_ATTRIBUTES = {"stdout", "stderr", "stderr_text", "nsjail_log", "jail_error", "compile_output"}

REVIEWED: dict[tuple[str, str, str], str] = {
    (
        "executor/builds/compiling.py",
        "compile_into",
        "stdout",
    ): "compiler output, the jail's own view, `printable()`, capped",
    ("executor/builds/compiling.py", "compile_into", "stderr_text"): "same: the compiler's diagnostics on /src/<file>",
    ("executor/builds/compiling.py", "compile_into", "nsjail_log"): "logged only (names host paths)",
    ("executor/builds/cache.py", "compile", "compile_output"): "the stored, already sanitised build output",
    ("executor/builds/cache.py", "_publish", "compile_output"): "the stored, already sanitised build output",
    ("executor/run.py", "execute", "compile_output"): "the sanitised build output, passed through",
    ("executor/verdicts.py", "decide", "stdout"): "the program's own output, for the checker and the executions API",
    ("executor/verdicts.py", "decide", "stderr_text"): "the program's own stderr excerpt (executions API only)",
    ("executor/verdicts.py", "decide", "nsjail_log"): "logged only, on IE",
    ("services/lib/sandbox/verdicts.py", "classify", "jail_error"): "logged only; the verdict reason is a fixed text",
    ("services/lib/sandbox/verdicts.py", "classify", "stderr"): "searched for fixed runtime markers; never copied",
    ("services/lib/sandbox/results.py", "stderr_text", "stderr"): "the RunResult property itself",
    ("executor/languages.py", "_output", "stdout"): "`--version` of the host's own toolchain: no untrusted input",
    ("services/launcher/exporter.py", "export_attempts", "stdout"): (
        "the CLI's own stdout, written with the gateway's export (cleaned rows, no tool output): nothing is read"
    ),
    ("executor/languages.py", "_output", "stderr"): "same",
    ("services/launcher/study.py", "cmd_run", "stderr"): "the CLI's own stderr, written with its own messages",
    ("services/launcher/study.py", "cmd_status", "stderr"): "same",
    ("services/launcher/study.py", "cmd_report", "stderr"): "same",
    ("executor/worker.py", "_execute_attempt", "compile_output"): "the sanitised build output, stored",
    ("executor/differential/campaign.py", "side_program", "compile_output"): (
        "the sanitised build output, `printable()` again and capped, in a failed pair's message"
    ),
    ("executor/differential/sides.py", "checked", "jail_error"): (
        "carried to the pair's runner, which logs it; the pair's message is the fixed 'sandbox failure'"
    ),
    ("executor/differential/stdio.py", "_stdio_outcome", "stdout"): (
        "the program's own output, compared with the other side's; shown only in its owner's counterexamples"
    ),
    ("services/lib/sandbox/verdicts.py", "unjudged_reason", "jail_error"): "tested for presence only; never copied",
    ("executor/worker.py", "_direct_result", "compile_output"): "the sanitised build output, returned",
    ("judge/offline/tools.py", "run_tool", "nsjail_log"): "logged only, on a sandbox failure",
    ("judge/offline/pylint_driver.py", "pylint_cold_run", "stdout"): (
        "returned to pylint_result, which parses it (below)"
    ),
    ("judge/offline/pylint_batch.py", "_pylint_from_record", "stdout"): (
        "a warm child's stdout, parsed by pylint_result: only pylint symbols matching an id pattern, types, lines"
    ),
    ("judge/offline/pylint_batch.py", "warm_run", "stdout"): (
        "the warm supervisor's framed records, parsed strictly by warm_records (stops at the first malformed one)"
    ),
    ("judge/offline/pylint_batch.py", "warm_run", "jail_error"): "logged only, on a sandbox failure",
    ("judge/offline/pylint_batch.py", "warm_run", "nsjail_log"): "logged only, on a sandbox failure",
    ("judge/offline/cppcheck.py", "lint_cppcheck", "stderr"): (
        "parsed XML; only ids matching a pattern, severities, lines kept"
    ),
    ("gateway/submissions.py", "_attempt_json", "compile_output"): "the sanitised build output, in the response",
    ("services/lib/mutation/__main__.py", "main", "stdout"): "sys.stdout: where the child writes its JSON answer",
    ("services/perturb/isolation.py", "generate_isolated", "stdout"): (
        "the seed parser's JSON answer from its jail, validated strictly by _read_answer into Mutant"
    ),
    ("services/perturb/isolation.py", "_stopped", "jail_error"): "logged only, on a sandbox failure",
    ("gateway/testcheck/__init__.py", "findings", "stdout"): (
        "the jailed analyser's answer: one JSON line per test, each checked against a fixed shape (its index, "
        "identifiers of at most 100 characters, an integer line); the 422's message is built from those fields only"
    ),
    ("gateway/testcheck/__init__.py", "findings", "jail_error"): (
        "raised to check_tests, which logs it and stores the problem unchecked; never in a response"
    ),
    ("gateway/testcheck/analyser.py", "main", "stdout"): "the in-jail analyser writing its own answer: nothing read",
    ("services/perturb/isolation.py", "_stopped", "nsjail_log"): "logged only, on a sandbox failure",
    ("services/perturb/axiom/calibration.py", "execution_report", "compile_output"): (
        "the sanitised build output of the program, clipped, in the calibration report"
    ),
    ("services/perturb/axiom/calibration.py", "execution_report", "stdout"): (
        "a public test's output only (hidden tests' are blanked), clipped"
    ),
    ("services/perturb/axiom/calibration.py", "execution_report", "stderr"): "same: public tests only, clipped",
    ("services/perturb/benchmark.py", "prepare_calibration", "compile_output"): (
        "the stored, sanitised build output, passed to the calibration report"
    ),
}


# Every call that starts a process outside the jail's own harness (which forks inside the jail). None of them may
# read untrusted code or data unjailed, and their raw output must not reach an API response.
PROCESS_STARTERS = {
    ("subprocess", "run"),
    ("subprocess", "Popen"),
    ("subprocess", "call"),
    ("subprocess", "check_call"),
    ("subprocess", "check_output"),
    ("os", "posix_spawn"),
    ("os", "posix_spawnp"),
    ("os", "system"),
    ("os", "fork"),
    ("os", "execv"),
    ("os", "execve"),
    ("os", "execvp"),
    ("asyncio", "create_subprocess_exec"),
    ("asyncio", "create_subprocess_shell"),
}
REVIEWED_PROCESSES: dict[tuple[str, str, str], str] = {
    ("services/lib/sandbox/supervise.py", "spawn_nsjail", "posix_spawn"): (
        "nsjail itself (a cold jail, or a reusable one whose first process is the zygote, zygote.py): everything "
        "untrusted runs in it; its output reaches the host only through collect's capped readers"
    ),
    ("executor/languages.py", "_output", "run"): (
        "the host's own gcc/g++/javac/java/python3 with version flags only: no tenant input; the first line of "
        "the banner is the /v1/languages version text"
    ),
    ("services/kernel/embedded.py", "start", "Popen"): "redis-server for `tribunal up`; output to its log file",
    ("services/launcher/stack.py", "_spawn", "Popen"): "the platform's own gateway and workers; output to log files",
    ("services/launcher/local_llm.py", "spawn", "Popen"): (
        "the local model server (llama-cpp-python, our own argv, loopback); output to its log file, never read back"
    ),
    ("services/launcher/observability.py", "start", "Popen"): (
        "Debian's prometheus for `tribunal up --prometheus-port`, on loopback, with our generated config; output "
        "to its log file; it reads only our processes' /metrics (the gateway's with a metrics-only key)"
    ),
}


# Scripts that run inside a jail (as its first process, or started by one): what they fork or exec stays in the
# jail, and what they read is the jail's own. Each is started only by a reviewed process start above.
IN_JAIL_SCRIPTS = {
    "services/lib/sandbox/zygote.py",  # a reusable jail's zygote (warm_runs.WarmRuns._spawn)
    "judge/harness/pylint_warm.py",  # the warm lint supervisor, run by ToolJail as `python3 -c` inside the jail
}


def _runs_in_the_jail(path: Path) -> bool:
    return "harness" in path.parts or str(path.relative_to(ROOT)) in IN_JAIL_SCRIPTS


def _process_starts() -> set[tuple[str, str, str]]:
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if _runs_in_the_jail(path):
                continue
            for function in ast.walk(ast.parse(path.read_text())):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Attribute)
                        and isinstance(node.func.value, ast.Name)
                        and (node.func.value.id, node.func.attr) in PROCESS_STARTERS
                    ):
                        found.add((str(path.relative_to(ROOT)), function.name, node.func.attr))
    return found


def test_every_process_start_is_reviewed() -> None:
    found = _process_starts()
    unreviewed = found - set(REVIEWED_PROCESSES)
    assert not unreviewed, f"review these process starts and list them in REVIEWED_PROCESSES: {sorted(unreviewed)}"
    stale = set(REVIEWED_PROCESSES) - found
    assert not stale, f"these process starts are gone; drop them from REVIEWED_PROCESSES: {sorted(stale)}"


def _readers() -> set[tuple[str, str, str]]:
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if _runs_in_the_jail(path):  # it reads nothing of the host
                continue
            tree = ast.parse(path.read_text())
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    if (
                        isinstance(node, ast.Attribute)
                        and node.attr in OUTPUT_ATTRIBUTES
                        and isinstance(node.ctx, ast.Load)
                    ):
                        found.add((str(path.relative_to(ROOT)), function.name, node.attr))
    return found


def test_every_reader_of_tool_output_is_reviewed() -> None:
    unreviewed = _readers() - set(REVIEWED)
    assert not unreviewed, f"review these readers of tool output and list them in REVIEWED: {sorted(unreviewed)}"


def test_the_review_list_has_no_stale_entries() -> None:
    stale = set(REVIEWED) - _readers()
    assert not stale, f"these readers are gone; drop them from REVIEWED: {sorted(stale)}"


def test_no_raw_tail_of_a_tools_output() -> None:
    """The pattern the audit exploited (`_tail(completed.stderr)` into judgment.error) is gone for good."""
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            assert "_tail(" not in text, path
            assert "completed.stderr" not in text and "completed.stdout" not in text, path
