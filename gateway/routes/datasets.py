"""`POST /v1/datasets?format=F`: a dataset file (JSON Lines) imported server-side, streamed a line at a time
through its format's loader (services/lib/datasets), as `tribunal import` does from a client.

Each record's bodies go through the API's own handlers (`POST /v1/problems`, `POST /v1/attempts:batch`), so a
problem or an attempt is validated, stored, counted against the key's quotas and made idempotent exactly as when
posted one by one: importing the same file twice creates nothing twice. Memory is bounded whatever the file's
size: the body is never held whole (one line, and one batch of attempts, at a time). Every bad line is reported by
its number and field, and the good lines are imported anyway.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.deps import SessionDep, SubmitKey
from gateway.errors import ApiError, field_error
from gateway.principal import Principal
from gateway.routes.attempts import submit_batch
from gateway.routes.problems import create as create_problem
from gateway.schemas import AttemptIn, BatchIn, ProblemIn
from gateway.schemas.studies import DatasetFormat
from services.kernel import jobs
from services.kernel.attempts import SubmissionError
from services.kernel.settings import get_settings
from services.lib.datasets import RecordError, load

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

# Formats whose loader reads the records' code (the humaneval loader parses the prompt to carry its helpers into
# the tests, the mbpp loader parses code and asserts to find the entry point): the gateway never parses tenant code
# outside nsjail, so these are imported client-side, by `tribunal import` (services/launcher/importer.py).
CODE_READING_FORMATS = ("humaneval", "mbpp")
# What an error message quotes of a line: enough to find it, never the line itself.
MAX_MESSAGE_CHARS = 300
# The most bad lines an answer lists (all are counted in `bad_lines`).
MAX_LISTED_ERRORS = 1000
# How long the import waits on the key's quotas (a 429's Retry-After, each time) before it names the line.
MAX_QUOTA_WAIT_S = 600.0


class _LineTooLong(Exception):
    pass


async def _lines(request: Request, max_line: int) -> AsyncIterator[bytes | _LineTooLong]:
    """The body's lines, one at a time; a line longer than `max_line` is skipped to its end and yielded as
    `_LineTooLong`, never held."""
    pending = bytearray()
    skipping = False
    async for chunk in request.stream():
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not skipping:
                pending += piece
                if len(pending) > max_line:
                    pending.clear()
                    skipping = True
            if end < 0:
                break
            yield _LineTooLong() if skipping else bytes(pending)
            pending.clear()
            skipping = False
            start = end + 1
    if skipping:
        yield _LineTooLong()
    elif pending:
        yield bytes(pending)


def _loc(loc: Any, skip: int) -> str:
    return ".".join(str(part) for part in list(loc)[skip:]) or "record"


class _Import:
    def __init__(self, principal: Principal, session: AsyncSession) -> None:
        self.principal = principal
        self.session = session
        self.settings = get_settings()
        self.counts = {
            "lines": 0,
            "problems_created": 0,
            "problems_existing": 0,
            "attempts_created": 0,
            "attempts_existing": 0,
            "pairs_checked": 0,
            "bad_lines": 0,
        }
        self.errors: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.job_ids: list[str] = []
        self.pending: list[tuple[int, AttemptIn]] = []
        self.pending_bytes = 0
        self.posted: set[str] = set()

    def bad(self, line: int, field: str, message: str) -> None:
        self.counts["bad_lines"] += 1
        if len(self.errors) < MAX_LISTED_ERRORS:
            short = message if len(message) <= MAX_MESSAGE_CHARS else message[: MAX_MESSAGE_CHARS - 3] + "..."
            self.errors.append({"line": line, "field": field[:MAX_MESSAGE_CHARS], "message": short})

    async def _through_quotas(self, call: Any) -> Any:
        waited = 0.0
        while True:
            try:
                return await call()
            except ApiError as exc:
                await self.session.rollback()
                if exc.status_code != 429 or waited >= MAX_QUOTA_WAIT_S:
                    raise
                pause = min(float((exc.headers or {}).get("Retry-After", "1")), 30.0)
                waited += pause
                await asyncio.sleep(pause)

    async def problem(self, line: int, body: dict[str, Any]) -> None:
        problem_id = body.get("problem_id")
        if isinstance(problem_id, str) and problem_id in self.posted:
            return
        try:
            problem = ProblemIn.model_validate(body)
            answer = Response(status_code=201)  # the route sets 200 when the problem was there
            await self._through_quotas(lambda: create_problem(problem, self.principal, self.session, answer))
        except ValidationError as exc:
            first = exc.errors()[0]
            self.bad(line, _loc(first["loc"], 0), first["msg"])
            return
        except (ApiError, SubmissionError) as exc:
            await self.session.rollback()
            if (exc.status_code if isinstance(exc, ApiError) else exc.status) == 409:
                self.counts["problems_existing"] += 1
                if len(self.notes) < MAX_LISTED_ERRORS:
                    self.notes.append(f"line {line}: problem {problem_id} is already there with other content: kept")
            else:
                self._refused(line, exc, 1)
            return
        self.counts["problems_created" if answer.status_code == 201 else "problems_existing"] += 1
        if isinstance(problem_id, str):
            self.posted.add(problem_id)

    def _refused(self, line: int, exc: ApiError | SubmissionError, skip: int) -> None:
        if isinstance(exc, SubmissionError):
            self.bad(line, _loc(exc.loc, skip), f"{exc.message} ({exc.status})")
        elif exc.errors:
            self.bad(line, _loc(exc.errors[0].get("loc", []), skip), f"{exc.errors[0].get('msg')} ({exc.status_code})")
        else:
            self.bad(line, "record", f"{exc.detail} ({exc.status_code})")

    async def attempt(self, line: int, body: dict[str, Any]) -> None:
        try:
            attempt = AttemptIn.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            self.bad(line, _loc(first["loc"], 0), first["msg"])
            return
        size = len(json.dumps(body))
        limit = self.settings.max_batch_size
        if self.pending and (len(self.pending) >= limit or self.pending_bytes + size > self.settings.max_body_bytes):
            await self.flush()
        self.pending.append((line, attempt))
        self.pending_bytes += size

    async def flush(self) -> None:
        batch, self.pending, self.pending_bytes = self.pending, [], 0
        if not batch:
            return
        body = BatchIn(attempts=[attempt for _, attempt in batch])
        try:
            accepted = await self._through_quotas(lambda: submit_batch(body, self.principal, self.session))
        except (ApiError, SubmissionError) as exc:
            await self.session.rollback()
            if len(batch) == 1:
                self._refused(batch[0][0], exc, 3)
                return
            # Refused whole: one at a time, to import the good ones and name the line of each bad one.
            for one in batch:
                self.pending = [one]
                await self.flush()
            return
        job = await jobs.get_job(self.session, accepted.job_id)
        created = job.progress_total if job is not None else 0
        self.counts["attempts_created"] += created
        self.counts["attempts_existing"] += len(batch) - created
        if created:
            self.job_ids.append(accepted.job_id)

    async def line(self, format: str, number: int, data: bytes | _LineTooLong) -> None:
        self.counts["lines"] = number
        if isinstance(data, _LineTooLong):
            self.bad(number, "record", f"longer than {self.settings.max_body_bytes} bytes")
            return
        if not data.strip():
            return
        try:
            record = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.bad(number, "json", exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8")
            return
        except RecursionError:
            self.bad(number, "json", "nested too deeply")
            return
        try:
            bodies = load(format, record, number)
        except RecordError as exc:
            self.bad(number, exc.field, exc.message)
            return
        for problem in bodies.problems:
            await self.problem(number, problem)
        for attempt in bodies.attempts:
            await self.attempt(number, attempt)
        self.counts["pairs_checked"] += len(bodies.pairs)


@router.post("")
async def import_dataset(
    request: Request,
    principal: SubmitKey,
    session: SessionDep,
    format: Annotated[DatasetFormat, Query(description="the records' format (docs/datasets.md)")],
) -> dict[str, Any]:
    """Import a JSON Lines body of `format` records: every line's problems and attempts, through the same handlers
    as `POST /v1/problems` and `POST /v1/attempts:batch`; bad lines are listed by number and field."""
    if format in CODE_READING_FORMATS:
        raise field_error(
            ["query", "format"],
            f"the {format} loader reads the records' code, which the gateway never parses outside its sandbox: "
            f"import the file with `tribunal import FILE --format {format}`",
        )
    run = _Import(principal, session)
    number = 0
    async for data in _lines(request, get_settings().max_body_bytes):
        number += 1
        await run.line(format, number, data)
    await run.flush()
    if run.counts["pairs_checked"]:
        run.notes.append(
            f"{run.counts['pairs_checked']} LoCaL pairs checked, not imported: pairs are scored, not stored; "
            "post them to POST /v1/similarity/datasets"
        )
    return {
        "format": format,
        **run.counts,
        "errors": run.errors,
        "errors_listed": len(run.errors),
        "notes": run.notes[:MAX_LISTED_ERRORS],
        "job_ids": run.job_ids,
    }
