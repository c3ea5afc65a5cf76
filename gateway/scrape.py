"""What the gateway reads from Redis and the database at each scrape of /metrics: the platform-wide gauges.

Queues, live worker processes, live jobs and judge trust (each figure labelled `trust="ok"` or `"too_few"`, with its n
and clusters beside it) belong to no single worker, so the gateway refreshes them just before it renders its registry
(services/kernel/telemetry.py defines them), at most once a second. Each source is read on its own: an unreachable Redis
or database leaves its gauges as they were last read, sets tribunal_platform_source_up{source} to 0 (an alert), and
never fails the scrape by itself.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select

from metrics.reports.judge_quality import KIND as JUDGE_QUALITY
from metrics.reports.model import Trust, trust_of
from services.kernel import queue, telemetry
from services.kernel.contracts import LIVE_JOB_STATUSES, JobKind
from services.kernel.db import sessionmaker
from services.kernel.models import Job, Report
from services.kernel.settings import get_settings

log = logging.getLogger("tribunal.gateway.scrape")

# The trust gauges and the judge_quality report's metric they show.
TRUST_GAUGES = {
    "roc_auc": telemetry.judge_roc_auc,
    "ece": telemetry.judge_ece,
    "mcc_oof": telemetry.judge_mcc_oof,
}


# Scrapes closer together than this share one refresh (several Prometheus servers, or anyone when /metrics is
# public): reading Redis and the database is the expensive part of a scrape.
MIN_REFRESH_INTERVAL_S = 1.0
# A source that does not answer within this is counted unreadable, so that a hung Redis or database never makes the
# scrape itself time out (which would read as the gateway being down).
SOURCE_TIMEOUT_S = 1.0
_refreshing = asyncio.Lock()
_refreshed_at = -math.inf


async def refresh_platform_gauges() -> None:
    """Bring the platform-wide gauges up to date. A source that cannot be read is logged and skipped, and
    tribunal_platform_source_up says so (its gauges keep their last values meanwhile)."""
    global _refreshed_at
    async with _refreshing:
        if time.monotonic() - _refreshed_at < MIN_REFRESH_INTERVAL_S:
            return
        for source, refreshes in (("redis", (_refresh_queues,)), ("database", (_refresh_jobs, _refresh_trust))):
            try:
                async with asyncio.timeout(SOURCE_TIMEOUT_S):
                    for refresh in refreshes:
                        await refresh()
                telemetry.platform_source_up.labels(source).set(1)
            except Exception as exc:  # noqa: BLE001 - a scrape must not fail because Redis or the database is down
                telemetry.platform_source_up.labels(source).set(0)
                log.warning("telemetry: %s unreadable (%s)", source, type(exc).__name__)
        _refreshed_at = time.monotonic()


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
# How many of the trust tenant's newest judge_quality reports are looked at for one over all its data.
TRUST_CANDIDATES = 20


def is_platform_wide(params: dict[str, Any]) -> bool:
    """A judge_quality report over everything its tenant judged: no filter, every judge, every condition."""
    return not params.get("filter") and params.get("judges") is None and params.get("conditions") is None


async def _refresh_trust() -> None:
    """The trust gauges from the newest platform-wide judge_quality report of the trust tenant
    (TRIBUNAL_TRUST_TENANT): only the operators' own meta-evaluation speaks for the platform's judges; another
    tenant's report, or one over a chosen subset, never replaces it."""
    global _shown_report
    async with sessionmaker()() as session:
        candidates = (
            await session.execute(
                select(Report.report_id, Report.finished_at, Report.params)
                .where(
                    Report.tenant == get_settings().trust_tenant,
                    Report.kind == JUDGE_QUALITY,
                    Report.finished_at.is_not(None),
                    Report.result.is_not(None),
                )
                .order_by(Report.finished_at.desc())
                .limit(TRUST_CANDIDATES)
            )
        ).all()
        newest = next((row for row in candidates if is_platform_wide(dict(row.params or {}))), None)
        if newest is None or newest.report_id == _shown_report:
            return
        result = await session.scalar(select(Report.result).where(Report.report_id == newest.report_id))
    rows = trust_rows(result or {})
    for gauge in (*TRUST_GAUGES.values(), telemetry.judge_trust_items, telemetry.judge_trust_clusters):
        gauge.clear()
    for row in rows:
        judge, condition = row["judge"], row["condition"]
        for metric, gauge in TRUST_GAUGES.items():
            cell = row.get(metric)
            if not isinstance(cell, dict) or not isinstance(cell.get("value"), int | float):
                continue
            trust = cell_trust(cell, row)
            gauge.labels(judge, condition, "value", trust).set(cell["value"])
            interval = cell.get("ci")
            if isinstance(interval, list) and len(interval) == 2:
                gauge.labels(judge, condition, "ci_low", trust).set(interval[0])
                gauge.labels(judge, condition, "ci_high", trust).set(interval[1])
        if isinstance(row.get("n"), int) and isinstance(row.get("clusters"), int):
            telemetry.judge_trust_items.labels(judge, condition).set(row["n"])
            telemetry.judge_trust_clusters.labels(judge, condition).set(row["clusters"])
    finished: datetime = newest.finished_at
    if finished.tzinfo is None:
        finished = finished.replace(tzinfo=UTC)
    telemetry.judge_trust_report_time.set(finished.timestamp())
    _shown_report = newest.report_id


def cell_trust(cell: dict[str, Any], row: dict[str, Any]) -> str:
    """A figure's `trust` label: the one its report judged it with, else (a report built before figures were
    judged) its n and clusters, its own or its row's, against today's TRIBUNAL_MIN_ITEMS and TRIBUNAL_MIN_CLUSTERS;
    `too_few` when it says neither, so that an unsized figure never passes for a well-measured one."""
    if cell.get("trust") in telemetry.TRUST_VALUES:
        return str(cell["trust"])
    n, clusters = cell.get("n", row.get("n")), cell.get("clusters", row.get("clusters"))
    if not isinstance(n, int) or not isinstance(clusters, int):
        return Trust.TOO_FEW.value
    settings = get_settings()
    return trust_of(n, clusters, settings.min_items, settings.min_clusters).value


def trust_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The judge x condition rows of a judge_quality report's JSON (its `metrics` table)."""
    table = (result.get("tables") or {}).get("metrics") or {}
    return [
        row
        for row in table.get("rows") or []
        if isinstance(row, dict) and isinstance(row.get("judge"), str) and isinstance(row.get("condition"), str)
    ]
