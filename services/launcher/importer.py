"""`tribunal import FILE --format F`: a dataset file, streamed a line at a time through its loader
(services/lib/datasets), posted to the gateway.

Bounded memory: the file is never read whole; problems are posted one by one, attempts in batches of at most the
server's batch size (and half its body limit). Every bad line is reported as `line N: field: message`, bad JSON
included, and the good lines are imported anyway. Importing the same file twice creates nothing twice: a problem
that is already there answers 200 (or 409 when stored with other content, which is kept and reported), and every
attempt has a deterministic attempt_uid.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

from services.kernel.settings import get_settings
from services.lib.datasets import FORMATS, RecordError, load

# The most a 429 is waited on before the import gives up on that request.
MAX_RETRIES = 20


@dataclass
class ImportReport:
    """What an import did: counts, and every bad line as `line N: field: message`."""

    lines: int = 0
    problems_created: int = 0
    problems_existing: int = 0
    attempts_created: int = 0
    attempts_existing: int = 0
    pairs: int = 0
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The problems the file made or named (its attempts' too), in first-seen order, and each one's first
    # reference solution (`{language, source_code}`): what a study's scope and reference attempts are.
    problem_ids: dict[str, None] = field(default_factory=dict)
    references: dict[str, dict[str, Any]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "problems_created": self.problems_created,
            "problems_existing": self.problems_existing,
            "attempts_created": self.attempts_created,
            "attempts_existing": self.attempts_existing,
            "pairs_checked": self.pairs,
            "bad_lines": len(self.errors),
        }


def file_lines(raw: IO[bytes], gzipped: bool) -> Iterator[bytes]:
    """The lines of a file, un-gzipped when `gzipped`, one at a time."""
    if gzipped:
        yield from gzip.GzipFile(fileobj=raw)
    else:
        yield from raw


def _api_error(response: httpx.Response, skip: int) -> str:
    """`field: message` from a problem+json answer; `skip` leading parts of its loc (body, attempts, i) dropped."""
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code}: {response.text[:300]}"
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        first = errors[0]
        loc = ".".join(str(part) for part in first.get("loc", [])[skip:]) or "record"
        return f"{loc}: {first.get('msg')} ({response.status_code})"
    detail = body.get("detail") if isinstance(body, dict) else None
    return f"record: {detail or response.text[:300]} ({response.status_code})"


class Importer:
    """Posts the bodies of one file's records; `add_line` per record, then `finish`."""

    def __init__(
        self,
        client: httpx.Client,
        report: ImportReport,
        batch_size: int,
        batch_bytes: int,
        attempt_fields: dict[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.attempt_fields = attempt_fields or {}
        self.report = report
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.pending: list[tuple[int, dict[str, Any]]] = []
        self.pending_bytes = 0
        self.posted_problems: set[str] = set()

    def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        for _ in range(MAX_RETRIES):
            response = self.client.post(path, json=body)
            if response.status_code != 429:
                return response
            time.sleep(min(float(response.headers.get("Retry-After", "1")), 30.0))
        return response

    def problem(self, line: int, body: dict[str, Any]) -> None:
        problem_id = body.get("problem_id")
        if isinstance(problem_id, str) and problem_id in self.posted_problems:
            return  # another record of this file made it (AXIOM: one problem per instruction)
        response = self._post("/v1/problems", body)
        if response.status_code == 201:
            self.report.problems_created += 1
        elif response.status_code == 200:
            self.report.problems_existing += 1
        elif response.status_code == 409:
            self.report.problems_existing += 1
            self.report.notes.append(f"line {line}: problem {problem_id} is already there with other content: kept")
        else:
            self.report.errors.append(f"line {line}: {_api_error(response, 1)}")
            return
        if isinstance(problem_id, str):
            self.posted_problems.add(problem_id)
            self.report.problem_ids[problem_id] = None
            references = body.get("references")
            if isinstance(references, list) and references and isinstance(references[0], dict):
                self.report.references.setdefault(problem_id, references[0])

    def attempt(self, line: int, body: dict[str, Any]) -> None:
        body = {**self.attempt_fields, **body}
        if isinstance(body.get("problem_id"), str):
            self.report.problem_ids[body["problem_id"]] = None
        size = len(json.dumps(body))
        if self.pending and (len(self.pending) >= self.batch_size or self.pending_bytes + size > self.batch_bytes):
            self.flush()
        self.pending.append((line, body))
        self.pending_bytes += size

    def flush(self) -> None:
        batch, self.pending, self.pending_bytes = self.pending, [], 0
        if not batch:
            return
        response = self._post("/v1/attempts:batch", {"attempts": [body for _, body in batch]})
        if response.status_code == 202:
            self._count(response, len(batch))
        elif len(batch) == 1:
            self.report.errors.append(f"line {batch[0][0]}: {_api_error(response, 3)}")
        else:
            # The batch was refused whole: send its attempts one at a time, to import the good ones and name the
            # line of each bad one.
            for line, body in batch:
                self.pending = [(line, body)]
                self.flush()

    def _count(self, response: httpx.Response, sent: int) -> None:
        job = self.client.get(f"/v1/jobs/{response.json()['job_id']}")
        created = job.json()["progress"]["total"] if job.status_code == 200 else 0
        self.report.attempts_created += created
        self.report.attempts_existing += sent - created


def import_file(
    client: httpx.Client,
    path: Path,
    format: str,
    *,
    batch_size: int | None = None,
    console: Console | None = None,
    attempt_fields: dict[str, Any] | None = None,
    limit: int | None = None,
) -> ImportReport:
    """Import a JSON Lines file (`.gz` too) of `format` records through `client`; never raises for a bad line.
    `attempt_fields` (e.g. a study's `judges`, `conditions`, `repeats`) are given to every attempt that does not
    set them itself; `limit` stops after that many lines.

    Raises:
        KeyError: `format` is not a known format.
    """
    if format not in FORMATS:
        raise KeyError(format)
    settings = get_settings()
    importer = Importer(
        client,
        ImportReport(),
        min(batch_size or settings.max_batch_size, settings.max_batch_size),
        settings.max_body_bytes // 2,
        attempt_fields,
    )
    report = importer.report
    with (
        path.open("rb") as raw,
        Progress(
            TextColumn("importing {task.description}"),
            BarColumn(),
            DownloadColumn(),
            TextColumn("{task.fields[lines]} lines, {task.fields[bad]} bad"),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            transient=False,
        ) as progress,
    ):
        task = progress.add_task(path.name, total=path.stat().st_size, lines=0, bad=0)
        for number, data in enumerate(file_lines(raw, path.suffix == ".gz"), start=1):
            if limit is not None and number > limit:
                break
            report.lines = number
            _one_line(importer, format, number, data)
            progress.update(task, completed=raw.tell(), lines=number, bad=len(report.errors))
        importer.flush()
        progress.update(task, completed=path.stat().st_size, lines=report.lines, bad=len(report.errors))
    if report.pairs:
        report.notes.append(
            f"{report.pairs} LoCaL pairs checked, not imported: pairs are scored, not stored; "
            f"run `tribunal similarity {path}`"
        )
    return report


def _one_line(importer: Importer, format: str, number: int, data: bytes) -> None:
    report = importer.report
    if not data.strip():
        return
    try:
        record = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        report.errors.append(f"line {number}: json: {message}")
        return
    try:
        bodies = load(format, record, number)
    except RecordError as exc:
        report.errors.append(f"line {number}: {exc.field}: {exc.message}")
        return
    for problem in bodies.problems:
        importer.problem(number, problem)
    for attempt in bodies.attempts:
        importer.attempt(number, attempt)
    report.pairs += len(bodies.pairs)
