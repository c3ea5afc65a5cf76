"""Judgments: judging stored attempts again (retry what failed, or ask for fresh repeats)."""

from __future__ import annotations

from pydantic import Field, field_validator

from gateway.schemas.common import RequestBody, within_limit
from services.kernel.contracts import Condition
from services.kernel.settings import get_settings


class JudgmentsIn(RequestBody):
    attempt_ids: list[str] = Field(min_length=1)
    judges: list[str] | None = None
    conditions: list[Condition] | None = None
    repeats: int = Field(default=1, ge=1, le=100)

    @field_validator("attempt_ids")
    @classmethod
    def _within_limit(cls, ids: list[str]) -> list[str]:
        return list(dict.fromkeys(within_limit(ids, get_settings().max_batch_size, "attempts", "request")))
