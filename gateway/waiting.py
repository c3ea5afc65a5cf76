"""Waiting for an attempt to end, for `GET /v1/attempts/{attempt_id}?wait_s=`: a long poll instead of a client's
loop of reads.

One subscription per gateway process to the channel on which workers announce attempts that ended
(`queue.ATTEMPTS_ENDED_CHANNEL`, published after the commit), fanned out to the requests waiting on them. An
announcement is a hint, not the truth: a woken request reads the attempt's status from the database, and a request
also reads it every RECHECK_S on its own, so an announcement lost (Redis restarting, an attempt ended by a path that
announces nothing, such as cancellation) delays an answer by at most that, and never loses one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from services.kernel import queue

log = logging.getLogger("tribunal.gateway")

# A waiting request reads the status again at least this often, announced or not.
RECHECK_S = 1.0
# After the subscription breaks, it is made again this much later (waiting requests recheck meanwhile).
RESUBSCRIBE_S = 1.0


class EndedAttempts:
    """The gateway's listener on the attempts-ended channel (one per app, made by its lifespan), started by the
    first request that waits and stopped by `close()`."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._listener: asyncio.Task[None] | None = None

    async def wait_until(self, attempt_id: str, ended: Callable[[], Awaitable[bool]], timeout_s: float) -> bool:
        """Wait until `ended()` (a read of the attempt's status) says the attempt ended, or `timeout_s` passed.
        `ended()` is asked first, then after each announcement of this attempt and every RECHECK_S."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with self._watching(attempt_id) as announced:
            while True:
                if await ended():
                    return True
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(announced.wait(), min(remaining, RECHECK_S))
                announced.clear()

    @contextlib.asynccontextmanager
    async def _watching(self, attempt_id: str) -> AsyncIterator[asyncio.Event]:
        # Registered before the first read of the status, so an announcement between the two is not missed.
        if self._listener is None or self._listener.done():
            self._listener = asyncio.create_task(self._listen(), name="tribunal-attempts-ended")
        event = asyncio.Event()
        self._waiting.setdefault(attempt_id, set()).add(event)
        try:
            yield event
        finally:
            waiters = self._waiting.get(attempt_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiting[attempt_id]

    async def _listen(self) -> None:
        while True:
            pubsub = None
            try:
                pubsub = (await queue.get_pool()).pubsub()
                await pubsub.subscribe(queue.ATTEMPTS_ENDED_CHANNEL)
                self._wake_all()  # an announcement may have been missed while unsubscribed
                async for message in pubsub.listen():
                    if message.get("type") != "message":
                        continue
                    data = message.get("data")
                    for attempt_id in (data.decode() if isinstance(data, bytes) else str(data)).split():
                        for event in self._waiting.get(attempt_id, ()):
                            event.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - waiting requests recheck on their own meanwhile
                log.warning("attempts-ended channel lost (%s); waiting requests recheck until it is back", exc)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()
            await asyncio.sleep(RESUBSCRIBE_S)

    def _wake_all(self) -> None:
        for waiters in self._waiting.values():
            for event in waiters:
                event.set()

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
