"""Jobs: a job as read back (its kind, status, progress and result)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from services.kernel.contracts import JobStatus


class JobOut(BaseModel):
    job_id: str
    kind: str
    status: JobStatus
    progress: dict[str, int]
    error: str | None
    result: dict[str, Any] | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None
