"""Reusable ("warm") jails: created ahead of need, then serving run after run.

A run's critical path used to include creating the jail (namespaces, cgroups, mounts: ~8 ms) and, for Python,
starting the interpreter (~10-20 ms); on a busy machine both cost CPU whenever they happen. A `WarmPool` keeps a
few jails per kind of run, each with services/lib/sandbox/zygote.py as its first process (the zygote), waiting on a
channel. A run takes one, its program files go into a fresh folder of the jail's read-only /prog, and the zygote
forks the run into new mount, IPC, PID and network namespaces with fresh tmpfs, no capability and a seccomp
filter of its own. When the run is over (every process of it reaped, its namespaces gone) and the jail's memory
is back to its idle figure, the jail goes back to the pool.

What a run shares with the runs before it in the same jail: its cgroups (the peak is reset per run, and the jail
is brought back to its idle memory before the next run) and the zygote's memory, which never holds any run's
data: the zygote passes a run's fds on unread. A jail whose run did not end normally (a clock, an output flood, a
cancel, a failed setup) is never reused. See docs/sandbox.md.

This module is the pool and a jail's ending; protocol.py is the host's half of the zygote's protocol, slots.py the
jails' program folders, and warm_runs.py the runs themselves.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from services.lib.sandbox.cgroups import RunCgroups

log = logging.getLogger(__name__)

# How many pre-made jails are kept per kind of run (profile and zygote), and for how many kinds; in all, at
# most twice as many as one kind gets, so requests with ever-new limits cannot fill the machine with waiting
# jails. A kind not used for IDLE_S is dropped; a pre-made jail older than MAX_AGE_S is replaced (it costs
# nothing while it waits,
# but a long-lived jail would keep a stale toolchain mounted after an upgrade).
DEFAULT_PER_KIND = 2
MAX_KINDS = 4
IDLE_S = 300.0
MAX_AGE_S = 600.0
# nsjail's own clock for a pre-made jail: it may wait up to MAX_AGE_S, then run for as long as a run may last (the
# host enforces that; this only ends a jail whose host died mid-run): the wall limit (at most MAX_WALL_S) stretched
# by the time the run waits for a CPU, up to clocks.starved_after_s (checked in profile.py).
MAX_WALL_S = 120.0
MAX_RUN_S = 421
JAIL_LIFETIME_S = int(MAX_AGE_S) + MAX_RUN_S
STALE_SLOT_S = 2 * JAIL_LIFETIME_S


@dataclass(eq=False)
class PreparedJail:
    """A spawned jail whose zygote waits for runs."""

    kind: Hashable
    pid: int
    pidfd: int
    channel: socket.socket
    # The zygote's own stderr (a traceback if it ever failed) and nsjail's log: read only when the jail ends.
    err_r: int
    log_r: int
    cgroups: RunCgroups
    slot: Path
    spawned_at: float = field(default_factory=time.monotonic)
    runs: int = 0
    # The idle jail's memory (the zygote's, once it is ready), and what an empty exec'd run adds to it (its setup
    # and supervisor processes), in KiB: WarmRuns._run_in measures runs from these.
    idle_kb: int = 0
    overhead_kb: int = 0
    # The zygote's pid on the host (its CPU time is not the runs').
    zygote_pid: int = 0

    def alive(self) -> bool:
        """Whether nsjail is still running (its pidfd becomes readable when it exits)."""
        readable, _, _ = select.select([self.pidfd], [], [], 0)
        return not readable


class WarmPool:
    """Reusable jails per kind, made in the background. Thread-safe.

    `spawn(kind)` creates one jail (the Sandbox's job); `discard(jail)` ends one that will not be used again. The
    pool only decides when. A run `take`s a jail and hands it back with `give_back` (it ended cleanly) or `retire`
    (anything else); a kind gets new jails while it has fewer than `per_kind`, ready and busy together.
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
        self._busy: collections.Counter[Hashable] = collections.Counter()
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
            self._busy[kind] += 1
            self._forget_idle_kinds()
            self._lock.notify_all()
        if jail is None:
            try:
                jail = self._spawn(kind)
            except BaseException:
                with self._lock:
                    self._busy[kind] -= 1
                raise
        return jail

    def give_back(self, jail: PreparedJail) -> None:
        """A jail whose run ended cleanly: ready for the next run of its kind (or ended, if the pool has no use
        for it any more)."""
        with self._lock:
            self._busy[jail.kind] -= 1
            keep = (
                not self._closed
                and jail.kind in self._last_used
                and time.monotonic() - jail.spawned_at < MAX_AGE_S
                and len(self._ready.get(jail.kind, ())) + self._busy[jail.kind] < self._per_kind
                and self._total() < 2 * self._per_kind
            )
            if keep:
                self._ready.setdefault(jail.kind, collections.deque()).appendleft(jail)
            else:
                self._discard_later(jail)
            self._lock.notify_all()

    def retire(self, jail: PreparedJail, end: Callable[[PreparedJail], None]) -> None:
        """A jail that will not run anything again; `end(jail)` (already under way, e.g. reading how it died)
        happens on the clean-up thread, and the pool makes a replacement."""
        with self._lock:
            self._busy[jail.kind] -= 1
            self._leaving[id(jail)] = jail
            self._lock.notify_all()
        self.defer(self._end_and_forget, jail, end)

    def _end_and_forget(self, jail: PreparedJail, end: Callable[[PreparedJail], None]) -> None:
        try:
            end(jail)
        finally:
            with self._lock:
                self._leaving.pop(id(jail), None)

    def close(self) -> None:
        """End every waiting jail (their zygotes read EOF and exit), and the one the refill thread may be making
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
        self._end_and_forget(jail, self._discard)

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

    def _total(self) -> int:
        """Jails ready or running, of every kind."""
        return sum(len(ready) for ready in self._ready.values()) + sum(self._busy.values())

    def _wanted(self) -> Hashable | None:
        """The most recently used kind short of jails (ready and busy), while the pool is under its total cap."""
        if self._total() >= 2 * self._per_kind:
            return None
        for kind in sorted(self._last_used, key=self._last_used.__getitem__, reverse=True):
            if len(self._ready.get(kind, ())) + self._busy[kind] < self._per_kind:
                return kind
        return None


def _logged(fn: Callable[..., object], *args: object) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("clean-up of a pre-made jail failed")


def end_jail(pid: int, pidfd: int, *, grace_s: float) -> int | None:
    """Reap a jail that was told to end (its channel closed) or is ending; after `grace_s`, SIGTERM nsjail (it
    kills the jail and removes its cgroups), and SIGKILL as the last resort. Returns nsjail's wait status (None if
    it was reaped elsewhere)."""
    for signum, wait_s in ((None, grace_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, None)):
        if signum is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signum)
        if wait_s is None:
            try:
                return os.waitpid(pid, 0)[1]
            except ChildProcessError:
                return None
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return None  # reaped already
            if done:
                return status
            time.sleep(0.002)
    return None
