"""The host's half of the zygote's protocol (services/lib/sandbox/zygote.py): a run's request, sent with its fds
on the jail's channel; the zygote's "ready" and its answer once a run is over; and the run's own reply on its reply
socket. Every answer is parsed strictly: the zygote and a run's first process write them when no process of the run
is left, but they are read as untrusted bytes all the same."""

from __future__ import annotations

import marshal
import re
import select
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from services.lib.sandbox.results import RunResult
from services.lib.sandbox.warm import PreparedJail
from services.lib.sandbox.zygote import SETUP_FAILED

# The longest message read from a jail.
MAX_REPLY = 1 << 20


@dataclass(frozen=True)
class RunReply:
    """What a run's first process answered on the run's reply socket (services/lib/sandbox/zygote.py): exactly one
    of a syntax error, the CPU time it used before running the harness in its own process, or how the run's child
    ended and what the run cost."""

    syntax_error: str | None = None
    before_harness_cpu_s: float | None = None
    run_cpu_s: float | None = None
    exit_code: int | None = None
    signal: int | None = None


@dataclass(frozen=True)
class RunDone:
    """What the zygote answered on the channel once every process of a run was gone: the CPU time of the whole
    run (its setup included), the setup process's own share, and how the run's first process ended. `failed`: the
    run's setup failed before the run began."""

    total_cpu_s: float = 0.0
    setup_cpu_s: float = 0.0
    exit_code: int | None = None
    signal: int | None = None
    failed: bool = False
    # Filled in by the host: CPU time the jail's cpuacct cgroup saw the run use beyond total_cpu_s.
    unseen_cpu_s: float = 0.0


def send_run(jail: PreparedJail, request: Mapping[str, object], fds: list[int]) -> None:
    """The run's request, as marshal data (the zygote reads it without importing a parser; plain str, int,
    float, list and None values, which every Python's marshal reads alike), with its fds: stdin, stdout, stderr,
    the run's reply socket and, for the harness, the result channel."""
    socket.send_fds(jail.channel, [marshal.dumps(dict(request), 4)], fds)


_NUMBER = rb"(\d+(?:\.\d+)?(?:e-?\d+)?)"
_RUN_REPORT = re.compile(rb"R " + _NUMBER + rb" (exit|signal) (\d{1,3})")
_HARNESS_START_CPU = re.compile(rb"L " + _NUMBER)
_RUN_DONE = re.compile(rb"D " + _NUMBER + rb" " + _NUMBER + rb" (exit|signal) (\d{1,3})")
_SETUP_FAILED = re.compile(rb"F " + _NUMBER)


READY = b"ready"


def await_ready(jail: PreparedJail, timeout_s: float) -> None:
    """Wait for a new jail's zygote to say it is ready (zygote.main); raise if it does not."""
    readable, _, _ = select.select([jail.channel], [], [], timeout_s)
    if not readable or _receive_now(jail.channel) != READY:
        raise RuntimeError("a reusable jail's zygote did not start")


def read_done(jail: PreparedJail) -> RunDone | None:
    """The zygote's answer after a run (zygote._serve), or None if there is none (the jail ended first).
    Parsed strictly."""
    data = _receive_now(jail.channel)
    if data is None:
        return None
    if _SETUP_FAILED.fullmatch(data):
        return RunDone(failed=True)
    done = _RUN_DONE.fullmatch(data)
    if done is None:
        return None
    total, setup, number = float(done[1]), float(done[2]), int(done[4])
    if done[3] == b"signal":
        return RunDone(total_cpu_s=total, setup_cpu_s=setup, signal=number)
    return RunDone(total_cpu_s=total, setup_cpu_s=setup, exit_code=number)


def _receive_now(channel: socket.socket) -> bytes | None:
    """One message already waiting on `channel`, or None."""
    try:
        data = channel.recv(MAX_REPLY, socket.MSG_DONTWAIT)
    except OSError:
        return None
    return data or None


def read_reply(reply: socket.socket) -> RunReply | None:
    """A run's answer (zygote._reply), read once the run has ended (it is waiting in the socket by then), or
    None if it ended without one (killed first, or its setup failed). Parsed strictly."""
    data = _receive_now(reply)
    if data is None:
        return None
    if data.startswith(b"E"):
        return RunReply(syntax_error=data[1:].decode("utf-8", "replace"))
    harness_start = _HARNESS_START_CPU.fullmatch(data)
    if harness_start is not None:
        return RunReply(before_harness_cpu_s=float(harness_start[1]))
    report = _RUN_REPORT.fullmatch(data)
    if report is None:
        return None
    cpu_s, number = float(report[1]), int(report[3])
    if report[2] == b"signal":
        return RunReply(run_cpu_s=cpu_s, signal=number)
    return RunReply(run_cpu_s=cpu_s, exit_code=number)


def fill_from_replies(result: RunResult, reply: RunReply | None, done: RunDone) -> None:
    """A reusable jail's run that ended: its ending and CPU time into `result`, from its first process's reply and the
    zygote's answer."""
    if reply is not None and reply.syntax_error is not None:
        result.syntax_error = reply.syntax_error
        result.exit_code = 0
        return
    if reply is not None and reply.run_cpu_s is not None:
        # A supervised run: the program's own ending, and the CPU time of every process of the run, precisely.
        result.cpu_s = reply.run_cpu_s + done.unseen_cpu_s
        result.exit_code, result.signal = reply.exit_code, reply.signal
        return
    if reply is None and done.exit_code == SETUP_FAILED:
        result.jail_error = "the run's first process could not set the run up"
        return
    # The harness ran in the run's first process (or that process died before it answered): its ending, and the
    # run's CPU time but the setup's and what the first process used before the harness.
    before = reply.before_harness_cpu_s if reply is not None and reply.before_harness_cpu_s is not None else 0.0
    result.cpu_s = max(0.0, done.total_cpu_s - done.setup_cpu_s - before) + done.unseen_cpu_s
    result.exit_code, result.signal = done.exit_code, done.signal
