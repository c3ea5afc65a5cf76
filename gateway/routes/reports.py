"""Reports: judge-quality and friends computed over stored judgments by the reports worker; JSON, PNG plots, HTML.
Listed with a cursor, without their results."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from gateway import paging, quotas
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.errors import ApiError, field_error
from gateway.principal import Principal
from gateway.schemas import ReportIn, ReportPage
from gateway.submissions import not_found
from metrics.reports import ReportKind, ReportParamError, resolve_cluster
from services.kernel import jobs, queue
from services.kernel.contracts import JobKind, JobStatus
from services.kernel.models import Job, Report, ReportPlot, new_id
from services.kernel.plans import ReportPlan
from services.kernel.registry import Task

router = APIRouter(prefix="/v1/reports", tags=["reports"])


@router.post("", status_code=202)
async def create(body: ReportIn, principal: SubmitKey, session: SessionDep) -> dict[str, Any]:
    return await create_report(body, principal, session)


async def create_report(
    body: ReportIn, principal: Principal, session: AsyncSession, recorded: Callable[[str, str], None] | None = None
) -> dict[str, Any]:
    """Record a report and its job, and enqueue it. `recorded(report_id, job_id)` runs in the transaction that
    creates them (a study records its report there, so that a resumed run never makes it twice)."""
    params = body.model_dump(mode="json")
    try:
        # Stored as the report will resample it: the kind's default when the request names none.
        params["cluster"] = resolve_cluster(body.kind, body.cluster)
    except ReportParamError as exc:
        raise field_error(["body", exc.field], str(exc)) from None
    report_id = new_id("rep")
    async with quotas.admission(principal, "queued_reports"):
        await quotas.check_queued_reports(session, principal)
        job = jobs.create_job(
            session, tenant=principal.tenant, kind=JobKind.REPORT, total=1, plan=ReportPlan(report_id=report_id)
        )
        session.add(
            Report(
                report_id=report_id,
                tenant=principal.tenant,
                kind=body.kind,
                params=params,
                job_id=job.job_id,
            )
        )
        if recorded is not None:
            recorded(report_id, job.job_id)
        await session.commit()
    try:
        await queue.enqueue(Task.BUILD_REPORT, report_id, tenant=principal.tenant)
    except Exception:  # noqa: BLE001 - the reconciler enqueues it from the database
        pass
    return {"report_id": report_id, "job_id": job.job_id, "status": JobStatus.QUEUED}


async def _own(session: SessionDep, report_id: str, tenant: str) -> Report:
    report = await session.get(Report, report_id)
    if report is None or report.tenant != tenant:
        raise not_found("report", report_id)
    return report


def _links(request: Request, report_id: str, plot_names: Iterable[str], has_html: bool) -> dict[str, Any]:
    """A report's `plots` and `html` links: paths relative to the API's own origin, never built from the request's
    Host header, which the client chose (a forged Host would make a client that follows the link send its key
    elsewhere)."""
    base = request.scope.get("root_path", "") + request.app.url_path_for("get_report", report_id=report_id)
    return {
        "plots": {name: f"{base}/plots/{name}.png" for name in sorted(plot_names)},
        "html": f"{base}/html" if has_html else None,
    }


@router.get("", response_model=ReportPage)
async def list_reports(
    principal: ReadKey,
    session: SessionDep,
    request: Request,
    kind: ReportKind | None = None,
    limit: paging.Limit = paging.DEFAULT_LIMIT,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The tenant's reports, oldest first, each as `GET /v1/reports/{report_id}` answers it but without `result`:
    neither it nor the HTML page is read, and the page costs two statements (with the plots' names) for any size."""
    query = (
        select(
            Report.report_id,
            Report.kind,
            Report.params,
            Report.job_id,
            Report.created_at,
            Report.finished_at,
            Report.html.is_not(None).label("has_html"),
            Job.status,
            Job.error,
        )
        .outerjoin(Job, Job.job_id == Report.job_id)
        .where(Report.tenant == principal.tenant)
    )
    if kind is not None:
        query = query.where(Report.kind == kind)
    rows = (await session.execute(paging.window(query, Report.created_at, Report.report_id, cursor, limit))).all()
    page, next_cursor = paging.split(rows, limit, lambda row: (row.created_at, row.report_id))
    plots: dict[str, list[str]] = defaultdict(list)
    if page:
        names = select(ReportPlot.report_id, ReportPlot.name).where(
            ReportPlot.report_id.in_([row.report_id for row in page])
        )
        for report_id, name in (await session.execute(names)).all():
            plots[report_id].append(name)
    items = [
        {
            "report_id": row.report_id,
            "kind": row.kind,
            "params": row.params,
            "status": row.status or JobStatus.FAILED,  # as the single read: a report whose job is gone failed
            "job_id": row.job_id,
            "error": row.error,
            "created_at": row.created_at,
            "finished_at": row.finished_at,
            **_links(request, row.report_id, plots[row.report_id], bool(row.has_html)),
        }
        for row in page
    ]
    return {"items": items, "next_cursor": next_cursor}


@router.get("/{report_id}", name="get_report")
async def get(report_id: str, principal: ReadKey, session: SessionDep, request: Request) -> dict[str, Any]:
    report = await _own(session, report_id, principal.tenant)
    job = await session.get(Job, report.job_id)
    names = (await session.scalars(select(ReportPlot.name).where(ReportPlot.report_id == report_id))).all()
    return {
        "report_id": report.report_id,
        "kind": report.kind,
        "params": report.params,
        "status": job.status if job else JobStatus.FAILED,
        "job_id": report.job_id,
        "error": job.error if job else None,
        "result": report.result,
        "created_at": report.created_at,
        "finished_at": report.finished_at,
        **_links(request, report_id, names, report.html is not None),
    }


@router.get("/{report_id}/plots/{name}.png", response_class=Response)
async def plot(report_id: str, name: str, principal: ReadKey, session: SessionDep) -> Response:
    await _own(session, report_id, principal.tenant)
    row = await session.get(ReportPlot, (report_id, name))
    if row is None:
        raise not_found("plot", name)
    return Response(row.png, media_type="image/png")


@router.get("/{report_id}/html", response_class=HTMLResponse)
async def html(report_id: str, principal: ReadKey, session: SessionDep) -> HTMLResponse:
    report = await _own(session, report_id, principal.tenant)
    if report.html is None:
        # Not 404: the report exists, its page is not built yet (GET /v1/reports/{id} says when it is).
        raise ApiError(409, f"the HTML page of report {report_id!r} is not built yet; retry once the report is done")
    return HTMLResponse(report.html)
