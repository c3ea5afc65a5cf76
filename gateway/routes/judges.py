"""Judges: the configured panel, and re-judging (retry what failed, or ask for fresh repeats)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from sqlalchemy import select

from gateway import quotas
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.errors import field_error
from gateway.schemas import JudgmentsIn
from services.kernel import jobs, queue
from services.kernel.attempts import resolve_judging
from services.kernel.contracts import Condition, JobKind, JobStatus
from services.kernel.judges import LLMJudge, OfflineJudge, configured_judges, public_view
from services.kernel.models import Attempt
from services.kernel.plans import JudgePlan
from services.kernel.registry import Task
from services.kernel.settings import get_settings
from services.kernel.subjects import job_subject

router = APIRouter(tags=["judges"])


def _configured() -> tuple[LLMJudge | OfflineJudge, ...]:
    settings = get_settings()
    return tuple(configured_judges(str(settings.judges_file) if settings.judges_file else None))


@router.get("/v1/judges")
async def list_judges(_: ReadKey) -> list[dict[str, Any]]:
    return [public_view(j) for j in _configured()]


@router.post("/v1/judgments", status_code=202)
async def rejudge(body: JudgmentsIn, principal: SubmitKey, session: SessionDep) -> dict[str, Any]:
    """Judge attempts again: units with an ok row are skipped, so this retries failures and adds repeats."""
    judges, conditions = resolve_judging(
        body.judges, list(body.conditions) if body.conditions else None, ["body", "judges"]
    )
    found = set(
        (
            await session.scalars(
                select(Attempt.attempt_id).where(
                    Attempt.attempt_id.in_(body.attempt_ids), Attempt.tenant == principal.tenant
                )
            )
        ).all()
    )
    for index, attempt_id in enumerate(body.attempt_ids):
        if attempt_id not in found:
            raise field_error(["body", "attempt_ids", index], f"no attempt {attempt_id!r}", 404)
    # Every row asked for counts (attempts x judges x conditions x repeats), whether or not the worker then skips a
    # unit that already has an ok row; with an LLM judge, the tenant's tokens for today must not be spent.
    asked = len(body.attempt_ids) * len(judges) * len(conditions) * body.repeats
    if any(isinstance(judge, LLMJudge) and judge.name in judges for judge in _configured()):
        await quotas.check_judge_tokens(session, principal)
    plan = JudgePlan(
        attempt_ids=body.attempt_ids, judges=judges, conditions=[Condition(c) for c in conditions], repeats=body.repeats
    )
    job = jobs.create_job(session, tenant=principal.tenant, kind=JobKind.JUDGE, total=len(body.attempt_ids), plan=plan)
    async with quotas.judgments_counted(session, principal, asked):
        await session.commit()
    try:
        for attempt_id in body.attempt_ids:
            await queue.enqueue(Task.JUDGE_ATTEMPT, job_subject(attempt_id, job.job_id), tenant=principal.tenant)
    except Exception:  # noqa: BLE001 - the reconciler enqueues what the database holds
        pass
    return {"job_id": job.job_id, "status": JobStatus.QUEUED, "judges": judges, "conditions": conditions}
