"""Writing problems and attempts: validation beyond the schema, idempotency by natural key, and views."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.errors import ApiError, field_error
from gateway.schemas import AttemptIn, ProblemIn
from services.kernel.judges import configured_judges
from services.kernel.models import Attempt, Execution, Judgment, Problem, new_id
from services.kernel.panel import panel
from services.kernel.settings import get_settings


def content_hash(payload: Any) -> str:
    """SHA-256 of canonical JSON: what "the same content" means for idempotent submissions."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def source_hash(source_code: str) -> str:
    return hashlib.sha256(source_code.encode("utf-8", "surrogatepass")).hexdigest()


async def find_problem(session: AsyncSession, tenant: str, problem_id: str) -> Problem | None:
    return await session.scalar(select(Problem).where(Problem.tenant == tenant, Problem.problem_id == problem_id))


async def put_problem(
    session: AsyncSession, tenant: str, body: ProblemIn, loc: list[str | int]
) -> tuple[Problem, bool]:
    """Store a problem, or return the stored one with the same id and content; a different content is 409."""
    payload = body.model_dump(mode="json", exclude={"problem_id"})
    digest = content_hash(payload)
    problem_id = body.problem_id or f"p_{digest[:16]}"
    existing = await find_problem(session, tenant, problem_id)
    if existing is not None:
        if existing.content_hash != digest:
            raise field_error([*loc, "problem_id"], f"problem {problem_id!r} exists with different content", 409)
        return existing, False
    problem = Problem(
        tenant=tenant,
        problem_id=problem_id,
        content_hash=digest,
        title=payload["title"],
        statement=payload["statement"],
        mode=payload["mode"],
        entry_point=payload["entry_point"],
        tests=payload["tests"],
        checker=payload["checker"],
        limits=payload["limits"],
        references=payload["references"],
        input_spec=payload["input_spec"],
    )
    session.add(problem)
    await session.flush()
    return problem, True


def attempt_content(body: AttemptIn, problem: Problem) -> dict[str, Any]:
    """The fields that make two submissions of one `attempt_uid` "the same"."""
    content = body.model_dump(mode="json", exclude={"attempt_uid", "problem_id", "problem"})
    content["problem"] = [problem.problem_id, problem.content_hash]
    return content


async def put_attempt(
    session: AsyncSession, tenant: str, body: AttemptIn, job_id: str, loc: list[str | int]
) -> tuple[Attempt, bool]:
    """Store an attempt (flush, no commit). Same uid and content: the stored one, not new. Else 409."""
    if body.problem is not None:
        problem, _ = await put_problem(session, tenant, body.problem, [*loc, "problem"])
    else:
        assert body.problem_id is not None
        found = await find_problem(session, tenant, body.problem_id)
        if found is None:
            raise field_error([*loc, "problem_id"], f"no problem {body.problem_id!r}", 404)
        problem = found
    if problem.mode == "function" and body.language != "python":
        raise field_error([*loc, "language"], "function-mode problems accept Python only")
    judges, conditions = resolve_judging(body.judges, body.conditions, [*loc, "judges"])
    digest = content_hash(attempt_content(body, problem))
    if body.attempt_uid is not None:
        existing = await session.scalar(
            select(Attempt).where(Attempt.tenant == tenant, Attempt.attempt_uid == body.attempt_uid)
        )
        if existing is not None:
            if existing.content_hash != digest:
                raise field_error(
                    [*loc, "attempt_uid"],
                    f"attempt_uid {body.attempt_uid!r} was submitted with different content",
                    409,
                )
            return existing, False
    attempt = Attempt(
        attempt_id=new_id("att"),
        attempt_uid=body.attempt_uid,
        tenant=tenant,
        problem_pk=problem.id,
        language=body.language,
        source_code=body.source_code,
        source_hash=source_hash(body.source_code),
        content_hash=digest,
        participant=body.participant,
        turn=body.turn,
        submitted_at=body.submitted_at,
        context=body.context,
        label=body.label.model_dump() if body.label else None,
        judges=judges,
        conditions=conditions,
        repeats=body.repeats,
        job_id=job_id,
        status="queued",
    )
    session.add(attempt)
    await session.flush()
    return attempt, True


def resolve_judging(
    judges: Sequence[str] | None, conditions: Sequence[str] | None, loc: list[str | int]
) -> tuple[list[str], list[str]]:
    """The judges (default: every enabled configured judge) and conditions (default: settings) for an attempt."""
    settings = get_settings()
    configured = {j.name: j for j in configured_judges(str(settings.judges_file) if settings.judges_file else None)}
    if judges is None:
        chosen = [name for name, judge in configured.items() if judge.enabled]
    else:
        unknown = [name for name in judges if name not in configured or not configured[name].enabled]
        if unknown:
            raise field_error(loc, f"unknown or disabled judge(s): {', '.join(unknown)}; see GET /v1/judges")
        chosen = list(dict.fromkeys(judges))
    return chosen, list(dict.fromkeys(conditions or settings.default_conditions))


def judgment_view(row: Judgment) -> dict[str, Any]:
    fields = row.fields or {}
    return {
        "judge": row.judge,
        "condition": row.condition,
        "repeat": row.repeat,
        "status": row.status,
        "p_ac": row.p_ac,
        "s_algo": fields.get("s_algo"),
        "s_robust": fields.get("s_robust"),
        "score": row.score,
        "rationale": fields.get("rationale"),
        "served_model": row.served_model,
        "requested_model": row.requested_model,
        "tries": row.tries,
        "latency_ms": row.latency_ms,
        "error": row.error,
        "rubric": row.rubric,
        "prompt_version": row.prompt_version,
        "provenance": row.provenance,
        "tokens_in": row.tokens_in,
        "tokens_out": row.tokens_out,
        "fields": row.fields,
    }


async def attempt_view(session: AsyncSession, attempt: Attempt) -> dict[str, Any]:
    """The public JSON of an attempt (api.md), with per-test results but never hidden test data."""
    problem_id = await session.scalar(select(Problem.problem_id).where(Problem.id == attempt.problem_pk))
    execution = await session.scalar(
        select(Execution).where(Execution.attempt_id == attempt.attempt_id, Execution.run == 0)
    )
    tests = [
        {key: test.get(key) for key in ("index", "status", "time_ms", "memory_kb", "public")}
        for test in (execution.tests if execution else [])
    ]
    rows = (
        await session.scalars(
            select(Judgment)
            .where(Judgment.attempt_id == attempt.attempt_id)
            .order_by(Judgment.judge, Judgment.condition, Judgment.repeat)
        )
    ).all()
    panels = await panel(session, attempt.tenant, list(rows))
    primary = (attempt.conditions or ["blind"])[0]
    return {
        "attempt_id": attempt.attempt_id,
        "attempt_uid": attempt.attempt_uid,
        "problem_id": problem_id or "",
        "language": attempt.language,
        "status": attempt.status,
        "verdict": attempt.verdict,
        "passed": attempt.passed,
        "total": attempt.total,
        "compile_output": execution.compile_output if execution else None,
        "tests": tests,
        "judgments": [judgment_view(row) for row in rows],
        "panel": ({**panels.get(primary, {}), "condition": primary, "by_condition": panels} if panels else None),
        "participant": attempt.participant,
        "turn": attempt.turn,
        "submitted_at": attempt.submitted_at,
        "parent_attempt_id": attempt.parent_attempt_id,
        "operator": attempt.operator,
        "job_id": attempt.job_id,
        "created_at": attempt.created_at,
        "finished_at": attempt.finished_at,
    }


def problem_view(problem: Problem, *, with_hidden: bool) -> dict[str, Any]:
    """The public JSON of a problem (api.md). Hidden tests (`public` false) are the ground truth attempts
    are scored on: they are listed only `with_hidden` (admin and author keys); otherwise `tests` holds the
    public tests alone and `hidden_tests` says how many more there are."""
    tests = list(problem.tests or [])
    hidden = sum(1 for test in tests if not test.get("public"))
    return {
        "problem_id": problem.problem_id,
        "title": problem.title,
        "statement": problem.statement,
        "mode": problem.mode,
        "entry_point": problem.entry_point,
        "tests": tests if with_hidden else [test for test in tests if test.get("public")],
        "hidden_tests": hidden,
        "checker": problem.checker,
        "limits": problem.limits,
        "references": problem.references,
        "input_spec": problem.input_spec,
        "created_at": problem.created_at,
    }


def not_found(what: str, ident: str) -> ApiError:
    return ApiError(404, f"no {what} {ident!r}")
