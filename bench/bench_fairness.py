"""Fairness: a victim tenant's latency while another tenant's backlog fills the executor's queue.

    .venv/bin/python bench/bench_fairness.py [--backlog 1000] [--samples 20]     (~2 min here)

The embedded stack (one process per worker kind, SQLite). Two tenants, each with its own key and its own copy of one
problem (`print 7`, one public stdio test). Every attempt is a trivial Python program with a new source, `judges: []`.

1. Baseline, idle stack: tenant B submits `--samples` attempts one after another (`POST /v1/attempts`, then
   `GET /v1/attempts/{id}?wait_s=60` until it ended): B's latency, POST -> ended, as its client sees it.
2. Contended: tenant A submits `--backlog` attempts (`POST /v1/attempts:batch`, up to 1,000 per POST); once A's
   attempts are running, B submits `--samples` attempts as in 1. For each, A's attempts still queued then (A's jobs'
   progress), and, at the end, whether A's backlog outlasted B's samples (else the measure is void and says so).
3. FIFO, computed: under oldest-first scheduling B's attempt starts after every attempt queued before it, so its
   latency would be A's backlog at B's POST / A's throughput (measured over the same window) + B's baseline median.
4. One unit's time, for the bound: the executor holds its max_jobs attempts at once, nearly all A's, so by Little's
   law each of A's spends max_jobs / A's throughput in the worker; fair scheduling promises B no more than about that.

Prints the medians and p95s and their ratios; writes bench/results/fairness.json. docs/performance.md ("Fairness")
has the figures of a run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.kernel.registry import SERVICES  # noqa: E402
from services.kernel.settings import get_settings  # noqa: E402
from services.launcher.stack import EmbeddedStack  # noqa: E402

console = Console()
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
BATCH = 1000  # the API's limit (TRIBUNAL_MAX_BATCH_SIZE)
PROBLEM = {
    "problem_id": "fair-print-7",
    "statement": "Print 7.",
    "tests": [{"input": "", "expected": "7\n", "public": True}],
    "references": [{"language": "python", "source_code": "print(7)\n"}],
}
ENDED = ("done", "failed", "cancelled")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p95": _percentile(values, 0.95), "n": len(values)}


def _tenant(stack: EmbeddedStack, admin: httpx.Client, name: str) -> httpx.Client:
    key = admin.post("/v1/keys", json={"tenant": name, "scopes": ["submit", "read"]})
    key.raise_for_status()
    client = httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key.json()['key']}"}, timeout=120)
    client.post("/v1/problems", json=PROBLEM).raise_for_status()
    return client


def _one(client: httpx.Client, tag: str) -> tuple[float, float]:
    """Submit one trivial attempt and wait for it to end: seconds from the POST to the answer saying it ended, and
    from its row's creation to its end (the stack's own timestamps: the part spent queued and executed)."""
    body = {"problem_id": PROBLEM["problem_id"], "language": "python", "source_code": f"print(7)  # {tag}\n"}
    started = time.perf_counter()
    response = client.post("/v1/attempts", json={**body, "judges": []})
    response.raise_for_status()
    attempt_id = response.json()["attempt_id"]
    while True:
        view = client.get(f"/v1/attempts/{attempt_id}", params={"wait_s": 60}).json()
        if view["status"] in ENDED:
            if view["status"] != "done" or view.get("verdict") != "AC":
                raise RuntimeError(f"victim attempt {attempt_id} ended {view['status']} {view.get('verdict')}")
            inside = datetime.fromisoformat(view["finished_at"]) - datetime.fromisoformat(view["created_at"])
            return time.perf_counter() - started, inside.total_seconds()


def _backlog(client: httpx.Client, count: int, run: str) -> list[str]:
    jobs = []
    for start in range(0, count, BATCH):
        attempts = [
            {
                "attempt_uid": f"{run}/{index}",
                "problem_id": PROBLEM["problem_id"],
                "language": "python",
                "source_code": f"print(7)  # {run} {index}\n",
                "judges": [],
            }
            for index in range(start, min(count, start + BATCH))
        ]
        response = client.post("/v1/attempts:batch", json={"attempts": attempts})
        response.raise_for_status()
        jobs.append(response.json()["job_id"])
    return jobs


def _done(client: httpx.Client, jobs: list[str]) -> tuple[int, int]:
    """(attempts of these jobs ended, their total)."""
    done = total = 0
    for job_id in jobs:
        progress = client.get(f"/v1/jobs/{job_id}").json()["progress"]
        done, total = done + int(progress["done"]), total + int(progress["total"])
    return done, total


def run(backlog: int, samples: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tribunal-bench-fairness-"))
    try:
        with EmbeddedStack(tmp / "stack") as stack:
            admin_key = stack.admin_key_path.read_text().strip()
            with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {admin_key}"}) as admin:
                a, b = _tenant(stack, admin, "tenant-a"), _tenant(stack, admin, "tenant-b")
            run_id = uuid.uuid4().hex[:8]
            for index in range(3):  # warm-up: jails, imports, the gateway's caches
                _one(b, f"{run_id} warm {index}")
            console.print(f"baseline: tenant B alone, {samples} attempts one after another")
            idle_runs = [_one(b, f"{run_id} idle {index}") for index in range(samples)]

            console.print(f"contended: tenant A queues {backlog} attempts, then B submits {samples}")
            posted = time.perf_counter()
            jobs = _backlog(a, backlog, f"{run_id}-a")
            post_s = time.perf_counter() - posted
            while _done(a, jobs)[0] < 1:
                time.sleep(0.1)
            window_start, a_done_start = time.perf_counter(), _done(a, jobs)[0]
            contended_runs, a_waiting = [], []
            for index in range(samples):
                a_done, a_total = _done(a, jobs)
                a_waiting.append(a_total - a_done)
                contended_runs.append(_one(b, f"{run_id} busy {index}"))
            window_s = time.perf_counter() - window_start
            a_done_end, a_total = _done(a, jobs)
            load1 = os.getloadavg()[0]
            for client in (a, b):
                client.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    throughput = (a_done_end - a_done_start) / window_s
    idle, contended = [r[0] for r in idle_runs], [r[0] for r in contended_runs]
    idle_p50 = statistics.median(idle)
    fifo = [waiting / throughput + idle_p50 for waiting in a_waiting] if throughput > 0 else []
    return {
        "backlog": backlog,
        "samples": samples,
        "post_backlog_s": post_s,
        "idle_s": idle,
        "contended_s": contended,
        "a_waiting_at_each_post": a_waiting,
        "a_still_waiting_at_end": a_total - a_done_end,
        "a_throughput_per_s": throughput,
        # Little's law: the executor holds max_jobs attempts at once, nearly all A's, so each spends this long in it.
        "executor_max_jobs": SERVICES["executor"].max_jobs(get_settings()),
        "a_unit_in_worker_s": SERVICES["executor"].max_jobs(get_settings()) / throughput if throughput > 0 else None,
        "fifo_estimate_s": fifo,
        "idle": _summary(idle),
        "contended": _summary(contended),
        "idle_in_stack": _summary([r[1] for r in idle_runs]),
        "contended_in_stack": _summary([r[1] for r in contended_runs]),
        "fifo": _summary(fifo) if fifo else None,
        "load1_at_end": load1,
    }


def report(result: dict[str, Any]) -> None:
    table = Table(title=f"Tenant B's latency, POST -> ended, with tenant A's backlog of {result['backlog']}")
    for column in ("", "p50 s", "p95 s", "vs idle (p50)"):
        table.add_column(column)
    idle = result["idle"]
    rows = [("B alone, idle stack", idle), ("B behind A's backlog (fair)", result["contended"])]
    if result["fifo"] is not None:
        rows.append(("B behind A's backlog (FIFO, computed)", result["fifo"]))
    for name, figures in rows:
        table.add_row(name, f"{figures['p50']:.3f}", f"{figures['p95']:.3f}", f"{figures['p50'] / idle['p50']:.1f}x")
    console.print(table)
    inside_idle, inside_busy = result["idle_in_stack"], result["contended_in_stack"]
    console.print(
        f"created -> finished (the stack's timestamps): idle p50 {inside_idle['p50']:.3f} s, "
        f"p95 {inside_idle['p95']:.3f} s; behind A p50 {inside_busy['p50']:.3f} s, p95 {inside_busy['p95']:.3f} s"
    )
    waiting = result["a_waiting_at_each_post"]
    console.print(
        f"A's attempts still queued or running at B's POSTs: median {statistics.median(waiting):.0f} "
        f"(min {min(waiting)}); at the end {result['a_still_waiting_at_end']}; A's throughput meanwhile "
        f"{result['a_throughput_per_s']:.1f} attempts/s; load average at the end {result['load1_at_end']:.1f}"
    )
    if result["a_unit_in_worker_s"] is not None:
        console.print(
            f"one of A's attempts in the executor (its {result['executor_max_jobs']} jobs / A's throughput): "
            f"{result['a_unit_in_worker_s']:.2f} s"
        )
    if result["fifo"] is not None:
        console.print(f"FIFO / fair, p50: {result['fifo']['p50'] / result['contended']['p50']:.0f}x")
    if result["a_still_waiting_at_end"] <= 0:
        console.print("[red]A's backlog drained before B's last sample: the contended figures are not all behind it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog", type=int, default=1000, help="tenant A's attempts (default 1000)")
    parser.add_argument("--samples", type=int, default=20, help="tenant B's attempts in each phase (default 20)")
    args = parser.parse_args()
    result = run(args.backlog, args.samples)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fairness.json").write_text(json.dumps(result, indent=2))
    report(result)


if __name__ == "__main__":
    main()
