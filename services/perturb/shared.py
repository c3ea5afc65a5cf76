"""What the perturb service's tasks share: their subjects' parts, the worker's Redis, and how many judgments a
program of a job asks for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.kernel import queue
from services.kernel.subjects import Subject


def parse_subject(subject: str) -> tuple[str, str]:
    """(item, job) of an `<item>@<job>` subject; a bare id names no job (`""`)."""
    parsed = Subject.parse(subject)
    return (subject, "") if parsed is None else (parsed.item, parsed.job_id)


async def worker_redis(ctx: dict[str, Any]) -> Any:
    """The worker's Redis (arq's pool); None for a step run outside a worker with no Redis configured."""
    if ctx.get("redis") is not None:
        return ctx["redis"]
    try:
        return await queue.get_pool()
    except RuntimeError:  # TRIBUNAL_REDIS_URL unset: no queue, so no other worker to count against
        return None


def judgments_each(judges: Sequence[str], conditions: Sequence[str], repeats: int = 1) -> int:
    """The judgment rows one program of a job asks for: judges x conditions x repeats."""
    return len(judges) * len(conditions) * max(1, repeats)
