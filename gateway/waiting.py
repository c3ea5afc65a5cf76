"""Waiting for an attempt to end, for `GET /v1/attempts/{attempt_id}?wait_s=`: a long poll instead of a client's
loop of reads.

One subscription per gateway process to the channel on which workers announce attempts that ended
(`queue.ATTEMPTS_ENDED_CHANNEL`, published after the commit), fanned out to the requests waiting on them. An
announcement can be lost (Redis restarting, an attempt ended by a path that announces nothing, such as
cancellation), so one task also reads, every RECHECK_S, which of all the attempts waited on have ended: one query
per process, however many requests wait. A waiting request holds no database connection, stops waiting when its
client goes away, and a tenant (or the process) already waiting on MAX_WAITS_PER_TENANT (MAX_WAITS) attempts gets
its answer at once instead: waiting is a convenience, never a way to hold the gateway's resources.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from sqlalchemy import select

from services.kernel import queue
from services.kernel.contracts import FINAL_ATTEMPT_STATUSES
from services.kernel.db import sessionmaker
from services.kernel.models import Attempt

log = logging.getLogger("tribunal.gateway")

# How often the waited-on attempts' statuses are read, announced or not.
RECHECK_S = 1.0
# How often a waiting request looks whether its client is still there.
DISCONNECT_CHECK_S = 0.5
# After the subscription breaks, it is made again this much later (the recheck carries on meanwhile).
RESUBSCRIBE_S = 1.0
# Requests waiting at once, per tenant and per gateway process; past either, a request answers at once.
MAX_WAITS_PER_TENANT = 64
MAX_WAITS = 1024
# The recheck reads this many attempt ids per statement.
_RECHECK_CHUNK = 500


class EndedAttempts:
    """The gateway's waiting room (one per app, made by its lifespan): the listener on the attempts-ended
    channel and the periodic recheck, both started by the first request that waits and stopped by `close()`."""

    def __init__(self, *, per_tenant: int = MAX_WAITS_PER_TENANT, total: int = MAX_WAITS) -> None:
        self.per_tenant = per_tenant
        self.total = total
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._by_tenant: collections.Counter[str] = collections.Counter()
        self._listener: asyncio.Task[None] | None = None
        self._recheck: asyncio.Task[None] | None = None

    def waiting(self) -> int:
        """How many requests wait now."""
        return sum(self._by_tenant.values())

    async def wait(
        self, tenant: str, attempt_id: str, timeout_s: float, disconnected: Callable[[], Awaitable[bool]]
    ) -> bool:
        """Wait until the attempt is announced or found ended (True), or until `timeout_s` passed, the client went
        away (`disconnected()`) or the tenant or the process already has its quota of waiting requests (False).
        The caller reads the attempt afterwards either way."""
        if self._by_tenant[tenant] >= self.per_tenant or self.waiting() >= self.total:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with self._watching(tenant, attempt_id) as announced:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(announced.wait(), min(remaining, DISCONNECT_CHECK_S))
                    return True
                if await disconnected():
                    return False

    @contextlib.asynccontextmanager
    async def _watching(self, tenant: str, attempt_id: str) -> AsyncIterator[asyncio.Event]:
        event = asyncio.Event()
        self._waiting.setdefault(attempt_id, set()).add(event)
        self._by_tenant[tenant] += 1
        self._ensure_running()
        try:
            yield event
        finally:
            self._by_tenant[tenant] -= 1
            if not self._by_tenant[tenant]:
                del self._by_tenant[tenant]
            waiters = self._waiting.get(attempt_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiting[attempt_id]

    def _ensure_running(self) -> None:
        if self._listener is None or self._listener.done():
            self._listener = asyncio.create_task(self._listen(), name="tribunal-attempts-ended")
        if self._recheck is None or self._recheck.done():
            self._recheck = asyncio.create_task(self._recheck_while_waited_on(), name="tribunal-attempts-recheck")

    def _wake(self, attempt_ids: list[str]) -> None:
        for attempt_id in attempt_ids:
            for event in self._waiting.get(attempt_id, ()):
                event.set()

    async def _listen(self) -> None:
        while True:
            pubsub = None
            try:
                pubsub = (await queue.get_pool()).pubsub()
                await pubsub.subscribe(queue.ATTEMPTS_ENDED_CHANNEL)
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        data = message.get("data")
                        self._wake((data.decode() if isinstance(data, bytes) else str(data)).split())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the recheck carries on meanwhile
                log.warning("attempts-ended channel lost (%s); rechecking until it is back", exc)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()
            await asyncio.sleep(RESUBSCRIBE_S)

    async def _recheck_while_waited_on(self) -> None:
        """Every RECHECK_S, while anybody waits: which of the waited-on attempts have ended (one statement per
        _RECHECK_CHUNK of them), waking their requests."""
        while self._waiting:
            await asyncio.sleep(RECHECK_S)
            ids = list(self._waiting)
            try:
                async with sessionmaker()() as session:
                    for start in range(0, len(ids), _RECHECK_CHUNK):
                        chunk = ids[start : start + _RECHECK_CHUNK]
                        ended = await session.scalars(
                            select(Attempt.attempt_id).where(
                                Attempt.attempt_id.in_(chunk), Attempt.status.in_(FINAL_ATTEMPT_STATUSES)
                            )
                        )
                        self._wake(list(ended))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - waiting requests end at their timeout meanwhile
                log.warning("rechecking waited-on attempts failed (%s)", exc)

    async def close(self) -> None:
        for task in (self._listener, self._recheck):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._listener = self._recheck = None
