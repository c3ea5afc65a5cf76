"""The response cache: validated answers, keyed by everything that shapes a request, so a rerun resends nothing
it already has a valid answer for.

The key covers the endpoint's base URL, the complete request body (model, messages, schema, every generation
parameter) and a caller-chosen scope: what else makes two answers to the same body different entries (a judge's
prompt version, condition and repeat index: a repeat is a fresh sample of the same request). Only validated
answers are stored; a stored answer that no longer validates is ignored and replaced.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.kernel import db
from services.kernel.models import JudgeResponseCache, utcnow

JSONScalar = str | int | float | bool | None


@dataclass(frozen=True)
class CachedReply:
    content: str
    served_model: str | None
    tokens_in: int | None
    tokens_out: int | None
    score_probs: dict[str, float] | None = None  # the probed value's probabilities (services/lib/llm/logprobs.py)


class ResponseCache(Protocol):
    async def get(self, key: str) -> CachedReply | None: ...

    async def put(self, key: str, reply: CachedReply) -> None: ...


def cache_key(base_url: str, scope: tuple[JSONScalar, ...], params: dict[str, Any]) -> str:
    """SHA-256 (64 hex digits) of the base URL (without a trailing slash), the scope and the request body."""
    material = [base_url.rstrip("/"), *scope, params]
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class DbResponseCache:
    """The cache in the database (table `judge_response_cache`), shared by every worker process.

    `sessions` is the session factory to use; by default the process's own (services/kernel/db.py). A put for a
    key that exists overwrites it (UPSERT), so concurrent puts of one key leave one row, the last write's.
    """

    def __init__(self, sessions: async_sessionmaker[AsyncSession] | None = None) -> None:
        self._sessions = sessions

    def _factory(self) -> async_sessionmaker[AsyncSession]:
        return self._sessions if self._sessions is not None else db.sessionmaker()

    async def get(self, key: str) -> CachedReply | None:
        async with self._factory()() as session:
            row = await session.get(JudgeResponseCache, key)
            if row is None:
                return None
            return CachedReply(row.content, row.served_model, row.tokens_in, row.tokens_out, row.score_probs)

    async def put(self, key: str, reply: CachedReply) -> None:
        async with self._factory()() as session, session.begin():
            await db.upsert(
                session,
                JudgeResponseCache.__table__,
                {
                    "cache_key": key,
                    "content": reply.content,
                    "served_model": reply.served_model,
                    "tokens_in": reply.tokens_in,
                    "tokens_out": reply.tokens_out,
                    "score_probs": reply.score_probs,
                    "created_at": utcnow(),
                },
                keys=["cache_key"],
            )
