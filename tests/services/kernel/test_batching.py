"""The coalescer behind the executor's shared transactions: concurrent requests share batches, each caller gets its
own outcome, a failed batch is retried one request at a time, and a caller that gave up is not run."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.kernel.batching import Coalescer


class Recorder:
    """A batch function and its one-at-a-time counterpart that double numbers and remember what they ran."""

    def __init__(self, fail_batch: bool = False, fail_single: frozenset[int] = frozenset()) -> None:
        self.batches: list[list[int]] = []
        self.singles: list[int] = []
        self.fail_batch = fail_batch
        self.fail_single = fail_single
        self.running = 0
        self.overlap = 0

    async def batch(self, items: Sequence[int]) -> list[int]:
        self.running += 1
        self.overlap = max(self.overlap, self.running)
        try:
            await asyncio.sleep(0.01)
            self.batches.append(list(items))
            if self.fail_batch:
                raise ConnectionError("the batch failed half-way")
            return [2 * item for item in items]
        finally:
            self.running -= 1

    async def single(self, item: int) -> int:
        self.singles.append(item)
        if item in self.fail_single:
            raise ValueError(f"item {item} fails alone")
        return 2 * item


async def test_concurrent_requests_share_a_batch_and_get_their_own_outcomes() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.batch, recorder.single, max_size=16, window_s=0.005)
    assert await asyncio.gather(*(coalescer.submit(i) for i in range(5))) == [0, 2, 4, 6, 8]
    assert recorder.batches == [[0, 1, 2, 3, 4]] and recorder.singles == []
    assert (coalescer.batches, coalescer.items, coalescer.fallbacks) == (1, 5, 0)


async def test_batches_hold_at_most_max_size_and_later_requests_form_the_next() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.batch, recorder.single, max_size=3, window_s=0.05)
    assert await asyncio.gather(*(coalescer.submit(i) for i in range(7))) == [2 * i for i in range(7)]
    assert recorder.batches == [[0, 1, 2], [3, 4, 5], [6]]


async def test_a_failed_batch_is_retried_one_by_one_and_a_failure_stays_with_its_caller() -> None:
    recorder = Recorder(fail_batch=True, fail_single=frozenset({2}))
    coalescer = Coalescer(recorder.batch, recorder.single, max_size=16, window_s=0.005)
    outcomes = await asyncio.gather(*(coalescer.submit(i) for i in range(4)), return_exceptions=True)
    assert outcomes[:2] == [0, 2] and outcomes[3] == 6
    assert isinstance(outcomes[2], ValueError)
    assert recorder.singles == [0, 1, 2, 3] and coalescer.fallbacks == 1


async def test_a_batch_that_answers_for_the_wrong_number_of_items_is_not_trusted() -> None:
    async def short(items: Sequence[int]) -> list[int]:
        return [0]

    async def single(item: int) -> int:
        return item + 100

    coalescer = Coalescer(short, single, max_size=16, window_s=0.005)
    assert await asyncio.gather(coalescer.submit(1), coalescer.submit(2)) == [101, 102]


async def test_a_caller_cancelled_before_its_batch_is_not_run() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.batch, recorder.single, max_size=16, window_s=0.05)
    kept = asyncio.create_task(coalescer.submit(1))
    dropped = asyncio.create_task(coalescer.submit(2))
    await asyncio.sleep(0.01)  # both wait in the window
    dropped.cancel()
    assert await kept == 2
    with pytest.raises(asyncio.CancelledError):
        await dropped
    assert recorder.batches == [[1]]


async def test_coalescers_sharing_a_lock_never_run_two_batches_at_once() -> None:
    recorder = Recorder()
    lock = asyncio.Lock()
    first = Coalescer(recorder.batch, recorder.single, max_size=2, window_s=0, lock=lock)
    second = Coalescer(recorder.batch, recorder.single, max_size=2, window_s=0, lock=lock)
    await asyncio.gather(*(c.submit(i) for i in range(6) for c in (first, second)))
    assert recorder.overlap == 1 and sum(len(b) for b in recorder.batches) == 12
    alone = Recorder()
    third = Coalescer(alone.batch, alone.single, max_size=2, window_s=0)
    fourth = Coalescer(alone.batch, alone.single, max_size=2, window_s=0)
    await asyncio.gather(*(c.submit(i) for i in range(6) for c in (third, fourth)))
    assert alone.overlap == 2  # without a shared lock they do overlap


async def test_a_batch_size_of_one_runs_each_request_alone() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.batch, recorder.single, max_size=1, window_s=0.005)
    assert await asyncio.gather(*(coalescer.submit(i) for i in range(3))) == [0, 2, 4]
    assert recorder.batches == [] and recorder.singles == [0, 1, 2]
