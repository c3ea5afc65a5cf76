"""What happened to one jailed run, before any verdict (RunResult), and the program's ending as nsjail's log tells
it (read_status): nsjail's own exit status cannot tell a program's exit(137) from SIGKILL."""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass

from services.lib.sandbox.clocks import Stop

# nsjail's log lines that say how the program ended, or that nsjail could not start it.
_LOG_EXITED = re.compile(rb"\) exited with status: (\d+)")
_LOG_SIGNALED = re.compile(rb"\) terminated with signal: \S+ \((\d+)\)")
_LOG_TIME_LIMIT = re.compile(rb"run time >= time limit")
_LOG_LAUNCH_FAILED = re.compile(rb"Launching child process failed|Couldn't launch the child process")


@dataclass
class RunResult:
    """What happened to one jailed program, before any verdict."""

    exit_code: int | None
    signal: int | None
    cpu_s: float
    wall_s: float
    # Peak memory of the whole jail (the cgroup's max usage: RSS, tmpfs, kernel memory), in KiB.
    memory_kb: int
    stdout: bytes
    stderr: bytes
    stdout_overflow: bool = False
    stderr_overflow: bool = False
    # What the jail's PID 1 wrote on RESULT_FD (harness profiles only; None for other runs).
    result: bytes | None = None
    result_overflow: bool = False
    wall_timeout: bool = False
    # Which clock stopped the run, if one did: "cpu", "wall" or "starved" (see clocks.clock_stop).
    stop: Stop | None = None
    # How long the run waited for a CPU that another process held (a lower bound: see clocks.Meter), in seconds.
    wait_s: float = 0.0
    # Processes of the run the kernel's OOM killer killed.
    oom_kills: int = 0
    cancelled: bool = False
    # Set when nsjail itself failed (could not mount, could not exec...): the platform's fault.
    jail_error: str | None = None
    nsjail_log: str = ""
    # A warm Python run whose program did not compile: the compiler's message (nothing ran).
    syntax_error: str | None = None

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def read_status(result: RunResult, nsjail_log: bytes, nsjail_status: int) -> None:
    """The program's exit status from nsjail's log (nsjail's own exit code cannot tell exit(137) from
    SIGKILL, nor a program's exit(255) from nsjail failing to start it)."""
    if _LOG_TIME_LIMIT.search(nsjail_log):
        result.wall_timeout = True
    if _LOG_LAUNCH_FAILED.search(nsjail_log):
        result.jail_error = _first_error(nsjail_log) or "nsjail could not launch the program"
        return
    exited = _LOG_EXITED.findall(nsjail_log)
    signaled = _LOG_SIGNALED.findall(nsjail_log)
    if exited:
        result.exit_code = int(exited[-1])
    elif signaled:
        result.signal = int(signaled[-1])
    elif result.cancelled or result.stop or result.wall_timeout or result.stdout_overflow or result.stderr_overflow:
        # We stopped nsjail ourselves, possibly before it logged the program's end.
        result.signal = signal.SIGKILL
    else:
        code = os.waitstatus_to_exitcode(nsjail_status)
        result.jail_error = _first_error(nsjail_log) or f"nsjail ended with status {code} and no program status"


def _first_error(nsjail_log: bytes) -> str | None:
    for line in nsjail_log.splitlines():
        if line.startswith((b"[E]", b"[F]")):
            return line.decode("utf-8", "replace")
    return None
