"""JSON answers that cannot fail on their text: a value that is not valid Unicode (a lone surrogate) is cleaned
(services/kernel/text.py) instead of turning the answer into a 500. Stored values are clean already (the models'
column types clean on the way in and out of the database); this covers what an answer builds by hand."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from services.kernel.text import clean_json


class CleanJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return super().render(clean_json(content, keep_nul=True))
