"""A worker process for tests/services/kernel/test_worker_liveness.py: services/kernel/worker.py's WakeableWorker
with one task, `record`, which notes its try number in Redis and then sleeps. Run as
    python -m tests.services.kernel.liveness_worker REDIS_URL QUEUE HEARTBEAT_S SLEEP_S
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from arq.connections import RedisSettings

from services.kernel.worker import WakeableWorker


async def record(ctx: dict[str, Any], tag: str) -> None:
    await ctx["redis"].rpush(f"liveness:{tag}", str(ctx["job_try"]))
    await asyncio.sleep(float(sys.argv[4]))
    await ctx["redis"].rpush(f"liveness:{tag}", "done")


async def _start(ctx: dict[str, Any]) -> None:
    ctx["heartbeat"] = asyncio.create_task(worker.heartbeat())


if __name__ == "__main__":
    worker = WakeableWorker(
        kind="liveness-test",
        functions=[record],
        redis_settings=RedisSettings.from_dsn(sys.argv[1]),
        queue_name=sys.argv[2],
        on_startup=_start,
        poll_delay=0.05,
        heartbeat_s=float(sys.argv[3]),
        job_timeout=600,  # the production default: without heartbeats a dead worker's job would wait 610 s
        max_tries=3,
        handle_signals=False,
    )
    worker.run()
