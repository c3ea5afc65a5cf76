"""Attempts: submit one or a batch (202 + job), read one, list with a cursor."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from gateway import paging, quotas
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.errors import field_error
from gateway.schemas import AttemptAccepted, AttemptIn, AttemptOut, AttemptPage, BatchAccepted, BatchIn
from gateway.submissions import attempt_views, find_attempt_view, not_found, put_attempt, put_attempts
from gateway.waiting import EndedAttempts
from services.kernel import attempts, jobs
from services.kernel.contracts import FINAL_ATTEMPT_STATUSES, AttemptStatus, JobKind, JobStatus
from services.kernel.models import Attempt, new_id
from services.kernel.plans import AttemptsPlan

router = APIRouter(prefix="/v1/attempts", tags=["attempts"])


@router.post("", status_code=202, response_model=AttemptAccepted)
async def submit(body: AttemptIn, principal: SubmitKey, session: SessionDep) -> AttemptAccepted:
    async with quotas.admission(principal, "queued_attempts"):
        for _ in range(2):
            job_id = new_id("job")
            try:
                attempt, created = await put_attempt(session, principal.tenant, body, job_id, ["body"])
                await quotas.check_queued_attempts(session, principal, int(created))
                if created:
                    jobs.create_job(
                        session,
                        tenant=principal.tenant,
                        kind=JobKind.EXECUTE_ATTEMPT,
                        total=1,
                        plan=AttemptsPlan(attempt_ids=[attempt.attempt_id]),
                        job_id=job_id,
                    )
                asked = quotas.judgments_of([attempt] if created else [])
                async with quotas.judgments_counted(session, principal, asked):
                    await session.commit()
                break
            except IntegrityError:
                # A concurrent request with the same attempt_uid won the race: answer with its ids.
                await session.rollback()
        else:
            raise field_error(["body", "attempt_uid"], "concurrent submissions of this attempt_uid conflict", 409)
    if created:
        await attempts.enqueue_first_stages([attempt])
    return AttemptAccepted(attempt_id=attempt.attempt_id, job_id=attempt.job_id or job_id, status=attempt.status)


@router.post(":batch", status_code=202, response_model=BatchAccepted)
async def submit_batch(body: BatchIn, principal: SubmitKey, session: SessionDep) -> BatchAccepted:
    job_id = new_id("job")
    try:
        async with quotas.admission(principal, "queued_attempts"):
            stored = await put_attempts(session, principal.tenant, body.attempts, job_id, ["body", "attempts"])
            ids = [attempt.attempt_id for attempt, _ in stored]
            new = [attempt for attempt, created in stored if created]
            await quotas.check_queued_attempts(session, principal, len(new))
            job = jobs.create_job(
                session,
                tenant=principal.tenant,
                kind=JobKind.EXECUTE_BATCH,
                total=len(new),
                plan=AttemptsPlan(attempt_ids=ids),
                job_id=job_id,
            )
            if not new:
                job.status, job.finished_at = JobStatus.SUCCEEDED, job.created_at
            async with quotas.judgments_counted(session, principal, quotas.judgments_of(new)):
                await session.commit()
    except IntegrityError:
        await session.rollback()
        raise field_error(
            ["body", "attempts"], "a concurrent submission used the same attempt_uid; retry", 409
        ) from None
    await attempts.enqueue_first_stages(new)
    return BatchAccepted(job_id=job_id, attempt_ids=ids)


# The longest a read may wait for its attempt to end (`wait_s`).
MAX_WAIT_S = 60.0


@router.get("/{attempt_id}", response_model=AttemptOut)
async def get(
    attempt_id: str,
    principal: ReadKey,
    session: SessionDep,
    request: Request,
    wait_s: Annotated[
        float,
        Query(
            ge=0,
            le=MAX_WAIT_S,
            description="Wait up to this many seconds for the attempt to end (status done or failed) before "
            "answering: a long poll. 0 (the default) answers at once. The answer is the attempt as it is then, "
            "ended or not.",
        ),
    ] = 0,
) -> dict[str, Any]:
    view = await find_attempt_view(session, principal.tenant, attempt_id)
    if view is None:
        raise not_found("attempt", attempt_id)
    if wait_s == 0 or view["status"] in FINAL_ATTEMPT_STATUSES:
        return view
    # The read's transaction ends here: no database connection is held while the request waits.
    await session.rollback()
    ended_attempts: EndedAttempts = request.app.state.ended_attempts
    await ended_attempts.wait(principal.tenant, attempt_id, wait_s, request.is_disconnected)
    return await find_attempt_view(session, principal.tenant, attempt_id) or view


@router.get("", response_model=AttemptPage)
async def list_attempts(
    principal: ReadKey,
    session: SessionDep,
    problem_id: str | None = None,
    participant: str | None = None,
    status: AttemptStatus | None = None,
    limit: paging.Limit = paging.DEFAULT_LIMIT,
    cursor: str | None = None,
) -> dict[str, Any] | JSONResponse:
    query = select(Attempt).where(Attempt.tenant == principal.tenant)
    if problem_id is not None:
        problem = await attempts.find_problem(session, principal.tenant, problem_id)
        if problem is None:
            return {"items": [], "next_cursor": None}
        query = query.where(Attempt.problem_pk == problem.id)
    if participant is not None:
        query = query.where(Attempt.participant == participant)
    if status is not None:
        query = query.where(Attempt.status == status)
    rows = (await session.scalars(paging.window(query, Attempt.created_at, Attempt.attempt_id, cursor, limit))).all()
    page, next_cursor = paging.split(rows, limit, lambda attempt: (attempt.created_at, attempt.attempt_id))
    # A bounded number of statements for any page size.
    return {"items": await attempt_views(session, page), "next_cursor": next_cursor}
