"""The gauges the gateway reads at each scrape (gateway/scrape.py), on a real Redis and real databases: the age of
the oldest task that waits (not one that runs, is deferred, or just finished), live worker processes per kind, and
judge trust from the trust tenant's own platform-wide report only."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.constants import in_progress_key_prefix
from prometheus_client import REGISTRY

from gateway import scrape
from services.kernel import queue
from services.kernel.db import dispose_engine, init_engine, session_scope
from services.kernel.models import Report
from services.kernel.registry import ALL_QUEUES, SERVICES
from services.kernel.settings import get_settings
from services.reports import worker
from tests.databases import BACKENDS, migrated_database
from tests.metrics.test_reports import make_rows
from tests.metrics.test_trust import four_attempts

QUEUE = "tribunal:executor"


@pytest.fixture()
async def redis(redis_url: str) -> AsyncIterator[ArqRedis]:
    pool = await create_pool(RedisSettings.from_dsn(f"{redis_url.rsplit('/', 1)[0]}/7"))
    await pool.flushdb()
    yield pool
    await pool.flushdb()
    await pool.aclose()


async def _enqueued(redis: ArqRedis, *, ago_s: float, running: bool = False, name: str = "") -> str:
    job_id = name or f"job-{ago_s}-{running}"
    await redis.zadd(QUEUE, {job_id: time.time() * 1000 - ago_s * 1000})
    if running:
        await redis.set(in_progress_key_prefix + job_id, b"1")
    return job_id


async def test_nothing_waiting_is_age_zero_for_every_queue(redis: ArqRedis) -> None:
    assert await queue.oldest_waiting_ages(redis) == dict.fromkeys(ALL_QUEUES, 0.0)


async def test_the_oldest_waiting_task_skips_running_and_deferred_ones(redis: ArqRedis) -> None:
    await _enqueued(redis, ago_s=300, running=True)
    await _enqueued(redis, ago_s=120)
    await _enqueued(redis, ago_s=30)
    await _enqueued(redis, ago_s=-60)  # a retry's delay: due in a minute, not waiting yet
    ages = await queue.oldest_waiting_ages(redis)
    assert ages[QUEUE] == pytest.approx(120, abs=5)
    assert all(age == 0.0 for name, age in ages.items() if name != QUEUE)


async def test_past_hundreds_of_running_tasks_the_waiting_one_is_still_found(redis: ArqRedis) -> None:
    for index in range(300):
        await _enqueued(redis, ago_s=600 - index * 0.01, running=True, name=f"running-{index}")
    await _enqueued(redis, ago_s=240)
    assert (await queue.oldest_waiting_ages(redis))[QUEUE] == pytest.approx(240, abs=5)


async def test_only_running_or_deferred_tasks_is_age_zero(redis: ArqRedis) -> None:
    await _enqueued(redis, ago_s=500, running=True)
    await _enqueued(redis, ago_s=-30)
    assert (await queue.oldest_waiting_ages(redis))[QUEUE] == 0.0


async def test_live_workers_count_each_kind_until_their_beat_lapses_or_they_leave(redis: ArqRedis) -> None:
    await queue.beat("executor", "host:1", 0.3, pool=redis)
    await queue.beat("executor", "host:2", 30, pool=redis)
    await queue.beat("executor", "host:2", 30, pool=redis)  # a second beat renews, it does not add
    await queue.beat("judge", "host:3", 30, pool=redis)
    assert await queue.live_workers(redis) == dict.fromkeys(SERVICES, 0) | {"executor": 2, "judge": 1}
    await asyncio.sleep(0.5)
    assert (await queue.live_workers(redis))["executor"] == 1  # host:1 missed its beats
    await queue.say_gone("executor", "host:2", pool=redis)
    assert await queue.live_workers(redis) == dict.fromkeys(SERVICES, 0) | {"judge": 1}


# --- judge trust ---------------------------------------------------------------------------------------------------


def _quality(rows: dict[str, float]) -> dict[str, Any]:
    """A judge_quality report's result with one blind row per judge (200 attempts in 50 clusters) and its ROC-AUC,
    as stored before figures carried their own trust: the scrape judges them against today's settings."""
    return {
        "kind": "judge_quality",
        "tables": {
            "metrics": {
                "rows": [
                    {
                        "judge": judge,
                        "condition": "blind",
                        "n": 200,
                        "clusters": 50,
                        "roc_auc": {"value": auc, "ci": [auc - 0.1, auc + 0.05]},
                    }
                    for judge, auc in rows.items()
                ]
            }
        },
    }


def _auc(judge: str, estimate: str = "value", trust: str = "ok", condition: str = "blind") -> float | None:
    labels = {"judge": judge, "condition": condition, "estimate": estimate, "trust": trust}
    return REGISTRY.get_sample_value("tribunal_judge_roc_auc", labels)


@pytest.fixture(params=BACKENDS)
async def reports(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
    postgres_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    async with migrated_database(tmp_path, postgres_url) as url:
        init_engine(role="tests", url=url)
        scrape._shown_report = None
        try:
            yield
        finally:
            await dispose_engine()


async def _report(report_id: str, tenant: str, minutes: int, result: dict[str, Any], **params: Any) -> None:
    async with session_scope() as session:
        session.add(
            Report(
                report_id=report_id,
                tenant=tenant,
                kind="judge_quality",
                params={"filter": {}, "judges": None, "conditions": None} | params,
                job_id=f"job_{report_id}",
                result=result,
                finished_at=datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=minutes),
            )
        )


async def test_trust_comes_only_from_the_trust_tenants_platform_wide_report(reports: None) -> None:
    admin = get_settings().trust_tenant
    await _report("rep_ops_1", admin, 1, _quality({"gpt": 0.91, "claude": 0.88}))
    await _report("rep_mallory", "mallory", 2, _quality({"gpt": 0.02}))  # another tenant's, newer
    await _report("rep_ops_subset", admin, 3, _quality({"gpt": 0.5}), filter={"attempt_ids": ["a"]})
    await _report("rep_ops_judges", admin, 4, _quality({"gpt": 0.4}), judges=["gpt"])
    await scrape._refresh_trust()
    assert (_auc("gpt"), _auc("claude")) == (0.91, 0.88)
    assert _auc("gpt", "ci_low") == pytest.approx(0.81) and _auc("gpt", "ci_high") == pytest.approx(0.96)
    report_time = REGISTRY.get_sample_value("tribunal_judge_trust_report_timestamp_seconds")
    assert report_time == datetime(2026, 12, 1, 0, 1, tzinfo=UTC).timestamp()
    # A newer platform-wide report replaces it whole: a judge it no longer has leaves the gauges.
    await _report("rep_ops_2", admin, 5, _quality({"gpt": 0.7}))
    await scrape._refresh_trust()
    assert (_auc("gpt"), _auc("claude")) == (0.7, None)


async def test_a_figure_from_too_few_attempts_is_labelled_so_with_its_n_and_clusters(reports: None) -> None:
    """A report over 4 attempts, built as the reports worker builds it (the minimums from the settings), puts
    ROC-AUC 1.000 [1.000, 1.000] on the gauge with trust="too_few", never as a figure to rely on; one over ~120
    attempts in 40 trajectories is trust="ok". Each judge and condition's n and clusters are gauges beside it."""
    admin = get_settings().trust_tenant
    few = [{**row, "judge": "tiny"} for row in four_attempts()]
    result, _, _ = worker.build("judge_quality", [*few, *make_rows()], {"bootstrap": 100, "folds": 3}, "trust")
    await _report("rep_ops_sized", admin, 6, result)
    await scrape._refresh_trust()
    assert _auc("tiny") is None and _auc("tiny", trust="too_few") == 1.0
    assert _auc("tiny", "ci_low", "too_few") == 1.0 and _auc("tiny", "ci_high", "too_few") == 1.0
    assert _auc("alpha", trust="too_few") is None and 0.5 < (_auc("alpha") or 0) <= 1
    sized = {"judge": "tiny", "condition": "blind"}
    assert REGISTRY.get_sample_value("tribunal_judge_trust_items", sized) == 4
    assert REGISTRY.get_sample_value("tribunal_judge_trust_clusters", sized) == 4
    alpha = next(r for r in result["tables"]["metrics"]["rows"] if r["judge"] == "alpha" and r["condition"] == "blind")
    assert (
        REGISTRY.get_sample_value("tribunal_judge_trust_items", {"judge": "alpha", "condition": "blind"})
        == (alpha["n"])
    )


# --- a source that fails or hangs ----------------------------------------------------------------------------------


def _source_up(source: str) -> float | None:
    return REGISTRY.get_sample_value("tribunal_platform_source_up", {"source": source})


@pytest.mark.parametrize("failure", ["refused", "hangs"])
async def test_an_unreadable_redis_is_reported_and_never_holds_the_scrape(
    failure: str, reports: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unreachable() -> ArqRedis:
        if failure == "hangs":
            await asyncio.sleep(3600)  # were it awaited to the end, the test's own timeout would fail it
        raise ConnectionError("redis is down")

    monkeypatch.setattr(queue, "get_pool", unreachable)
    monkeypatch.setattr(scrape, "_refreshed_at", float("-inf"))
    await scrape.refresh_platform_gauges()
    assert (_source_up("redis"), _source_up("database")) == (0.0, 1.0)
