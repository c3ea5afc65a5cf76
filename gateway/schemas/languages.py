"""Languages: one language the executors run, with the compiler or runtime they found."""

from __future__ import annotations

from pydantic import BaseModel


class LanguageOut(BaseModel):
    id: str
    name: str
    version: str | None = None
    compiler: str | None = None
    runtime: str | None = None
