"""The `tribunal` command: start the embedded stack, run one process kind, manage keys, submit work."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from services.kernel.contracts import FINAL_ATTEMPT_STATUSES, Language, Verdict
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
    from services.stack import EmbeddedStack

    stack = EmbeddedStack(
        _data_dir(args), host=args.host, port=args.port, workers=args.workers, judges_file=args.judges
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
        console.print(f"[bold green]Tribunal is up[/] at [bold]{stack.url}[/]  (API docs: {stack.url}/docs)")
        console.print(f"admin key: {stack.admin_key_path}" + ("  (new)" if stack.created_admin_key else ""))
        judges = ", ".join(f"{j.name} ({j.kind})" for j in stack.judges)
        console.print(f"judges: {judges}")
        console.print(f"redis: {stack.redis_url}   logs: {stack.data_dir / 'logs'}   Ctrl-C stops everything")
        while not stopping:
            for name, process in list(stack.processes.items()):
                if process.poll() is not None:
                    console.print(f"[red]{name} exited ({process.returncode}); restarting[/]")
                    if name == "gateway":
                        stack.start_gateway()
                    else:
                        stack.start_worker(name)
            time.sleep(0.5)
    finally:
        stack.stop()
        console.print("stopped")
    return 0


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
    from services.migrate import upgrade

    _data_dir(args)
    upgrade()
    console.print("database is at the newest revision")
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    from services.kernel.db import dispose_engine, init_engine, session_scope
    from services.kernel.keys import SCOPES, create_key
    from services.migrate import upgrade

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
                attempt = client.get(f"/v1/attempts/{accepted['attempt_id']}").json()
                status.update(f"{attempt['attempt_id']}: {attempt['status']}")
                if attempt["status"] in FINAL_ATTEMPT_STATUSES:
                    break
                time.sleep(0.05)
        print(json.dumps(attempt, indent=2))
        return 0 if attempt["verdict"] == Verdict.AC else 2


def cmd_demo(args: argparse.Namespace) -> int:
    from services.demo import run_demo

    return run_demo(data_dir=args.data_dir, limit=args.limit, keep=args.keep)


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
    up.set_defaults(func=cmd_up)

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

    submit = sub.add_parser("submit", help="submit a program for a problem")
    submit.add_argument("file")
    submit.add_argument("--problem", required=True)
    submit.add_argument("--language", choices=list(Language))
    submit.add_argument("--wait", action="store_true", help="poll until the verdict, with progress")
    client_args(submit)
    submit.set_defaults(func=cmd_submit)

    demo = sub.add_parser("demo", help="HumanEval end to end: canonical solutions and wrong variants, then a table")
    demo.add_argument("--data-dir", type=Path, default=None)
    demo.add_argument("--limit", type=int, default=None, help="only the first N problems")
    demo.add_argument("--keep", action="store_true", help="keep the data dir afterwards")
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
