"""What a task that gave up leaves behind: every job and attempt ends, with the reason.

A task's exception is retried (services/kernel/queue.py `task`); when its last try raises too, `give_up` ends the
subject it was about, so nothing stays `queued` or `running` for ever:
- `<unit>@<job>` subjects (re-judging, perturbation, synthesis and similarity units): their job fails;
- an attempt's stage (execute, judge, verify): the attempt fails and its job counts it (attempts.give_up);
- a report: the job building it fails;
- a job (a direct execution, a synthesis' final step): it fails.
Each write only moves what is still live, so a give-up racing a late success changes nothing.
"""

from __future__ import annotations

from sqlalchemy import select

from services.kernel import attempts, jobs
from services.kernel.contracts import JobStatus
from services.kernel.db import session_scope
from services.kernel.models import Report
from services.kernel.registry import Task
from services.kernel.subjects import Subject

# Tasks whose subject is an attempt (at one of its stages).
_ATTEMPT_TASKS = frozenset({Task.EXECUTE_ATTEMPT, Task.JUDGE_ATTEMPT, Task.VERIFY_MUTANT})


async def give_up(kind: Task, subject: str, reason: str) -> None:
    """End what task `kind` about `subject` was doing, recording `reason` (fixed words: no exception text)."""
    async with session_scope() as session:
        unit = Subject.parse(subject)
        if unit is not None:
            await jobs.finish(session, unit.job_id, JobStatus.FAILED, error=reason)
        elif kind == Task.BUILD_REPORT:
            report_job = await session.scalar(select(Report.job_id).where(Report.report_id == subject))
            if report_job is not None:
                await jobs.finish(session, report_job, JobStatus.FAILED, error=reason)
        elif kind in _ATTEMPT_TASKS:
            await attempts.give_up(session, subject, reason)
        else:
            await jobs.finish(session, subject, JobStatus.FAILED, error=reason)
