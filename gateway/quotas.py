"""The gateway's side of quotas: the request buckets every authenticated request passes, and the caps on a tenant's
work checked where that work is submitted, before anything of it is stored or queued. Each limit is the calling
key's value (its own, else the default); counts are the tenant's, whichever of its keys made them. Admin keys have
no quotas.

Every kind of work is counted: attempts (queued_attempts), similarity pairs (queued_pairs), the judgments a request
asks for (judgments_per_request, and the tenant's judgments_per_day), direct executions and reports. A job that
grows after it is accepted (a perturbation's mutants, a synthesis job's programs) is bounded by the worker that
grows it (services/kernel/ratelimit.py `growth_room`), under the quotas of the key recorded in its plan
(`owner_key_id`, services/kernel/plans.py `OwnedPlan`).

The caps on live work are counted in the database at submission, under the tenant's admission lock (`admission`,
the lock a worker growing one of the tenant's jobs holds too), so that submissions sent together are counted one
after another and cannot pass a cap together; the request buckets and the day's judgments are exact (one Lua script
in Redis each)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable

from redis.exceptions import RedisError
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.errors import QuotaExceeded
from gateway.principal import Principal
from services.kernel import queue, telemetry
from services.kernel.contracts import LIVE_JOB_STATUSES, JobKind
from services.kernel.models import Attempt, Job
from services.kernel.ratelimit import (
    JudgeTokenBudget,
    QuotaName,
    add_judgments,
    live_attempts,
    quota_of,
    seconds_to_next_utc_day,
    take_back_judgments,
    take_request,
    tenant_judge_token_limit,
    tenant_lock,
    unscored_pairs,
)

log = logging.getLogger("tribunal.gateway.quotas")

# A cap's Retry-After: live work ends at its own pace, so the client is told to look again soon.
CAP_RETRY_AFTER_S = 1


# How long a submission waits for its tenant's admission lock (held while another submission of the tenant, or a
# worker growing one of its jobs, counts and stores), and how long a holder may keep it if it dies holding it.
ADMISSION_WAIT_S = 10.0
ADMISSION_HOLD_S = 60.0


def _exempt(principal: Principal) -> bool:
    return "admin" in principal.scopes


def _refuse(
    limit: QuotaName, value: int, retry_after_s: int, scope: str = "tenant", *, asked: int | None = None
) -> QuotaExceeded:
    telemetry.quota_rejections.labels(limit).inc()
    refusal = QuotaExceeded(limit, value, retry_after_s, scope)
    if asked is not None:  # what the request would have added: the client can tell how far over it is
        refusal.detail = f"{refusal.detail}: the request adds {asked}"
        refusal.extensions["requested"] = asked
    return refusal


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


@contextlib.asynccontextmanager
async def admission(principal: Principal, limit: QuotaName) -> AsyncIterator[None]:
    """Held around a submission's count of its tenant's live work and the commit that adds to it, so that the
    tenant's submissions sent together (and its growing jobs' workers, ratelimit.growth_lock: the same lock) count
    one after another, each seeing what the one before committed. Enter it before anything is written: a writer
    waiting for it would hold SQLite's write lock. Not had within ADMISSION_WAIT_S: 429 naming `limit`, Retry-After
    1 s. Admin keys have no caps and take no lock; without Redis the submission is counted unlocked (logged), as the
    request buckets fail open."""
    if _exempt(principal):
        yield
        return
    async with contextlib.AsyncExitStack() as held:
        try:
            redis = await queue.get_pool()
            locked = await held.enter_async_context(
                tenant_lock(redis, principal.tenant, hold_s=ADMISSION_HOLD_S, wait_s=ADMISSION_WAIT_S)
            )
        except (RedisError, OSError):
            log.warning("admission lock unavailable; submission counted unlocked", exc_info=True)
            locked = True
        if not locked:
            refusal = _refuse(limit, quota_of(principal.quotas, limit), CAP_RETRY_AFTER_S)
            refusal.detail = f"{refusal.detail}: the tenant's other submissions are being counted; try again"
            raise refusal
        yield


async def _over_cap(session: AsyncSession, principal: Principal, limit: QuotaName, count: int, adding: int) -> None:
    value = quota_of(principal.quotas, limit)
    if count + adding > value:
        await session.rollback()
        raise _refuse(limit, value, CAP_RETRY_AFTER_S, asked=adding)


async def _live_jobs(session: AsyncSession, tenant: str, kind: JobKind) -> int:
    query = select(func.count()).where(Job.tenant == tenant, Job.kind == kind, Job.status.in_(LIVE_JOB_STATUSES))
    return int(await session.scalar(query) or 0)


async def check_queued_attempts(session: AsyncSession, principal: Principal, new: int) -> None:
    """After `new` attempts were added (flushed or pending) in `session`: 429 if the tenant's queued or running
    attempts, these included, exceed queued_attempts; the session is then rolled back."""
    if _exempt(principal) or new <= 0:
        return
    live = await live_attempts(session, principal.tenant)
    await _over_cap(session, principal, "queued_attempts", live - new, new)


async def check_queued_pairs(session: AsyncSession, principal: Principal, new: int) -> None:
    """Before `new` similarity pairs are stored: 429 if the tenant's pairs not yet scored (in its live jobs), with
    these, would exceed queued_pairs; the session is then rolled back."""
    if _exempt(principal) or new <= 0:
        return
    await _over_cap(session, principal, "queued_pairs", await unscored_pairs(session, principal.tenant), new)


def judgments_of(attempts: Iterable[Attempt]) -> int:
    """The judgment rows these new attempts ask for: each one's judges x conditions x repeats."""
    return sum(len(a.judges or []) * len(a.conditions or []) * max(1, a.repeats or 1) for a in attempts)


async def check_judgments_per_request(session: AsyncSession, principal: Principal, count: int) -> None:
    """429 if one request asks for more than judgments_per_request judgment rows (the session is rolled back).
    A cap on one request: waiting does not help, a smaller request does."""
    if _exempt(principal) or count <= 0:
        return
    value = quota_of(principal.quotas, "judgments_per_request")
    if count > value:
        await session.rollback()
        raise _refuse("judgments_per_request", value, CAP_RETRY_AFTER_S, "request", asked=count)


@contextlib.asynccontextmanager
async def judgments_counted(
    session: AsyncSession, principal: Principal, count: int, *, per_request: int | None = None
) -> AsyncIterator[None]:
    """Around a submission's commit: the request's `count` judgments (its `per_request` bound for the per-request
    cap, if larger: what a growing job may ask for in all) are checked against judgments_per_request, then added to
    the tenant's day, or 429 naming judgments_per_day (Retry-After: the next UTC day) with the session rolled back.
    If the body raises (the commit failed), they are taken back. Without Redis the day is not counted (logged)."""
    await check_judgments_per_request(session, principal, max(count, per_request or 0))
    if _exempt(principal) or count <= 0:
        yield
        return
    limit = quota_of(principal.quotas, "judgments_per_day")
    try:
        redis = await queue.get_pool()
        added, _ = await add_judgments(redis, principal.tenant, count, limit)
    except Exception:  # noqa: BLE001 - Redis unreachable: as the request buckets, fail open; /readyz reports it
        log.warning("judgments per day unavailable; %d judgment(s) admitted uncounted", count, exc_info=True)
        yield
        return
    if not added:
        await session.rollback()
        raise _refuse("judgments_per_day", limit, seconds_to_next_utc_day(), asked=count)
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            await take_back_judgments(redis, principal.tenant, count)
        raise


async def check_judge_tokens(session: AsyncSession, principal: Principal) -> None:
    """Before LLM judging is asked for again (POST /v1/judgments): 429 naming judge_tokens_per_day while the
    tenant's tokens for today are spent (every LLM judgment would be recorded failed), Retry-After the next UTC
    day. Without Redis the judge worker's own check stands."""
    if _exempt(principal):
        return
    limit = await tenant_judge_token_limit(session, principal.tenant)
    try:
        spent = await JudgeTokenBudget(await queue.get_pool(), principal.tenant, limit).exhausted()
    except Exception:  # noqa: BLE001 - the judge worker checks the budget before each LLM judgment anyway
        log.warning("judge token budget unavailable at submission", exc_info=True)
        return
    if spent:
        await session.rollback()
        raise _refuse("judge_tokens_per_day", limit, seconds_to_next_utc_day())


async def check_running_executions(session: AsyncSession, principal: Principal) -> None:
    """Before a direct execution is created: 429 if the tenant's unfinished ones reach running_executions."""
    if not _exempt(principal):
        live = await _live_jobs(session, principal.tenant, JobKind.EXECUTE_DIRECT)
        await _over_cap(session, principal, "running_executions", live, 1)


async def check_queued_reports(session: AsyncSession, principal: Principal) -> None:
    """Before a report is created: 429 if the tenant's reports not yet built reach queued_reports."""
    if not _exempt(principal):
        # Calibrations are built by the same workers: they count among the reports not yet built.
        live = await _live_jobs(session, principal.tenant, JobKind.REPORT) + await _live_jobs(
            session, principal.tenant, JobKind.CALIBRATE
        )
        await _over_cap(session, principal, "queued_reports", live, 1)
