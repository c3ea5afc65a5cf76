"""Coalescing concurrent requests of one process into shared batches (group commit).

A worker runs many tasks at once, and each used to open its own transaction to claim an attempt and another to
store its result. `Coalescer` gathers such requests for a few milliseconds, or until a batch is full, and runs them
as one batch (one transaction); each caller gets its own outcome. One batch runs at a time, and requests that
arrive meanwhile form the next one, so under load batches grow by themselves and an idle process waits at most
the window.

If a batch raises, it is retried one request at a time (`single`): the batch function must be all-or-nothing (one
transaction that rolled back), so no request is done twice or lost, and a request that fails alone fails only its
own caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

log = logging.getLogger("tribunal.batching")


class Coalescer[T, R]:
    """Run concurrent `submit(item)` calls as batches of at most `max_size` through `batch(items) -> results`
    (one result per item, in order), falling back to `single(item)` for each item of a batch that raised.
    `max_size` 1 runs every item through `single`, at once, as without a coalescer. Coalescers given the same
    `lock` run their batches one at a time. `quiet`, if given, says when no other request can arrive within the
    window (its caller knows nobody else is on the way): a batch formed from idle then goes at once instead of
    waiting out the window for nothing."""

    def __init__(
        self,
        batch: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
        single: Callable[[T], Awaitable[R]],
        *,
        max_size: int,
        window_s: float,
        name: str = "batch",
        lock: asyncio.Lock | None = None,
        quiet: Callable[[], bool] | None = None,
    ) -> None:
        self._batch = batch
        self._single = single
        self.max_size = max(1, max_size)
        self.window_s = max(0.0, window_s)
        self.name = name
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._full = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        # Held while a batch runs: coalescers that share one write to the database one at a time (SQLite has one
        # writer; two transactions of one process would only make each other wait in SQLite's busy handler).
        self._lock = lock or asyncio.Lock()
        self._quiet = quiet
        # What happened so far: batches run, items they carried, batches that fell back to single items.
        self.batches = 0
        self.items = 0
        self.fallbacks = 0
        self.busy_s = 0.0

    async def submit(self, item: T) -> R:
        """The outcome of `item`, run in a batch with whatever else is submitted meanwhile. If the caller is
        cancelled before its batch starts, the item is dropped; once its batch started, the item completes
        without it (as a task killed after its transaction committed)."""
        if self.max_size == 1:
            return await self._single(item)
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self.max_size:
            self._full.set()
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run(), name=f"coalescer-{self.name}")
        return await future

    async def _run(self) -> None:
        live: list[tuple[T, asyncio.Future[R]]] = []
        try:
            # Only a batch formed from idle waits for the window; those that gathered while a batch ran go at once.
            if self.window_s and len(self._pending) < self.max_size and not (self._quiet and self._quiet()):
                self._full.clear()
                try:
                    await asyncio.wait_for(self._full.wait(), self.window_s)
                except TimeoutError:
                    pass
            while self._pending:
                async with self._lock:
                    # Taken once the lock is ours: what arrived while another batch held it comes along.
                    taken, self._pending = self._pending[: self.max_size], self._pending[self.max_size :]
                    self._full.clear()
                    live = [(item, future) for item, future in taken if not future.done()]
                    if live:
                        started = time.perf_counter()
                        try:
                            await self._flush(live)
                        finally:
                            self.busy_s += time.perf_counter() - started
        except BaseException:
            # The runner itself is cancelled (the worker is shutting down): nobody is left to run what waits, and
            # the callers of the batch it was running learn that theirs was interrupted.
            for _, future in [*live, *self._pending]:
                future.cancel()
            self._pending = []
            raise

    async def _flush(self, taken: list[tuple[T, asyncio.Future[R]]]) -> None:
        items = [item for item, _ in taken]
        try:
            results = await self._batch(items)
            if len(results) != len(items):
                raise RuntimeError(f"{self.name}: {len(results)} results for {len(items)} items")
        except Exception:
            self.fallbacks += 1
            log.warning("%s: a batch of %d failed; running them one by one", self.name, len(items), exc_info=True)
            for item, future in taken:
                if future.done():
                    continue
                try:
                    outcome = await self._single(item)
                except Exception as exc:  # noqa: BLE001 - it belongs to that caller, who re-raises it
                    if not future.done():
                        future.set_exception(exc)
                else:
                    if not future.done():
                        future.set_result(outcome)
            return
        self.batches += 1
        self.items += len(items)
        for (_, future), outcome in zip(taken, results, strict=True):
            if not future.done():
                future.set_result(outcome)
