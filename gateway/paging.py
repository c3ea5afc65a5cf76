"""Cursor paging, shared by every listing (`GET /v1/attempts`, `/v1/problems`, `/v1/jobs`, `/v1/reports`).

A listing is oldest first, ordered by (created_at, a unique key); its cursor is the last item's pair, as opaque
URL-safe base64 of JSON. A page reads `limit + 1` rows: the extra one only says whether there is a next page. A
cursor this API did not give is a 400 naming `query.cursor`."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Query
from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute

from gateway.errors import field_error

# The `limit` query parameter of every listing: 1 to 500 items a page, 50 by default.
Limit = Annotated[int, Query(ge=1, le=500, description="Items a page (1-500).")]
DEFAULT_LIMIT = 50


def encode_cursor(created_at: datetime, key: str) -> str:
    """The cursor that resumes a listing after the item created at `created_at` with unique key `key`."""
    raw = json.dumps([created_at.isoformat(), key]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The (created_at, key) pair of a cursor `encode_cursor` made; a 400 naming `query.cursor` otherwise."""
    try:
        created, key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        at = datetime.fromisoformat(created)
        # In UTC, as the columns bind it: a forged offset that leaves the datetime range is refused here, not 500.
        return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC), str(key)
    except (ValueError, TypeError, OverflowError) as exc:
        raise field_error(["query", "cursor"], "not a cursor this API returned", 400) from exc


def window[Q: Select[Any]](
    query: Q,
    created_at: InstrumentedAttribute[datetime],
    key: InstrumentedAttribute[str],
    cursor: str | None,
    limit: int,
) -> Q:
    """`query` restricted to the rows after `cursor` (all of them without one), oldest first, `limit + 1` of them
    (the extra row tells `split` whether there is a next page)."""
    if cursor:
        created, last = decode_cursor(cursor)
        query = query.where(or_(created_at > created, and_(created_at == created, key > last)))
    return query.order_by(created_at, key).limit(limit + 1)


def split[R](
    rows: Sequence[R], limit: int, position: Callable[[R], tuple[datetime, str]]
) -> tuple[list[R], str | None]:
    """The page of `rows` (read through `window`) and the cursor of the next page, None on the last one;
    `position` gives a row's (created_at, key), the columns `window` ordered by."""
    page = list(rows[:limit])
    return page, encode_cursor(*position(page[-1])) if len(rows) > limit else None
