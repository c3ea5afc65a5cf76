"""What the gateway reads from Redis and the database at each scrape of /metrics: the platform-wide gauges.

Queues, live worker processes, live jobs and judge trust belong to no single worker, so the gateway refreshes them
just before it renders its registry (services/kernel/telemetry.py defines them). Each source is read on its own: an
unreachable Redis or database leaves its gauges as they were last read and never fails the scrape (`up` stays 1,
and the stale value's age shows in the gauges' flat line; readiness at /readyz says what is down).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select

from metrics.reports.judge_quality import KIND as JUDGE_QUALITY
from services.kernel import queue, telemetry
from services.kernel.contracts import LIVE_JOB_STATUSES, JobKind
from services.kernel.db import sessionmaker
from services.kernel.models import Job, Report

log = logging.getLogger("tribunal.gateway.scrape")

# The trust gauges and the judge_quality report's metric they show.
TRUST_GAUGES = {
    "roc_auc": telemetry.judge_roc_auc,
    "ece": telemetry.judge_ece,
    "mcc_oof": telemetry.judge_mcc_oof,
}


async def refresh_platform_gauges() -> None:
    """Bring the platform-wide gauges up to date; a source that cannot be read is logged and skipped."""
    for refresh in (_refresh_queues, _refresh_jobs, _refresh_trust):
        try:
            await refresh()
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail because Redis or the database is down
            log.warning("telemetry: %s skipped (%s)", refresh.__name__.removeprefix("_refresh_"), type(exc).__name__)


async def _refresh_queues() -> None:
    pool = await queue.get_pool()
    for name, depth in (await queue.queue_depths(pool)).items():
        telemetry.queue_depth.labels(name).set(depth)
    for name, age in (await queue.oldest_waiting_ages(pool)).items():
        telemetry.queue_oldest_age.labels(name).set(age)
    for kind, count in (await queue.live_workers(pool)).items():
        telemetry.worker_processes.labels(kind).set(count)


async def _refresh_jobs() -> None:
    async with sessionmaker()() as session:
        counted = await session.execute(
            select(Job.kind, Job.status, func.count())
            .where(Job.status.in_(LIVE_JOB_STATUSES))
            .group_by(Job.kind, Job.status)
        )
        counts = {(str(kind), str(status)): int(n) for kind, status, n in counted.all()}
    for kind in JobKind:
        for status in LIVE_JOB_STATUSES:
            telemetry.jobs_live.labels(kind.value, status.value).set(counts.get((kind.value, status.value), 0))


_shown_report: str | None = None


async def _refresh_trust() -> None:
    """The newest built judge_quality report (any tenant's: judges are the platform's) into the trust gauges."""
    global _shown_report
    async with sessionmaker()() as session:
        newest = (
            await session.execute(
                select(Report.report_id, Report.finished_at)
                .where(Report.kind == JUDGE_QUALITY, Report.finished_at.is_not(None), Report.result.is_not(None))
                .order_by(Report.finished_at.desc())
                .limit(1)
            )
        ).first()
        if newest is None or newest.report_id == _shown_report:
            return
        result = await session.scalar(select(Report.result).where(Report.report_id == newest.report_id))
    rows = trust_rows(result or {})
    for gauge in TRUST_GAUGES.values():
        gauge.clear()
    for row in rows:
        for metric, gauge in TRUST_GAUGES.items():
            cell = row.get(metric)
            if not isinstance(cell, dict) or not isinstance(cell.get("value"), int | float):
                continue
            gauge.labels(row["judge"], row["condition"], "value").set(cell["value"])
            interval = cell.get("ci")
            if isinstance(interval, list) and len(interval) == 2:
                gauge.labels(row["judge"], row["condition"], "ci_low").set(interval[0])
                gauge.labels(row["judge"], row["condition"], "ci_high").set(interval[1])
    finished: datetime = newest.finished_at
    if finished.tzinfo is None:
        finished = finished.replace(tzinfo=UTC)
    telemetry.judge_trust_report_time.set(finished.timestamp())
    _shown_report = newest.report_id


def trust_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The judge x condition rows of a judge_quality report's JSON (its `metrics` table)."""
    table = (result.get("tables") or {}).get("metrics") or {}
    return [
        row
        for row in table.get("rows") or []
        if isinstance(row, dict) and isinstance(row.get("judge"), str) and isinstance(row.get("condition"), str)
    ]
