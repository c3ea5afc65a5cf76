"""What every worker process shares: its database engine, its telemetry endpoint, the reconciler, arq's settings."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from arq.worker import Worker

from services.kernel import queue, telemetry
from services.kernel.db import dispose_engine, init_engine
from services.kernel.reconcile import reconcile_forever
from services.kernel.registry import SERVICES
from services.kernel.settings import get_settings

Hook = Callable[[dict[str, Any]], Awaitable[None]]


def build_worker(
    service: str,
    *,
    functions: Sequence[Any],
    on_startup: Hook | None = None,
    on_shutdown: Hook | None = None,
    burst: bool = False,
) -> Worker:
    """An arq worker of one registered service (its queue and job count come from the registry), configured
    from settings; the hooks add what is the service's own. `functions` must be the service's declared tasks."""
    settings = get_settings()
    spec = SERVICES[service]
    names = sorted(getattr(fn, "__name__", "") for fn in functions)
    if names != sorted(task.value for task in spec.tasks):
        raise RuntimeError(f"the {service} worker runs {names}, but the registry declares {list(spec.tasks)}")
    role = service

    async def startup(ctx: dict[str, Any]) -> None:
        init_engine(role=role)
        telemetry.serve_telemetry(settings.worker_telemetry_port, settings.worker_telemetry_host)
        if on_startup is not None:
            await on_startup(ctx)
        ctx["reconciler"] = asyncio.create_task(
            reconcile_forever(ctx["redis"], settings.reconcile_interval_s, settings.reconcile_grace_s)
        )

    async def shutdown(ctx: dict[str, Any]) -> None:
        reconciler = ctx.get("reconciler")
        if reconciler is not None:
            reconciler.cancel()
        if on_shutdown is not None:
            await on_shutdown(ctx)
        await dispose_engine()

    return Worker(
        functions=list(functions),
        redis_settings=queue.redis_settings(),
        queue_name=spec.queue,
        on_startup=startup,
        on_shutdown=shutdown,
        max_jobs=spec.max_jobs(settings),
        job_timeout=settings.job_timeout_s,
        max_tries=settings.job_max_tries,
        poll_delay=spec.poll_delay(settings),
        keep_result=3600,
        burst=burst,
        handle_signals=True,
    )


def run(worker: Worker) -> None:
    """Run a worker until SIGTERM/SIGINT, logging to stderr."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker.run()
