"""The languages this deployment runs, with the toolchain versions its executor workers reported."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter

from gateway.deps import ReadKey
from gateway.schemas import LanguageOut
from services.kernel import queue
from services.kernel.contracts import Language
from services.kernel.registry import LANGUAGES_KEY

router = APIRouter(prefix="/v1/languages", tags=["languages"])


@router.get("", response_model=list[LanguageOut])
async def list_languages(_: ReadKey) -> list[dict[str, Any]]:
    reported: dict[str, dict[str, Any]] = {}
    try:
        raw = await (await queue.get_pool()).get(LANGUAGES_KEY)
        if raw:
            reported = {item["id"]: item for item in json.loads(raw)}
    except Exception:  # noqa: BLE001 - versions are informative; the ids are known without them
        pass
    return [{**reported.get(lang, {}), "id": lang, "name": lang.display_name} for lang in Language]
