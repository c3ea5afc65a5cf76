"""A CPU hog beside the tests, on purpose: busy-loop processes at normal priority, each ending itself after
`max_s` seconds at most (and killed when the hog is stopped); while the hog is on, one that ended is replaced, so
the load lasts as long as the phase that needs it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from types import TracebackType

# Three busy processes per CPU: a run that gets its fair share gets a quarter of a CPU or less.
DEFAULT_PER_CPU = 3
HOG_MAX_S = 60


class Hog:
    def __init__(self, processes: int | None = None, *, max_s: int = HOG_MAX_S, cpu: int | None = None) -> None:
        self.count = processes or DEFAULT_PER_CPU * (os.cpu_count() or 1)
        self.max_s = max_s
        # All on this one CPU (the others stay free), or spread over all of them.
        self.cpu = cpu
        self._procs: list[subprocess.Popen[bytes]] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._keeper: threading.Thread | None = None
        self.started_at = 0.0
        self.stopped_at = 0.0

    def _spawn(self) -> subprocess.Popen[bytes]:
        pinned = ["taskset", "-c", str(self.cpu)] if self.cpu is not None else []
        return subprocess.Popen(
            [*pinned, "timeout", "-s", "KILL", str(self.max_s), "/bin/sh", "-c", "while :; do :; done"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # A session each, so an autogroup each: the scheduler shares the CPUs between the hog's processes and
            # a jail as between so many sessions (one session for all would count as one).
            start_new_session=True,
        )

    def start(self) -> Hog:
        with self._lock:
            self._procs = [self._spawn() for _ in range(self.count)]
        self._stopping.clear()
        self.started_at = time.monotonic()
        self._keeper = threading.Thread(target=self._keep, name="test-load-hog", daemon=True)
        self._keeper.start()
        time.sleep(0.5)  # let the scheduler spread them
        return self

    def _keep(self) -> None:
        while not self._stopping.wait(0.5):
            with self._lock:
                if self._stopping.is_set():
                    return
                self._procs = [proc if proc.poll() is None else self._spawn() for proc in self._procs]

    def stop(self) -> None:
        self._stopping.set()
        if self._keeper is not None:
            self._keeper.join(timeout=5)
        with self._lock:
            for proc in self._procs:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            for proc in self._procs:
                proc.wait(timeout=10)
            self._procs = []
        self.stopped_at = time.monotonic()

    def running(self) -> int:
        with self._lock:
            return sum(proc.poll() is None for proc in self._procs)

    def __enter__(self) -> Hog:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def host_procs_running() -> int:
    """The host's runnable processes now (its /proc/stat's procs_running, read outside any jail)."""
    with open("/proc/stat") as handle:
        for line in handle:
            if line.startswith("procs_running "):
                return int(line.split()[1])
    raise AssertionError("no procs_running in /proc/stat")
