"""Who is calling: the principal an API key authenticates (gateway/deps.py finds it; quotas meter it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's id, its tenant, its scopes and its quotas (null members: the defaults)."""

    key_id: str
    tenant: str
    scopes: frozenset[str]
    quotas: Mapping[str, int | None] = field(default_factory=dict)
