"""Batches: many attempts submitted in one request, as one job."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from gateway.schemas.attempts import AttemptIn
from gateway.schemas.common import RequestBody, within_limit
from services.kernel.settings import get_settings


class BatchIn(RequestBody):
    attempts: list[AttemptIn] = Field(min_length=1)

    @field_validator("attempts")
    @classmethod
    def _batch_within_limit(cls, attempts: list[AttemptIn]) -> list[AttemptIn]:
        return within_limit(attempts, get_settings().max_batch_size, "attempts", "batch")


class BatchAccepted(BaseModel):
    job_id: str
    attempt_ids: list[str]
