"""A run's verdict: how a RunResult ended, decided from what the program used (classify), why a run the machine's
load held says nothing about the program (unjudged_reason), and tool output made fit for an API response."""

from __future__ import annotations

import logging
import re
import signal

from services.kernel.contracts import Verdict
from services.lib.sandbox.clocks import UNTRUSTED_CPU_FRACTION, UNTRUSTED_WAIT_FRACTION
from services.lib.sandbox.results import RunResult

log = logging.getLogger(__name__)

# What runtimes print when an allocation fails below the cgroup limit (Python, C++, Java).
_MEMORY_MARKERS = (b"MemoryError", b"std::bad_alloc", b"java.lang.OutOfMemoryError")
# ...except this one, which the JVM also says when the pids cgroup refuses a thread.
_THREAD_MARKERS = (b"unable to create native thread", b"unable to create new native thread")
# A failed program whose peak memory came this close to the cgroup limit was stopped by the limit (an OOM
# kill leaves the cgroup's peak at the limit).
_OOM_PEAK_FRACTION = 0.95


def classify(
    result: RunResult, *, cpu_time_s: float, memory_mb: int, output_limit: int, runtime_messages: bool = True
) -> tuple[str, str]:
    """("OK" | "TLE" | "MLE" | "OLE" | "RE" | "IE", reason) for one run; OK means it ended normally.

    runtime_messages: also read the runtime's out-of-memory messages on stderr (not for compilers, whose
    error output quotes the program's source, `std::bad_alloc` included).

    What decides is what the program used, never how long the machine took to give it: memory reached (the
    cgroup's peak, its OOM kills) whatever clock stopped the run; CPU time of every process of the run against the
    CPU limit; the wall limit only on the run's own time (see clocks.clock_stop); and a run the machine's load held past
    that is not judged at all (unjudged_reason: IE, to be run again).
    """
    if result.cancelled:
        return Verdict.IE, "run cancelled"
    if result.jail_error:
        # nsjail's own error names host paths (mount sources): it goes to the log, never into a verdict.
        log.error("sandbox failure: %s", result.jail_error)
        return Verdict.IE, "sandbox failure (nsjail could not run the program; see the executor's log)"
    if result.stdout_overflow or result.stderr_overflow:
        return Verdict.OLE, f"output limit exceeded ({output_limit // 1024} KB)"
    memory_reached = result.oom_kills > 0 or result.memory_kb >= _OOM_PEAK_FRACTION * memory_mb * 1024
    stopped = result.stop is not None or result.wall_timeout
    if memory_reached and (result.signal in (signal.SIGKILL, signal.SIGXCPU) or stopped):
        # An OOM kill, or a program stopped by a clock once it had reached its memory limit. At the limit the
        # kernel reclaims the cgroup's own page cache (the interpreter's code, mapped files) before it kills,
        # and the program faults it back in: on a busy host that stall can outlast the CPU limit (the kernel
        # charges the reclaim to the program) or the wall limit (the faults wait on the disk). Either way the
        # memory limit is what stopped it.
        return Verdict.MLE, f"memory limit exceeded ({memory_mb} MB)"
    if result.stop == "cpu" or result.cpu_s >= cpu_time_s or result.signal == signal.SIGXCPU:
        return Verdict.TLE, f"CPU time limit exceeded ({cpu_time_s:g} s)"
    unjudged = unjudged_reason(result, cpu_time_s=cpu_time_s)
    if unjudged is not None:
        return Verdict.IE, unjudged
    if result.wall_timeout:
        return Verdict.TLE, f"wall time limit exceeded ({max(0.0, result.wall_s - result.wait_s):.1f} s)"
    if result.exit_code == 0 and result.signal is None:
        return "OK", ""
    if runtime_messages and any(marker in result.stderr for marker in _THREAD_MARKERS):
        return Verdict.RE, "process/thread limit reached"
    if memory_reached or (runtime_messages and any(marker in result.stderr for marker in _MEMORY_MARKERS)):
        return Verdict.MLE, f"memory limit exceeded ({memory_mb} MB)"
    if result.signal == signal.SIGKILL:
        # Nothing inside the jail can SIGKILL its init, and we and nsjail's timer are ruled out above: it
        # was the kernel, for the memory limit (ruled out: the peak is not near it) or RLIMIT_CPU. wait4
        # can read a little under the limit for a multi-threaded program killed there (the JVM).
        return Verdict.TLE, f"CPU time limit exceeded ({cpu_time_s:g} s)"
    if result.signal is not None:
        return Verdict.RE, f"killed by signal {signal_name(result.signal)}"
    return Verdict.RE, f"exit code {result.exit_code}"


def unjudged_reason(result: RunResult, *, cpu_time_s: float) -> str | None:
    """Why a run's stop says nothing about the program (None if it does): the wall clock stopped it while the
    machine's load was holding it. Either its elapsed time reached starved_after_s(wall limit) before its own
    time reached one ("starved"), or the wall limit came with less than UNTRUSTED_CPU_FRACTION of the CPU limit
    used after the run had waited for a CPU for at least UNTRUSTED_WAIT_FRACTION of its elapsed time (the waiting
    measured is a lower bound, so such a stop may still be the load's). A memory limit reached, or the CPU limit,
    is decided before this (classify). The caller runs such a run again; if it stays unjudged, its verdict is IE."""
    if result.cancelled or result.jail_error:
        return None
    if result.stop == "starved":
        pass
    elif not (
        result.stop == "wall"
        and result.cpu_s < UNTRUSTED_CPU_FRACTION * cpu_time_s
        and result.wait_s >= UNTRUSTED_WAIT_FRACTION * result.wall_s
    ):
        return None
    return (
        f"not judged: the machine was too busy (the run waited for a CPU for {result.wait_s:.1f} s of "
        f"{result.wall_s:.1f} s and used {result.cpu_s:.2f} s of CPU); running it again may give a verdict"
    )


_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """Tool output fit for an API response: C0 control characters (but tab and newline) and DEL removed."""
    return _CONTROL_CHARACTERS.sub("", text)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)
