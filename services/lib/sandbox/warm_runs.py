"""Runs in reusable ("warm") jails, the host's side: a run's program goes into a fresh folder of a pre-made jail's
/prog, the jail's zygote (services/lib/sandbox/zygote.py) forks it into fresh namespaces, and the jail goes back to
its pool (warm.WarmPool) only if the run ended cleanly and the jail's memory came back to its idle figure. Also how
such a jail is made (its zygote started, measured idle and, for exec'd programs, calibrated) and ended."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import socket
import time
from collections.abc import Callable, Hashable
from dataclasses import replace
from pathlib import Path
from typing import cast

from services.lib.sandbox import protocol, slots, warm
from services.lib.sandbox.capture import Capture, LoaderNoiseFilter, read_available, sealed_memfd
from services.lib.sandbox.cgroups import RunCgroups
from services.lib.sandbox.clocks import Meter
from services.lib.sandbox.layout import (
    HARNESS_ENV,
    JAIL_PROGRAM_DIR,
    JAIL_PYTHON,
    JAIL_ZYGOTE,
    NSJAIL_LOG_FD,
    PROGRAM_DIR_ENV,
    ZYGOTE_ENV,
)
from services.lib.sandbox.profile import JailProfile
from services.lib.sandbox.results import RunResult, read_status
from services.lib.sandbox.supervise import TERM_GRACE_S, RunControl, collect, spawn_nsjail

log = logging.getLogger(__name__)

# Interpreter flags a run may use and still run inside a zygote started with the same flags.
_ZYGOTE_FLAGS = ("-I", "-S", "-B")

# Between two runs a reusable jail's memory must come back to within this much of its idle figure, within this
# long (WarmRuns._run_in); a jail that does not is replaced. How long a new jail's zygote may take to start.
SETTLE_SLACK_KB = 4096
# CPU time of a run that its processes' getrusage did not report, below which it is taken for measurement noise.
UNSEEN_CPU_FLOOR_S = 0.001
SETTLE_WAIT_S = 0.25
READY_TIMEOUT_S = 30.0
# Empty runs a reusable jail that execs its programs makes to learn what a run costs beyond its program, and the
# least memory an exec'd run is reported to have used (a page).
CALIBRATION_RUNS = 3
MIN_PEAK_KB = 4
# Room a reusable jail that execs its programs keeps for its zygote (a Python interpreter): each run gets its own
# memory limit on top of what the idle jail uses (WarmRuns._run_in).
ZYGOTE_MEMORY_MB = 64


class _JailGone(Exception):
    """A reusable jail could not take its run: it had ended while it waited."""


def _only_child(pid: int) -> int:
    """The one child process of `pid` (nsjail's: the jail's first process)."""
    with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
        children = handle.read().split()
    if len(children) != 1:
        raise RuntimeError(f"nsjail has {len(children)} children, not one")
    return int(children[0])


def _launch_plan(argv: list[str]) -> tuple[tuple[str, ...], int | None]:
    """How a zygote starts a run: (the zygote's own argv, the index of the script to run in-process or None to
    execv). `python3 [-I] [-S] [-B] SCRIPT ARGS` runs in a zygote started with the same flags; a fixed script
    outside the program dir (the harness) is compiled by the zygote ahead of time."""
    if argv and argv[0] == JAIL_PYTHON:
        index = 1
        while index < len(argv) and argv[index] in _ZYGOTE_FLAGS:
            index += 1
        if index < len(argv) and not argv[index].startswith("-"):
            flags = tuple(argv[1:index])
            preload = () if argv[index].startswith(JAIL_PROGRAM_DIR + "/") else ("--preload", argv[index])
            return (JAIL_PYTHON, *flags, JAIL_ZYGOTE, *preload), index
    return (JAIL_PYTHON, *_ZYGOTE_FLAGS, JAIL_ZYGOTE), None


class WarmRuns:
    """The Sandbox's reusable jails (Sandbox.enable_warm): a pool of them per kind of run, and runs in them.
    Thread-safe, like the Sandbox."""

    def __init__(
        self,
        *,
        nsjail_path: Path,
        config_file: Callable[[JailProfile], Path],
        zygote: Path,
        slots_root: Path,
        harness: Path | None,
        per_kind: int,
    ) -> None:
        slots_root.mkdir(mode=0o711, exist_ok=True)
        slots_root.chmod(0o711)
        slots.remove_stale_slots(slots_root)
        self._nsjail_path = nsjail_path
        self._config_file = config_file
        self._zygote, self._slots_root, self._harness = zygote, slots_root, harness
        self.pool = warm.WarmPool(self._spawn, self._discard, per_kind=per_kind)

    def run(
        self,
        profile: JailProfile,
        argv: list[str],
        *,
        program_dir: Path | None,
        program_files: dict[str, bytes] | None,
        check_syntax: str | None,
        stdin: bytes,
        control: RunControl,
        capture: Capture,
    ) -> RunResult:
        """A run of a `warm` profile (Sandbox.run): in a jail of its kind from the pool, or in a second one if the
        first had ended while it waited."""
        if (program_dir is None) == (program_files is None):
            raise ValueError("give exactly one of program_dir and program_files")
        zygote_argv, script = _launch_plan(argv)
        memory_mb = profile.memory_mb
        # Beside the run in its jail: the zygote and the run's setup process, and for a run that is not the
        # harness its first process, the supervisor.
        extra = 2 + int("--preload" not in zygote_argv)
        # A Python run is a fork of the zygote's interpreter: that interpreter's memory is the run's, as a cold
        # run's interpreter would be. An exec'd program (C, C++, the JVM) owes nothing to the zygote: its jail gets
        # room for the zygote, and each run is limited to, and measured as, what it adds to the idle jail.
        exact_memory_mb = profile.memory_mb if script is None else None
        profile = replace(
            profile,
            processes=profile.processes + extra,
            memory_mb=profile.memory_mb + (ZYGOTE_MEMORY_MB if script is None else 0),
        )
        kind = (profile, zygote_argv, exact_memory_mb is not None)
        request: dict[str, object] = {
            "argv": argv,
            "script": script,
            "check": check_syntax,
            "cpu_time_s": profile.cpu_time_s,
            "tmpfs_mb": profile.tmpfs_mb,
            # What the run's neutral /proc/meminfo shows: its own limit, as a cold jail's does.
            "memory_mb": memory_mb,
        }
        stdin_fd = sealed_memfd(stdin)
        try:
            for attempt in range(2):
                jail = self.pool.take(kind)
                try:
                    return self._run_in(
                        jail,
                        request,
                        stdin_fd,
                        program_dir,
                        program_files,
                        profile,
                        exact_memory_mb,
                        control,
                        capture=capture,
                    )
                except _JailGone:
                    # The jail ended while it waited (killed from outside): nothing ran; use another.
                    log.warning("a reusable jail was gone when its run came (attempt %d)", attempt + 1)
            raise RuntimeError("no reusable jail could take the run")
        finally:
            os.close(stdin_fd)

    def _run_in(
        self,
        jail: warm.PreparedJail,
        request: dict[str, object],
        stdin_fd: int,
        program_dir: Path | None,
        program_files: dict[str, bytes] | None,
        profile: JailProfile,
        exact_memory_mb: int | None,
        control: RunControl,
        *,
        capture: Capture,
    ) -> RunResult:
        """One run in a reusable jail taken from the pool; the jail goes back to the pool only if the run ended
        cleanly (the zygote reported it over, with every process of it gone) and its memory came back to idle.
        With `exact_memory_mb` the run may add that much to the idle jail, and its peak is what it added."""
        floor_kb = jail.idle_kb + jail.overhead_kb
        try:
            result, reply, done, run_dir = self._exchange(
                jail,
                request,
                stdin_fd,
                program_dir,
                program_files,
                profile,
                None if exact_memory_mb is None else floor_kb + exact_memory_mb * 1024,
                control,
                capture=capture,
            )
        except BaseException:
            self.pool.retire(jail, self._discard)
            raise
        if exact_memory_mb is not None:
            # What the run added to the idle jail; a program that ran had at least a page of its own.
            result.memory_kb = max(MIN_PEAK_KB, result.memory_kb - floor_kb)
        stopped = result.stop is not None or result.cancelled or result.stdout_overflow or result.stderr_overflow
        if done is not None and not done.failed and not stopped:
            protocol.fill_from_replies(result, reply, done)
            shutil.rmtree(run_dir, ignore_errors=True)
            if jail.cgroups.settle(jail.idle_kb + SETTLE_SLACK_KB, SETTLE_WAIT_S):
                self.pool.give_back(jail)
            else:
                log.info("a reusable jail kept memory after its run; replacing it")
                self.pool.retire(jail, self._discard)
            return result
        if done is not None and done.failed:
            result.jail_error = "the reusable jail could not set up the run"
        elif done is not None:
            protocol.fill_from_replies(result, reply, done)
        elif stopped:
            result.signal = signal.SIGKILL  # we stopped the jail before the run ended
        else:
            # The jail ended by itself mid-run (its zygote was OOM-killed, or nsjail was killed or hit its
            # lifetime): nsjail's log says how, as for a cold run.
            status = warm.end_jail(jail.pid, jail.pidfd, grace_s=TERM_GRACE_S)
            read_status(result, read_available(jail.log_r), status if status is not None else 0)
        self.pool.retire(jail, self._discard)
        return result

    def _exchange(
        self,
        jail: warm.PreparedJail,
        request: dict[str, object],
        stdin_fd: int,
        program_dir: Path | None,
        program_files: dict[str, bytes] | None,
        profile: JailProfile,
        limit_kb: int | None,
        control: RunControl,
        *,
        capture: Capture,
    ) -> tuple[RunResult, protocol.RunReply | None, protocol.RunDone | None, Path]:
        """Hand a run to a jail's zygote and collect it: the result with the jail's memory peak (from `limit_kb`
        as the jail's limit, if given), the run's reply, the zygote's answer (None if the jail ended first) and
        the run's program folder. Raises _JailGone if the jail could not take the run."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        res_r, res_w = os.pipe() if profile.with_harness else (None, None)
        host_reply, jail_reply = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        readers = [fd for fd in (out_r, err_r, res_r) if fd is not None]
        try:
            try:
                run_dir = slots.make_run_dir(jail.slot)
                if program_dir is not None:
                    slots.link_program(program_dir, run_dir)
                else:
                    slots.write_program(program_files or {}, run_dir)
                jail.cgroups.start_run(limit_kb)
                oom_before = jail.cgroups.oom_kills()
                meter = Meter(jail.cgroups, exclude=jail.zygote_pid)
                fds = [stdin_fd, out_w, err_w, jail_reply.fileno(), *([res_w] if res_w is not None else [])]
                try:
                    protocol.send_run(jail, {**request, "dir": run_dir.name}, fds)
                except OSError as exc:
                    raise _JailGone from exc
            finally:
                jail_reply.close()
                for fd in (out_w, err_w, res_w):
                    if fd is not None:
                        os.close(fd)
        except BaseException:
            for fd in readers:
                os.close(fd)
            host_reply.close()
            raise
        jail.runs += 1
        started = time.monotonic()
        control.attach(jail.pidfd)
        try:
            result, _, ended = collect(
                jail.channel.fileno(),
                out_r,
                err_r,
                None,
                res_r,
                started,
                profile,
                control,
                capture=capture,
                loader_noise=False,
                meter=meter,
            )
        finally:
            control.detach()
        # Written by the run's first process before it ended, and by the zygote once no process of the run was
        # left (the run never holds either socket): trusted.
        reply = protocol.read_reply(host_reply)
        host_reply.close()
        done = protocol.read_done(jail) if ended else None
        peak_kb = jail.cgroups.peak_kb()
        if peak_kb is not None:
            result.memory_kb = peak_kb
        result.oom_kills = max(0, jail.cgroups.oom_kills() - oom_before)
        # Every process of the run ran in the jail's cgroup, the zygote's own share aside: that is the run's CPU
        # time, also when a clock stopped it and nothing of the jail reported.
        meter.sample()
        result.cpu_s, result.wait_s = meter.cpu_s, min(meter.wait_s, result.wall_s)
        if done is not None and not done.failed:
            # What the zygote's getrusage did not see (processes nobody waited for: a program that ignores SIGCHLD
            # has its children reaped by the kernel, their CPU time with them) is the run's too.
            unseen_s = meter.cpu_s - done.total_cpu_s
            if unseen_s > UNSEEN_CPU_FLOOR_S:
                done = replace(done, unseen_cpu_s=unseen_s)
        return result, reply, done, run_dir

    def _calibrate(self, jail: warm.PreparedJail, profile: JailProfile) -> None:
        """What an exec'd run costs the jail beyond its program (the setup process and the supervisor, copies of
        the zygote, and an empty program): the least of CALIBRATION_RUNS empty runs, subtracted from every run's
        peak. The least, so that a run is never charged less than it used: what the copies cost varies by a few
        hundred KiB from run to run."""
        overheads = []
        for _ in range(CALIBRATION_RUNS):
            stdin_fd = sealed_memfd(b"")
            try:
                result, reply, done, run_dir = self._exchange(
                    jail,
                    {
                        "argv": ["/usr/bin/true"],
                        "script": None,
                        "check": None,
                        "cpu_time_s": 1,
                        "tmpfs_mb": 1,
                        "memory_mb": profile.memory_mb,
                    },
                    stdin_fd,
                    None,
                    {},
                    profile,
                    None,
                    RunControl(),
                    capture=Capture(
                        stdout_limit=4096, stderr_limit=4096, stdout_keep=0, stderr_keep=(0, 0), result_limit=0
                    ),
                )
            finally:
                os.close(stdin_fd)
            shutil.rmtree(run_dir, ignore_errors=True)
            if done is not None and not done.failed:
                protocol.fill_from_replies(result, reply, done)
            if done is None or done.failed or result.exit_code != 0:
                raise RuntimeError("a reusable jail failed its calibration run")
            overheads.append(max(0, result.memory_kb - jail.idle_kb))
            if not jail.cgroups.settle(jail.idle_kb + SETTLE_SLACK_KB, SETTLE_WAIT_S):
                raise RuntimeError("a reusable jail kept memory after its calibration run")
        jail.overhead_kb = min(overheads)

    def _spawn(self, kind: Hashable) -> warm.PreparedJail:
        """Create a jail whose zygote waits for runs (called by the pool, usually on its own thread)."""
        profile, zygote_argv, execs = cast(tuple[JailProfile, tuple[str, ...], bool], kind)
        slot = slots.make_slot(self._slots_root)
        env = {PROGRAM_DIR_ENV: str(slot), ZYGOTE_ENV: str(self._zygote)}
        if profile.with_harness:
            if self._harness is None:
                raise ValueError("this profile mounts the harness, but the warm pool has none")
            env[HARNESS_ENV] = str(self._harness)
        cgroups = RunCgroups(f"tribunal-{os.getpid()}-{secrets.token_hex(8)}")
        host_end, jail_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        err_r, err_w = os.pipe()
        log_r, log_w = os.pipe()
        targets = {jail_end.fileno(): 0, null: 1, err_w: 2, log_w: NSJAIL_LOG_FD}
        nsjail_argv = [
            str(self._nsjail_path),
            "--config",
            str(self._config_file(profile)),
            *cgroups.nsjail_args,
            "--",
            *zygote_argv,
        ]
        try:
            pid = spawn_nsjail(nsjail_argv, env, targets)
            pidfd = os.pidfd_open(pid)
        except BaseException:
            for fd in (err_r, log_r):
                os.close(fd)
            host_end.close()
            cgroups.close()
            shutil.rmtree(slot, ignore_errors=True)
            raise
        finally:
            # The jail's ends, now nsjail's: the socket through its object, the others by number (never a number
            # closed already, which another thread may have been given since).
            jail_end.close()
            for fd in (null, err_w, log_w):
                os.close(fd)
        jail = warm.PreparedJail(
            kind=kind,
            pid=pid,
            pidfd=pidfd,
            channel=host_end,
            err_r=err_r,
            log_r=log_r,
            cgroups=cgroups,
            slot=slot,
        )
        try:
            protocol.await_ready(jail, READY_TIMEOUT_S)
            jail.zygote_pid = _only_child(pid)
            cgroups.adopt(jail.zygote_pid)
            jail.idle_kb = cgroups.usage_kb()
            if execs:
                self._calibrate(jail, profile)
        except BaseException:
            self._discard(jail)
            raise
        return jail

    def _discard(self, jail: warm.PreparedJail) -> None:
        """End a reusable jail: closing the channel makes its zygote end the jail (nsjail is signalled if not)."""
        jail.channel.close()
        warm.end_jail(jail.pid, jail.pidfd, grace_s=1.0)
        noise = LoaderNoiseFilter()
        complaint = noise.feed(read_available(jail.err_r)) + noise.flush()
        if complaint:
            log.warning("a reusable jail's zygote wrote on stderr: %s", complaint[-2000:].decode("utf-8", "replace"))
        for fd in (jail.err_r, jail.log_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        os.close(jail.pidfd)
        jail.cgroups.close()
        shutil.rmtree(jail.slot, ignore_errors=True)
