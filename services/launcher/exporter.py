"""`tribunal export`: stream `GET /v1/exports/attempts` to a file or stdout, never holding the export in memory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO

import httpx


def export_attempts(
    client: httpx.Client,
    *,
    job_id: str | None,
    problem_id: str | None,
    format: str = "jsonl",
    output: Path | None = None,
) -> tuple[int, str]:
    """Write the export of `job_id` and/or `problem_id` to `output` (stdout without one), as it arrives.
    (0, "") once written; (1, the gateway's answer) on an error status, before anything is written."""
    params = {
        "format": format,
        **({"job_id": job_id} if job_id else {}),
        **({"problem_id": problem_id} if problem_id else {}),
    }
    with client.stream("GET", "/v1/exports/attempts", params=params, timeout=httpx.Timeout(60, read=300)) as response:
        if response.status_code != 200:
            response.read()
            return 1, f"{response.status_code} {response.text}"
        if output is None:
            _copy(response, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            with output.open("wb") as sink:
                _copy(response, sink)
    return 0, ""


def _copy(response: httpx.Response, sink: BinaryIO) -> None:
    for chunk in response.iter_bytes():
        sink.write(chunk)
