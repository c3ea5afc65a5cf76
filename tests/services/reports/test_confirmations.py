"""The reports worker joins a mutant's confirmation pair (its df_score) onto the mutant's tidy rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.kernel.contracts import JobKind
from services.kernel.db import make_engine
from services.kernel.models import Job, SimilarityPair, new_id
from services.kernel.tidy import confirmation_scores
from services.launcher.migrate import upgrade_async


@pytest.fixture()
async def sessions(tmp_path: Path) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'confirm.db'}"
    await upgrade_async(url)
    engine = make_engine(url, role="tests")
    yield async_sessionmaker(engine, expire_on_commit=False)
    await engine.dispose()


def _pair(job_id: str, ordinal: int, key: str, status: str, df_score: float | None) -> SimilarityPair:
    return SimilarityPair(
        job_id=job_id,
        ordinal=ordinal,
        pair_key=key,
        mode="stdio",
        reference_language="python",
        reference_source="print(1)",
        candidate_language="python",
        candidate_source="print(2)",
        status=status,
        result=None if df_score is None else {"df_score": df_score},
    )


async def test_confirmation_scores_read_only_the_tenants_scored_pairs(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    mine, theirs = new_id("job"), new_id("job")
    async with sessions() as session:
        session.add_all(
            [
                Job(job_id=mine, tenant="t", kind=JobKind.SIMILARITY),
                Job(job_id=theirs, tenant="u", kind=JobKind.SIMILARITY),
            ]
        )
        await session.flush()
        session.add_all(
            [
                _pair(mine, 0, "m-equivalent", "scored", 1.0),
                _pair(mine, 1, "m-defect", "scored", 0.25),
                _pair(mine, 2, "m-timeout", "scored", -1.0),  # every repetition timed out: no score
                _pair(mine, 3, "m-queued", "queued", None),
                _pair(theirs, 0, "m-other", "scored", 0.0),  # another tenant's pair never leaks in
            ]
        )
        await session.commit()
    async with sessions() as session:
        keys = ["m-equivalent", "m-defect", "m-timeout", "m-queued", "m-other", "m-none"]
        scores = await confirmation_scores(session, "t", keys)
        assert scores == {"m-equivalent": 1.0, "m-defect": 0.25}
        assert await confirmation_scores(session, "t", []) == {}
