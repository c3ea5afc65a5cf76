"""What every worker process shares: its database engine, its telemetry endpoint, the reconciler, arq's settings,
and being woken when work is enqueued rather than only polling for it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix
from arq.worker import Worker

from services.kernel import cancel, fair, queue, telemetry, terminal
from services.kernel.db import dispose_engine, init_engine
from services.kernel.reconcile import reconcile_forever
from services.kernel.registry import SERVICES
from services.kernel.settings import get_settings

Hook = Callable[[dict[str, Any]], Awaitable[None]]
# A running job's in-progress mark outlives this many missed heartbeats (WakeableWorker).
HEARTBEAT_LIVES = 4

log = logging.getLogger("tribunal.worker")


class WakeableWorker(Worker):
    """arq's worker, which claims its jobs tenant by tenant (services/kernel/fair.py) and looks at its queue as
    soon as it is woken (`wake`: a publish on the queue's wake channel, queue.enqueue; or one of its jobs ending
    while it was full, when arq would skip looking until its next poll) and otherwise every `poll_delay_s`, as arq
    does. arq's own loop runs without a delay of its own: the waiting happens at the end of each poll iteration."""

    def __init__(self, *args: Any, kind: str, poll_delay: float, heartbeat_s: float, **kwargs: Any) -> None:
        super().__init__(*args, poll_delay=0, **kwargs)
        self.kind = kind
        # This process's name among its kind's live workers (queue.live_workers counts them for the telemetry).
        self.process_name = f"{socket.gethostname()}:{os.getpid()}"
        self.idle_poll_s = poll_delay
        self.wake = asyncio.Event()
        # arq marks a job it starts "in progress" for the job's whole timeout (+10 s), and no other worker takes
        # it until that mark expires: a SIGKILLed worker's jobs would wait ~10 minutes. Here the mark lives
        # HEARTBEAT_LIVES heartbeats, and `heartbeat` renews it for the jobs this worker is running: a dead
        # worker's jobs are taken again once its marks expire (as retries), within heartbeat_s * HEARTBEAT_LIVES.
        self.heartbeat_s = heartbeat_s
        self.in_progress_timeout_s = heartbeat_s * HEARTBEAT_LIVES

    async def heartbeat(self) -> None:
        """Every heartbeat_s until cancelled: say this process is alive, and renew the in-progress marks of the
        jobs it is running."""
        while True:
            try:
                running = list(self.tasks)
                if running:
                    async with self.pool.pipeline(transaction=False) as pipe:
                        for job_id in running:
                            pipe.pexpire(in_progress_key_prefix + job_id, int(self.in_progress_timeout_s * 1000))
                        await pipe.execute()
                await queue.beat(
                    self.kind, self.process_name, self.heartbeat_s * queue.WORKER_ALIVE_LIVES, pool=self.pool
                )
            except Exception as exc:  # noqa: BLE001 - the next beat tries again; a missed one is within the lives
                log.warning("heartbeat failed (%s)", exc)
            await asyncio.sleep(self.heartbeat_s)

    async def say_stopped(self) -> None:
        """Stop counting as alive at once (a clean shutdown); a killed process's beat expires instead."""
        with contextlib.suppress(Exception):
            await queue.say_gone(self.kind, self.process_name, pool=self.pool)

    async def _poll_iteration(self) -> None:
        """arq's poll iteration, except how jobs are picked: not the oldest due ids of the queue, started in that
        order as slots free up, but exactly as many as there are free slots, claimed tenant by tenant
        (services/kernel/fair.py), so a job another tenant queues behind a backlog is among the next claimed."""
        # Cleared before looking, so that a wake arriving while this iteration runs makes the next one start at once.
        self.wake.clear()
        if self.allow_pick_jobs:
            await self._claim_and_start()
        if self.allow_abort_jobs:
            await self._cancel_aborted_jobs()
        for job_id, running in list(self.tasks.items()):
            if running.done():
                del self.tasks[job_id]
                running.result()  # arq's way: an error in run_job itself propagates
        await self.heart_beat()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), self.idle_poll_s)

    async def _claim_and_start(self) -> None:
        free = self.max_jobs - self.job_counter
        if self.burst and self.max_burst_jobs >= 0:
            free = min(free, self.max_burst_jobs - self._jobs_started())
        if free < 1:
            return
        claimed = await fair.claim(
            self.pool, self.queue_name, free, in_progress_ms=int(self.in_progress_timeout_s * 1000)
        )
        for index, job in enumerate(claimed):
            if self.sem.locked() or self.job_counter >= self.max_jobs:  # not expected: `free` was counted above
                for unstarted in claimed[index:]:
                    await self._unclaim(unstarted.job_id)
                return
            await self.sem.acquire()
            self.job_counter += 1
            started = self.loop.create_task(self._run_claimed(job))
            started.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
            self.tasks[job.job_id] = started

    async def _run_claimed(self, job: fair.Claimed) -> None:
        # Every coroutine the job starts (its task, gathered tests) sees its tenant: fair.FairSlots reads it.
        fair.JOB_TENANT.set(job.tenant)
        await self.run_job(job.job_id, job.score)

    async def _unclaim(self, job_id: str) -> None:
        await self.pool.delete(in_progress_key_prefix + job_id)
        await fair.release(self.pool, self.queue_name, job_id)

    async def finish_job(self, job_id: str, *args: Any, **kwargs: Any) -> None:
        await super().finish_job(job_id, *args, **kwargs)
        await self._released(job_id)

    async def finish_failed_job(self, job_id: str, result_data: bytes | None) -> None:
        await super().finish_failed_job(job_id, result_data)
        await self._released(job_id)

    async def _released(self, job_id: str) -> None:
        """The job ended (or waits for its retry): off the running list, and off its tenant's list if it ended for
        good. Best effort: a claim cleans up whatever this misses."""
        try:
            await fair.release(self.pool, self.queue_name, job_id)
        except Exception as exc:  # noqa: BLE001 - the next claim cleans up
            log.warning("could not release job %s (%s)", job_id, exc)

    def _release_sem_dec_counter_on_complete(self) -> None:
        was_full = self.job_counter >= self.max_jobs
        super()._release_sem_dec_counter_on_complete()
        if was_full:
            self.wake.set()


async def listen_for_wakes(redis: ArqRedis, queue_name: str, wake: asyncio.Event, retry_s: float) -> None:
    """Set `wake` whenever something is published on the queue's wake channel, until cancelled. If the
    subscription breaks it is made again after `retry_s` (meanwhile the worker polls), and `wake` is set once it
    is back, since a publish may have been missed."""
    while True:
        pubsub = redis.pubsub()
        try:
            await pubsub.subscribe(queue.wake_channel(queue_name))
            wake.set()
            async for _ in pubsub.listen():
                wake.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - polling carries on; the subscription is made again
            log.warning("wake channel of %s lost (%s); polling until it is back", queue_name, exc)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()
        await asyncio.sleep(retry_s)


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
    poll_delay = spec.poll_delay(settings)

    async def startup(ctx: dict[str, Any]) -> None:
        init_engine(role=role)
        telemetry.serve_telemetry(settings.worker_telemetry_port, settings.worker_telemetry_host)
        await cancel.start(ctx)  # stops this process's units of a job when it is cancelled
        if on_startup is not None:
            await on_startup(ctx)
        ctx["reconciler"] = asyncio.create_task(
            reconcile_forever(ctx["redis"], settings.reconcile_interval_s, settings.reconcile_grace_s)
        )
        ctx["wake_listener"] = asyncio.create_task(
            listen_for_wakes(ctx["redis"], spec.queue, built.wake, retry_s=max(poll_delay, 1.0))
        )
        ctx["heartbeat"] = asyncio.create_task(built.heartbeat())
        ctx[queue.GIVE_UP] = terminal.give_up

    async def shutdown(ctx: dict[str, Any]) -> None:
        for name in ("wake_listener", "reconciler", "heartbeat"):
            background = ctx.get(name)
            if background is not None:
                background.cancel()
        await built.say_stopped()
        await cancel.stop(ctx)
        if on_shutdown is not None:
            await on_shutdown(ctx)
        await dispose_engine()

    built = WakeableWorker(
        kind=service,
        functions=list(functions),
        redis_settings=queue.redis_settings(),
        queue_name=spec.queue,
        on_startup=startup,
        on_shutdown=shutdown,
        max_jobs=spec.max_jobs(settings),
        job_timeout=settings.job_timeout_s,
        max_tries=settings.job_max_tries + queue.GIVE_UP_TRIES,
        poll_delay=poll_delay,
        heartbeat_s=settings.worker_heartbeat_s,
        keep_result=3600,
        burst=burst,
        handle_signals=True,
    )
    # How many jobs this worker has started and not yet finished, for a service's own batching (executor/worker.py).
    built.ctx["jobs_running"] = lambda: built.job_counter
    telemetry.worker_jobs_running.labels(service).set_function(lambda: built.job_counter)
    telemetry.start_task_series(task.value for task in spec.tasks)
    telemetry.worker_jobs_capacity.labels(service).set(built.max_jobs)
    return built


def run(worker: Worker) -> None:
    """Run a worker until SIGTERM/SIGINT, logging to stderr."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker.run()
