"""The metrics worker: the only place the metrics service meets the queue and the database.

It turns stored attempts, executions and judgments into the tidy table the pure report builders take, runs the
builder of the report's kind, renders its plots and HTML page, and stores all three.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import select

from metrics import html, plots, report_builder
from services.kernel import jobs, queue, worker
from services.kernel.db import session_scope
from services.kernel.models import Attempt, Execution, Judgment, Problem, Report, ReportPlot, utcnow
from services.kernel.queue import METRICS_QUEUE, Task

log = logging.getLogger("tribunal.metrics")


def label_ac(attempt: Attempt, verdict: str | None) -> int | None:
    """Ground truth for acceptance: the client's label when it gave one, else the execution verdict (IE: none)."""
    label = attempt.label or {}
    chosen = label.get("verdict") or verdict
    if chosen is None or chosen == "IE":
        return None
    return 1 if chosen == "AC" else 0


async def load_rows(tenant: str, flt: dict[str, Any]) -> list[dict[str, Any]]:
    """The tidy judgment table of a tenant (api filter: problem_ids, participants, attempt_ids)."""
    async with session_scope() as session:
        query = (
            select(Attempt, Problem.problem_id, Execution.verdict, Judgment)
            .join(Problem, Problem.id == Attempt.problem_pk)
            .outerjoin(Execution, (Execution.attempt_id == Attempt.attempt_id) & (Execution.run == 0))
            .join(Judgment, Judgment.attempt_id == Attempt.attempt_id)
            .where(Attempt.tenant == tenant)
        )
        if flt.get("problem_ids"):
            query = query.where(Problem.problem_id.in_(list(flt["problem_ids"])))
        if flt.get("participants"):
            query = query.where(Attempt.participant.in_(list(flt["participants"])))
        if flt.get("attempt_ids"):
            query = query.where(Attempt.attempt_id.in_(list(flt["attempt_ids"])))
        rows = []
        for attempt, problem_id, verdict, judgment in (await session.execute(query)).all():
            label = attempt.label or {}
            rows.append(
                {
                    "attempt_id": attempt.attempt_id,
                    "problem_id": problem_id,
                    "participant": attempt.participant,
                    "turn": attempt.turn,
                    "trajectory": f"{attempt.participant}|{problem_id}" if attempt.participant else attempt.attempt_id,
                    "label_ac": label_ac(attempt, verdict),
                    "label_score": label.get("score"),
                    "judge": judgment.judge,
                    "condition": judgment.condition,
                    "repeat": judgment.repeat,
                    "status": judgment.status,
                    "p_ac": judgment.p_ac,
                    "score": judgment.score,
                    "parent_attempt_id": attempt.parent_attempt_id,
                    "operator": attempt.operator,
                    "arm": attempt.arm,
                    "severity": attempt.severity,
                }
            )
    return rows


def build(kind: str, rows: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    options = {
        "judges": params.get("judges"),
        "conditions": params.get("conditions"),
        "bootstrap": params.get("bootstrap", 2000),
        "seed": params.get("seed", 0),
    }
    if kind == "judge_quality":
        return report_builder.judge_quality(
            rows, folds=params.get("folds", 10), cluster=params.get("cluster", "trajectory"), **options
        )
    if kind == "similarity":
        return report_builder.similarity([], bootstrap=options["bootstrap"], seed=options["seed"])
    builder = getattr(report_builder, kind)
    return dict(builder(rows, **options))


@queue.task(Task.BUILD_REPORT)
async def build_report(ctx: dict[str, Any], report_id: str) -> None:
    async with session_scope() as session:
        report = await session.get(Report, report_id)
        if report is None:
            return
        job = await jobs.get_job(session, report.job_id)
        if job is None or job.status not in ("queued", "running"):
            return
        await jobs.mark_running(session, report.job_id)
        tenant, kind, params, job_id = report.tenant, report.kind, dict(report.params), report.job_id
    try:
        rows = await load_rows(tenant, params.get("filter") or {})
        result = await asyncio.to_thread(build, kind, rows, params)
        rendered = await asyncio.to_thread(plots.render_all, result)
        page = await asyncio.to_thread(html.render_html, result, rendered, f"Tribunal {kind} report {report_id}")
    except Exception as exc:
        log.exception("report %s failed", report_id)
        async with session_scope() as session:
            await jobs.finish(session, job_id, "failed", error=f"{type(exc).__name__}: {exc}")
        return
    async with session_scope() as session:
        stored = await session.get(Report, report_id)
        assert stored is not None
        stored.result, stored.html, stored.finished_at = result, page, utcnow()
        for name, png in rendered.items():
            await session.merge(ReportPlot(report_id=report_id, name=name, png=png))
        await jobs.finish(session, job_id, "succeeded", result={"report_id": report_id})


def run_worker() -> None:
    """Run the metrics worker until SIGTERM/SIGINT (reports are CPU-bound: two at a time)."""
    worker.run(worker.build_worker(role="metrics", functions=[build_report], queue_name=METRICS_QUEUE, max_jobs=2))
