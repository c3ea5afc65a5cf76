"""A test's verdict, decided in the executor from what its jail returned: the jail's own classification, then
the checker on stdout (stdio mode) or the harness's report (function mode)."""

from __future__ import annotations

import logging
import signal
from dataclasses import replace

from executor.checkers import excerpt, mismatch, values_equal
from executor.harness import function_runner as harness
from executor.languages import LanguageSpec
from services.kernel.contracts import Checker, Language, Limits, TestCase, TestResult, Verdict
from services.kernel.text import clean_text
from services.lib.sandbox import RunResult, classify, unjudged_reason

log = logging.getLogger(__name__)

STDOUT_EXCERPT = 64 * 1024
MESSAGE_CAP = 300


def decide(
    index: int,
    test: TestCase,
    lang: LanguageSpec,
    result: RunResult,
    limits: Limits,
    checker: Checker,
) -> TestResult:
    """The verdict of one test, decided here in the executor from what the jail returned."""
    status, message = classify(
        result, cpu_time_s=limits.cpu_time_s, memory_mb=limits.memory_mb, output_limit=limits.output_kb * 1024
    )
    if status == "IE" and unjudged_reason(result, cpu_time_s=limits.cpu_time_s) is None:
        log.error("sandbox failure on test %d: %s\n%s", index, message, result.nsjail_log)
    # surrogateescape: invalid UTF-8 never equals valid expected text, so `exact` stays byte-exact.
    stdout = result.stdout.decode("utf-8", "surrogateescape")
    stderr = result.stderr_text
    if status == "OK":
        if result.result is not None:
            status, message = decide_function_call(result, test, limits, checker)
        elif test.expected is None:
            status = "AC"
        else:
            reason = mismatch(checker.kind, test.expected, stdout, checker.abs_tol, checker.rel_tol)
            status, message = ("AC", "") if reason is None else ("WA", reason)
    if status in ("RE", "MLE") and not message.startswith(HARNESS_PREFIXES):
        detail = error_line(stderr, lang)
        message = f"{message}: {detail}" if detail else message
    return TestResult(
        index=index,
        status=Verdict(status),
        cpu_time_ms=round(result.cpu_s * 1000),
        wall_time_ms=round(result.wall_s * 1000),
        wait_time_ms=round(result.wait_s * 1000),
        stopped_by=result.stop,
        memory_kb=result.memory_kb,
        public=test.public,
        exit_code=result.exit_code,
        # What the program and the harness wrote is stored and answered: valid UTF-8 without NUL, within the caps
        # (cleaning never lengthens text). A candidate's exception text may hold lone surrogates (`'\udc80'`).
        stdout=clean_text(stdout[:STDOUT_EXCERPT].encode("utf-8", "surrogateescape")),
        stderr=clean_text(stderr),
        message=clean_text(message[:MESSAGE_CAP]),
    )


# Messages the harness already made specific; stderr's last line adds nothing to them.
HARNESS_PREFIXES = ("the program ", "the function ")


def decide_function_call(result: RunResult, test: TestCase, limits: Limits, checker: Checker) -> tuple[str, str]:
    """The verdict of a function-mode run whose supervisor ended normally, from what it wrote on the result
    channel. Only the supervisor writes there; the candidate's own claims reach us as data we compare here."""
    try:
        if result.result_overflow:
            raise ValueError("the result is too large")
        report = harness.loads_limited(result.result or b"")
        if not isinstance(report, dict) or not isinstance(report.get("status"), str):
            raise ValueError("no status")
    except ValueError:
        # Only a harness bug (or a harness killed mid-write, which classify() has already ruled out) gets here.
        log.error("unreadable function-mode result: %r", (result.result or b"")[:200])
        return "IE", "the harness's result could not be read"
    kind = report["status"]
    text = str(report.get("message", ""))
    # An argument test is decided here, from a value; a code test by its own code. Neither accepts the other's.
    if (kind == "value") != (test.code is None) and kind in ("value", "pass", "fail"):
        log.error("function-mode harness answered %r for a %s test", kind, "code" if test.code else "argument")
        return "IE", "internal error in the function-mode harness"
    if kind == "value":
        # Plain JSON data, converted from the candidate's encoded value inside the jail (harness.json_data).
        value = report.get("value")
        if values_equal(test.expected, value, checker.abs_tol, checker.rel_tol):
            return "AC", ""
        return "WA", f"expected {excerpt(test.expected)}, got {excerpt(value)}"
    if kind == "pass":
        return "AC", ""
    if kind in ("fail", "bad_value"):
        return "WA", text
    if kind == "memory":
        return "MLE", text or "MemoryError"
    if kind == "error":
        return "RE", text
    if kind == "died":
        # The candidate's process ended on its own: decide on that ending as if it were the whole run.
        ended = replace(
            result,
            exit_code=report.get("exit_code") if isinstance(report.get("exit_code"), int) else None,
            signal=report.get("signal") if isinstance(report.get("signal"), int) else None,
        )
        if ended.exit_code is None and ended.signal is None:
            ended.exit_code = -1
        status, message = classify(
            ended, cpu_time_s=limits.cpu_time_s, memory_mb=limits.memory_mb, output_limit=limits.output_kb * 1024
        )
        if status == "OK":  # exit(0) in the middle of a test is still no result
            return "RE", "the program ended its process during the test (exit code 0)"
        if status == "TLE" and ended.signal == signal.SIGKILL and ended.cpu_s < 0.9 * limits.cpu_time_s:
            # Unlike the jail's PID 1, the candidate's process can SIGKILL itself. (RLIMIT_CPU's SIGKILL comes
            # with CPU time at the limit, which wait4 may read a little under: hence the margin.)
            return "RE", "the program's process was killed by SIGKILL"
        if status == "RE" and ended.exit_code is not None:
            return "RE", f"the program ended its process during the test (exit code {ended.exit_code})"
        return status, message
    if kind == "bad_test":
        return "IE", text
    log.error("function-mode harness failure: %s", text)
    return "IE", "internal error in the function-mode harness"


def error_line(stderr: str, lang: LanguageSpec) -> str:
    """The line of stderr that says what went wrong (Python: the exception, Java: the uncaught one)."""
    # Lines end at "\n" only: str.splitlines() would also end one at U+0085 or U+2028 inside an exception's text.
    lines = [line.strip() for line in stderr.split("\n") if line.strip()]
    if not lines:
        return ""
    if lang.id == Language.JAVA:
        for line in lines:
            if line.startswith("Exception in thread"):
                return line.split(" ", 4)[-1] if line.count(" ") >= 4 else line
            if line.startswith(("Error:", "Caused by:")):
                return line
    if lang.id == Language.CPP:
        for position, line in enumerate(lines):
            if line.startswith("terminate called"):
                return " ".join(lines[position : position + 2])[:MESSAGE_CAP]
    return lines[-1][:MESSAGE_CAP]
