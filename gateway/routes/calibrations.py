"""Calibrations: learn a judge x condition's calibration map as a job of the reports worker
(services/reports/calibrate.py); the judgments it covers then carry `p_ac_calibrated` (gateway/calibrated.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gateway import quotas
from gateway.deps import SessionDep, SubmitKey
from gateway.errors import field_error
from gateway.schemas.calibrations import CalibrationIn
from services.kernel import jobs, queue
from services.kernel.contracts import JobKind, JobStatus
from services.kernel.judges import configured_judges
from services.kernel.plans import CalibrationPlan
from services.kernel.registry import Task
from services.kernel.settings import get_settings

router = APIRouter(prefix="/v1/calibrations", tags=["calibrations"])


@router.post("", status_code=202)
async def create(body: CalibrationIn, principal: SubmitKey, session: SessionDep) -> dict[str, Any]:
    """Record a calibration job and enqueue it; an unknown judge is a 422 naming `judge`."""
    settings = get_settings()
    known = [j.name for j in configured_judges(str(settings.judges_file) if settings.judges_file else None)]
    if body.judge not in known:
        raise field_error(["body", "judge"], f"unknown judge {body.judge!r}; configured: {', '.join(known)}")
    plan = CalibrationPlan.model_validate(body.model_dump(mode="json"))
    async with quotas.admission(principal, "queued_reports"):
        await quotas.check_queued_reports(session, principal)  # a calibration is built beside the reports
        job = jobs.create_job(session, tenant=principal.tenant, kind=JobKind.CALIBRATE, total=1, plan=plan)
        await session.commit()
    try:
        await queue.enqueue(Task.CALIBRATE_JUDGE, job.job_id, tenant=principal.tenant)
    except Exception:  # noqa: BLE001 - the reconciler enqueues it from the database
        pass
    return {"job_id": job.job_id, "status": JobStatus.QUEUED}
