"""API keys: create (shown once), list, revoke, and set their quotas. Admin only."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import select

from gateway.deps import AdminKey, SessionDep
from gateway.errors import ApiError
from gateway.schemas import KeyCreate, KeyCreated, KeyInfo, Quotas
from services.kernel.keys import create_key
from services.kernel.models import ApiKey, utcnow

router = APIRouter(prefix="/v1/keys", tags=["keys"])


def _stored(quotas: Quotas | None) -> dict[str, int] | None:
    """What the key row keeps: the limits set, none for those left at the default (so a changed default applies)."""
    if quotas is None:
        return None
    return quotas.model_dump(exclude_none=True) or None


def _info(row: ApiKey) -> KeyInfo:
    return KeyInfo(
        key_id=row.key_id,
        tenant=row.tenant,
        scopes=row.scopes,
        name=row.name,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        quotas=Quotas.model_validate(row.quotas or {}),
    )


@router.post("", status_code=201, response_model=KeyCreated)
async def create(body: KeyCreate, _: AdminKey, session: SessionDep) -> KeyCreated:
    row, plaintext = await create_key(session, tenant=body.tenant, scopes=list(body.scopes), name=body.name)
    row.quotas = _stored(body.quotas)
    await session.commit()
    return KeyCreated(
        key_id=row.key_id,
        key=plaintext,
        tenant=row.tenant,
        scopes=row.scopes,
        name=row.name,
        quotas=Quotas.model_validate(row.quotas or {}),
    )


@router.get("", response_model=list[KeyInfo])
async def list_keys(_: AdminKey, session: SessionDep) -> list[KeyInfo]:
    rows = (await session.scalars(select(ApiKey).order_by(ApiKey.created_at))).all()
    return [_info(r) for r in rows]


async def _key(session: SessionDep, key_id: str) -> ApiKey:
    row = await session.get(ApiKey, key_id)
    if row is None:
        raise ApiError(404, f"no key {key_id!r}")
    return row


@router.put("/{key_id}/quotas", response_model=KeyInfo)
async def set_quotas(key_id: str, body: Quotas, _: AdminKey, session: SessionDep) -> KeyInfo:
    """Replace the key's quotas: a limit left out or null goes back to the default. Takes effect on the key's
    next request (a request bucket keeps the tokens it holds, up to the new size)."""
    row = await _key(session, key_id)
    row.quotas = _stored(body)
    await session.commit()
    return _info(row)


@router.delete("/{key_id}", response_model=KeyInfo)
async def revoke(key_id: str, _: AdminKey, session: SessionDep) -> KeyInfo:
    row = await _key(session, key_id)
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        await session.commit()
    return _info(row)
