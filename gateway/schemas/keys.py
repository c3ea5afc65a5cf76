"""API keys (admin): the key created, a key as listed, and a key's quotas (services/kernel/ratelimit.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from gateway.schemas.common import RequestBody
from services.kernel.keys import Scope
from services.kernel.ratelimit import MAX_QUOTA

QuotaValue = Annotated[int | None, Field(default=None, strict=True, ge=1, le=MAX_QUOTA)]


class Quotas(BaseModel):
    """A key's limits; null (or left out): the deployment's default (TRIBUNAL_QUOTA_*). Unlike other bodies, an
    unknown member is refused: a misspelt limit silently left at its default would be a limit nobody set."""

    model_config = ConfigDict(extra="forbid")

    requests_per_minute: Annotated[QuotaValue, Field(description="Requests per minute, per key and per tenant.")] = None
    queued_attempts: Annotated[
        QuotaValue,
        Field(
            description="The tenant's attempts queued or running: submitted ones, perturbation mutants, synthesis "
            "programs. A request over it is refused; a growing job waits at it."
        ),
    ] = None
    running_executions: Annotated[QuotaValue, Field(description="The tenant's direct executions not ended.")] = None
    queued_reports: Annotated[QuotaValue, Field(description="The tenant's reports not yet built.")] = None
    judge_tokens_per_day: Annotated[
        QuotaValue, Field(description="LLM judge tokens the tenant's judgments may spend per UTC day.")
    ] = None
    queued_pairs: Annotated[
        QuotaValue,
        Field(
            description="The tenant's similarity pairs not yet scored, across its jobs (single pairs, datasets, "
            "perturbation confirmations)."
        ),
    ] = None
    judgments_per_request: Annotated[
        QuotaValue,
        Field(
            description="Judgment rows (attempts x judges x conditions x repeats) one request may ask for, counting "
            "the most a perturbation or synthesis job may make."
        ),
    ] = None
    judgments_per_day: Annotated[
        QuotaValue, Field(description="Judgment rows the tenant may ask for per UTC day, by every kind of work.")
    ] = None


class KeyCreate(RequestBody):
    tenant: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    scopes: list[Scope] = Field(min_length=1)
    name: str = Field(default="", max_length=200)
    quotas: Quotas | None = None


class KeyCreated(BaseModel):
    key_id: str
    key: str
    tenant: str
    scopes: list[str]
    name: str
    quotas: Quotas


class KeyInfo(BaseModel):
    key_id: str
    tenant: str
    scopes: list[str]
    name: str
    created_at: datetime
    revoked_at: datetime | None
    quotas: Quotas
