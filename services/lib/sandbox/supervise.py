"""Starting nsjail and watching a running jail: nsjail is spawned with exactly the fds it needs (spawn_nsjail), and
collect() reads the run's streams with their caps while it enforces the clocks and the output limits by stopping the
jail; a RunControl lets another thread stop it too (a cancelled task)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import selectors
import signal
import threading
import time
from pathlib import Path

from services.lib.sandbox.capture import LOG_CAP, READ_CHUNK, Capture, Excerpt, LoaderNoiseFilter
from services.lib.sandbox.clocks import Meter, Stop, clock_stop, next_sample_s, starved_after_s
from services.lib.sandbox.profile import JailProfile
from services.lib.sandbox.results import RunResult

log = logging.getLogger(__name__)

# Source fds are moved at or above this number before posix_spawn's dup2 actions, so no action can overwrite
# a source fd that a later action still needs.
_SPAWN_FD_FLOOR = 10

# After SIGTERM nsjail kills the jail and removes its cgroups itself; SIGKILL (which leaks the cgroup
# directories) is only the fallback if it has not exited by then.
TERM_GRACE_S = 2.0
# Once nsjail has exited its pipes reach EOF at once; this only guards against an fd leaked elsewhere.
_EXIT_DRAIN_S = 1.0

# A cold run's nsjail joins the run's cgroup v2 directory itself before it starts anything (writing 0 to
# cgroup.procs moves the writer): every process of the jail is in it from its first instruction, nsjail included.
_JOIN_CGROUP = 'echo 0 > "$0" && exec "$@"'


def spawn_nsjail(
    argv: list[str], env: dict[str, str], targets: dict[int, int], *, cgroup_procs: Path | None = None
) -> int:
    """posix_spawn nsjail with `targets` (our fd -> the child's fd number) and nothing else of ours inherited; with
    `cgroup_procs`, through /bin/sh, which moves itself into that cgroup and then execs nsjail (same pid)."""
    if cgroup_procs is not None:
        argv = ["/bin/sh", "-c", _JOIN_CGROUP, str(cgroup_procs), *argv]
    # Sources move above _SPAWN_FD_FLOOR first, so no dup2 action can overwrite a source a later one needs.
    high = {fd: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _SPAWN_FD_FLOOR) for fd in targets}
    try:
        return os.posix_spawn(
            argv[0],
            argv,
            env,
            file_actions=[(os.POSIX_SPAWN_DUP2, high[fd], target) for fd, target in targets.items()],
            # Python ignores these; ignored signals survive exec, and the program must get defaults.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            setsigmask=(),
        )
    finally:
        for fd in high.values():
            os.close(fd)


class RunControl:
    """Lets another thread stop a running jail, e.g. when the task awaiting it is cancelled.

    The pidfd makes the signal race-free (no pid reuse); the lock keeps it from being used after close.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pidfd: int | None = None
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            self._signal_locked(signal.SIGTERM)

    def attach(self, pidfd: int) -> None:
        """The Sandbox's: the running jail's nsjail is `pidfd` (signalled at once if the run was cancelled)."""
        with self._lock:
            self._pidfd = pidfd
            if self.cancelled:
                self._signal_locked(signal.SIGTERM)

    def detach(self) -> None:
        """The Sandbox's: the jail is gone, or its pidfd is about to be closed."""
        with self._lock:
            self._pidfd = None

    def _signal(self, signum: int) -> None:
        with self._lock:
            self._signal_locked(signum)

    def _signal_locked(self, signum: int) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signum)


def collect(
    done_fd: int,
    out_r: int,
    err_r: int,
    log_r: int | None,
    res_r: int | None,
    started: float,
    profile: JailProfile,
    control: RunControl,
    *,
    capture: Capture,
    loader_noise: bool,
    meter: Meter | None,
) -> tuple[RunResult, bytes, bool]:
    """Read a run's streams (closing them) until `done_fd` is readable (nsjail exited; or, for a reusable jail,
    the zygote answered or the jail ended) and the streams are at EOF; enforce the clocks (clock_stop, reading
    `meter` as often as the CPU limit needs and whenever the wall limit may have come) and the output limits by
    stopping the jail (`control`). Returns the run's result without its ending, CPU time or memory (the caller's
    to fill in), nsjail's log, and whether `done_fd` became readable."""
    stdout = bytearray()
    stdout_total = 0
    # Every byte read from the program's stderr, before any filtering, minus only the loader's own lines.
    stderr_raw_total = 0
    stderr = Excerpt(*capture.stderr_keep)
    noise = LoaderNoiseFilter()
    if not loader_noise:
        noise.flush()
    nsjail_log = bytearray()
    result_data = bytearray()
    result_overflow = False
    stop: Stop | None = None
    overflow_out = overflow_err = False
    next_sample = started + next_sample_s(profile.cpu_time_s) if meter is not None else math.inf
    term_sent_at: float | None = None
    kill_sent = False
    exited_at: float | None = None

    selector = selectors.DefaultSelector()
    try:
        open_pipes = {out_r, err_r} | {fd for fd in (log_r, res_r) if fd is not None}
        for fd in open_pipes:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        selector.register(done_fd, selectors.EVENT_READ)
        while open_pipes or exited_at is None:
            now = time.monotonic()
            if term_sent_at is None and control.cancelled:
                control._signal(signal.SIGTERM)
                term_sent_at = now
            elif term_sent_at is None and exited_at is None:
                if meter is not None and now >= next_sample:
                    meter.sample()
                    next_sample = now + next_sample_s(profile.cpu_time_s - meter.cpu_s)
                stop = clock_stop(now - started, meter, profile)
                if stop == "wall" and meter is not None:
                    # The waiting may have grown since the last sample: decide on a fresh one.
                    meter.sample()
                    next_sample = now + next_sample_s(profile.cpu_time_s - meter.cpu_s)
                    stop = clock_stop(now - started, meter, profile)
                if stop is not None:
                    control._signal(signal.SIGTERM)
                    term_sent_at = now
            if term_sent_at is not None and not kill_sent and now >= term_sent_at + TERM_GRACE_S:
                log.warning("a jail's nsjail ignored SIGTERM; killing it")
                control._signal(signal.SIGKILL)
                kill_sent = True
            if exited_at is not None and now >= exited_at + _EXIT_DRAIN_S:
                break
            if term_sent_at is None:
                # The wall limit can come no earlier than if the run waits no more from now on.
                wall_at = started + profile.wall_time_s + (meter.wait_s if meter is not None else 0.0)
                starved_at = started + starved_after_s(profile.wall_time_s)
                timeout = min(wall_at, starved_at, next_sample) - now
            elif not kill_sent:
                timeout = term_sent_at + TERM_GRACE_S - now
            else:
                timeout = _EXIT_DRAIN_S
            if exited_at is not None:
                timeout = min(timeout, exited_at + _EXIT_DRAIN_S - now)
            for key, _ in selector.select(max(0.0, timeout)):
                fd = int(key.fd)
                if fd == done_fd:
                    selector.unregister(done_fd)
                    exited_at = time.monotonic()
                    continue
                try:
                    data = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    continue
                if not data:
                    selector.unregister(fd)
                    open_pipes.discard(fd)
                    if fd == err_r:
                        stderr.add(noise.flush())
                    continue
                if fd == out_r:
                    stdout_total += len(data)
                    room = capture.stdout_keep - len(stdout)
                    if room > 0:
                        stdout += data[:room]
                    if stdout_total > capture.stdout_limit:
                        overflow_out = True
                elif fd == err_r:
                    stderr_raw_total += len(data)
                    stderr.add(noise.feed(data))
                    if stderr_raw_total - noise.dropped > capture.stderr_limit:
                        overflow_err = True
                elif fd == res_r:
                    room = capture.result_limit - len(result_data)
                    if len(data) > room:
                        result_overflow = True
                    result_data += data[: max(room, 0)]
                elif len(nsjail_log) < LOG_CAP:
                    nsjail_log += data
                if (overflow_out or overflow_err) and term_sent_at is None:
                    control._signal(signal.SIGTERM)
                    term_sent_at = time.monotonic()
    finally:
        selector.close()
        for pipe in (out_r, err_r, log_r, res_r):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    os.close(pipe)
    result = RunResult(
        exit_code=None,
        signal=None,
        cpu_s=0.0,
        wall_s=time.monotonic() - started,
        memory_kb=0,
        stdout=bytes(stdout),
        stderr=stderr.value(),
        stdout_overflow=overflow_out,
        stderr_overflow=overflow_err,
        result=bytes(result_data) if res_r is not None else None,
        result_overflow=result_overflow,
        wall_timeout=stop in ("wall", "starved"),
        stop=stop,
        cancelled=control.cancelled,
        nsjail_log=nsjail_log.decode("utf-8", "replace"),
    )
    return result, bytes(nsjail_log), exited_at is not None
