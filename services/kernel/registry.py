"""The service registry: every worker kind, declared once.

A service declares its tasks, its queue, how many jobs one of its workers runs at once and which attempt stages it
serves. Everything that needs to know the list of services reads it from here: the queue (which queue serves a
task), the CLI's `worker` command, `tribunal up`, the reconciler and the Prometheus queue gauges. What the database
holds as pending for each service is services/kernel/pending.py's to say. Adding a service is a package with a
`run_worker()` plus one entry in `SERVICES` (and its task names in `Task`); docs/architecture.md walks through it.

The kernel does not import the services (they sit above it): a service's entry point is named as
"module:function" and imported by the launcher when it starts that worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from services.kernel.contracts import Stage
from services.kernel.settings import Settings


class Task(StrEnum):
    """Every kind of queued work, named by the function a worker runs for it."""

    EXECUTE_ATTEMPT = "execute_attempt"
    EXECUTE_DIRECT = "execute_direct"
    JUDGE_ATTEMPT = "judge_attempt"
    BUILD_REPORT = "build_report"
    PERTURB_ATTEMPT = "perturb_attempt"
    VERIFY_MUTANT = "verify_mutant"
    SYNTHESIZE_PROGRAM = "synthesize_program"
    FINISH_SYNTHESIS = "finish_synthesis"
    PREPARE_CALIBRATION = "prepare_calibration"
    SCORE_PAIR = "score_pair"
    CALIBRATE_JUDGE = "calibrate_judge"


# What workers publish at start for the gateway to serve: the executor its toolchains (GET /v1/languages).
LANGUAGES_KEY = "tribunal:languages"


class Work(NamedTuple):
    """One task about one subject, and the tenant whose work it is (queues serve tenants in turn)."""

    task: Task
    subject: str
    tenant: str


@dataclass(frozen=True)
class Service:
    """One worker kind."""

    name: str  # the worker kind: `tribunal worker NAME`, process names `NAME-0`, ...
    queue: str  # the Redis queue its workers read
    tasks: tuple[Task, ...]
    entry_point: str  # "module:function" that runs one worker process until SIGTERM
    max_jobs: Callable[[Settings], int]  # jobs one worker process runs at once
    # How long an idle worker waits between two looks at its queue (arq's poll_delay).
    poll_delay: Callable[[Settings], float] = lambda settings: settings.background_poll_delay_s
    # Attempt stages this service runs: an attempt waiting at one of them is enqueued as `stage_tasks[stage]`.
    stage_tasks: dict[Stage, Task] = field(default_factory=dict)


SERVICES: dict[str, Service] = {
    service.name: service
    for service in (
        Service(
            name="executor",
            queue="tribunal:executor",
            tasks=(Task.EXECUTE_ATTEMPT, Task.EXECUTE_DIRECT),
            entry_point="executor.worker:run_worker",
            # More jobs than sandbox slots, so one attempt's compile overlaps another's tests.
            max_jobs=lambda settings: max(4, settings.executor_slots * 4),
            poll_delay=lambda settings: settings.worker_poll_delay_s,
            stage_tasks={Stage.EXECUTE: Task.EXECUTE_ATTEMPT},
        ),
        Service(
            name="judge",
            queue="tribunal:judge",
            tasks=(Task.JUDGE_ATTEMPT,),
            entry_point="judge.worker:run_worker",
            max_jobs=lambda settings: settings.judge_slots,
            stage_tasks={Stage.JUDGE: Task.JUDGE_ATTEMPT},
        ),
        Service(
            name="reports",
            queue="tribunal:reports",
            tasks=(Task.BUILD_REPORT, Task.CALIBRATE_JUDGE),
            entry_point="services.reports.worker:run_worker",
            max_jobs=lambda settings: 2,
        ),
        Service(
            name="perturb",
            queue="tribunal:perturb",
            tasks=(
                Task.PERTURB_ATTEMPT,
                Task.VERIFY_MUTANT,
                Task.SYNTHESIZE_PROGRAM,
                Task.FINISH_SYNTHESIS,
                Task.PREPARE_CALIBRATION,
            ),
            entry_point="services.perturb.worker:run_worker",
            max_jobs=lambda settings: max(4, settings.executor_slots),
            stage_tasks={Stage.VERIFY: Task.VERIFY_MUTANT},
        ),
        Service(
            name="similarity",
            queue="tribunal:similarity",
            tasks=(Task.SCORE_PAIR,),
            # The executor's code (it runs the programs, in nsjail), on a queue of its own so that a dataset of
            # thousands of pairs never delays attempts; each pair holds two sandbox slots at once.
            entry_point="executor.similarity_worker:run_worker",
            max_jobs=lambda settings: max(1, settings.executor_slots // 2),
        ),
    )
}

# Older names of worker kinds, still accepted by `tribunal worker` (the reports worker was "metrics").
FORMER_NAMES: dict[str, str] = {"metrics": "reports"}

QUEUE_OF: dict[Task, str] = {task: service.queue for service in SERVICES.values() for task in service.tasks}
STAGE_TASK: dict[Stage, Task] = {
    stage: task for service in SERVICES.values() for stage, task in service.stage_tasks.items()
}
ALL_QUEUES: tuple[str, ...] = tuple(sorted({service.queue for service in SERVICES.values()}))


def _check_complete() -> None:
    """Every task is served by exactly one service and every stage by one; checked on import."""
    served = [task for service in SERVICES.values() for task in service.tasks]
    if sorted(served) != sorted(Task) or len(set(served)) != len(served):
        raise RuntimeError("every Task must be declared by exactly one service")
    if set(STAGE_TASK) != set(Stage):
        raise RuntimeError("every Stage must be served by a service")


_check_complete()
