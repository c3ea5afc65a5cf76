"""The `tribunal` command: start the embedded stack, run one process kind, manage keys, submit work."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from services.kernel.contracts import FINAL_ATTEMPT_STATUSES, TERMINAL_JOB_STATUSES, JobStatus, Language, Verdict
from services.kernel.registry import FORMER_NAMES, SERVICES

console = Console(stderr=True)

EXTENSIONS = {
    ".py": Language.PYTHON,
    ".c": Language.C,
    ".cc": Language.CPP,
    ".cpp": Language.CPP,
    ".cxx": Language.CPP,
    ".java": Language.JAVA,
}


def _data_dir(args: argparse.Namespace) -> Path:
    if getattr(args, "data_dir", None):
        os.environ["TRIBUNAL_DATA_DIR"] = str(args.data_dir)
    from services.kernel.settings import get_settings

    get_settings.cache_clear()
    return get_settings().data_dir


def cmd_up(args: argparse.Namespace) -> int:
    from services.kernel.judges import JudgesFileError
    from services.launcher.local_llm import LocalModelUnavailable
    from services.launcher.stack import EmbeddedStack

    stack = EmbeddedStack(
        _data_dir(args),
        host=args.host,
        port=args.port,
        workers=args.workers,
        judges_file=args.judges,
        prometheus_port=args.prometheus_port,
        local_llm=args.local_llm,
    )
    stopping = False

    def _stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        try:
            stack.start()
        except JudgesFileError as exc:
            console.print(f"[red]judges file rejected[/]: {exc}")
            return 2
        except LocalModelUnavailable as exc:
            console.print(f"[red]no local model[/]: {exc}")
            return 2
        console.print(f"[bold green]Tribunal is up[/] at [bold]{stack.url}[/]  (API docs: {stack.url}/docs)")
        console.print(f"admin key: {stack.admin_key_path}" + ("  (new)" if stack.created_admin_key else ""))
        judges = ", ".join(f"{j.name} ({j.kind})" for j in stack.judges)
        console.print(f"judges: {judges}")
        console.print(f"redis: {stack.redis_url}   logs: {stack.data_dir / 'logs'}   Ctrl-C stops everything")
        if stack.prometheus is not None:
            console.print(f"prometheus: {stack.prometheus.url}  (alerts: {stack.prometheus.url}/alerts)")
        if stack.local_llm is not None:
            console.print(f"local model: {stack.local_llm.model} at {stack.local_llm.base_url}  (judge: local)")
        while not stopping:
            for name in stack.restart_dead():
                console.print(f"[red]{name} exited; restarted[/]")
            if stack.prometheus is not None and not stack.prometheus.running:
                console.print("[red]prometheus exited; restarting[/]")
                try:
                    stack.start_prometheus(wait_scraped=False)
                except (OSError, RuntimeError, TimeoutError) as exc:  # the stack runs on without it
                    console.print(f"[red]prometheus did not restart ({exc}); trying again[/]")
            time.sleep(0.5)
    finally:
        stack.stop()
        console.print("stopped")
    return 0


def cmd_judges_check(args: argparse.Namespace) -> int:
    from judge.rubrics import rubric_specs
    from services.kernel.judges import JudgesFileError, LLMJudge, load_judges_file
    from services.launcher.judges_check import check_all

    path = args.judges or (Path(os.environ["TRIBUNAL_JUDGES_FILE"]) if os.environ.get("TRIBUNAL_JUDGES_FILE") else None)
    if path is None:
        # What `tribunal up --local-llm` wrote, if it ran with this data dir.
        written = _data_dir(args) / "judges.local.toml"
        path = written if written.is_file() else None
    try:
        parsed = load_judges_file(path)
    except JudgesFileError as exc:
        console.print(f"[red]judges file rejected[/]: {escape(str(exc))}")
        return 2
    judges = list(parsed.judge)
    if not any(isinstance(j, LLMJudge) and j.enabled for j in judges):
        console.print(f"no LLM judge is configured ({path or 'the embedded offline judges'}): nothing to check")
        return 0
    table = Table(title=escape(f"LLM endpoints of {path}"))
    columns = ("judge", "served model", "listed", "latency", "tokens in/out", "structured output", "logprobs", "result")
    for column in columns:
        table.add_column(column)
    results = check_all(judges, rubric_specs(parsed.rubric))
    for r in results:
        latency = f"{r.latency_ms} ms" if r.latency_ms is not None else "-"
        # What an endpoint said is text, never markup: a model name like "x[/]" must not break or style the table.
        cells = [r.judge, r.served_model or "-", r.listed, latency, r.tokens, r.structured, r.logprobs]
        table.add_row(*(Text(cell) for cell in cells), Text(r.result, style="green" if r.ok else "red"))
    Console().print(table)
    return 0 if all(r.ok for r in results) else 1


def cmd_worker(args: argparse.Namespace) -> int:
    import importlib

    kind = FORMER_NAMES.get(args.kind, args.kind)
    module, _, function = SERVICES[kind].entry_point.partition(":")
    getattr(importlib.import_module(module), function)()
    return 0


def cmd_gateway(args: argparse.Namespace) -> int:
    import uvicorn

    uvicorn.run(
        "gateway.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
    )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from services.launcher.migrate import upgrade

    _data_dir(args)
    upgrade()
    console.print("database is at the newest revision")
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    from services.kernel.db import dispose_engine, init_engine, session_scope
    from services.kernel.keys import SCOPES, create_key
    from services.launcher.migrate import upgrade

    unknown = sorted(set(args.scopes) - set(SCOPES))
    if unknown:
        console.print(f"[red]unknown scope(s)[/]: {', '.join(unknown)}; choose from {', '.join(SCOPES)}")
        return 2
    _data_dir(args)
    upgrade()

    async def run() -> tuple[str, str]:
        init_engine(role="cli")
        try:
            async with session_scope() as session:
                row, plaintext = await create_key(session, tenant=args.tenant, scopes=args.scopes, name=args.name)
                return row.key_id, plaintext
        finally:
            await dispose_engine()

    key_id, plaintext = asyncio.run(run())
    print(json.dumps({"key_id": key_id, "key": plaintext, "tenant": args.tenant, "scopes": sorted(args.scopes)}))
    return 0


def client_from(args: argparse.Namespace) -> httpx.Client:
    """An HTTP client for the gateway named by --url/--key, TRIBUNAL_URL/TRIBUNAL_API_KEY, or the admin key."""
    url = args.url or os.environ.get("TRIBUNAL_URL", "http://127.0.0.1:8000")
    key = args.key or os.environ.get("TRIBUNAL_API_KEY")
    if not key:
        key_file = _data_dir(args) / "admin.key"
        if not key_file.exists():
            raise SystemExit(f"no API key: pass --key, set TRIBUNAL_API_KEY, or start `tribunal up` ({key_file})")
        key = key_file.read_text().strip()
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _fail(response: httpx.Response) -> int:
    console.print(f"[red]{response.status_code}[/] {response.text}")
    return 1


def cmd_problems_add(args: argparse.Namespace) -> int:
    with client_from(args) as client:
        response = client.post("/v1/problems", json=json.loads(Path(args.file).read_text()))
        if response.status_code not in (200, 201):
            return _fail(response)
        print(json.dumps({"problem_id": response.json()["problem_id"]}))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Import a dataset file through its format's loader (services/launcher/importer.py); non-zero if a line was bad."""
    from services.launcher.importer import import_file

    with client_from(args) as client:
        report = import_file(client, Path(args.file), args.format, batch_size=args.batch_size, console=console)
    for line in report.notes:
        console.print(line, markup=False, style="yellow")
    for line in report.errors:
        console.print(line, markup=False, style="red")
    print(json.dumps(report.summary()))
    return 1 if report.errors else 0


def cmd_submit(args: argparse.Namespace) -> int:
    path = Path(args.file)
    language = args.language or EXTENSIONS.get(path.suffix)
    if language is None:
        raise SystemExit(f"cannot tell the language of {path.name}; pass --language")
    body: dict[str, Any] = {"problem_id": args.problem, "language": language, "source_code": path.read_text()}
    with client_from(args) as client:
        response = client.post("/v1/attempts", json=body)
        if response.status_code != 202:
            return _fail(response)
        accepted = response.json()
        if not args.wait:
            print(json.dumps(accepted))
            return 0
        with console.status(f"judging {accepted['attempt_id']} ...") as status:
            while True:
                # A long poll: answered as soon as the attempt ends, or after 10 s with its status then.
                read = client.get(f"/v1/attempts/{accepted['attempt_id']}", params={"wait_s": 10}, timeout=40)
                if read.status_code != 200:
                    return _fail(read)
                attempt = read.json()
                status.update(f"{attempt['attempt_id']}: {attempt['status']}")
                if attempt["status"] in FINAL_ATTEMPT_STATUSES:
                    break
        print(json.dumps(attempt, indent=2))
        return 0 if attempt["verdict"] == Verdict.AC else 2


def _finding(verification: dict[str, Any]) -> str:
    """What verification says of a mutant, in a word (services/perturb/verification.py)."""
    if not verification:
        return ""
    if not verification.get("compiles"):
        return "does not compile"
    if verification.get("operator_bug"):
        return "OPERATOR BUG"
    return "equivalent?" if verification.get("equivalent_suspect") else ""


def _follow(
    client: httpx.Client,
    path: str,
    label: str,
    *,
    every_s: float,
    params: dict[str, Any] | None = None,
    describe: Callable[[dict[str, Any]], str] | None = None,
) -> dict[str, Any]:
    """Poll a job's view at `path` with a progress bar (its `progress` counts) until the job ends; the last view.
    `describe` gives the bar a line of its own from each view."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task(label, total=None)
        while True:
            job: dict[str, Any] = client.get(path, params=params).json()
            description = describe(job) if describe is not None else label
            done, total = job["progress"]["done"], max(job["progress"]["total"], 1)
            progress.update(bar, description=description, completed=done, total=total)
            if job["status"] in TERMINAL_JOB_STATUSES:
                return job
            time.sleep(every_s)


def cmd_export(args: argparse.Namespace) -> int:
    """Stream a job's or a problem's attempts × judgments as JSONL or CSV (GET /v1/exports/attempts)."""
    from services.launcher.exporter import export_attempts

    with client_from(args) as client:
        code, error = export_attempts(
            client, job_id=args.job_id, problem_id=args.problem_id, format=args.format, output=args.output
        )
    if code:
        console.print(error, markup=False, style="red")
    return code


def cmd_perturb(args: argparse.Namespace) -> int:
    """Perturb accepted attempts, follow the job with a progress bar, then print its mutants as a table."""

    body: dict[str, Any] = {
        "attempt_ids": args.attempt_ids,
        "seed": args.seed,
        "all_sites": args.all_sites,
        "judge": args.judge,
    }
    if args.operators:
        body["operators"] = args.operators.split(",")
    with client_from(args) as client:
        response = client.post("/v1/perturbations", json=body)
        if response.status_code != 202:
            return _fail(response)
        job_id = response.json()["job_id"]
        job = _follow(client, f"/v1/perturbations/{job_id}", f"perturbing ({job_id})", every_s=0.1)
    table = Table(title=f"mutants of {', '.join(args.attempt_ids)} ({job['status']})")
    for column in ("operator", "arm", "sev", "line", "guard", "verdict", "finding"):
        table.add_column(column)
    for mutant in job["mutants"]:
        table.add_row(
            mutant["operator"],
            mutant["arm"],
            "" if mutant["severity"] is None else f"{mutant['severity']:g}",
            str(mutant["line"]),
            "yes" if mutant["guard_context"] else "",
            mutant["verdict"] or mutant["status"],
            _finding(mutant.get("verification") or {}),
        )
    Console().print(table)
    if args.json:
        print(json.dumps(job, indent=2))
    return 0 if job["status"] == JobStatus.SUCCEEDED else 1


def _read_pairs(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file of code pairs (LoCaL's shape), with the line of any that is not JSON."""
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{number}: not JSON ({exc.msg})") from None
    if not records:
        raise SystemExit(f"{path}: no pairs")
    return records


def _number(value: Any, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def cmd_similarity(args: argparse.Namespace) -> int:
    """Score a JSONL of code pairs by differential fuzzing, follow the job with a progress bar, then print each
    metric's MAE against df_score and the SFD/DFS/Control regions; optionally save every pair's row as JSONL."""

    body: dict[str, Any] = {
        "pairs": _read_pairs(Path(args.file)),
        "repeats": args.repeats,
        "time_budget_s": args.time_budget,
        "seed": args.seed,
        "protocol": args.protocol,
        "crystal_k": args.crystal_k,
        "timeout_rule": args.timeout_rule,
    }
    if args.n_inputs is not None:
        body["n_inputs"] = args.n_inputs
    with client_from(args) as client:
        response = client.post("/v1/similarity/datasets", json=body)
        if response.status_code != 202:
            return _fail(response)
        job_id = response.json()["job_id"]
        path, label = f"/v1/similarity/{job_id}", f"fuzzing pairs ({job_id})"
        job = _follow(client, path, label, every_s=0.5, params={"limit": 1})
        rows: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = client.get(f"/v1/similarity/{job_id}", params={"offset": offset, "limit": 500}).json()
            rows += page["pairs"]
            offset = page["next_offset"]
    summary = page["summary"]
    table = Table(title=f"similarity {job_id} ({job['status']}): {summary['pairs']} pairs scored; MAE against df_score")
    table.add_column("metric")
    table.add_column("MAE")
    regions = summary.get("regions") or {}
    for region in regions:
        table.add_column(f"{region} ({regions[region]['pairs']})")
    for metric, mae in (summary.get("mae") or {}).items():
        table.add_row(metric, _number(mae), *(_number(regions[r]["mae"].get(metric)) for r in regions))
    Console().print(table)
    if summary.get("thresholds"):
        th = summary["thresholds"]
        console.print(
            f"thresholds ({summary.get('thresholds_source')}): x_lo={th['x_lo']} x_hi={th['x_hi']} "
            f"y_lo={th['y_lo']} y_hi={th['y_hi']}"
        )
    failed = [row for row in rows if row["status"] == "failed"]
    if failed:
        console.print(f"[yellow]{len(failed)} pairs failed[/], e.g. {failed[0]['id']}: {failed[0]['error']}")
    if args.output:
        Path(args.output).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return 0 if job["status"] == JobStatus.SUCCEEDED else 1


def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc


def cmd_synthesize(args: argparse.Namespace) -> int:
    """Synthesise an AXIOM benchmark from accepted programs, follow the job with a progress bar, then print what it
    kept per target score, how its draws ended, and the score entropy; optionally save the JSONL export."""

    llms = [name for name in args.llm.split(",") if name]
    body: dict[str, Any] = {
        "attempt_ids": args.attempt_ids,
        "problem_ids": [p for p in (args.problems or "").split(",") if p],
        "llm": llms[0] if len(llms) == 1 else llms,
        "m": args.m,
        "select": args.select,
        "max_draws": args.max_draws,
        "seed": args.seed,
        "judge": args.judge,
    }
    if args.targets is not None:
        body["targets"] = args.targets
    with client_from(args) as client:
        response = client.post("/v1/benchmarks:synthesize", json=body)
        if response.status_code != 202:
            return _fail(response)
        job_id = response.json()["job_id"]

        def describe(view: dict[str, Any]) -> str:
            outcomes = view["outcomes"]
            rejected = sum(n for k, n in outcomes.items() if k not in ("kept", "mismatch", "pending"))
            return (
                f"synthesizing ({job_id}): kept {outcomes.get('kept', 0)}, "
                f"dropped {outcomes.get('mismatch', 0)}, rejected {rejected}"
            )

        job = _follow(client, f"/v1/benchmarks/{job_id}", f"synthesizing ({job_id})", every_s=0.2, describe=describe)
        exported = None
        if args.export and job["selection_done"]:
            exported = client.get(f"/v1/benchmarks/{job_id}/export.jsonl")
    table = Table(title=f"benchmark {job_id} ({job['status']})")
    for column in ("target", "kept", "selected", "calibrated", "dropped"):
        table.add_column(column, justify="right")
    for target in range(5, -1, -1):
        kept = [p for p in job["programs"] if p["target_score"] == target]
        dropped = [p for p in job["dropped"] if p["target_score"] == target]
        if kept or dropped:
            table.add_row(
                str(target),
                str(len(kept)),
                str(sum(1 for p in kept if p["selected"])),
                str(sum(1 for p in kept if p["calibrated_score"] is not None)),
                str(len(dropped)),
            )
    Console().print(table)
    entropy = job["score_entropy"]

    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    console.print(
        f"draws: {', '.join(f'{k} {n}' for k, n in job['outcomes'].items()) or 'none'}; score entropy over the "
        f"{entropy['over']} programs: {fmt(entropy['all'])} (1..5: {fmt(entropy['rectifiable'])})"
    )
    if (job.get("result") or {}).get("unfilled"):
        console.print(f"[yellow]given up (draws ran out)[/]: {', '.join(job['result']['unfilled'])}")
    if exported is not None:
        if exported.status_code != 200:
            return _fail(exported)
        Path(args.export).write_text(exported.text, encoding="utf-8")
        console.print(f"exported {exported.text.count(chr(10))} records to {args.export}")
    if args.json:
        print(json.dumps(job, indent=2))
    return 0 if job["status"] == JobStatus.SUCCEEDED else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from services.launcher.demo import run_demo

    return run_demo(data_dir=args.data_dir, limit=args.limit, keep=args.keep, local_llm=not args.no_local_llm)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tribunal", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start Redis, the gateway and executor workers on this machine")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=8000)
    up.add_argument("--data-dir", type=Path)
    up.add_argument("--workers", type=int, default=1, help="worker processes of each kind")
    up.add_argument(
        "--judges", type=Path, help="judges TOML file (default: $TRIBUNAL_JUDGES_FILE, else offline judges)"
    )
    up.add_argument(
        "--prometheus-port",
        type=int,
        help="also run Prometheus on 127.0.0.1:PORT, scraping every process with the alert rules loaded",
    )
    up.add_argument(
        "--local-llm",
        action="store_true",
        help="also run the local model server (llama.cpp, TRIBUNAL_LOCAL_LLM_*) and the judge `local` that asks it",
    )
    up.set_defaults(func=cmd_up)

    judges = sub.add_parser("judges", help="the configured judges").add_subparsers(dest="judges_command", required=True)
    check = judges.add_parser(
        "check", help="ask every LLM endpoint for one judgment of a known program; non-zero if any fails"
    )
    check.add_argument(
        "--judges",
        type=Path,
        help="judges TOML file (default: $TRIBUNAL_JUDGES_FILE, else what `up --local-llm` wrote)",
    )
    check.add_argument("--data-dir", type=Path)
    check.set_defaults(func=cmd_judges_check)

    worker = sub.add_parser("worker", help="run one worker process (as `tribunal up` does)")
    worker.add_argument("kind", choices=sorted(SERVICES) + sorted(FORMER_NAMES))
    worker.set_defaults(func=cmd_worker)

    gateway = sub.add_parser("gateway", help="run the HTTP gateway alone")
    gateway.add_argument("--host", default="127.0.0.1")
    gateway.add_argument("--port", type=int, default=8000)
    gateway.set_defaults(func=cmd_gateway)

    migrate = sub.add_parser("migrate", help="bring the database to the newest schema")
    migrate.add_argument("--data-dir", type=Path)
    migrate.set_defaults(func=cmd_migrate)

    keys = sub.add_parser("keys", help="API keys").add_subparsers(dest="keys_command", required=True)
    create = keys.add_parser("create", help="create a key and print it once")
    create.add_argument("--tenant", required=True)
    create.add_argument(
        "--scopes",
        nargs="+",
        default=["submit", "read"],
        metavar="SCOPE",
        help="submit, read, author (also sees hidden tests), metrics (scrapes /metrics), admin (every scope)",
    )
    create.add_argument("--name", default="")
    create.add_argument("--data-dir", type=Path)
    create.set_defaults(func=cmd_keys_create)

    def client_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--url", help="gateway URL (default $TRIBUNAL_URL or http://127.0.0.1:8000)")
        p.add_argument("--key", help="API key (default $TRIBUNAL_API_KEY or <data-dir>/admin.key)")
        p.add_argument("--data-dir", type=Path)

    problems = sub.add_parser("problems", help="problems").add_subparsers(dest="problems_command", required=True)
    add = problems.add_parser("add", help="create a problem from a JSON file (api.md's body)")
    add.add_argument("file")
    client_args(add)
    add.set_defaults(func=cmd_problems_add)

    from services.lib.datasets import FORMATS

    importing = sub.add_parser("import", help="import a dataset file (JSONL) through its format's loader")
    importing.add_argument("file", help="JSON Lines, one record a line (.gz too)")
    importing.add_argument("--format", required=True, choices=list(FORMATS), help="docs/datasets.md")
    importing.add_argument("--batch-size", type=int, default=None, help="attempts a batch (default the server's max)")
    client_args(importing)
    importing.set_defaults(func=cmd_import)

    submit = sub.add_parser("submit", help="submit a program for a problem")
    submit.add_argument("file")
    submit.add_argument("--problem", required=True)
    submit.add_argument("--language", choices=list(Language))
    submit.add_argument("--wait", action="store_true", help="poll until the verdict, with progress")
    client_args(submit)
    submit.set_defaults(func=cmd_submit)

    export = sub.add_parser("export", help="a job's or a problem's attempts × judgments as JSONL or CSV")
    export.add_argument("--job-id", help="the attempts this job created")
    export.add_argument("--problem-id", help="the attempts of this problem (with --job-id: of both)")
    export.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    export.add_argument("--output", type=Path, metavar="FILE", help="write to FILE (default stdout)")
    client_args(export)
    export.set_defaults(func=cmd_export)

    perturb = sub.add_parser("perturb", help="make verified mutants of accepted attempts, with progress")
    perturb.add_argument("attempt_ids", nargs="+", metavar="ATTEMPT_ID")
    perturb.add_argument("--operators", help="comma-separated operator names (GET /v1/perturbations/operators)")
    perturb.add_argument("--seed", type=int, default=0, help="chooses each operator's site reproducibly")
    perturb.add_argument("--all-sites", action="store_true", help="every site of every operator, not one")
    perturb.add_argument("--judge", action="store_true", help="judge the mutants and their seeds under blind")
    perturb.add_argument("--json", action="store_true", help="also print the job with every mutant as JSON")
    client_args(perturb)
    perturb.set_defaults(func=cmd_perturb)

    synthesize = sub.add_parser(
        "synthesize", help="synthesise an AXIOM benchmark of graded programs from accepted ones, with progress"
    )
    synthesize.add_argument("attempt_ids", nargs="*", metavar="ATTEMPT_ID", help="accepted attempts (5-point seeds)")
    synthesize.add_argument("--problems", help="comma-separated problem ids (each one's oldest accepted attempt)")
    synthesize.add_argument("--llm", required=True, help="the configured LLM judge(s) that generate, comma-separated")
    synthesize.add_argument("--targets", type=_int_list, help="comma-separated target scores in 0..4 (default 0..4)")
    synthesize.add_argument("--m", type=int, default=2, help="programs per target score per problem (paper: 2)")
    synthesize.add_argument("--select", type=int, default=90, help="representatives per target score (paper: 90)")
    synthesize.add_argument("--max-draws", type=int, default=4, help="draws per program before giving it up")
    synthesize.add_argument("--seed", type=int, default=0, help="makes every draw reproducible")
    synthesize.add_argument("--judge", action="store_true", help="judge the kept programs and seeds under blind")
    synthesize.add_argument("--export", metavar="FILE", help="write the JSONL export (AXIOM's records) to FILE")
    synthesize.add_argument("--json", action="store_true", help="also print the job with every program as JSON")
    client_args(synthesize)
    synthesize.set_defaults(func=cmd_synthesize)

    similarity = sub.add_parser(
        "similarity", help="score a JSONL of code pairs by differential fuzzing (LoCaL's table), with progress"
    )
    similarity.add_argument("file", help="JSONL: id, golden_code, generated_code, and problem_id or input_spec")
    similarity.add_argument("--n-inputs", type=int, default=None, help="N (default 2000 function, 1000 program)")
    similarity.add_argument("--repeats", type=int, default=5, help="R repetitions (LoCaL: 5)")
    similarity.add_argument("--time-budget", type=float, default=60.0, help="T seconds per repetition")
    similarity.add_argument("--seed", type=int, default=0, help="makes the inputs reproducible")
    similarity.add_argument("--protocol", choices=["pseudocode", "local_rq3"], default="local_rq3")
    similarity.add_argument("--crystal-k", type=int, default=50, help="CrystalBLEU's k (LoCaL: 50)")
    similarity.add_argument(
        "--timeout-rule",
        choices=["paper", "strict"],
        default="paper",
        help="paper: exclude a repetition either program ran out of time on; strict: only the reference's",
    )
    similarity.add_argument("--output", metavar="FILE", help="write every pair's row as JSONL to FILE")
    client_args(similarity)
    similarity.set_defaults(func=cmd_similarity)

    from services.launcher import study

    study.add_parser(sub, client_args, client_from)

    demo = sub.add_parser("demo", help="HumanEval end to end: canonical solutions and wrong variants, then a table")
    demo.add_argument("--data-dir", type=Path, default=None)
    demo.add_argument("--limit", type=int, default=None, help="only the first N problems")
    demo.add_argument("--keep", action="store_true", help="keep the data dir afterwards")
    demo.add_argument("--no-local-llm", action="store_true", help="without the local model server and judge `local`")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Belt and braces: whatever any process of the platform creates (the data dir, the database and its
    # -wal/-shm files, logs, keys, Redis files) is private unless it says otherwise. The executor sets the
    # modes of what jails must read (builds, the harness) explicitly.
    os.umask(0o077)
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
