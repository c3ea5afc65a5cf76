"""The judge worker: the only place the judge service meets the queue and the database.

One task judges one attempt: every (judge, condition, repeat) unit it is due, each written as soon as it is
known (UPSERT on the unit's key), so a crash loses at most the units in flight and a retry redoes only those.
Units that already have an ok row are never sent again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from judge.offline import OfflineUnavailable, score_offline
from judge.request import BudgetExceeded, JudgeInput, LogEntry, build_messages, condition_context
from judge.rubrics import RUBRICS
from judge.runner import CachedReply, LLMRunner, Outcome
from judge.tooljail import ToolJail
from services.kernel import jobs, queue, telemetry, worker
from services.kernel.db import session_scope, upsert
from services.kernel.judges import JUDGES_KEY, LLMJudge, OfflineJudge, configured_judges, public_view
from services.kernel.models import Attempt, Execution, JobUnit, JudgeResponseCache, Judgment, Problem, utcnow
from services.kernel.queue import JUDGE_QUEUE, Task
from services.kernel.settings import get_settings

log = logging.getLogger("tribunal.judge")


class DbCache:
    """The response cache in the database, shared by every judge worker."""

    async def get(self, key: str) -> CachedReply | None:
        async with session_scope() as session:
            row = await session.get(JudgeResponseCache, key)
            if row is None:
                return None
            return CachedReply(row.content, row.served_model, row.tokens_in, row.tokens_out)

    async def put(self, key: str, reply: CachedReply) -> None:
        async with session_scope() as session:
            await upsert(
                session,
                JudgeResponseCache.__table__,
                {
                    "cache_key": key,
                    "content": reply.content,
                    "served_model": reply.served_model,
                    "tokens_in": reply.tokens_in,
                    "tokens_out": reply.tokens_out,
                    "created_at": utcnow(),
                },
                keys=["cache_key"],
            )


@dataclass(frozen=True)
class Plan:
    judges: list[str]
    conditions: list[str]
    repeats: int


def parse_subject(subject: str) -> tuple[str, str | None]:
    """`attempt_id` (the attempt's own judging) or `attempt_id@job_id` (a re-judge job)."""
    attempt_id, _, job_id = subject.partition("@")
    return attempt_id, job_id or None


async def _write(
    attempt_id: str,
    judge: str,
    condition: str,
    repeat: int,
    rubric: str,
    prompt_version: str,
    provenance: str | None,
    outcome: Outcome,
) -> None:
    async with session_scope() as session:
        await upsert(
            session,
            Judgment.__table__,
            {
                "attempt_id": attempt_id,
                "judge": judge,
                "condition": condition,
                "repeat": repeat,
                "status": outcome.status,
                "rubric": rubric,
                "prompt_version": prompt_version,
                "fields": outcome.fields,
                "p_ac": outcome.p_ac,
                "score": outcome.score,
                "raw_response": outcome.raw_response,
                "requested_model": outcome.requested_model,
                "served_model": outcome.served_model,
                "provenance": provenance,
                "tries": outcome.tries,
                "latency_ms": outcome.latency_ms,
                "tokens_in": outcome.tokens_in,
                "tokens_out": outcome.tokens_out,
                "request_hash": outcome.request_hash,
                "error": outcome.error,
                "updated_at": utcnow(),
            },
            keys=["attempt_id", "judge", "condition", "repeat"],
        )
    telemetry.judgments.labels(judge, outcome.status).inc()


async def _offline_outcome(
    judge: OfflineJudge, attempt: Attempt, problem: Problem, execution: Execution | None, jail: ToolJail | None
) -> Outcome:
    started = time.perf_counter()
    public_total = sum(1 for test in problem.tests if test.get("public"))
    try:
        score = await asyncio.to_thread(
            score_offline,
            judge.method,
            source=attempt.source_code,
            language=attempt.language,
            references=list(problem.references or []),
            execution_tests=list(execution.tests if execution else []),
            compile_error=bool(execution and execution.verdict == "CE"),
            public_total=public_total,
            lint_jail=jail,
        )
    except Exception as exc:  # noqa: BLE001 - a judge that breaks is a recorded failure, not a stuck attempt
        reason = f"unavailable: {exc}" if isinstance(exc, OfflineUnavailable) else f"internal: {type(exc).__name__}"
        if not isinstance(exc, OfflineUnavailable):
            log.exception("offline judge %s failed on %s", judge.name, attempt.attempt_id)
        return Outcome(
            status="failed",
            error=reason,
            requested_model=judge.method,
            served_model=judge.method,
            tries=1,
        )
    return Outcome(
        status="ok",
        fields=score.fields,
        p_ac=score.p_ac,
        score=score.score,
        requested_model=judge.method,
        served_model=judge.method,
        tries=1,
        latency_ms=int((time.perf_counter() - started) * 1000),
    )


async def _participant_log(attempt: Attempt) -> list[LogEntry]:
    if not attempt.participant:
        return []
    async with session_scope() as session:
        rows = (
            await session.execute(
                select(
                    Attempt.attempt_id,
                    Problem.problem_id,
                    Attempt.turn,
                    Attempt.submitted_at,
                    Attempt.created_at,
                    Attempt.context,
                )
                .join(Problem, Problem.id == Attempt.problem_pk)
                .where(
                    Attempt.tenant == attempt.tenant,
                    Attempt.participant == attempt.participant,
                    Attempt.context.is_not(None),
                    Attempt.parent_attempt_id.is_(None),
                )
            )
        ).all()
    return [LogEntry(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows if r[5]]


async def judge_units(ctx: dict[str, Any], attempt_id: str, plan: Plan) -> int:
    """Judge every due unit of one attempt; returns how many rows were written."""
    async with session_scope() as session:
        attempt = await session.get(Attempt, attempt_id)
        if attempt is None:
            return 0
        problem = await session.get(Problem, attempt.problem_pk)
        assert problem is not None
        execution = await session.scalar(
            select(Execution).where(Execution.attempt_id == attempt_id, Execution.run == 0)
        )
        done = {
            (row.judge, row.condition, row.repeat)
            for row in (await session.scalars(select(Judgment).where(Judgment.attempt_id == attempt_id))).all()
            if row.status == "ok"
        }
        session.expunge_all()
    judges = {judge.name: judge for judge in ctx["judges"]}
    needs_log = any(c != "blind" for c in plan.conditions)
    participant_log = await _participant_log(attempt) if needs_log else []
    writes: list[Any] = []
    for name in plan.judges:
        judge = judges.get(name)
        if judge is None or not judge.enabled:
            continue
        due = [(c, r) for c in plan.conditions for r in range(plan.repeats) if (name, c, r) not in done]
        if not due:
            continue
        if isinstance(judge, OfflineJudge):
            writes.append(_judge_offline(judge, attempt, problem, execution, due, ctx.get("tool_jail")))
        else:
            for condition, repeat in due:
                writes.append(
                    _judge_llm(ctx["runners"][name], judge, attempt, problem, condition, repeat, participant_log)
                )
    results = await asyncio.gather(*writes)
    return sum(results)


async def _judge_offline(
    judge: OfflineJudge,
    attempt: Attempt,
    problem: Problem,
    execution: Execution | None,
    due: list[tuple[str, int]],
    jail: ToolJail | None,
) -> int:
    # Offline judges do not read participant context: one score serves every condition and repeat.
    outcome = await _offline_outcome(judge, attempt, problem, execution, jail)
    for condition, repeat in due:
        await _write(
            attempt.attempt_id, judge.name, condition, repeat, judge.rubric, f"offline:{judge.method}", None, outcome
        )
    return len(due)


async def _judge_llm(
    runner: LLMRunner,
    judge: LLMJudge,
    attempt: Attempt,
    problem: Problem,
    condition: str,
    repeat: int,
    participant_log: list[LogEntry],
) -> int:
    rubric = RUBRICS[judge.rubric]
    context, provenance = condition_context(
        condition,
        attempt_id=attempt.attempt_id,
        problem_id=problem.problem_id,
        source_code=attempt.source_code,
        log=participant_log,
    )
    judge_input = JudgeInput(
        problem.problem_id, problem.statement, attempt.language, attempt.source_code, context, provenance
    )
    try:
        messages = build_messages(rubric, judge_input)
    except BudgetExceeded as exc:
        outcome = Outcome(status="failed", error=f"budget: {exc}", requested_model=judge.model)
        telemetry.judge_failures.labels(judge.name, "budget").inc()
    else:
        try:
            outcome = await runner.run(rubric, messages, condition=condition, repeat=repeat)
        except Exception as exc:  # noqa: BLE001 - recorded with its reason; the attempt still completes
            log.exception("judge %s failed on %s", judge.name, attempt.attempt_id)
            outcome = Outcome(status="failed", error=f"internal: {type(exc).__name__}", requested_model=judge.model)
    await _write(attempt.attempt_id, judge.name, condition, repeat, rubric.name, rubric.version, provenance, outcome)
    return 1


async def _count_unit_once(job_id: str, unit: str) -> None:
    """Add one to the job's progress unless this unit was already counted (a retried task)."""
    async with session_scope() as session:
        dialect = session.get_bind().dialect.name
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        result = await session.execute(
            insert(JobUnit).values(job_id=job_id, unit=unit).on_conflict_do_nothing(index_elements=["job_id", "unit"])
        )
        if result.rowcount:  # type: ignore[attr-defined]
            await jobs.add_progress(session, job_id)


@queue.task(Task.JUDGE_ATTEMPT)
async def judge_attempt(ctx: dict[str, Any], subject: str) -> None:
    """Judge one attempt: its own judging after execution, or its share of a re-judge job."""
    attempt_id, job_id = parse_subject(subject)
    settings = get_settings()
    async with session_scope() as session:
        attempt = await session.get(Attempt, attempt_id)
        if attempt is None:
            return
        if job_id is None:
            if attempt.status != "running":
                return  # already done, or cancelled before it ran
            plan = Plan(
                list(attempt.judges or []), list(attempt.conditions or settings.default_conditions), attempt.repeats
            )
        else:
            job = await jobs.get_job(session, job_id)
            if job is None or job.status not in ("queued", "running"):
                return
            await jobs.mark_running(session, job_id)
            params = job.params or {}
            plan = Plan(list(params["judges"]), list(params["conditions"]), int(params["repeats"]))
    await judge_units(ctx, attempt_id, plan)
    if job_id is not None:
        await _count_unit_once(job_id, attempt_id)
        return
    async with session_scope() as session:
        moved = await session.execute(
            update(Attempt)
            .where(Attempt.attempt_id == attempt_id, Attempt.status == "running")
            .values(status="done", finished_at=utcnow())
        )
        if moved.rowcount and attempt.job_id:  # type: ignore[attr-defined]
            await jobs.add_progress(session, attempt.job_id)


async def _startup(ctx: dict[str, Any]) -> None:
    settings = get_settings()
    judges = configured_judges(str(settings.judges_file) if settings.judges_file else None)
    ctx["judges"] = judges
    ctx["tool_jail"] = _tool_jail() if any(_uses_lint(j) for j in judges) else None
    cache = DbCache()
    ctx["runners"] = {j.name: LLMRunner(j, cache=cache) for j in judges if isinstance(j, LLMJudge)}
    await ctx["redis"].set(JUDGES_KEY, json.dumps([public_view(j) for j in judges]))


def _uses_lint(judge: LLMJudge | OfflineJudge) -> bool:
    return isinstance(judge, OfflineJudge) and judge.method == "lint"


def _tool_jail() -> ToolJail | None:
    """The jail the lint judge's tools run in, one per process, its work root under the data dir (like the
    executor's). A worker that cannot jail (no cgroups, no privileges) still judges: lint is then unavailable,
    never run outside the jail."""
    settings = get_settings()
    try:
        return ToolJail(
            settings.data_dir / "judge",
            slots=settings.executor_slots,
            nsjail_path=settings.nsjail_path,
            sandbox_uid=settings.sandbox_uid,
        )
    except Exception:  # noqa: BLE001 - logged; the lint judge records "no sandbox" for every attempt
        log.exception("no sandbox for the lint judge: lint judgments will fail as unavailable")
        return None


async def _shutdown(ctx: dict[str, Any]) -> None:
    for runner in ctx.get("runners", {}).values():
        await runner.close()


def run_worker() -> None:
    """Run the judge worker until SIGTERM/SIGINT."""
    worker.run(
        worker.build_worker(
            role="judge",
            functions=[judge_attempt],
            queue_name=JUDGE_QUEUE,
            max_jobs=get_settings().judge_slots,
            on_startup=_startup,
            on_shutdown=_shutdown,
        )
    )
