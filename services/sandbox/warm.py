"""Pre-made jails: created ahead of need, one run each.

A run's critical path used to include creating the jail (namespaces, cgroups, mounts: ~8 ms) and, for Python,
starting the interpreter (~10-20 ms). A `WarmPool` does both before the run is known: it keeps a few jails per
kind of run ready, each with services/sandbox/launcher.py as its first process, waiting on a channel. A run takes
one, its program files are linked into the jail's (still empty, read-only) /prog, and the launcher becomes the
run. Refills happen on a background thread.

What a pre-made jail shares with other runs: nothing. It is used by exactly one run and then ends, like a fresh
jail; the only difference is *when* it was created. Its launcher has seen nothing before the run's own request
(no other run's data, no secret), so a run can learn nothing from the memory it starts with. See docs/sandbox.md.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import marshal
import os
import re
import secrets
import select
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# How many pre-made jails are kept per kind of run (profile and launcher), and for how many kinds; in all, at
# most twice as many as one kind gets, so requests with ever-new limits cannot fill the machine with waiting
# jails. A kind not used for IDLE_S is dropped; a pre-made jail older than MAX_AGE_S is replaced (it costs
# nothing while it waits,
# but a long-lived jail would keep a stale toolchain mounted after an upgrade).
DEFAULT_PER_KIND = 2
MAX_KINDS = 4
IDLE_S = 300.0
MAX_AGE_S = 600.0
# nsjail's own clock for a pre-made jail: it may wait up to MAX_AGE_S, then run up to the wall limit (the host
# enforces that one; this only ends a jail whose host died mid-run). The wall limit is at most 120 s.
JAIL_LIFETIME_S = int(MAX_AGE_S) + 121
STALE_SLOT_S = 2 * JAIL_LIFETIME_S
MAX_REPLY = 1 << 20


@dataclass(eq=False)
class PreparedJail:
    """A spawned jail whose launcher waits for its run."""

    pid: int
    pidfd: int
    channel: socket.socket
    out_r: int
    err_r: int
    log_r: int
    res_r: int | None
    cgroups: Any  # jail._RunCgroups (not imported: jail imports this module)
    slot: Path
    spawned_at: float = field(default_factory=time.monotonic)

    def alive(self) -> bool:
        """Whether nsjail is still running (its pidfd becomes readable when it exits)."""
        readable, _, _ = select.select([self.pidfd], [], [], 0)
        return not readable


@dataclass(frozen=True)
class LaunchReply:
    """What the launcher answered (services/sandbox/launcher.py): exactly one of a syntax error, the CPU time it
    used before running the harness in its own process, or how the run's child ended and what the run cost."""

    syntax_error: str | None = None
    launcher_cpu_s: float | None = None
    run_cpu_s: float | None = None
    exit_code: int | None = None
    signal: int | None = None


class WarmPool:
    """Pre-made jails per kind, refilled in the background. Thread-safe.

    `spawn(kind)` creates one jail (the Sandbox's job); `discard(jail)` ends one that will not be used. The pool
    only decides when.
    """

    def __init__(
        self,
        spawn: Callable[[Hashable], PreparedJail],
        discard: Callable[[PreparedJail], None],
        *,
        per_kind: int = DEFAULT_PER_KIND,
    ) -> None:
        self._spawn = spawn
        self._discard = discard
        self._per_kind = max(1, per_kind)
        self._ready: dict[Hashable, collections.deque[PreparedJail]] = {}
        self._last_used: dict[Hashable, float] = {}
        self._lock = threading.Condition()
        self._closed = False
        self._spawning = False
        # Jails being ended on the clean-up thread, by id: still the pool's until they are gone.
        self._leaving: dict[int, PreparedJail] = {}
        # Clean-up after runs (removing cgroups and folders takes milliseconds) and ending unwanted jails.
        self._cleanup = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tribunal-warm-cleanup")
        self._thread = threading.Thread(target=self._refill_forever, name="tribunal-warm-jails", daemon=True)
        self._thread.start()

    def defer(self, fn: Callable[..., object], *args: object) -> None:
        """Run fn(*args) on the pool's clean-up thread."""
        try:
            self._cleanup.submit(_logged, fn, *args)
        except RuntimeError:  # shut down: do it here
            _logged(fn, *args)

    def take(self, kind: Hashable) -> PreparedJail:
        """A ready jail of this kind (created now if none is ready); the pool makes another in the background."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is closed")
            self._last_used[kind] = time.monotonic()
            self._prune()
            ready = self._ready.setdefault(kind, collections.deque())
            jail = ready.popleft() if ready else None
            self._forget_idle_kinds()
            self._lock.notify_all()
        if jail is None:
            jail = self._spawn(kind)
        return jail

    def close(self) -> None:
        """End every waiting jail (their launchers read EOF and exit), and the one the refill thread may be making
        right now: when this returns, no jail of the pool is left."""
        with self._lock:
            self._closed = True
            jails = [jail for ready in self._ready.values() for jail in ready]
            self._ready.clear()
            self._lock.notify_all()
        for jail in jails:
            self._discard(jail)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=30.0)
        self._cleanup.shutdown(wait=True)

    def ready_count(self) -> int:
        """How many jails are ready for a run, of every kind."""
        with self._lock:
            return sum(len(ready) for ready in self._ready.values())

    def waiting(self) -> list[PreparedJail]:
        """The pool's jails now: those ready for a run, and those it is ending (never used)."""
        with self._lock:
            return [jail for ready in self._ready.values() for jail in ready] + list(self._leaving.values())

    def settle(self, timeout_s: float = 30.0) -> None:
        """Wait until no refill is due or in progress and every clean-up has run (for tests and benchmarks that
        look at the host between runs)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            self._prune()
            self._lock.notify_all()
            while (self._spawning or self._wanted() is not None) and not self._closed:
                if not self._lock.wait(timeout=max(0.0, deadline - time.monotonic())):
                    break
        with contextlib.suppress(RuntimeError):
            self._cleanup.submit(lambda: None).result(timeout=max(0.0, deadline - time.monotonic()))

    def _discard_later(self, jail: PreparedJail) -> None:
        """End a jail the pool will not use, on the clean-up thread (the caller holds the lock)."""
        self._leaving[id(jail)] = jail
        self.defer(self._discard_and_forget, jail)

    def _discard_and_forget(self, jail: PreparedJail) -> None:
        try:
            self._discard(jail)
        finally:
            with self._lock:
                self._leaving.pop(id(jail), None)

    def _prune(self) -> None:
        """Drop ready jails that ended while they waited (killed from outside) or are too old (the lock is held)."""
        now = time.monotonic()
        for ready in self._ready.values():
            for jail in list(ready):
                if not jail.alive() or now - jail.spawned_at >= MAX_AGE_S:
                    ready.remove(jail)  # in place: callers may hold this deque
                    self._discard_later(jail)

    def _forget_idle_kinds(self) -> None:
        now = time.monotonic()
        recent = sorted(self._last_used, key=self._last_used.__getitem__, reverse=True)
        for position, kind in enumerate(recent):
            if position >= MAX_KINDS or now - self._last_used[kind] > IDLE_S:
                del self._last_used[kind]
                for jail in self._ready.pop(kind, ()):
                    self._discard_later(jail)

    def _refill_forever(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._wanted():
                    self._lock.wait(timeout=30.0)
                    self._prune()
                    self._forget_idle_kinds()
                if self._closed:
                    return
                kind = self._wanted()
                self._spawning = True
            assert kind is not None
            try:
                jail = self._spawn(kind)
            except Exception:
                log.exception("could not pre-make a jail")
                with self._lock:
                    self._spawning = False
                    self._lock.notify_all()
                time.sleep(1.0)
                continue
            with self._lock:
                self._spawning = False
                if self._closed or kind not in self._last_used:
                    self._discard_later(jail)
                else:
                    self._ready.setdefault(kind, collections.deque()).append(jail)
                self._lock.notify_all()

    def _wanted(self) -> Hashable | None:
        """The most recently used kind short of jails, while the pool is under its total cap."""
        if sum(len(ready) for ready in self._ready.values()) >= 2 * self._per_kind:
            return None
        for kind in sorted(self._last_used, key=self._last_used.__getitem__, reverse=True):
            if len(self._ready.get(kind, ())) < self._per_kind:
                return kind
        return None


def _logged(fn: Callable[..., object], *args: object) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("clean-up of a pre-made jail failed")


# --- the host's half of the launcher protocol (services/sandbox/launcher.py) ----------------------------------


def send_run(jail: PreparedJail, request: Mapping[str, object], stdin_fd: int) -> None:
    """The run's request, as marshal data (the launcher reads it without importing a parser; plain str, int,
    float, list and None values, which every Python's marshal reads alike), with its stdin fd."""
    socket.send_fds(jail.channel, [marshal.dumps(dict(request), 4)], [stdin_fd])


_RUN_REPORT = re.compile(rb"R (\d+(?:\.\d+)?(?:e-?\d+)?) (exit|signal) (\d{1,3})")
_LAUNCHER_CPU = re.compile(rb"L (\d+(?:\.\d+)?(?:e-?\d+)?)")


def read_reply(jail: PreparedJail) -> LaunchReply | None:
    """The launcher's answer (launcher._reply), read once the jail has ended (it is waiting in the socket by
    then), or None if it ended without one (killed first, or it never started). Parsed strictly."""
    jail.channel.setblocking(False)
    try:
        data = jail.channel.recv(MAX_REPLY)
    except OSError:
        return None
    if data.startswith(b"E"):
        return LaunchReply(syntax_error=data[1:].decode("utf-8", "replace"))
    launcher = _LAUNCHER_CPU.fullmatch(data)
    if launcher is not None:
        return LaunchReply(launcher_cpu_s=float(launcher[1]))
    report = _RUN_REPORT.fullmatch(data)
    if report is None:
        return None
    cpu_s, number = float(report[1]), int(report[3])
    if report[2] == b"signal":
        return LaunchReply(run_cpu_s=cpu_s, signal=number)
    return LaunchReply(run_cpu_s=cpu_s, exit_code=number)


def link_program(source: Path, slot: Path) -> None:
    """Hard-link a published build's files into a jail's /prog (the same inodes, read-only in the jail); copy
    when a link is impossible. Only regular files and directories, never following a symlink."""
    for entry in os.scandir(source):
        target = slot / entry.name
        if entry.is_dir(follow_symlinks=False):
            target.mkdir(mode=0o755)
            target.chmod(0o755)
            link_program(Path(entry.path), target)
        elif entry.is_file(follow_symlinks=False):
            try:
                os.link(entry.path, target, follow_symlinks=False)
            except OSError:
                shutil.copy2(entry.path, target, follow_symlinks=False)
        else:
            raise ValueError(f"{entry.path} is neither a file nor a directory")


def write_program(files: dict[str, bytes], slot: Path) -> None:
    """Write a run's program files (plain names) into a jail's /prog, readable by the jail's user."""
    for name, data in files.items():
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"not a plain file name: {name!r}")
        fd = os.open(slot / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(slot / name, 0o644)


def make_slot(root: Path) -> Path:
    """A fresh, empty directory for one jail's /prog. Its name is random only: the jail can read it in
    /proc/self/mountinfo, so it says nothing (not this process's pid, nor how many runs came before)."""
    slot = root / f"warm-{secrets.token_hex(16)}"
    slot.mkdir(mode=0o755)
    slot.chmod(0o755)
    return slot


def remove_stale_slots(root: Path) -> None:
    """Slots no live jail can still use: nsjail ends every pre-made jail by MAX_AGE_S plus its run's wall limit
    (JailProfile.config), and a live process touches a slot when its run comes; twice that is garbage."""
    cutoff = time.time() - STALE_SLOT_S
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(root):
            with contextlib.suppress(OSError):
                if entry.name.startswith("warm-") and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    shutil.rmtree(entry.path, ignore_errors=True)


def end_jail(pid: int, pidfd: int, *, grace_s: float) -> None:
    """Reap a jail that was told to end (its channel closed); after `grace_s`, SIGTERM nsjail (it kills the jail
    and removes its cgroups), and SIGKILL as the last resort."""
    for signum, wait_s in ((None, grace_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, None)):
        if signum is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signum)
        if wait_s is None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return  # reaped already
            if done:
                return
            time.sleep(0.002)
