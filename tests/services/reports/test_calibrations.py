"""Calibration jobs end to end in-process, on a real migrated SQLite and the session's real Redis: a judge that
always says 0.9 on attempts accepted 40% of the time gets an applied map; its judgments then carry
`p_ac_calibrated` on read; too few labelled items fail the job with the reason; labelled items grown by 20% make
the refit check enqueue one refit job (and only one); bad bodies are 422 naming the field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from gateway.app import create_app
from services.kernel import db, jobs, queue
from services.kernel.contracts import Condition, JobKind, JobStatus
from services.kernel.keys import create_key
from services.kernel.models import Attempt, Calibration, Job, Judgment, Problem, new_id
from services.kernel.plans import CalibrationPlan
from services.kernel.settings import get_settings
from services.reports import calibrate
from tests.databases import migrated_database

TENANT = "cal"
JUDGE = "sample_tests"


@pytest.fixture()
async def database(tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    monkeypatch.setenv("TRIBUNAL_REDIS_URL", redis_url)
    get_settings.cache_clear()
    async with migrated_database(tmp_path, None) as url:
        await db.dispose_engine()
        db.init_engine("tests", url)
        try:
            yield
        finally:
            await queue.close_pool()
            await db.dispose_engine()
            get_settings.cache_clear()


async def _seed(start: int, count: int) -> list[str]:
    """`count` attempts in trajectories of four (participant x problem), 40% labelled AC, each judged 0.9."""
    async with db.session_scope() as session:
        problem = await session.scalar(select(Problem).where(Problem.tenant == TENANT))
        if problem is None:
            problem = Problem(
                tenant=TENANT, problem_id="p", statement="s", tests=[], checker={}, limits={}, content_hash="h"
            )
            session.add(problem)
            await session.flush()
        ids = []
        for i in range(start, start + count):
            attempt = Attempt(
                attempt_id=new_id("att"),
                tenant=TENANT,
                problem_pk=problem.id,
                language="python",
                source_code="print(1)",
                source_hash="h",
                content_hash="h",
                status="done",
                participant=f"u{i // 4}",
                label={"verdict": "AC" if i % 5 < 2 else "WA"},
            )
            session.add(attempt)
            await session.flush()
            session.add(Judgment(attempt_id=attempt.attempt_id, judge=JUDGE, condition="blind", status="ok", p_ac=0.9))
            ids.append(attempt.attempt_id)
    return ids


async def _run(plan: CalibrationPlan) -> Job:
    async with db.session_scope() as session:
        job = jobs.create_job(session, tenant=TENANT, kind=JobKind.CALIBRATE, total=1, plan=plan)
    await calibrate.calibrate_judge({"job_try": 1}, job.job_id)
    async with db.session_scope() as session:
        done = await session.get(Job, job.job_id)
        assert done is not None
        return done


async def test_a_miscalibrated_judge_is_calibrated_served_and_refitted(database: None) -> None:
    ids = await _seed(0, 60)
    job = await _run(CalibrationPlan(judge=JUDGE, condition=Condition.BLIND, bootstrap=300, seed=1))
    assert job.status == JobStatus.SUCCEEDED, job.error
    result = job.result or {}
    assert (result["n"], result["clusters"], result["version"]) == (60, 15, 1)
    assert result["ece_before"]["value"] == pytest.approx(0.5)
    assert result["ece_difference"]["ci"][1] < 0 and result["applied"] is True
    assert result["fitted_on"]["attempts"] == 60 and None not in result["fitted_on"]["date_range"]
    for metric in ("ece", "brier", "log_loss"):
        assert set(result[f"{metric}_difference"]) == {"value", "ci"}

    async with db.session_scope() as session:
        _, key = await create_key(session, tenant=TENANT, scopes=["read", "submit"])
    app = create_app()
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway", headers=headers) as client:
        judgment = (await client.get(f"/v1/attempts/{ids[0]}")).json()["judgments"][0]
        assert judgment["p_ac"] == 0.9
        assert judgment["p_ac_calibrated"] == pytest.approx(0.4)
        assert judgment["calibration_id"] == result["calibration_id"]
        listed = (await client.get("/v1/attempts", params={"limit": 5})).json()
        assert all(j["calibration_id"] == result["calibration_id"] for a in listed["items"] for j in a["judgments"])

        for body, field in (
            ({"judge": "nobody"}, "judge"),
            ({"judge": JUDGE, "method": "beta"}, "method"),
            ({"judge": JUDGE, "cluster": "seed"}, "cluster"),
            ({"judge": JUDGE, "bootstrap": -1}, "bootstrap"),
        ):
            response = await client.post("/v1/calibrations", json=body)
            assert response.status_code == 422, response.text
            assert field in response.text
        accepted = await client.post("/v1/calibrations", json={"judge": JUDGE, "method": "platt", "bootstrap": 10})
        assert accepted.status_code == 202 and accepted.json()["status"] == "queued"

    # A judge x condition with no labelled item: the job fails and says why.
    failed = await _run(CalibrationPlan(judge="chrf", condition=Condition.BLIND, bootstrap=10))
    assert failed.status == JobStatus.FAILED and "at least 20 labelled items; got 0" in (failed.error or "")

    # Refits: a calibrate job is live (the POST above), so none is due; once it ended, 10 more items (17%) are not
    # enough, 12 (20%) are, and a second look finds the refit job live.
    assert await calibrate.enqueue_refits() == []
    async with db.session_scope() as session:
        await jobs.finish(session, accepted.json()["job_id"], JobStatus.CANCELLED)
    await _seed(60, 10)
    assert await calibrate.enqueue_refits() == []
    await _seed(70, 2)
    made = await calibrate.enqueue_refits()
    assert len(made) == 1 and await calibrate.enqueue_refits() == []
    async with db.session_scope() as session:
        refit = await session.get(Job, made[0])
        assert refit is not None
        plan = refit.plan(CalibrationPlan)
        assert (plan.refit_of, plan.bootstrap, plan.seed) == (result["calibration_id"], 300, 1)
    await calibrate.calibrate_judge({"job_try": 1}, made[0])
    async with db.session_scope() as session:
        versions = (await session.scalars(select(Calibration.version).order_by(Calibration.version))).all()
    assert list(versions) == [1, 2]
