"""Exports: a job's or a problem's attempts with their judgments, streamed as JSON Lines or CSV for a study's
notebook (`pandas.read_json(lines=True)` / `read_csv`).

One flat row per attempt × judgment (judge × condition × repeat); an attempt without a judgment yet is one row
whose judgment cells are empty. The execution is summarised by the attempt's `verdict`, `passed` and `total`: no
per-test data (hidden tests' included), no stdout, stderr, source or raw judge response, as `GET /v1/attempts`.
Rows come in pages of `PAGE_ATTEMPTS` attempts on a keyset cursor (created_at, attempt_id), two SQL statements a
page, each page in its own short read, so memory stays bounded whatever the export's size."""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.deps import ReadKey, SessionDep, open_session
from gateway.errors import field_error
from services.kernel import attempts, jobs
from services.kernel.models import Attempt, Judgment, Problem
from services.kernel.text import clean_text

router = APIRouter(prefix="/v1/exports", tags=["exports"])

PAGE_ATTEMPTS = 500

ATTEMPT_COLUMNS = (
    "attempt_id",
    "attempt_uid",
    "problem_id",
    "language",
    "participant",
    "turn",
    "status",
    "verdict",
    "passed",
    "total",
)
JUDGMENT_COLUMNS = (
    "judge",
    "condition",
    "repeat",
    "judgment_status",
    "p_ac",
    "score",
    "weighted_p_ac",
    "weighted_score",
    "error",
    "served_model",
    "tokens_in",
    "tokens_out",
)
COLUMNS = (*ATTEMPT_COLUMNS, *JUDGMENT_COLUMNS)

# A spreadsheet runs a cell that starts with one of these as a formula (OWASP's CSV injection): a leading `'`
# makes it text.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

_ATTEMPTS = select(
    Attempt.attempt_id,
    Attempt.attempt_uid,
    Problem.problem_id,
    Attempt.language,
    Attempt.participant,
    Attempt.turn,
    Attempt.status,
    Attempt.verdict,
    Attempt.passed,
    Attempt.total,
    Attempt.created_at,
).join(Problem, Problem.id == Attempt.problem_pk)
_JUDGMENTS = select(
    Judgment.attempt_id,
    Judgment.judge,
    Judgment.condition,
    Judgment.repeat,
    Judgment.status,
    Judgment.p_ac,
    Judgment.score,
    Judgment.weighted_p_ac,
    Judgment.weighted_score,
    Judgment.error,
    Judgment.served_model,
    Judgment.tokens_in,
    Judgment.tokens_out,
)

Format = Literal["jsonl", "csv"]
_MEDIA = {"jsonl": "application/x-ndjson", "csv": "text/csv; charset=utf-8"}


_STRING = {"schema": {"type": "string"}}


@router.get(
    "/attempts",
    response_class=StreamingResponse,
    responses={200: {"description": "The rows", "content": {"application/x-ndjson": _STRING, "text/csv": _STRING}}},
)
async def export_attempts(
    request: Request,
    principal: ReadKey,
    session: SessionDep,
    format: Annotated[Format, Query(description="jsonl (one JSON object a line) or csv (a header row first)")] = (
        "jsonl"
    ),
    job_id: str | None = None,
    problem_id: str | None = None,
) -> StreamingResponse:
    """The tenant's attempts of `job_id` (the attempts it created) and/or of `problem_id`, one row per attempt ×
    judgment, oldest attempt first (see the module's docstring)."""
    if job_id is None and problem_id is None:
        raise field_error(["query", "job_id"], "give job_id or problem_id (or both)")
    where = [Attempt.tenant == principal.tenant]
    if job_id is not None:
        job = await jobs.get_job(session, job_id)
        if job is None or job.tenant != principal.tenant:
            raise field_error(["query", "job_id"], f"no job {job_id!r}", 404)
        where.append(Attempt.job_id == job_id)
    if problem_id is not None:
        problem = await attempts.find_problem(session, principal.tenant, problem_id)
        if problem is None:
            raise field_error(["query", "problem_id"], f"no problem {problem_id!r}", 404)
        where.append(Attempt.problem_pk == problem.id)
    opener = request.app.dependency_overrides.get(open_session, open_session)
    rows = export_rows(asynccontextmanager(opener), where)
    body = _jsonl(rows) if format == "jsonl" else _csv(rows)
    headers = {"Content-Disposition": f'attachment; filename="attempts.{format}"'}
    return StreamingResponse(body, media_type=_MEDIA[format], headers=headers)


async def export_rows(
    opener: Callable[[], Any], where: Sequence[Any], page_size: int = PAGE_ATTEMPTS
) -> AsyncIterator[list[dict[str, Any]]]:
    """The rows of the attempts matching `where`, a page of attempts at a time; each page is read in a session of
    its own from `opener` (an async context manager of sessions), so no read spans the whole export."""
    after: tuple[datetime, str] | None = None
    while True:
        session: AsyncSession
        async with opener() as session:
            query = _ATTEMPTS.where(*where)
            if after is not None:
                at, last = after
                query = query.where(
                    or_(Attempt.created_at > at, and_(Attempt.created_at == at, Attempt.attempt_id > last))
                )
            page = (
                await session.execute(query.order_by(Attempt.created_at, Attempt.attempt_id).limit(page_size))
            ).all()
            if not page:
                return
            ids = [row.attempt_id for row in page]
            judged: dict[str, list[Any]] = defaultdict(list)
            ordered = _JUDGMENTS.where(Judgment.attempt_id.in_(ids)).order_by(
                Judgment.attempt_id, Judgment.judge, Judgment.condition, Judgment.repeat
            )
            for judgment in await session.execute(ordered):
                judged[judgment.attempt_id].append(judgment)
        yield [row for attempt in page for row in _rows_of(attempt, judged.get(attempt.attempt_id, []))]
        if len(page) < page_size:
            return
        after = (page[-1].created_at, page[-1].attempt_id)


def _rows_of(attempt: Any, judgments: Sequence[Any]) -> list[dict[str, Any]]:
    base = {column: _cell(getattr(attempt, column)) for column in ATTEMPT_COLUMNS}
    if not judgments:
        return [{**base, **dict.fromkeys(JUDGMENT_COLUMNS)}]
    return [
        {
            **base,
            **{
                column: _cell(getattr(judgment, "status" if column == "judgment_status" else column))
                for column in JUDGMENT_COLUMNS
            },
        }
        for judgment in judgments
    ]


def _cell(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def csv_cell(value: Any) -> Any:
    """A CSV cell: text that a spreadsheet would run as a formula gets a leading `'`; None is empty."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


async def _jsonl(pages: AsyncIterator[list[dict[str, Any]]]) -> AsyncIterator[str]:
    async for page in pages:
        yield "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in page)


async def _csv(pages: AsyncIterator[list[dict[str, Any]]]) -> AsyncIterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    yield buffer.getvalue()
    async for page in pages:
        buffer.seek(0)
        buffer.truncate()
        writer.writerows([csv_cell(row[column]) for column in COLUMNS] for row in page)
        yield buffer.getvalue()
