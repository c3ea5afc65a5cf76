"""The gateway's side of quotas: the request buckets every authenticated request passes, and the caps on a tenant's
live work checked where that work is submitted. Each limit is the calling key's value (its own, else the default);
counts are the tenant's, whichever of its keys made them. Admin keys have no quotas.

The caps are counted in the database at submission, so concurrent submissions may pass a cap together by the
few that raced; the request buckets are exact (one Lua script in Redis)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.errors import QuotaExceeded
from services.kernel import queue, telemetry
from services.kernel.contracts import LIVE_JOB_STATUSES, AttemptStatus, JobKind
from services.kernel.models import Attempt, Job
from services.kernel.ratelimit import QuotaName, quota_of, take_request

if TYPE_CHECKING:
    from gateway.deps import Principal

log = logging.getLogger("tribunal.gateway.quotas")

# A cap's Retry-After: live work ends at its own pace, so the client is told to look again soon.
CAP_RETRY_AFTER_S = 1


def _exempt(principal: Principal) -> bool:
    return "admin" in principal.scopes


def _refuse(limit: QuotaName, value: int, retry_after_s: int, scope: str = "tenant") -> QuotaExceeded:
    telemetry.quota_rejections.labels(limit).inc()
    return QuotaExceeded(limit, value, retry_after_s, scope)


async def meter_request(principal: Principal) -> None:
    """Take one token from the key's and the tenant's request buckets, or answer 429. Without Redis the request
    is let through (and logged): the buckets protect the service, they are not a reason to stop serving."""
    if _exempt(principal):
        return
    per_minute = quota_of(principal.quotas, "requests_per_minute")
    try:
        refusal = await take_request(
            await queue.get_pool(), key_id=principal.key_id, tenant=principal.tenant, per_minute=per_minute
        )
    except Exception:  # noqa: BLE001 - Redis unreachable: fail open, /readyz reports Redis
        log.warning("request buckets unavailable; request admitted unmetered", exc_info=True)
        return
    if refusal is not None:
        raise _refuse("requests_per_minute", per_minute, refusal.retry_after_s, refusal.bucket)


async def _over_cap(session: AsyncSession, principal: Principal, limit: QuotaName, count: int, adding: int) -> None:
    value = quota_of(principal.quotas, limit)
    if count + adding > value:
        await session.rollback()
        raise _refuse(limit, value, CAP_RETRY_AFTER_S)


async def _live_jobs(session: AsyncSession, tenant: str, kind: JobKind) -> int:
    query = select(func.count()).where(Job.tenant == tenant, Job.kind == kind, Job.status.in_(LIVE_JOB_STATUSES))
    return int(await session.scalar(query) or 0)


async def check_queued_attempts(session: AsyncSession, principal: Principal, new: int) -> None:
    """After `new` attempts were added (flushed or pending) in `session`: 429 if the tenant's queued or running
    attempts, these included, exceed queued_attempts; the session is then rolled back."""
    if _exempt(principal) or new <= 0:
        return
    query = select(func.count()).where(
        Attempt.tenant == principal.tenant, Attempt.status.in_([AttemptStatus.QUEUED, AttemptStatus.RUNNING])
    )
    live = int(await session.scalar(query) or 0)
    await _over_cap(session, principal, "queued_attempts", live - new, new)


async def check_running_executions(session: AsyncSession, principal: Principal) -> None:
    """Before a direct execution is created: 429 if the tenant's unfinished ones reach running_executions."""
    if not _exempt(principal):
        live = await _live_jobs(session, principal.tenant, JobKind.EXECUTE_DIRECT)
        await _over_cap(session, principal, "running_executions", live, 1)


async def check_queued_reports(session: AsyncSession, principal: Principal) -> None:
    """Before a report is created: 429 if the tenant's reports not yet built reach queued_reports."""
    if not _exempt(principal):
        live = await _live_jobs(session, principal.tenant, JobKind.REPORT)
        await _over_cap(session, principal, "queued_reports", live, 1)
