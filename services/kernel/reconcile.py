"""The reconciler: the database is the truth, so work it holds as pending but Redis lost is enqueued again.

What is pending is services/kernel/pending.py's to say: attempts waiting at a stage, and each service's own
pending query (direct executions, re-judge jobs, reports, perturbation and synthesis steps, similarity pairs).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from arq.connections import ArqRedis
from arq.jobs import JobStatus

from services.kernel import queue, telemetry
from services.kernel.db import session_scope
from services.kernel.models import utcnow
from services.kernel.pending import PendingWork, pending_before

log = logging.getLogger("tribunal.reconcile")

# A pass looks at this many of the oldest pending items of each kind; the next pass continues.
_BATCH = 2000


async def pending_work(grace_s: float) -> PendingWork:
    """Every (task, subject, tenant) the database holds as pending and older than `grace_s`."""
    cutoff = utcnow() - timedelta(seconds=grace_s)
    async with session_scope() as session:
        return await pending_before(session, cutoff, _BATCH)


async def reconcile_once(pool: ArqRedis, grace_s: float) -> int:
    """Enqueue every pending task older than `grace_s` that Redis no longer holds, as its tenant's work; a queued
    task that no tenant's list holds (enqueued without one, e.g. by an older gateway during a rolling update) is
    listed as its tenant's (services/kernel/fair.py)."""
    restored = 0
    for task, subject, tenant in await pending_work(grace_s):
        status = await queue.task_status(task, subject, pool=pool)
        if status == JobStatus.not_found:
            if await queue.enqueue(task, subject, tenant=tenant, pool=pool):
                telemetry.reconciled.labels(task.value).inc()
                restored += 1
        elif status in (JobStatus.queued, JobStatus.deferred):
            await queue.adopt(task, subject, tenant=tenant, pool=pool)
    if restored:
        log.warning("reconciler re-enqueued %d task(s) that Redis no longer held", restored)
    return restored


async def reconcile_forever(pool: ArqRedis, interval_s: float, grace_s: float) -> None:
    """Run `reconcile_once` every `interval_s` until cancelled; errors are logged, never fatal."""
    while True:
        try:
            await reconcile_once(pool, grace_s)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the next pass tries again
            log.exception("reconcile pass failed")
        await asyncio.sleep(interval_s)
