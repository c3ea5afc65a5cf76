"""Judges: the configured panel, and re-judging (retry what failed, or ask for fresh repeats)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from gateway import quotas
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.errors import field_error
from gateway.schemas import JudgmentsIn
from metrics.reports import trust
from services.kernel import jobs, queue, telemetry
from services.kernel.attempts import resolve_judging
from services.kernel.contracts import Condition, JobKind, JobStatus
from services.kernel.judges import LLMJudge, OfflineJudge, configured_judges, public_view
from services.kernel.models import Attempt
from services.kernel.plans import JudgePlan
from services.kernel.registry import Task
from services.kernel.settings import get_settings, trust_thresholds
from services.kernel.subjects import job_subject
from services.kernel.tidy import load_rows

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


@router.get("/v1/judges/{name}/trust")
async def judge_trust(
    name: str,
    principal: ReadKey,
    condition: str | None = Query(default=None, max_length=40),
    cluster: str = Query(default="trajectory", pattern="^(trajectory|problem)$"),
) -> dict[str, Any]:
    """The judge's trust cards over the tenant's stored judgments (metrics/reports/trust.py), one per use, under
    ``condition`` (default: the condition it has most ok judgments under); verdicts against the operator's
    TRIBUNAL_TRUST_* thresholds and TRIBUNAL_MIN_ITEMS / TRIBUNAL_MIN_CLUSTERS. The trust gauges follow each answer
    to the trust tenant (TRIBUNAL_TRUST_TENANT)."""
    settings = get_settings()
    rows = await load_rows(principal.tenant, {"judges": [name]})
    known = {j.name for j in _configured()}
    if name not in known and not rows:
        raise field_error(["path", "name"], f"no judge {name!r}", 404)
    counts = Counter(str(r["condition"]) for r in rows if r.get("status") == "ok")
    if condition is not None and condition not in counts:
        raise field_error(["query", "condition"], f"judge {name!r} has no ok judgment under condition {condition!r}")
    chosen = condition or (counts.most_common(1)[0][0] if counts else settings.default_conditions[0].value)
    result = await asyncio.to_thread(
        trust.judge_cards,
        rows,
        name,
        chosen,
        bootstrap=settings.trust_bootstrap,
        cluster=cluster,
        thresholds=trust_thresholds(settings),
        min_items=settings.min_items,
        min_clusters=settings.min_clusters,
    )
    # The gauges are the operator's view: only the trust tenant's cards feed them (TRIBUNAL_TRUST_TENANT, as the
    # judge-quality gauges), never another tenant's reads, whose data they would show to /metrics.
    for card in result["cards"] if principal.tenant == settings.trust_tenant else []:
        for verdict in telemetry.TRUST_CARD_VERDICTS:
            telemetry.judge_trust.labels(name, chosen, card["use"], verdict).set(int(card["status"] == verdict))
        if card["figures"]:
            first = card["figures"][0]
            telemetry.judge_trust_card_items.labels(name, chosen, card["use"]).set(first["n"])
            telemetry.judge_trust_card_clusters.labels(name, chosen, card["use"]).set(first["clusters"])
    return result
