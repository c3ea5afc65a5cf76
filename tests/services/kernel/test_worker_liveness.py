"""A dead worker's jobs are taken again within seconds, not after arq's job timeout; a live worker's are not
(services/kernel/worker.py: heartbeats renew short in-progress marks). Real Redis, real worker processes."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from arq import create_pool
from arq.connections import RedisSettings
from arq.constants import in_progress_key_prefix

from services.kernel.worker import HEARTBEAT_LIVES

REPO = Path(__file__).resolve().parents[3]
HEARTBEAT_S = 0.5


def _enqueue(redis_url: str, queue: str, tag: str) -> str:
    async def run() -> str:
        pool = await create_pool(RedisSettings.from_dsn(redis_url))
        job = await pool.enqueue_job("record", tag, _queue_name=queue, _job_id=f"record-{tag}")
        await pool.aclose()
        assert job is not None
        return job.job_id

    return asyncio.run(run())


@pytest.fixture()
def workers(redis_url: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def _start(workers: list[subprocess.Popen[bytes]], redis_url: str, queue: str, sleep_s: float) -> None:
    argv = [
        sys.executable,
        "-m",
        "tests.services.kernel.liveness_worker",
        redis_url,
        queue,
        str(HEARTBEAT_S),
        str(sleep_s),
    ]
    workers.append(subprocess.Popen(argv, cwd=REPO))


def _wait_for(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_killed_workers_job_is_taken_again_within_seconds(
    redis_url: str, workers: list[subprocess.Popen[bytes]]
) -> None:
    queue, tag = f"liveness-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    client = redis.Redis.from_url(redis_url)
    job_id = _enqueue(redis_url, queue, tag)
    _start(workers, redis_url, queue, sleep_s=300)
    _wait_for(lambda: client.lrange(f"liveness:{tag}", 0, -1) == [b"1"], 30, "the first worker never started the job")
    # The mark lasts a few heartbeats, not the job's 600 s timeout.
    ttl_ms = client.pttl(in_progress_key_prefix + job_id)
    assert 0 < ttl_ms <= HEARTBEAT_S * HEARTBEAT_LIVES * 1000
    workers[0].send_signal(signal.SIGKILL)
    workers[0].wait()
    _start(workers, redis_url, queue, sleep_s=0)
    # Taken again (try 2) once the dead worker's mark expired: within 30 s, where it used to take 610 s.
    _wait_for(
        lambda: client.lrange(f"liveness:{tag}", 0, -1) == [b"1", b"2", b"done"],
        30,
        "the dead worker's job was not taken again",
    )
    client.close()


def test_a_live_workers_long_job_is_not_taken_twice(redis_url: str, workers: list[subprocess.Popen[bytes]]) -> None:
    # The job runs for several mark lifetimes; a second worker polls the queue all along and never starts it.
    queue, tag = f"liveness-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    client = redis.Redis.from_url(redis_url)
    _enqueue(redis_url, queue, tag)
    _start(workers, redis_url, queue, sleep_s=HEARTBEAT_S * HEARTBEAT_LIVES * 3)
    _wait_for(lambda: client.lrange(f"liveness:{tag}", 0, -1) == [b"1"], 30, "the first worker never started the job")
    _start(workers, redis_url, queue, sleep_s=0)
    _wait_for(lambda: b"done" in client.lrange(f"liveness:{tag}", 0, -1), 60, "the job never ended")
    assert client.lrange(f"liveness:{tag}", 0, -1) == [b"1", b"done"]
    client.close()
