"""The jailed run every linter shares (judge/tooljail.py): its limits and tool paths, its fixed failure
vocabulary, and the checked reading of message ids and line numbers from what a tool printed.

The other modules read the limits as `tools.NAME` at call time (tests lower them on this module)."""

from __future__ import annotations

import logging
import re

from judge.offline.scores import OfflineUnavailable
from judge.tooljail import ToolJail
from services.lib.sandbox import RunResult, classify, signal_name

log = logging.getLogger(__name__)

# Limits of one linter run (in its own nsjail jail, judge/tooljail.py).
LINT_CPU_S = 20.0
LINT_WALL_S = 15.0
LINT_MEMORY_MB = 1024
# Each of stdout and stderr (cppcheck's XML report is on stderr); past it the run is stopped.
LINT_OUTPUT_LIMIT = 4 << 20
# Far above the gateway's source limit; a bigger program is not linted at all.
LINT_MAX_SOURCE_BYTES = 1 << 20
# The jail has only /usr: Debian's pylint (package `pylint`) for the system interpreter, and Debian's cppcheck.
LINT_PYTHON = "/usr/bin/python3"
LINT_CPPCHECK = "/usr/bin/cppcheck"
# Nothing a tool printed is stored or shown as text: only message ids matching this, known types and line numbers.
_MESSAGE_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_MAX_LINE = 10**9


def encode_source(source: str) -> bytes:
    return source.encode("utf-8", "surrogatepass")


def run_tool(
    jail: ToolJail, tool: str, argv: list[str], files: dict[str, bytes], *, reusable: bool = False
) -> RunResult:
    """Run a linter in the jail (`reusable`: in a reusable one); a run stopped by a limit or a failing sandbox is
    a fixed-vocabulary failure."""
    result = jail.run(
        argv,
        files,
        cpu_time_s=LINT_CPU_S,
        wall_time_s=LINT_WALL_S,
        memory_mb=LINT_MEMORY_MB,
        output_limit=LINT_OUTPUT_LIMIT,
        reusable=reusable,
    )
    # runtime_messages=False: the tools' output quotes the program (`std::bad_alloc`), it proves nothing.
    status, reason = classify(
        result,
        cpu_time_s=LINT_CPU_S,
        memory_mb=LINT_MEMORY_MB,
        output_limit=LINT_OUTPUT_LIMIT,
        runtime_messages=False,
    )
    if status == "IE":
        log.error("lint: the sandbox could not run %s: %s\n%s", tool, reason, result.nsjail_log)
        raise OfflineUnavailable(tool_failure(tool, "sandbox"))
    if status == "OLE":
        raise OfflineUnavailable(tool_failure(tool, "output"))
    if status == "TLE":
        raise OfflineUnavailable(tool_failure(tool, "timeout"))
    if status == "MLE":
        raise OfflineUnavailable(tool_failure(tool, "memory"))
    if result.signal is not None:
        raise OfflineUnavailable(tool_failure(tool, "signal", result.signal))
    return result


def tool_failure(tool: str, kind: str, signum: int | None = None) -> str:
    """The fixed reason for a tool run stopped by a limit (cold and warm runs word it alike)."""
    if kind == "sandbox":
        return f"lint: the sandbox could not run {tool}"
    if kind == "output":
        return f"lint: {tool} output passed the limit ({LINT_OUTPUT_LIMIT >> 20} MiB)"
    if kind == "timeout":
        return f"lint: {tool} timed out ({LINT_CPU_S:g} s CPU, {LINT_WALL_S:g} s wall)"
    if kind == "memory":
        return f"lint: {tool} ran out of memory ({LINT_MEMORY_MB} MiB)"
    if kind == "signal" and signum is not None:
        return f"lint: {tool} was killed by {signal_name(signum)}"
    raise ValueError(f"unknown tool failure {kind!r}")


def message_id(value: object) -> str | None:
    return value if isinstance(value, str) and _MESSAGE_ID.fullmatch(value) else None


def line_number(value: object) -> int | None:
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_LINE:
        return value
    return None
