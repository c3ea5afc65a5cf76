"""Calibration jobs (POST /v1/calibrations, and refits): learn a judge x condition's calibration map from the
tenant's labelled items (metrics/recalibration.py) and store it as a `calibration` row.

The items are the tidy judgment table's (services/kernel/tidy.py `load_rows`) rows of that judge and condition
that score (status ok, repeat 0, not a perturbation mutant), carry a `label_ac` (the client's label, else the
execution verdict; IE is no label) and a raw probability (`recalibration.raw_probability`). Refits
(:func:`refit_due`, :func:`enqueue_refits`): the reports worker looks every `calibration_refit_interval_s` at each
tenant's newest calibration of every judge x condition, and when the labelled items have grown by at least
`calibration_refit_growth` (20% by default) since it was fitted, and no calibration job of that judge x condition is
live, it creates one with the same method, cluster, bootstrap and seed (`refit_of`: the calibration it refits).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import func, select

from metrics import recalibration
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.reports.common import cluster_of, scored
from services.kernel import jobs, queue
from services.kernel.contracts import LIVE_JOB_STATUSES, JobKind, JobStatus
from services.kernel.db import session_scope
from services.kernel.models import Attempt, Calibration, Job, new_id
from services.kernel.plans import CalibrationPlan
from services.kernel.registry import Task
from services.kernel.settings import get_settings
from services.kernel.tidy import load_rows

log = logging.getLogger("tribunal.calibrate")


def calibration_items(
    rows: list[dict[str, Any]], judge: str, condition: str, cluster: str
) -> tuple[list[str], list[float], list[int], list[str]]:
    """The labelled items of one judge x condition: attempt ids, raw probabilities, labels and clusters."""
    aids: list[str] = []
    probs: list[float] = []
    labels: list[int] = []
    groups: list[str] = []
    for row in scored(rows):
        if row["judge"] != judge or row["condition"] != condition or row.get("label_ac") is None:
            continue
        raw = recalibration.raw_probability(
            row.get("p_ac"), row.get("score"), row.get("weighted_p_ac"), row.get("weighted_score")
        )
        if raw is None:
            continue
        aids.append(str(row["attempt_id"]))
        probs.append(min(1.0, max(0.0, raw)))
        labels.append(int(row["label_ac"]))
        groups.append(cluster_of(row, cluster))
    return aids, probs, labels, groups


@queue.task(Task.CALIBRATE_JUDGE)
async def calibrate_judge(ctx: dict[str, Any], job_id: str) -> None:
    async with session_scope() as session:
        job = await jobs.get_job(session, job_id)
        if job is None or job.status not in LIVE_JOB_STATUSES or job.kind != JobKind.CALIBRATE:
            return
        await jobs.mark_running(session, job_id)
        tenant, plan = job.tenant, job.plan(CalibrationPlan)
    rows = await load_rows(tenant, {})
    aids, probs, labels, groups = calibration_items(rows, plan.judge, plan.condition, plan.cluster)
    try:
        result = await asyncio.to_thread(
            recalibration.calibrate,
            plan.method,
            probs,
            labels,
            groups,
            folds=plan.folds,
            bootstrap=plan.bootstrap,
            seed=plan.seed,
        )
    except (MetricInputError, UndefinedMetricError) as exc:
        async with session_scope() as session:
            await jobs.finish(session, job_id, JobStatus.FAILED, error=f"{plan.judge}/{plan.condition}: {exc}")
        return
    async with session_scope() as session:
        first, last = (
            await session.execute(
                select(func.min(Attempt.created_at), func.max(Attempt.created_at)).where(Attempt.attempt_id.in_(aids))
            )
        ).one()
        version = 1 + int(
            await session.scalar(
                select(func.count())
                .select_from(Calibration)
                .where(
                    Calibration.tenant == tenant,
                    Calibration.judge == plan.judge,
                    Calibration.condition == plan.condition,
                )
            )
            or 0
        )
        fitted_on = {
            "n": result["n"],
            "clusters": result["clusters"],
            "attempts": len(set(aids)),
            "positives": result["positives"],
            "date_range": [first.isoformat() if first else None, last.isoformat() if last else None],
        }
        calibration_id = new_id("cal")
        figures = {key: value for key, value in result.items() if key != "map"}
        figures.update(bootstrap=plan.bootstrap, seed=plan.seed, requested_folds=plan.folds)
        session.add(
            Calibration(
                calibration_id=calibration_id,
                tenant=tenant,
                judge=plan.judge,
                condition=plan.condition,
                method=plan.method,
                cluster=plan.cluster,
                version=version,
                applied=result["applied"],
                fitted_on=fitted_on,
                fitted_map=result["map"],
                result=figures,
                job_id=job_id,
            )
        )
        await jobs.finish(
            session,
            job_id,
            JobStatus.SUCCEEDED,
            result={
                "calibration_id": calibration_id,
                "judge": plan.judge,
                "condition": plan.condition,
                "method": plan.method,
                "cluster": plan.cluster,
                "version": version,
                "fitted_on": fitted_on,
                **figures,
                "map": result["map"],
                "refit_of": plan.refit_of,
            },
        )


def refit_due(fitted_n: int, labelled_now: int, growth: float) -> bool:
    """True when the labelled items have grown by at least `growth` (a share) since the map was fitted."""
    return labelled_now >= fitted_n * (1.0 + growth) and labelled_now > fitted_n


async def enqueue_refits() -> list[str]:
    """Create (and enqueue) a refit job for every newest calibration whose labelled items have grown enough; the
    ids of the jobs created."""
    growth = get_settings().calibration_refit_growth
    created: list[str] = []
    async with session_scope() as session:
        newest: dict[tuple[str, str, str], Calibration] = {}
        for row in await session.scalars(select(Calibration).order_by(Calibration.created_at)):
            newest[(row.tenant, row.judge, row.condition)] = row
        live = {
            (job.tenant, plan.judge, plan.condition)
            for job in await session.scalars(
                select(Job).where(Job.kind == JobKind.CALIBRATE, Job.status.in_(LIVE_JOB_STATUSES))
            )
            for plan in [job.plan(CalibrationPlan)]
        }
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for (tenant, judge, condition), calibration in sorted(newest.items()):
        if (tenant, judge, condition) in live:
            continue
        if tenant not in rows_of:
            rows_of[tenant] = await load_rows(tenant, {})
        now = len(calibration_items(rows_of[tenant], judge, condition, calibration.cluster)[0])
        if not refit_due(int(calibration.fitted_on.get("n", 0)), now, growth):
            continue
        before = calibration.result
        plan = CalibrationPlan(
            judge=judge,
            condition=condition,  # type: ignore[arg-type]
            method=calibration.method,  # type: ignore[arg-type]
            cluster=calibration.cluster,  # type: ignore[arg-type]
            bootstrap=int(before.get("bootstrap", 2000)),
            seed=int(before.get("seed", 0)),
            folds=int(before.get("requested_folds", recalibration.DEFAULT_FOLDS)),
            refit_of=calibration.calibration_id,
        )
        async with session_scope() as session:
            job = jobs.create_job(session, tenant=tenant, kind=JobKind.CALIBRATE, total=1, plan=plan)
        created.append(job.job_id)
        try:
            await queue.enqueue(Task.CALIBRATE_JUDGE, job.job_id, tenant=tenant)
        except Exception:  # noqa: BLE001 - the reconciler enqueues it from the database
            pass
    return created


async def refit_forever(interval_s: float) -> None:
    """Run :func:`enqueue_refits` every `interval_s` until cancelled; errors are logged, never fatal."""
    while True:
        try:
            made = await enqueue_refits()
            if made:
                log.info("enqueued %d calibration refit(s)", len(made))
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the next pass tries again
            log.exception("calibration refit pass failed")
        await asyncio.sleep(interval_s)
