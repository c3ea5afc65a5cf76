"""Warm pylint: concurrent requests coalesced into batches (`PylintBatcher`), each batch linted in one jail by the
warm supervisor (judge/harness/pylint_warm.py), whose framed records are read here; every file gets exactly the
result of its cold run (pylint_driver.py)."""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from judge.harness import pylint_warm
from judge.offline import pylint_driver, tools
from judge.offline.pylint_driver import neutralise_pylint_pragmas, pylint_cold_run, pylint_result
from judge.offline.scores import OfflineScore, OfflineUnavailable
from judge.offline.tools import encode_source, tool_failure
from judge.tooljail import ToolJail

log = logging.getLogger(__name__)

# Warm pylint (judge/harness/pylint_warm.py): concurrent requests are linted in batches, one jail per batch, pylint
# imported once per batch and one forked child per file. A batch closes at LINT_BATCH_FILES files or LINT_BATCH_BYTES of
# source, or LINT_BATCH_LINGER_S after it could start (a runner free, a file waiting); its jail's stdout
# (every file's report) may reach LINT_BATCH_OUTPUT_LIMIT, past which the files not yet reported are linted again.
LINT_BATCH_FILES = 16
LINT_BATCH_BYTES = 4 << 20
LINT_BATCH_LINGER_S = 0.05
LINT_BATCH_OUTPUT_LIMIT = 16 << 20

_WARM_OUTCOMES = frozenset({"exit", "signal", "timeout", "memory", "output"})


@dataclass(frozen=True)
class WarmRecord:
    """What the warm supervisor reported for one file: how its child ended and, for "exit", its whole stdout."""

    outcome: str
    code: int | None
    signum: int | None
    stdout: bytes


@functools.cache
def warm_script() -> str:
    """The warm supervisor's source, run in the jail as `python3 -c`."""
    return Path(pylint_warm.__file__).read_text(encoding="utf-8")


def warm_run(jail: ToolJail, sources: list[bytes], *, driver: str | None = None) -> tuple[bool, list[WarmRecord]]:
    """Lint `sources` (neutralised, encoded) in one jail with judge/harness/pylint_warm.py; returns whether its
    supervisor got ready (pylint imported and warm) and the records of the files it finished, in order: a prefix of
    `sources`, all of them unless the jail was stopped (a limit of the whole batch, or the sandbox failed).

    The jail is the cold run's (LINT_MEMORY_MB, the same mounts) with room for every file's own limits: CPU and
    wall clock of LINT_CPU_S and LINT_WALL_S per file plus one more for the supervisor's start."""
    count = len(sources)
    manifest = {
        # The cold run's driver, run by each child as the cold run's interpreter runs it.
        "driver": pylint_driver.PYLINT_DRIVER if driver is None else driver,
        "args": list(pylint_driver.PYLINT_ARGS),
        "files": [{"key": index, "size": len(source)} for index, source in enumerate(sources)],
        "cpu_s": tools.LINT_CPU_S,
        "wall_s": tools.LINT_WALL_S,
        "memory_mb": tools.LINT_MEMORY_MB,
        "output_limit": tools.LINT_OUTPUT_LIMIT,
        # Chosen here, where the whole batch is: the supervisor never holds more than one file.
        "warm": pylint_warm.warm_modules(sources),
    }
    # The sources travel on stdin, after the manifest (its length first): the supervisor reads each only when its
    # turn comes, so neither it nor a child it forks holds another file's source (the child sees its own file
    # alone in /box, and the empty pylintrc; its stdin is /dev/null).
    header = json.dumps(manifest).encode()
    stdin = b"%d\n" % len(header) + header + b"".join(sources)
    argv = [tools.LINT_PYTHON, "-I", "-B", "-c", warm_script()]
    result = jail.run(
        argv,
        {"pylintrc": b""},
        cpu_time_s=tools.LINT_CPU_S * (count + 1),
        wall_time_s=tools.LINT_WALL_S * (count + 1),
        memory_mb=tools.LINT_MEMORY_MB,
        output_limit=LINT_BATCH_OUTPUT_LIMIT,
        stdin=stdin,
    )
    if result.jail_error:
        log.error("lint: the sandbox could not run a pylint batch: %s\n%s", result.jail_error, result.nsjail_log)
    return warm_records(result.stdout, count)


def warm_records(stdout: bytes, count: int) -> tuple[bool, list[WarmRecord]]:
    """Parse the supervisor's stdout (judge/harness/pylint_warm.py): `ready`, then per file a JSON header line and the
    child's stdout. Every field is checked; reading stops at the first record that is not exactly as expected
    (e.g. cut short when the jail was stopped), and the files from there on have no record."""
    if not stdout.startswith(b"ready\n"):
        return False, []
    records: list[WarmRecord] = []
    position = len(b"ready\n")
    while len(records) < count:
        end = stdout.find(b"\n", position, position + 4096)
        if end < 0:
            break
        try:
            header = json.loads(stdout[position:end])
        except ValueError:
            break
        if not isinstance(header, dict) or header.get("key") != len(records):
            break
        outcome, code, signum, length = (header.get(k) for k in ("outcome", "code", "signal", "stdout"))
        if outcome not in _WARM_OUTCOMES or not all(_small_int(v) for v in (code, signum, length)):
            break
        if outcome == "exit" and code is None or outcome == "signal" and signum is None:
            break
        if length is None or length > tools.LINT_OUTPUT_LIMIT or end + 1 + length > len(stdout):
            break
        records.append(WarmRecord(outcome, code, signum, stdout[end + 1 : end + 1 + length]))
        position = end + 1 + length
    return True, records


def _small_int(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 31)


def _pylint_from_record(record: WarmRecord, pragmas: int) -> OfflineScore:
    if record.outcome == "exit":
        return pylint_result(record.code, record.stdout, pragmas)
    raise OfflineUnavailable(tool_failure("pylint", record.outcome, record.signum))


@dataclass(eq=False)
class _LintRequest:
    linted: bytes
    pragmas: int
    future: Future[OfflineScore]
    queued: float

    def settle(self, compute: Callable[[], OfflineScore]) -> None:
        """Resolve the caller's future with compute()'s score or exception (once; later calls are ignored)."""
        if self.future.done():
            return
        try:
            score = compute()
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who records it
            self.future.set_exception(exc)
        else:
            self.future.set_result(score)


def _lint_warm_batch(jail: ToolJail, requests: list[_LintRequest]) -> None:
    """Settle every request of a batch, each with exactly the result its file gets alone.

    A file the warm supervisor finished gets its child's result. If the jail stopped mid-batch, the file it was on
    is linted again cold (its own run: a file that brings a batch down gets the cold run's failure, and only it
    pays for the cold run) and the rest form a new warm batch. If the supervisor never got ready (pylint missing,
    too little memory or time to import it, the sandbox failing), every file is linted cold: each then gets
    exactly the cold run's failure."""
    remaining = requests
    try:
        while remaining:
            ready, records = warm_run(jail, [request.linted for request in remaining])
            for request, record in zip(remaining, records, strict=False):
                request.settle(functools.partial(_pylint_from_record, record, request.pragmas))
            unfinished = remaining[len(records) :]
            if not unfinished:
                return
            if not ready:
                log.warning("lint: the warm pylint supervisor did not start; %d files linted cold", len(unfinished))
                for request in unfinished:
                    request.settle(functools.partial(_cold_request, request, jail))
                return
            unfinished[0].settle(functools.partial(_cold_request, unfinished[0], jail))
            remaining = unfinished[1:]
    except BaseException as exc:
        for request in remaining:
            if not request.future.done():
                request.future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("lint batch stopped"))
        if not isinstance(exc, Exception):
            raise
        log.exception("lint: a pylint batch failed")


def _cold_request(request: _LintRequest, jail: ToolJail) -> OfflineScore:
    return pylint_result(*pylint_cold_run(request.linted, jail), request.pragmas)


class PylintBatcher:
    """Coalesces concurrent pylint requests on one ToolJail into warm batches. Thread-safe.

    `submit` queues a file and returns a future; a dispatcher thread waits for one of `runners` to be free (all
    the while more requests queue), then closes a batch when `max_files` files or `max_bytes` of source wait, or
    `linger_s` after it could start, and starts it. Each future gets its own file's result.
    The dispatcher ends after a few idle seconds and starts again with the next request.
    """

    IDLE_S = 10.0

    def __init__(
        self,
        jail: ToolJail,
        *,
        max_files: int = LINT_BATCH_FILES,
        max_bytes: int = LINT_BATCH_BYTES,
        linger_s: float = LINT_BATCH_LINGER_S,
        runners: int | None = None,
    ) -> None:
        self.jail = jail
        self.max_files = max(1, max_files)
        self.max_bytes = max_bytes
        self.linger_s = linger_s
        # One batch per core keeps batches large (the supervisor's start is the cost a batch shares).
        self.runners = max(1, runners or min(jail.slots, os.cpu_count() or 1))
        self._free = threading.Semaphore(self.runners)
        self._cond = threading.Condition()
        self._pending: list[_LintRequest] = []
        self._pending_bytes = 0
        self._dispatcher: threading.Thread | None = None
        self.batches = 0  # batches started (for tests and benchmarks)

    def submit(self, source: str) -> Future[OfflineScore]:
        """Queue a Python source (checked by the caller: not empty, not too large) for pylint."""
        future: Future[OfflineScore] = Future()
        if not Path(tools.LINT_PYTHON).is_file():
            future.set_exception(OfflineUnavailable("lint: pylint is not installed"))
            return future
        linted, pragmas = neutralise_pylint_pragmas(source)
        request = _LintRequest(encode_source(linted), pragmas, future, time.monotonic())
        with self._cond:
            if self._dispatcher is None:
                dispatcher = threading.Thread(target=self._dispatch, name="pylint-batcher", daemon=True)
                dispatcher.start()  # it waits for this lock; if it cannot start, nothing was queued
                self._dispatcher = dispatcher
            self._pending.append(request)
            self._pending_bytes += len(request.linted)
            self._cond.notify()
        return future

    def _full(self) -> bool:
        return len(self._pending) >= self.max_files or self._pending_bytes >= self.max_bytes

    def _dispatch(self) -> None:
        try:
            while self._dispatch_one():
                pass
        except BaseException as exc:  # never leave a caller waiting on a dispatcher that is gone
            log.exception("lint: the pylint batcher stopped")
            with self._cond:
                failed, self._pending, self._pending_bytes = self._pending, [], 0
                self._dispatcher = None
            for request in failed:
                if request.future.set_running_or_notify_cancel():
                    request.future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("stopped"))
            if not isinstance(exc, Exception):
                raise

    def _dispatch_one(self) -> bool:
        """Start one batch; False once idle for IDLE_S (the dispatcher then ends)."""
        with self._cond:
            idle_until = time.monotonic() + self.IDLE_S
            while not self._pending:
                left = idle_until - time.monotonic()
                if left <= 0:
                    self._dispatcher = None
                    return False
                self._cond.wait(left)
        self._free.acquire()  # requests arriving meanwhile join this batch
        batch: list[_LintRequest] = []
        try:
            # Linger from when the batch could start: callers whose files a batch just finished come back with
            # their next files within milliseconds, and join this batch rather than wait for the next.
            free_at = time.monotonic()
            with self._cond:
                close_at = max(free_at, self._pending[0].queued if self._pending else free_at) + self.linger_s
                while not self._full() and (left := close_at - time.monotonic()) > 0:
                    self._cond.wait(left)
                batch = self._take()
            if not batch:
                self._free.release()
                return True
            threading.Thread(target=self._run, args=(batch,), name="pylint-batch", daemon=True).start()
        except BaseException as exc:
            self._free.release()
            for request in batch:
                request.future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("stopped"))
            raise
        self.batches += 1
        return True

    def _take(self) -> list[_LintRequest]:
        batch: list[_LintRequest] = []
        size = 0
        while self._pending and len(batch) < self.max_files:
            request = self._pending[0]
            if batch and size + len(request.linted) > self.max_bytes:
                break
            self._pending.pop(0)
            self._pending_bytes -= len(request.linted)
            # A caller that gave up (a cancelled task) is not linted.
            if request.future.set_running_or_notify_cancel():
                batch.append(request)
                size += len(request.linted)
        return batch

    def _run(self, batch: list[_LintRequest]) -> None:
        try:
            _lint_warm_batch(self.jail, batch)
        finally:
            self._free.release()


_BATCHERS: weakref.WeakKeyDictionary[ToolJail, PylintBatcher] = weakref.WeakKeyDictionary()
_BATCHERS_LOCK = threading.Lock()


def pylint_batcher(jail: ToolJail) -> PylintBatcher:
    """The batcher of this jail (one per jail, made on first use), shared by every caller of `lint`."""
    with _BATCHERS_LOCK:
        batcher = _BATCHERS.get(jail)
        if batcher is None:
            batcher = _BATCHERS[jail] = PylintBatcher(jail)
        return batcher
