"""Studies (docs/studies.md): a stored study spec, the records of its stages, and its progress read live from the
database, so that `tribunal study status` and `tribunal study report` work from any machine.

`tribunal study run` drives a study: it imports the files (through the same bodies as `tribunal import`), submits
the references, waits, and asks this API for the stages that create a job, the perturbations and each report.
Those are created here, and their ids recorded in the study in the same transaction: a run resumed after a crash
finds them and never creates them twice. Everything else a run does is idempotent by itself (problem ids,
attempt uids, one judgment row per attempt x judge x condition x repeat).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fastapi import APIRouter, Response
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from gateway import paging
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.errors import ApiError, field_error
from gateway.routes.perturbations import create_perturbation
from gateway.routes.reports import create_report
from gateway.schemas import PerturbationsIn, ReportIn
from gateway.schemas.perturbations import MAX_SEEDS_PER_JOB
from gateway.schemas.studies import StageIn, StageName, StudyIn, StudyReportIn, StudySpec
from gateway.submissions import not_found
from services.kernel.contracts import Verdict
from services.kernel.models import Attempt, Job, Judgment, Problem, Report, Study, new_id

router = APIRouter(prefix="/v1/studies", tags=["studies"])

# The participant a study's reference attempts are submitted as (the accepted seeds of its perturbations).
REFERENCE_PARTICIPANT = "reference"


def spec_hash(spec: StudySpec) -> str:
    """The content hash of a spec: what makes posting the same study file again a no-op."""
    return hashlib.sha256(json.dumps(spec.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


async def _own(session: AsyncSession, study_id: str, tenant: str, *, lock: bool = False) -> Study:
    query = select(Study).where(Study.study_id == study_id, Study.tenant == tenant)
    study = (await session.scalars(query.with_for_update() if lock else query)).first()
    if study is None:
        raise not_found("study", study_id)
    return study


def _scope(study: Study) -> list[str]:
    return list(study.state.get("problem_ids") or [])


async def _progress(session: AsyncSession, study: Study) -> dict[str, Any]:
    """The study's work as the database has it: its attempts by status, their judgments by status, and the jobs
    its stages created (three statements, whatever the study's size)."""
    scope = _scope(study)
    problems = select(Problem.id).where(Problem.tenant == study.tenant, Problem.problem_id.in_(scope))
    attempts_by_status = dict(
        (
            await session.execute(
                select(Attempt.status, func.count())
                .where(Attempt.tenant == study.tenant, Attempt.problem_pk.in_(problems))
                .group_by(Attempt.status)
            )
        ).all()
    )
    judgments_by_status = dict(
        (
            await session.execute(
                select(Judgment.status, func.count())
                .join(Attempt, Attempt.attempt_id == Judgment.attempt_id)
                .where(Attempt.tenant == study.tenant, Attempt.problem_pk.in_(problems))
                .group_by(Judgment.status)
            )
        ).all()
    )
    job_ids = [study.state.get("perturb", {}).get("job_id")] + [
        r.get("job_id") for r in study.state.get("reports", {}).values()
    ]
    jobs = {
        job.job_id: job for job in await session.scalars(select(Job).where(Job.job_id.in_([j for j in job_ids if j])))
    }

    def job_progress(job_id: str | None) -> dict[str, Any] | None:
        job = jobs.get(job_id or "")
        if job is None:
            return None
        return {
            "job_id": job.job_id,
            "status": job.status,
            "done": job.progress_done,
            "total": job.progress_total,
            "error": job.error,
        }

    perturb = study.state.get("perturb")
    return {
        "problems": len(scope),
        "attempts": {"total": sum(attempts_by_status.values()), **attempts_by_status},
        "judgments": {"total": sum(judgments_by_status.values()), **judgments_by_status},
        "perturbations": job_progress(perturb.get("job_id")) if perturb else None,
        "reports": [
            {"index": int(index), "kind": r["kind"], "report_id": r["report_id"], **(job_progress(r["job_id"]) or {})}
            for index, r in sorted(study.state.get("reports", {}).items(), key=lambda item: int(item[0]))
        ],
    }


def _view(study: Study) -> dict[str, Any]:
    state = study.state
    return {
        "study_id": study.study_id,
        "name": study.name,
        "spec": study.spec,
        "spec_hash": study.spec_hash,
        "stages": state.get("stages", {}),
        "created_at": study.created_at,
        "updated_at": study.updated_at,
    }


async def _full_view(session: AsyncSession, study: Study) -> dict[str, Any]:
    return {**_view(study), "progress": await _progress(session, study)}


@router.post("", status_code=201)
async def create(body: StudyIn, principal: SubmitKey, session: SessionDep, response: Response) -> dict[str, Any]:
    """A new study (201); the same name and spec again answers it (200); the same name with another spec is 409."""
    digest = spec_hash(body.spec)
    name = body.spec.name
    existing = (
        await session.scalars(select(Study).where(Study.tenant == principal.tenant, Study.name == name))
    ).first()
    if existing is None:
        study = Study(
            study_id=new_id("std"),
            tenant=principal.tenant,
            name=name,
            spec=body.spec.model_dump(mode="json"),
            spec_hash=digest,
            state={},
        )
        session.add(study)
        try:
            await session.commit()
        except IntegrityError:
            # The same name posted at the same time: the other request stored it; answer as for a second post.
            await session.rollback()
            return await create(body, principal, session, response)
        return await _full_view(session, study)
    if existing.spec_hash != digest:
        raise ApiError(
            409,
            f"study {name!r} exists with another spec ({existing.study_id}); give the changed study another name",
            [{"loc": ["body", "spec", "name"], "msg": "taken by a study with another spec"}],
        )
    response.status_code = 200
    return await _full_view(session, existing)


@router.get("")
async def list_studies(
    principal: ReadKey, session: SessionDep, limit: paging.Limit = paging.DEFAULT_LIMIT, cursor: str | None = None
) -> dict[str, Any]:
    """The tenant's studies, oldest first, without their progress (read it from `GET /v1/studies/{id}`)."""
    query = select(Study).where(Study.tenant == principal.tenant)
    rows = (await session.scalars(paging.window(query, Study.created_at, Study.study_id, cursor, limit))).all()
    page, next_cursor = paging.split(rows, limit, lambda row: (row.created_at, row.study_id))
    return {"items": [_view(study) for study in page], "next_cursor": next_cursor}


@router.get("/{study_id}")
async def get(study_id: str, principal: ReadKey, session: SessionDep) -> dict[str, Any]:
    """A study: its spec, the record of every stage a run reached, and its progress read live."""
    return await _full_view(session, await _own(session, study_id, principal.tenant))


@router.put("/{study_id}/stages/{stage}")
async def record_stage(
    study_id: str, stage: StageName, body: StageIn, principal: SubmitKey, session: SessionDep
) -> dict[str, Any]:
    """Record what a run did in one stage (its status and summary); the import stage also records the problems
    the study's files made, which are the study's scope."""
    study = await _own(session, study_id, principal.tenant, lock=True)
    state = dict(study.state)
    stages = dict(state.get("stages", {}))
    stages[stage] = {"status": body.status, "summary": body.summary}
    state["stages"] = stages
    if body.problem_ids is not None:
        if stage != "import":
            raise field_error(["body", "problem_ids"], "only the import stage records the study's problems")
        state["problem_ids"] = list(dict.fromkeys(body.problem_ids))
    study.state = state
    await session.commit()
    return await _full_view(session, study)


async def _reference_seeds(session: AsyncSession, study: Study) -> list[str]:
    """The study's accepted reference attempts, oldest first: the perturbations' seeds."""
    problems = select(Problem.id).where(Problem.tenant == study.tenant, Problem.problem_id.in_(_scope(study)))
    return list(
        await session.scalars(
            select(Attempt.attempt_id)
            .where(
                Attempt.tenant == study.tenant,
                Attempt.problem_pk.in_(problems),
                Attempt.participant == REFERENCE_PARTICIPANT,
                Attempt.parent_attempt_id.is_(None),
                Attempt.verdict == Verdict.AC,
            )
            .order_by(Attempt.created_at, Attempt.attempt_id)
        )
    )


@router.post("/{study_id}/perturbations", status_code=202)
async def perturb(study_id: str, principal: SubmitKey, session: SessionDep, response: Response) -> dict[str, Any]:
    """The study's perturbation job over its accepted references, created once: asked again, the same job (200)."""
    study = await _own(session, study_id, principal.tenant, lock=True)
    spec = StudySpec.model_validate(study.spec)
    recorded = study.state.get("perturb")
    if recorded:
        response.status_code = 200
        return dict(recorded)
    if spec.perturbations is None:
        raise field_error(["path", "study_id"], "this study has no [perturbations]", 409)
    seeds = await _reference_seeds(session, study)
    if not seeds:
        raise field_error(["path", "study_id"], "the study has no accepted reference attempt to perturb yet", 409)
    if len(seeds) > MAX_SEEDS_PER_JOB:
        raise field_error(
            ["path", "study_id"],
            f"the study has {len(seeds)} accepted references; a perturbation job takes at most {MAX_SEEDS_PER_JOB} "
            "(give its dataset a `limit`)",
            409,
        )
    body = PerturbationsIn(
        attempt_ids=seeds,
        operators=spec.perturbations.operators,
        seed=spec.perturbations.seed,
        all_sites=spec.perturbations.all_sites,
        judge=True,
        judges=spec.judging.judges,
    )

    def record(job_id: str) -> None:
        study.state = {**study.state, "perturb": {"job_id": job_id, "seeds": len(seeds)}}

    answer = await create_perturbation(body, principal, session, record)
    return {"job_id": answer["job_id"], "seeds": len(seeds), "judges": answer["judges"]}


@router.post("/{study_id}/reports", status_code=202)
async def report(
    study_id: str, body: StudyReportIn, principal: SubmitKey, session: SessionDep, response: Response
) -> dict[str, Any]:
    """The study's report at `index` of its `report` list, over the study's problems, created once: asked again,
    the same report (200) -- unless the one made failed, which is made again."""
    study = await _own(session, study_id, principal.tenant, lock=True)
    spec = StudySpec.model_validate(study.spec)
    if body.index >= len(spec.report):
        raise field_error(["body", "index"], f"the study has {len(spec.report)} reports")
    if not _scope(study):
        # An empty problem filter is no filter: the report would cover the tenant's whole data, not the study's.
        raise field_error(["path", "study_id"], "the study has no problems yet (its import stage records them)", 409)
    reports = dict(study.state.get("reports", {}))
    recorded = reports.get(str(body.index))
    if recorded:
        job = await session.get(Job, recorded["job_id"])
        made = await session.get(Report, recorded["report_id"])
        if job is not None and made is not None and job.status != "failed":
            response.status_code = 200
            return dict(recorded)
    wanted = spec.report[body.index]
    request = ReportIn(
        kind=wanted.kind,
        filter={"problem_ids": _scope(study)},
        judges=wanted.judges if wanted.judges is not None else spec.judging.judges,
        conditions=wanted.conditions if wanted.conditions is not None else spec.judging.conditions,
        folds=wanted.folds or 10,
        bootstrap=wanted.bootstrap if wanted.bootstrap is not None else spec.bootstrap,
        cluster=wanted.cluster,
        seed=wanted.seed if wanted.seed is not None else spec.seed,
        k=wanted.k,
        mutants=wanted.mutants,
        min_items=wanted.min_items or spec.min_items,
        min_clusters=wanted.min_clusters or spec.min_clusters,
    )

    def record(report_id: str, job_id: str) -> None:
        entry = {"kind": wanted.kind, "report_id": report_id, "job_id": job_id}
        study.state = {**study.state, "reports": {**reports, str(body.index): entry}}

    answer = await create_report(request, principal, session, record)
    return {"kind": wanted.kind, "report_id": answer["report_id"], "job_id": answer["job_id"]}
