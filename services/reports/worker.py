"""The reports worker: the only place the metrics reports meet the queue and the database.

It turns stored attempts, executions and judgments into the tidy table the pure report builders take
(:func:`load_rows`), runs the builder of the report's kind with the request's parameters
(:func:`metrics.reports.build_report`), renders its plots and HTML page, and stores all three.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from sqlalchemy import select

from metrics import html, plots
from metrics.reports import KINDS
from metrics.reports import build_report as build_kind
from metrics.reports import similarity as similarity_report
from services.kernel import jobs, queue, telemetry, worker
from services.kernel.contracts import LIVE_JOB_STATUSES, JobKind, JobStatus
from services.kernel.db import session_scope
from services.kernel.judges import configured_judges
from services.kernel.models import (
    Job,
    Report,
    ReportPlot,
    SimilarityPair,
    utcnow,
)
from services.kernel.plans import SimilarityPlan
from services.kernel.registry import Task
from services.kernel.settings import get_settings, trust_thresholds
from services.kernel.tidy import OFFLINE_PREFIX, label_ac, load_rows, offline_method
from services.reports import calibrate
from services.reports.calibrate import calibrate_judge

log = logging.getLogger("tribunal.reports")
# The tidy table moved to services/kernel/tidy.py (the gateway's trust cards read it too); still importable here.
__all__ = ["OFFLINE_PREFIX", "build", "build_report", "label_ac", "load_pair_rows", "load_rows", "offline_method"]

SERVICE = "reports"


async def load_pair_rows(tenant: str, job_id: str) -> list[dict[str, Any]]:
    """The scored pairs of one of the tenant's similarity jobs (filter ``job_id``), as the similarity report reads
    them: the pairs :func:`metrics.reports.similarity.scored_pairs` keeps (df_score -1 left out, as LoCaL does)."""
    async with session_scope() as session:
        job = await session.get(Job, job_id)
        if job is None or job.tenant != tenant or job.kind != JobKind.SIMILARITY:
            return []
        plan = job.plan(SimilarityPlan)
        pairs = (
            await session.scalars(
                select(SimilarityPair)
                .where(SimilarityPair.job_id == job_id, SimilarityPair.status == "scored")
                .order_by(SimilarityPair.ordinal)
            )
        ).all()
        kept, _ = similarity_report.scored_pairs({pair.ordinal: pair.result for pair in pairs})
        rows = []
        for pair in pairs:
            if pair.ordinal not in kept:
                continue
            rows.append(
                {
                    **kept[pair.ordinal],
                    "pair_id": pair.pair_key,
                    "problem_id": str(pair.problem_pk) if pair.problem_pk is not None else pair.pair_key,
                    "trajectory": pair.pair_key,
                    "attempt_id": pair.pair_key,
                    "thresholds": plan.thresholds,
                    "protocol": plan.protocol,
                }
            )
    return rows


def enabled_judges() -> list[str]:
    """The names of the deployment's enabled judges (its judges file, or the offline defaults), in its order."""
    settings = get_settings()
    return [j.name for j in configured_judges(str(settings.judges_file) if settings.judges_file else None) if j.enabled]


def build(
    kind: str,
    rows: list[dict[str, Any]],
    params: dict[str, Any],
    title: str,
    configured_judges: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, bytes], str]:
    """The report's JSON, its plots (name -> PNG) and its HTML page: CPU-bound, run in a thread. The report lists
    every one of `configured_judges` with its counts of ok, failed and not-applicable rows (none for code pairs)."""
    settings = get_settings()
    # The request's own minimums, else the operators' (TRIBUNAL_MIN_ITEMS, TRIBUNAL_MIN_CLUSTERS).
    request = {
        **params,
        "min_items": params.get("min_items") or settings.min_items,
        "min_clusters": params.get("min_clusters") or settings.min_clusters,
        "thresholds": trust_thresholds(settings),
    }
    report = build_kind(kind, rows, request, configured_judges).to_json()
    rendered = plots.render_all(report)
    return report, rendered, html.render_html(report, rendered, title)


@queue.task(Task.BUILD_REPORT)
async def build_report(ctx: dict[str, Any], report_id: str) -> None:
    async with session_scope() as session:
        report = await session.get(Report, report_id)
        if report is None:
            return
        job = await jobs.get_job(session, report.job_id)
        if job is None or job.status not in LIVE_JOB_STATUSES:
            return
        await jobs.mark_running(session, report.job_id)
        tenant, kind, params, job_id = report.tenant, report.kind, dict(report.params), report.job_id
    started = time.perf_counter()
    try:
        flt = params.get("filter") or {}
        configured: list[str] | None = None
        if kind == JobKind.SIMILARITY and flt.get("job_id"):
            rows = await load_pair_rows(tenant, str(flt["job_id"]))
        else:
            rows = await load_rows(tenant, flt)
            configured = enabled_judges()
        result, rendered, page = await asyncio.to_thread(
            build, kind, rows, params, f"Tribunal {kind} report {report_id}", configured
        )
    except Exception as exc:
        log.exception("report %s failed", report_id)
        telemetry.report_duration.labels(kind, "failed").observe(time.perf_counter() - started)
        async with session_scope() as session:
            await jobs.finish(session, job_id, JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return
    async with session_scope() as session:
        stored = await session.get(Report, report_id)
        assert stored is not None
        stored.result, stored.html, stored.finished_at = result, page, utcnow()
        for name, png in rendered.items():
            await session.merge(ReportPlot(report_id=report_id, name=name, png=png))
        await jobs.finish(session, job_id, JobStatus.SUCCEEDED, result={"report_id": report_id})
    telemetry.report_duration.labels(kind, "built").observe(time.perf_counter() - started)


async def _startup(ctx: dict[str, Any]) -> None:
    telemetry.start_report_series(KINDS)
    ctx["calibration_refits"] = asyncio.create_task(
        calibrate.refit_forever(get_settings().calibration_refit_interval_s)
    )


async def _shutdown(ctx: dict[str, Any]) -> None:
    refits = ctx.get("calibration_refits")
    if refits is not None:
        refits.cancel()


def run_worker() -> None:
    """Run the reports worker until SIGTERM/SIGINT (reports are CPU-bound: the registry runs two at a time): it
    builds reports and calibrations (services/reports/calibrate.py), and looks for calibrations due a refit."""
    worker.run(
        worker.build_worker(
            SERVICE, functions=[build_report, calibrate_judge], on_startup=_startup, on_shutdown=_shutdown
        )
    )
