"""Problems: statement, tests, checker, limits. Idempotent by `problem_id` within a tenant."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.schemas import ProblemIn, ProblemOut
from gateway.submissions import not_found, problem_view, put_problem
from services.kernel.attempts import find_problem
from services.kernel.keys import has_scope

router = APIRouter(prefix="/v1/problems", tags=["problems"])


@router.post("", status_code=201, response_model=ProblemOut)
async def create(body: ProblemIn, principal: SubmitKey, session: SessionDep, response: Response) -> dict[str, Any]:
    problem, created = await put_problem(session, principal.tenant, body, ["body"])
    await session.commit()
    if not created:
        response.status_code = 200
    # The stored problem has exactly the content just sent (else 409): echoing its tests tells nothing new.
    return problem_view(problem, with_hidden=True)


@router.get("/{problem_id:path}", response_model=ProblemOut)
async def get(problem_id: str, principal: ReadKey, session: SessionDep) -> dict[str, Any]:
    problem = await find_problem(session, principal.tenant, problem_id)
    if problem is None:
        raise not_found("problem", problem_id)
    # Hidden tests are the ground truth: only their authors (and admins) read them back.
    return problem_view(problem, with_hidden=has_scope(principal.scopes, "author"))
