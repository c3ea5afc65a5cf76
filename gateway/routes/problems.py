"""Problems: statement, tests, checker, limits. Idempotent by `problem_id` within a tenant; listed with a cursor.
Test code is checked at creation (gateway/testcheck), and references run against the tests (gateway/validation)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from sqlalchemy import select

from gateway import paging, validation
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.schemas import ProblemIn, ProblemOut, ProblemPage
from gateway.submissions import not_found, problem_view, put_problem
from services.kernel.attempts import find_problem
from services.kernel.keys import has_scope
from services.kernel.models import Problem

router = APIRouter(prefix="/v1/problems", tags=["problems"])


@router.post("", status_code=201, response_model=ProblemOut)
async def create(body: ProblemIn, principal: SubmitKey, session: SessionDep, response: Response) -> dict[str, Any]:
    problem, created = await put_problem(session, principal.tenant, body, ["body"])
    await session.commit()
    if created:
        await validation.enqueue(principal.tenant, problem.validation_jobs or [])
    else:
        response.status_code = 200
    # The stored problem has exactly the content just sent (else 409): echoing its tests tells nothing new.
    return problem_view(problem, with_hidden=True, jobs=await validation.load_jobs(session, [problem]))


@router.get("", response_model=ProblemPage)
async def list_problems(
    principal: ReadKey,
    session: SessionDep,
    limit: paging.Limit = paging.DEFAULT_LIMIT,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The tenant's problems, oldest first, each as `GET /v1/problems/{problem_id}` answers it for this key."""
    query = select(Problem).where(Problem.tenant == principal.tenant)
    rows = (await session.scalars(paging.window(query, Problem.created_at, Problem.problem_id, cursor, limit))).all()
    page, next_cursor = paging.split(rows, limit, lambda problem: (problem.created_at, problem.problem_id))
    # As the single read: hidden tests only for authors (and admins).
    with_hidden = has_scope(principal.scopes, "author")
    found = await validation.load_jobs(session, page)
    return {
        "items": [problem_view(problem, with_hidden=with_hidden, jobs=found) for problem in page],
        "next_cursor": next_cursor,
    }


@router.get("/{problem_id:path}", response_model=ProblemOut)
async def get(problem_id: str, principal: ReadKey, session: SessionDep) -> dict[str, Any]:
    problem = await find_problem(session, principal.tenant, problem_id)
    if problem is None:
        raise not_found("problem", problem_id)
    # Hidden tests are the ground truth: only their authors (and admins) read them back.
    found = await validation.load_jobs(session, [problem])
    return problem_view(problem, with_hidden=has_scope(principal.scopes, "author"), jobs=found)
