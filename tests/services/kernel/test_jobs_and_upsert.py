"""Job transitions and upserts on both databases: retries never count twice, never move a job backwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.kernel import jobs
from services.kernel.db import make_engine, upsert
from services.kernel.models import Attempt, Judgment, Problem, new_id
from services.launcher.migrate import upgrade_async


@pytest.fixture(params=["sqlite", "postgresql"])
async def session(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncSession]:
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'kernel.db'}"
    await upgrade_async(url)
    engine = make_engine(url, role="tests")
    async with async_sessionmaker(engine, expire_on_commit=False)() as session:
        yield session
    await engine.dispose()


async def test_job_moves_forward_only_and_counts_progress_once(session: AsyncSession) -> None:
    job = jobs.create_job(session, tenant="t", kind="execute_batch", total=2)
    await session.commit()
    assert await jobs.mark_running(session, job.job_id) is True
    assert await jobs.mark_running(session, job.job_id) is False  # a retry does not restart it
    await jobs.add_progress(session, job.job_id)
    await session.commit()
    await session.refresh(job)
    assert (job.status, job.progress_done, job.tries) == ("running", 1, 2)
    await jobs.add_progress(session, job.job_id)
    await session.commit()
    await session.refresh(job)
    assert (job.status, job.progress_done) == ("succeeded", 2)
    assert job.finished_at is not None and job.finished_at.tzinfo is not None
    # A terminal job stays terminal.
    assert await jobs.finish(session, job.job_id, "cancelled") is False
    await session.commit()
    await session.refresh(job)
    assert job.status == "succeeded"


async def test_cancel_wins_over_later_progress(session: AsyncSession) -> None:
    job = jobs.create_job(session, tenant="t", kind="execute_batch", total=1)
    await session.commit()
    assert await jobs.finish(session, job.job_id, "cancelled", error="by client") is True
    # Its progress is frozen where the cancel found it: a late unit is recorded, never counted.
    assert await jobs.add_progress(session, job.job_id) is False
    assert await jobs.count_unit_once(session, job.job_id, "late") is False
    assert await jobs.add_total(session, job.job_id, 3) is False
    await session.commit()
    await session.refresh(job)
    assert (job.status, job.progress_done, job.progress_total) == ("cancelled", 0, 1)


async def test_upsert_keeps_one_row_per_key_and_the_newest_write(session: AsyncSession) -> None:
    problem = Problem(
        tenant="t",
        problem_id=new_id("p"),
        statement="s",
        tests=[],
        checker={},
        limits={},
        references=[],
        content_hash="h",
    )
    session.add(problem)
    await session.flush()
    attempt = Attempt(
        attempt_id=new_id("att"),
        tenant="t",
        problem_pk=problem.id,
        language="python",
        source_code="x",
        source_hash="h",
        content_hash="h",
    )
    session.add(attempt)
    await session.commit()
    key = {"attempt_id": attempt.attempt_id, "judge": "j", "condition": "blind", "repeat": 0}
    await upsert(
        session,
        Judgment.__table__,
        {**key, "status": "failed", "error": "timeout", "tries": 4},
        keys=list(key),
    )
    await upsert(
        session,
        Judgment.__table__,
        {**key, "status": "ok", "error": None, "tries": 1, "p_ac": 0.8},
        keys=list(key),
    )
    await session.commit()
    rows = (await session.scalars(select(Judgment).where(Judgment.attempt_id == attempt.attempt_id))).all()
    assert len(rows) == 1
    assert (rows[0].status, rows[0].p_ac, rows[0].error) == ("ok", 0.8, None)
    await session.execute(delete(Judgment))
    await session.commit()
    assert await session.scalar(select(func.count()).select_from(Judgment)) == 0
