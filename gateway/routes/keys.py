"""API keys: create (shown once), list, revoke. Admin only."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import select

from gateway.deps import AdminKey, SessionDep
from gateway.errors import ApiError
from gateway.schemas import KeyCreate, KeyCreated, KeyInfo
from services.kernel.keys import create_key
from services.kernel.models import ApiKey, utcnow

router = APIRouter(prefix="/v1/keys", tags=["keys"])


@router.post("", status_code=201, response_model=KeyCreated)
async def create(body: KeyCreate, _: AdminKey, session: SessionDep) -> KeyCreated:
    row, plaintext = await create_key(session, tenant=body.tenant, scopes=list(body.scopes), name=body.name)
    await session.commit()
    return KeyCreated(key_id=row.key_id, key=plaintext, tenant=row.tenant, scopes=row.scopes, name=row.name)


@router.get("", response_model=list[KeyInfo])
async def list_keys(_: AdminKey, session: SessionDep) -> list[KeyInfo]:
    rows = (await session.scalars(select(ApiKey).order_by(ApiKey.created_at))).all()
    return [
        KeyInfo(
            key_id=r.key_id,
            tenant=r.tenant,
            scopes=r.scopes,
            name=r.name,
            created_at=r.created_at,
            revoked_at=r.revoked_at,
        )
        for r in rows
    ]


@router.delete("/{key_id}", response_model=KeyInfo)
async def revoke(key_id: str, _: AdminKey, session: SessionDep) -> KeyInfo:
    row = await session.get(ApiKey, key_id)
    if row is None:
        raise ApiError(404, f"no key {key_id!r}")
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        await session.commit()
    return KeyInfo(
        key_id=row.key_id,
        tenant=row.tenant,
        scopes=row.scopes,
        name=row.name,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )
