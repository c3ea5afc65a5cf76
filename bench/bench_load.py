"""Load: 10,000 attempts through the batch API on the embedded stack, then the five offline judges on a slice.

    .venv/bin/python bench/bench_load.py [--attempts 10000] [--judged 500] [--quick]

1. Execution load: N trivial Python programs (`print(7)`, each with its own comment so every source is new) against
   one small problem, `POST /v1/attempts:batch` in batches of up to 1,000 (the API's limit), sent back to back,
   `"judges": []`. The clock runs from the first POST until every batch's job is terminal.
2. Judged slice: M more attempts with the five offline judges (sample_tests, chrf, codebleu, edit_similarity, lint).
3. Accounting, through the API only: `GET /v1/attempts?problem_id=` lists every attempt once; each must be
   terminal, listed once, be one the batches returned, and (judged) hold exactly one `ok` judgment per judge. The
   workers' own counters (executions, judgments, task retries and failures) and the gateway's 5xx count are
   scraped from their /metrics as a cross-check.
4. Memory: the RSS of every stack process (gateway, each worker, Redis; with and without its children, e.g. the
   executor's jails) sampled every 0.5 s through all phases, with the 1-minute load average (the machine is
   shared). Per process: start, end, max, and the least-squares slope during the load phase.

`--quick` is a smoke run (1,000 / 100; results in load-quick.json and bench/results/load_memory-quick.png). Prints
tables, writes bench/results/load.json and docs/img/load_memory.png; `--replot bench/results/load.json` redraws the
plot and the tables from a saved run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.kernel.registry import SERVICES  # noqa: E402
from services.launcher.stack import EmbeddedStack  # noqa: E402

console = Console()
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PLOT = ROOT / "docs" / "img" / "load_memory.png"
BATCH = 1000  # the API's limit (TRIBUNAL_MAX_BATCH_SIZE)
OFFLINE_JUDGES = ["sample_tests", "chrf", "codebleu", "edit_similarity", "lint"]
PROBLEM = {
    "problem_id": "load-print-7",
    "statement": "Print 7.",
    "tests": [{"input": "", "expected": "7\n", "public": True}],
    "references": [{"language": "python", "source_code": "print(7)\n"}],
}
TERMINAL_JOB = ("succeeded", "failed", "cancelled")
TERMINAL_ATTEMPT = ("done", "failed")
MB = 1024 * 1024


class MemorySampler(threading.Thread):
    """RSS of every stack process every `interval_s`: the process alone, and with its descendants."""

    def __init__(self, stack: EmbeddedStack, interval_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.interval_s = interval_s
        pids = {name: process.pid for name, process in stack.processes.items()}
        if stack.redis is not None and stack.redis.process is not None:
            pids["redis"] = stack.redis.process.pid
        # One worker per kind here: label by role ("executor"), not by process name ("executor-0").
        self.roles = {name.removesuffix("-0"): psutil.Process(pid) for name, pid in pids.items()}
        self.samples: list[dict[str, Any]] = []
        self.phases: list[dict[str, Any]] = []
        self.started = time.monotonic()
        self._halt = threading.Event()

    def now(self) -> float:
        return time.monotonic() - self.started

    def mark(self, phase: str) -> None:
        if self.phases:
            self.phases[-1]["end_s"] = self.now()
        self.phases.append({"phase": phase, "start_s": self.now(), "end_s": None})

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.interval_s)

    def sample(self) -> None:
        own: dict[str, float] = {}
        tree: dict[str, float] = {}
        for role, process in self.roles.items():
            try:
                rss = process.memory_info().rss
                children = process.children(recursive=True)
            except psutil.NoSuchProcess:
                continue
            total = rss
            for child in children:  # jails come and go between the listing and the read
                try:
                    total += child.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
            own[role], tree[role] = rss / MB, total / MB
        self.samples.append({"t_s": self.now(), "load1": os.getloadavg()[0], "rss_mb": own, "tree_rss_mb": tree})

    def stop(self) -> None:
        if self.phases:
            self.phases[-1]["end_s"] = self.now()
        self._halt.set()
        self.join()
        self.sample()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _slope_mb_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB), in MB per minute."""
    if len(points) < 2:
        return 0.0
    mean_t = statistics.fmean(t for t, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    return 60 * sum((t - mean_t) * (y - mean_y) for t, y in points) / spread if spread else 0.0


def _scrape(url: str, headers: dict[str, str] | None = None) -> dict[str, float]:
    """Prometheus text: `name{labels}` -> value (samples only, no comments)."""
    text = httpx.get(url, headers=headers, timeout=10).text
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def _total(metrics: dict[str, float], name: str, label: str = "") -> float:
    return sum(v for k, v in metrics.items() if k.split("{")[0] == name and label in k)


def _submit(
    client: httpx.Client, run: str, count: int, judges: list[str], statuses: Counter[int]
) -> tuple[list[str], list[str], list[float], list[float]]:
    """Send `count` attempts in batches of up to BATCH; returns the job ids, attempt ids, each POST's latency
    and each POST's latency divided by its batch's size (the submit cost per attempt)."""
    jobs: list[str] = []
    attempt_ids: list[str] = []
    latencies: list[float] = []
    per_attempt: list[float] = []
    for start in range(0, count, BATCH):
        body = {
            "attempts": [
                {
                    "attempt_uid": f"{run}/{index}",
                    "problem_id": PROBLEM["problem_id"],
                    "language": "python",
                    "source_code": f"print(7)  # {run} {index}\n",
                    "judges": judges,
                }
                for index in range(start, min(count, start + BATCH))
            ]
        }
        started = time.perf_counter()
        response = client.post("/v1/attempts:batch", json=body)
        latencies.append(time.perf_counter() - started)
        per_attempt.append(latencies[-1] / len(body["attempts"]))
        statuses[response.status_code] += 1
        response.raise_for_status()
        accepted = response.json()
        jobs.append(accepted["job_id"])
        attempt_ids += accepted["attempt_ids"]
    return jobs, attempt_ids, latencies, per_attempt


def _wait_jobs(client: httpx.Client, jobs: list[str], timeout_s: float) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    finished: dict[str, dict[str, Any]] = {}
    while len(finished) < len(jobs):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(jobs) - len(finished)} jobs not terminal after {timeout_s} s")
        for job_id in jobs:
            if job_id not in finished:
                job = client.get(f"/v1/jobs/{job_id}").json()
                if job["status"] in TERMINAL_JOB:
                    finished[job_id] = job
        time.sleep(0.25)
    return finished


def _list_attempts(client: httpx.Client) -> list[dict[str, Any]]:
    """Every attempt of the problem, through the paginated listing."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"problem_id": PROBLEM["problem_id"], "limit": 500}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/attempts", params=params)
        page.raise_for_status()
        body = page.json()
        items += body["items"]
        cursor = body.get("next_cursor")
        if not cursor:
            return items


def _seconds(start: str, end: str | None) -> float | None:
    from datetime import datetime

    if end is None:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _account(
    items: list[dict[str, Any]], submitted: list[str], judged: set[str], jobs: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Lost, duplicated, not terminal, unexpected; judgments per judged attempt; job progress."""
    listed = Counter(item["attempt_id"] for item in items)
    expected = set(submitted)
    bad_judgments = []
    for item in items:
        if item["attempt_id"] not in judged:
            if item.get("judgments"):
                bad_judgments.append(item["attempt_id"])
            continue
        names = Counter(j["judge"] for j in item.get("judgments") or [])
        ok = all(j.get("status") == "ok" for j in item.get("judgments") or [])
        if names != Counter(OFFLINE_JUDGES) or not ok:
            bad_judgments.append(item["attempt_id"])
    progress = [job["progress"] for job in jobs.values()]
    return {
        "submitted": len(submitted),
        "submitted_unique": len(expected),
        "listed": len(items),
        "listed_unique": len(listed),
        "duplicated_in_listing": sorted(a for a, n in listed.items() if n > 1),
        "lost": sorted(expected - set(listed)),
        "unexpected": sorted(set(listed) - expected),
        "not_terminal": sorted(i["attempt_id"] for i in items if i["status"] not in TERMINAL_ATTEMPT),
        "statuses": dict(Counter(i["status"] for i in items)),
        "verdicts": dict(Counter(str(i.get("verdict")) for i in items)),
        "judged_attempts": len(judged),
        "judgments_not_one_ok_per_judge": bad_judgments,
        "jobs": dict(Counter(job["status"] for job in jobs.values())),
        "job_progress_mismatch": [p for p in progress if p.get("done") != p.get("total")],
    }


def _plot(samples: list[dict[str, Any]], phases: list[dict[str, Any]], path: Path, title: str) -> None:
    """RSS per process over time, each phase shaded and named; the executor and judge with their jails dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(10, 5.5))
    times = [s["t_s"] for s in samples]
    roles = list(dict.fromkeys(role for s in samples for role in s["rss_mb"]))
    for role in roles:
        axis.plot(times, [s["rss_mb"].get(role, float("nan")) for s in samples], label=role, linewidth=1.2)
    for role, colour in (("executor", "grey"), ("judge", "peru")):
        tree = [s["tree_rss_mb"].get(role, float("nan")) for s in samples]
        axis.plot(times, tree, "--", color=colour, linewidth=0.7, label=f"{role} + its jails")
    colours = {"idle": "#eeeeee", "load": "#dbe9f6", "judged": "#fde2c8", "after": "#eeeeee"}
    axis.set_ylim(bottom=0)
    top = axis.get_ylim()[1]
    for index, phase in enumerate(phases):
        end = phase["end_s"] if phase["end_s"] is not None else times[-1]
        axis.axvspan(phase["start_s"], end, color=colours.get(phase["phase"], "#f4f4f4"), zorder=0)
        # Staggered, so the short idle phases' names do not sit on the next one's.
        axis.text(phase["start_s"], top * (0.99 - 0.04 * (index % 2)), f" {phase['phase']}", va="top", fontsize=9)
    axis.set_xlabel("seconds since the stack was ready")
    axis.set_ylabel("RSS (MB)")
    axis.set_title(title, fontsize=10)
    axis.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _plot_title(result: dict[str, Any]) -> str:
    return (
        f"{result['attempts']:,} attempts (judges: []), then {result['judged']['attempts']} with the five offline "
        f"judges; {result['cores']} cores, mean load average {result['load_average_mean_during']:.1f}"
    )


def _memory_summary(samples: list[dict[str, Any]], phases: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per process: start, end and max RSS, and in the load and judged phases the first and last sample and the
    least-squares slope, over the whole phase and over its second half (past warm-up: imports, caches, pools)."""
    roles = list(dict.fromkeys(role for s in samples for role in s["rss_mb"]))
    summary = {}
    for role in roles:
        series = [(s["t_s"], s["rss_mb"][role]) for s in samples if role in s["rss_mb"]]
        trees = [s["tree_rss_mb"][role] for s in samples if role in s["tree_rss_mb"]]
        figures = {
            "start_mb": series[0][1],
            "end_mb": series[-1][1],
            "max_mb": max(y for _, y in series),
            "with_children_max_mb": max(trees),
            "with_children_end_mb": trees[-1],
        }
        for phase in phases:
            if phase["phase"] not in ("load", "judged"):
                continue
            inside = [(t, y) for t, y in series if phase["start_s"] <= t <= phase["end_s"]]
            if not inside:
                continue
            name = phase["phase"]
            figures[f"{name}_start_mb"] = inside[0][1]
            figures[f"{name}_end_mb"] = inside[-1][1]
            figures[f"{name}_slope_mb_per_min"] = _slope_mb_per_min(inside)
            figures[f"{name}_second_half_slope_mb_per_min"] = _slope_mb_per_min(inside[len(inside) // 2 :])
        summary[role] = figures
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=10_000)
    parser.add_argument("--judged", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1,000 attempts, 100 judged")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for each phase")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--replot",
        type=Path,
        help="recompute the memory figures of a saved run (load.json), redraw its plot and tables",
    )
    args = parser.parse_args()
    if args.replot:
        saved = json.loads(args.replot.read_text())
        saved["memory"] = _memory_summary(saved["samples"], saved["phases"])  # as this version computes it
        args.replot.write_text(json.dumps(saved, indent=1) + "\n")
        _plot(
            saved["samples"],
            saved["phases"],
            RESULTS / "load_memory-quick.png" if "--quick" in saved["command"] else PLOT,
            _plot_title(saved),
        )
        _print(saved)
        return
    if args.quick:
        args.attempts, args.judged = 1000, 100
    statuses: Counter[int] = Counter()
    tmp = Path(tempfile.mkdtemp(prefix="tribunal-bench-load-"))
    load_before = os.getloadavg()
    try:
        with EmbeddedStack(tmp / "stack") as stack:
            key = stack.admin_key_path.read_text().strip()
            headers = {"Authorization": f"Bearer {key}"}
            sampler = MemorySampler(stack)
            sampler.mark("idle")
            sampler.start()
            with httpx.Client(base_url=stack.url, headers=headers, timeout=120) as client:
                client.post("/v1/problems", json=PROBLEM).raise_for_status()
                time.sleep(5)  # an idle baseline for the memory plot

                sampler.mark("load")
                started = time.perf_counter()
                load_jobs, load_ids, batch_s, per_attempt_s = _submit(client, "load", args.attempts, [], statuses)
                submitted_s = time.perf_counter() - started
                finished = _wait_jobs(client, load_jobs, args.timeout)
                load_s = time.perf_counter() - started
                console.print(f"load: {args.attempts} attempts terminal in {load_s:.1f} s")

                sampler.mark("judged")
                started = time.perf_counter()
                judged_jobs, judged_ids, judged_batch_s, _ = _submit(
                    client, "judged", args.judged, OFFLINE_JUDGES, statuses
                )
                finished |= _wait_jobs(client, judged_jobs, args.timeout)
                judged_s = time.perf_counter() - started
                console.print(f"judged: {args.judged} attempts terminal in {judged_s:.1f} s")

                sampler.mark("after")
                time.sleep(5)
                items = _list_attempts(client)
                account = _account(items, load_ids + judged_ids, set(judged_ids), finished)
                load_items = [i for i in items if i["attempt_id"] in set(load_ids)]
                queue_to_end = [
                    s for i in load_items if (s := _seconds(i["created_at"], i.get("finished_at"))) is not None
                ]
            sampler.stop()
            gateway = _scrape(f"{stack.url}/metrics", headers)
            workers = {
                name: _scrape(f"http://127.0.0.1:{port}/metrics")
                for name, port in zip(SERVICES, stack.worker_telemetry_ports, strict=False)
            }
            logs = stack.data_dir / "logs"
            tracebacks = {
                path.stem: n
                for path in logs.glob("*.log")
                if (n := path.read_text(errors="replace").count("Traceback"))
            }
    except BaseException:
        console.print(f"[red]failed; the stack's data and logs are kept in {tmp}[/red]")
        raise
    shutil.rmtree(tmp, ignore_errors=True)

    server_5xx = sum(v for k, v in gateway.items() if re.match(r'tribunal_http_requests_total\{.*status="5', k))
    counters = {
        "executions": _total(workers["executor"], "tribunal_executions_total"),
        "judgments_ok": _total(workers["judge"], "tribunal_judgments_total", 'status="ok"'),
        "judgments_failed": _total(workers["judge"], "tribunal_judgments_total", 'status="failed"'),
        "task_retries": sum(_total(m, "tribunal_task_retries_total") for m in workers.values()),
        "task_failures": sum(_total(m, "tribunal_task_failures_total") for m in workers.values()),
        "reconciled": sum(_total(m, "tribunal_reconciled_total") for m in workers.values()),
        "gateway_5xx": server_5xx,
    }
    per_attempt = [s * 1000 for s in per_attempt_s]
    memory = _memory_summary(sampler.samples, sampler.phases)
    result = {
        "command": "bench/bench_load.py"
        + (" --quick" if args.quick else f" --attempts {args.attempts} --judged {args.judged}"),
        "cores": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "load_average_mean_during": statistics.fmean(s["load1"] for s in sampler.samples),
        "attempts": args.attempts,
        "batch_size": BATCH,
        "batches": len(batch_s),
        "load": {
            "submit_all_s": submitted_s,
            "all_terminal_s": load_s,
            "attempts_per_s": args.attempts / load_s,
            "batch_post_p50_ms": statistics.median(batch_s) * 1000,
            "batch_post_p99_ms": _percentile(batch_s, 0.99) * 1000,
            "batch_post_max_ms": max(batch_s) * 1000,
            "batch_post_ms": [s * 1000 for s in batch_s],
            "per_attempt_submit_p50_ms": statistics.median(per_attempt),
            "per_attempt_submit_p99_ms": _percentile(per_attempt, 0.99),
            "queued_to_terminal_p50_s": statistics.median(queue_to_end) if queue_to_end else None,
            "queued_to_terminal_p99_s": _percentile(queue_to_end, 0.99) if queue_to_end else None,
        },
        "judged": {
            "attempts": args.judged,
            "judges": OFFLINE_JUDGES,
            "all_terminal_s": judged_s,
            "attempts_per_s": args.judged / judged_s,
            "batch_post_ms": [s * 1000 for s in judged_batch_s],
        },
        "accounting": account,
        "http_statuses": dict(statuses),
        "counters": counters,
        "tracebacks_in_logs": tracebacks,
        "memory": memory,
        "phases": sampler.phases,
        "samples": sampler.samples,
    }
    RESULTS.mkdir(exist_ok=True)
    name = "load-quick.json" if args.quick else "load.json"
    (RESULTS / name).write_text(json.dumps(result, indent=1) + "\n")
    if not args.no_plot:
        _plot(
            sampler.samples,
            sampler.phases,
            RESULTS / "load_memory-quick.png" if args.quick else PLOT,
            _plot_title(result),
        )
    _print(result)


def _print(result: dict[str, Any]) -> None:
    load, judged, account = result["load"], result["judged"], result["accounting"]
    table = Table(
        title=f"Load through the batch API ({result['cores']} cores, mean load average "
        f"{result['load_average_mean_during']:.2f})"
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row(f"{result['attempts']:,} attempts, judges: [], to all terminal", f"{load['all_terminal_s']:.1f} s")
    table.add_row("throughput", f"{load['attempts_per_s']:.1f} attempts/s")
    table.add_row(
        f"POST of a batch of {result['batch_size']}, p50 / p99",
        f"{load['batch_post_p50_ms']:.0f} / {load['batch_post_p99_ms']:.0f} ms",
    )
    table.add_row(
        "submit per attempt (POST / batch size), p50 / p99",
        f"{load['per_attempt_submit_p50_ms']:.2f} / {load['per_attempt_submit_p99_ms']:.2f} ms",
    )
    if load["queued_to_terminal_p50_s"] is not None:
        table.add_row(
            "created → finished per attempt, p50 / p99",
            f"{load['queued_to_terminal_p50_s']:.1f} / {load['queued_to_terminal_p99_s']:.1f} s",
        )
    table.add_row(
        f"{judged['attempts']} attempts × 5 offline judges, to all terminal",
        f"{judged['all_terminal_s']:.1f} s ({judged['attempts_per_s']:.1f}/s)",
    )
    table.add_row("listed / submitted", f"{account['listed']} / {account['submitted']}")
    for label, key in (
        ("lost", "lost"),
        ("duplicated", "duplicated_in_listing"),
        ("not terminal", "not_terminal"),
        ("unexpected", "unexpected"),
        ("judged without one ok row per judge", "judgments_not_one_ok_per_judge"),
        ("jobs whose progress ≠ total", "job_progress_mismatch"),
    ):
        table.add_row(label, str(len(account[key])))
    table.add_row("HTTP statuses", str(result["http_statuses"]))
    table.add_row("counters (workers' /metrics)", str({k: int(v) for k, v in result["counters"].items()}))
    console.print(table)
    memory = Table(title="RSS per process (MB); slopes by least squares (MB/min), whole phase / its second half")
    for column in ("process", "start", "end", "max", "load", "load slope", "judged", "judged slope", "+children max"):
        memory.add_column(column, justify="right")
    for role, m in result["memory"].items():
        memory.add_row(
            role,
            f"{m['start_mb']:.0f}",
            f"{m['end_mb']:.0f}",
            f"{m['max_mb']:.0f}",
            f"{m['load_start_mb']:.0f}→{m['load_end_mb']:.0f}",
            f"{m['load_slope_mb_per_min']:+.2f} / {m['load_second_half_slope_mb_per_min']:+.2f}",
            f"{m['judged_start_mb']:.0f}→{m['judged_end_mb']:.0f}",
            f"{m['judged_slope_mb_per_min']:+.2f} / {m['judged_second_half_slope_mb_per_min']:+.2f}",
            f"{m['with_children_max_mb']:.0f}",
        )
    console.print(memory)


if __name__ == "__main__":
    main()
