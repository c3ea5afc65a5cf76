"""The judge worker: the only place the judge service meets the queue and the database.

One task judges one attempt: every (judge, condition, repeat) unit it is due, each written as soon as it is
known (UPSERT on the unit's key), so a crash loses at most the units in flight and a retry redoes only those.
Units that already have an ok or not_applicable row are never sent again (the judge scored them, or does not
apply to the attempt: no reference solution, no public tests, no linter for its language).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from judge.offline import OfflineNotApplicable, OfflineUnavailable, score_offline_async
from judge.request import (
    BudgetExceeded,
    JudgeInput,
    LogEntry,
    NotApplicable,
    build_messages,
    condition_context,
    pick_reference,
)
from judge.rubrics import RUBRICS, RubricSpec, rubric_specs
from judge.runner import LLMRunner
from judge.tooljail import ToolJail
from services.kernel import attempts, cancel, jobs, queue, telemetry, worker
from services.kernel.contracts import (
    FINAL_JUDGMENT_STATUSES,
    LIVE_JOB_STATUSES,
    JudgmentOutput,
    JudgmentStatus,
    OfflineMethod,
    Stage,
    Verdict,
)
from services.kernel.db import session_scope, upsert
from services.kernel.judges import (
    JUDGES_KEY,
    LLMJudge,
    OfflineJudge,
    configured_judges,
    configured_rubrics,
    public_view,
)
from services.kernel.models import Attempt, Execution, Judgment, Problem, utcnow
from services.kernel.plans import JudgingPlan
from services.kernel.ratelimit import JudgeTokenBudget, tenant_judge_token_limit
from services.kernel.registry import Task
from services.kernel.settings import get_settings
from services.kernel.subjects import Subject, judged_unit
from services.lib.llm import DbResponseCache

log = logging.getLogger("tribunal.judge")


@dataclass(frozen=True)
class Plan:
    judges: list[str]
    conditions: list[str]
    repeats: int


def parse_subject(subject: str) -> tuple[str, str | None]:
    """`attempt_id` (the attempt's own judging) or `attempt_id@job_id` (a job's: re-judge, perturbation or
    synthesis, which judges its seeds under its plan)."""
    parsed = Subject.parse(subject)
    return (subject, None) if parsed is None else (parsed.item, parsed.job_id or None)


async def _write(
    attempt_id: str,
    judge: str,
    condition: str,
    repeat: int,
    rubric: str,
    prompt_version: str,
    provenance: str | None,
    outcome: JudgmentOutput,
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
                **outcome.model_dump(),
                "rubric": rubric,
                "prompt_version": prompt_version,
                "provenance": provenance,
                "updated_at": utcnow(),
            },
            keys=["attempt_id", "judge", "condition", "repeat"],
        )
    telemetry.judgments.labels(judge, condition, outcome.status).inc()
    if outcome.tries:  # offline judges and cache hits ask no provider
        telemetry.judgment_tries.labels(judge).observe(outcome.tries)


async def _offline_outcome(
    judge: OfflineJudge, attempt: Attempt, problem: Problem, execution: Execution | None, jail: ToolJail | None
) -> JudgmentOutput:
    started = time.perf_counter()
    public_total = sum(1 for test in problem.tests if test.get("public"))
    try:
        score = await score_offline_async(
            judge.method,
            source=attempt.source_code,
            language=attempt.language,
            references=list(problem.references or []),
            execution_tests=list(execution.tests if execution else []),
            compile_error=bool(execution and execution.verdict == Verdict.CE),
            public_total=public_total,
            lint_jail=jail,
        )
    except OfflineNotApplicable as exc:
        # Not a failure: the judge does not apply to this attempt, on any worker; the row says why and is final.
        return JudgmentOutput(
            status=JudgmentStatus.NOT_APPLICABLE,
            error=str(exc),
            requested_model=judge.method,
            served_model=judge.method,
            tries=1,
        )
    except Exception as exc:  # noqa: BLE001 - a judge that breaks is a recorded failure, not a stuck attempt
        reason = f"unavailable: {exc}" if isinstance(exc, OfflineUnavailable) else f"internal: {type(exc).__name__}"
        if not isinstance(exc, OfflineUnavailable):
            log.exception("offline judge %s failed on %s", judge.name, attempt.attempt_id)
        return JudgmentOutput(
            status=JudgmentStatus.FAILED,
            error=reason,
            requested_model=judge.method,
            served_model=judge.method,
            tries=1,
        )
    return JudgmentOutput(
        status=JudgmentStatus.OK,
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
            if row.status in FINAL_JUDGMENT_STATUSES
        }
        session.expunge_all()
    judges = {judge.name: judge for judge in ctx["judges"]}
    needs_log = any(c != "blind" for c in plan.conditions)
    participant_log = await _participant_log(attempt) if needs_log else []
    writes: list[Any] = []
    budget: JudgeTokenBudget | None = None
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
            budget = budget or await _token_budget(ctx, attempt.tenant)
            for condition, repeat in due:
                rubric = ctx.get("rubrics", RUBRICS)[judge.rubric]
                writes.append(
                    _judge_llm(
                        ctx["runners"][name],
                        judge,
                        rubric,
                        attempt,
                        problem,
                        condition,
                        repeat,
                        participant_log,
                        budget,
                    )
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
    rubric: RubricSpec,
    attempt: Attempt,
    problem: Problem,
    condition: str,
    repeat: int,
    participant_log: list[LogEntry],
    budget: JudgeTokenBudget,
) -> int:
    context, provenance = condition_context(
        condition,
        attempt_id=attempt.attempt_id,
        problem_id=problem.problem_id,
        source_code=attempt.source_code,
        log=participant_log,
    )
    judge_input = JudgeInput(
        problem.problem_id,
        problem.statement,
        attempt.language,
        attempt.source_code,
        context,
        provenance,
        public_tests=tuple(test for test in problem.tests if test.get("public")),
        reference=pick_reference(list(problem.references or []), attempt.language),
    )
    try:
        messages = build_messages(rubric, judge_input)
    except NotApplicable as exc:
        # The rubric sees an input this problem lacks (a reference, public tests): final, with the reason; no request.
        outcome = JudgmentOutput(status=JudgmentStatus.NOT_APPLICABLE, error=str(exc), requested_model=judge.model)
    except BudgetExceeded as exc:
        outcome = JudgmentOutput(status=JudgmentStatus.FAILED, error=f"budget: {exc}", requested_model=judge.model)
        telemetry.judge_failures.labels(judge.name, "budget").inc()
    else:
        if await budget.exhausted():
            # The tenant's judge_tokens_per_day: a recorded failure with its reason, re-judged once tokens are back.
            error = f"budget: quota judge_tokens_per_day ({budget.limit}) spent for today (UTC)"
            outcome = JudgmentOutput(status=JudgmentStatus.FAILED, error=error, requested_model=judge.model)
            telemetry.judge_failures.labels(judge.name, "budget").inc()
            telemetry.quota_rejections.labels("judge_tokens_per_day").inc()
        else:
            try:
                outcome = await runner.run(rubric, messages, condition=condition, repeat=repeat)
            except Exception as exc:  # noqa: BLE001 - recorded with its reason; the attempt still completes
                log.exception("judge %s failed on %s", judge.name, attempt.attempt_id)
                error = f"internal: {type(exc).__name__}"
                outcome = JudgmentOutput(status=JudgmentStatus.FAILED, error=error, requested_model=judge.model)
            await _spend(budget, outcome)
    await _write(attempt.attempt_id, judge.name, condition, repeat, rubric.name, rubric.version, provenance, outcome)
    return 1


async def _token_budget(ctx: dict[str, Any], tenant: str) -> JudgeTokenBudget:
    async with session_scope() as session:
        limit = await tenant_judge_token_limit(session, tenant)
    return JudgeTokenBudget(ctx["redis"], tenant, limit)


async def _spend(budget: JudgeTokenBudget, outcome: JudgmentOutput) -> None:
    """Count the tokens a provider reported (a cached answer cost none today)."""
    tokens = (outcome.tokens_in or 0) + (outcome.tokens_out or 0)
    if outcome.from_cache or tokens <= 0:
        return
    try:
        await budget.spend(tokens)
    except Exception:  # noqa: BLE001 - the judgment is kept; only the day's count misses it
        log.warning("could not count %d judge tokens of tenant %s", tokens, budget.tenant, exc_info=True)


@queue.task(Task.JUDGE_ATTEMPT)
async def judge_attempt(ctx: dict[str, Any], subject: str) -> None:
    """Judge one attempt: the judge stage of its pipeline, or its share of a re-judge job. A cancel of the job
    stops it where it is (its provider calls and tool jails end; the units already written stay)."""
    attempt_id, job_id = parse_subject(subject)
    settings = get_settings()
    watch = cancel.watch_of(ctx)
    if job_id is not None and watch.known_cancelled(job_id):
        return  # a re-judge job cancelled while this waited: skipped without a look at the database
    unit_job = job_id
    async with session_scope() as session:
        if job_id is None:
            attempt = await attempts.claim(session, attempt_id, Stage.JUDGE)
            if attempt is None:
                return  # past this stage, ended, or cancelled
            unit_job, tenant = attempt.job_id, attempt.tenant
            conditions = list(attempt.conditions or settings.default_conditions)
            plan = Plan(list(attempt.judges or []), conditions, attempt.repeats)
        else:
            job = await jobs.get_job(session, job_id)
            if job is None or job.status not in LIVE_JOB_STATUSES:
                return
            await jobs.mark_running(session, job_id)
            judging = job.plan(JudgingPlan)
            plan = Plan(list(judging.judges), [str(c) for c in judging.conditions], judging.repeats)
    if isinstance(await watch.run(unit_job, judge_units(ctx, attempt_id, plan)), cancel.Stopped):
        if job_id is None:
            async with session_scope() as session:
                ended = await attempts.end_cancelled(session, [attempt_id])
            await queue.announce_ended(ended)
        return
    async with session_scope() as session:
        if job_id is not None:
            await jobs.count_unit_once(session, job_id, judged_unit(attempt_id))
            return
        moved, following = await attempts.finish_stage(session, attempt_id, Stage.JUDGE)
    await attempts.after_stage(attempt_id, moved, following, tenant=tenant)


async def _startup(ctx: dict[str, Any]) -> None:
    settings = get_settings()
    judges = configured_judges(str(settings.judges_file) if settings.judges_file else None)
    ctx["judges"] = judges
    ctx["rubrics"] = rubric_specs(configured_rubrics(str(settings.judges_file) if settings.judges_file else None))
    telemetry.start_judgment_series(j.name for j in judges)
    ctx["tool_jail"] = _tool_jail() if any(_uses_lint(j) for j in judges) else None
    cache = DbResponseCache()
    ctx["runners"] = {j.name: LLMRunner(j, cache=cache) for j in judges if isinstance(j, LLMJudge)}
    await ctx["redis"].set(JUDGES_KEY, json.dumps([public_view(j) for j in judges]))


def _uses_lint(judge: LLMJudge | OfflineJudge) -> bool:
    return isinstance(judge, OfflineJudge) and judge.method == OfflineMethod.LINT


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
    worker.run(worker.build_worker("judge", functions=[judge_attempt], on_startup=_startup, on_shutdown=_shutdown))
