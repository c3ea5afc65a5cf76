"""Benchmark of the metrics library: the trajectory-clustered judge-quality bootstrap (vectorised against
straightforward) and Algorithm 2 of the LoCaL paper, on synthetic data of the papers' sizes.

Usage: ``.venv/bin/python bench/bench_metrics.py [--resamples 2000] [--repeats 3] [--loop-repeats 1]``.
Prints a table and writes ``bench/results/metrics.json``. Targets (issue): bootstrap <= 10 s, Algorithm 2 <= 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metrics import compare  # noqa: E402
from metrics.similarity import select_region_thresholds  # noqa: E402

JUDGE_QUALITY_METRICS = ["roc_auc", "pr_auc", "log_loss", "brier", "ece", "mcc_oof"]
N_TRAJECTORIES, N_ATTEMPTS, MAX_ATTEMPTS = 184, 517, 30  # paper 001, Table II
JUDGES, CONDITIONS = ("openai", "deepseek", "gemini", "claude"), ("blind", "prefix12k", "nonblind")
N_PAIRS, N_CEMS = 3117, 4  # paper 002, 3.3.3 and Table 5


def judge_quality_data(seed: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Labels, trajectory of every attempt, and 12 judge x condition probability vectors on coarse scales."""
    rng = np.random.default_rng(seed)
    # Trajectory lengths: most trajectories have one attempt, a few very many (median 1, mean 2.81, max 30).
    sizes = np.ones(N_TRAJECTORIES, dtype=int)
    heavy = rng.pareto(1.0, N_TRAJECTORIES) + 1e-9
    while sizes.sum() < N_ATTEMPTS:
        pick = rng.choice(N_TRAJECTORIES, p=heavy / heavy.sum())
        if sizes[pick] < MAX_ATTEMPTS:
            sizes[pick] += 1
    trajectory = np.repeat(np.arange(N_TRAJECTORIES), sizes)
    turn = np.concatenate([np.arange(1, size + 1) for size in sizes])
    ability = rng.normal(0, 1, N_TRAJECTORIES)[trajectory]
    labels = (rng.random(N_ATTEMPTS) < 1 / (1 + np.exp(-(ability + 0.25 * turn - 1.6)))).astype(int)
    scores: dict[str, np.ndarray] = {}
    for j, judge in enumerate(JUDGES):
        levels = (8, 31, 10, 22)[j]  # distinct output values, as in VI-A7
        for c, condition in enumerate(CONDITIONS):
            signal = (0.8 + 0.3 * j + 0.2 * c) * (labels - 0.3) + rng.normal(0, 0.6, N_ATTEMPTS)
            probability = 1 / (1 + np.exp(-2.5 * signal))
            scores[f"{judge}/{condition}"] = np.round(probability * (levels - 1)) / (levels - 1)
    return labels, trajectory, scores


def similarity_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SurfaceSim, df_score and four metrics' scores for LoCaL-sized data (mutants: similar form, low df_score)."""
    rng = np.random.default_rng(seed)
    mutated = rng.random(N_PAIRS) < 2652 / 3117
    surface = np.clip(np.where(mutated, rng.normal(0.92, 0.05, N_PAIRS), rng.normal(0.64, 0.15, N_PAIRS)), 0, 1)
    df_score = np.clip(np.where(mutated, rng.beta(0.3, 2.5, N_PAIRS), rng.beta(8, 0.2, N_PAIRS)), 0, 1)
    bias = np.array([0.9, 0.8, 0.6, 0.3])[:, None]
    metric_scores = np.clip(bias * surface + (1 - bias) * df_score + rng.normal(0, 0.05, (N_CEMS, N_PAIRS)), 0, 1)
    return surface, df_score, metric_scores


def timed(function: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    """Median wall time over ``repeats`` runs, all times, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def max_interval_gap(first: dict[str, Any], second: dict[str, Any]) -> float:
    gaps = [
        abs(a - b)
        for name, intervals in first["ci"].items()
        for metric, interval in intervals.items()
        for a, b in zip(interval, second["ci"][name][metric], strict=True)
    ]
    return max(gaps, default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the vectorised bootstrap and Algorithm 2")
    parser.add_argument("--loop-repeats", type=int, default=1, help="repeats of the straightforward bootstrap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "metrics.json")
    args = parser.parse_args()

    labels, trajectory, scores = judge_quality_data(args.seed)

    def run(vectorised: bool) -> dict[str, Any]:
        return compare(
            JUDGE_QUALITY_METRICS,
            labels,
            scores,
            groups=trajectory,
            params={"folds": 10},
            bootstrap=args.resamples,
            cluster=trajectory,
            seed=args.seed,
            vectorised=vectorised,
        )

    fast_median, fast_times, fast = timed(lambda: run(True), args.repeats)
    slow_median, slow_times, slow = timed(lambda: run(False), args.loop_repeats)
    surface, df_score, metric_scores = similarity_data(args.seed)
    alg2_median, alg2_times, thresholds = timed(
        lambda: select_region_thresholds(surface, df_score, metric_scores, step=0.01), args.repeats
    )

    rows = [
        ("bootstrap, vectorised", fast_median, 10.0),
        ("bootstrap, straightforward (sklearn per resample)", slow_median, None),
        ("Algorithm 2, step 0.01", alg2_median, 30.0),
    ]
    python = sys.version.split()[0]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {python}")
    print(
        f"judge-quality set: {len(JUDGES)} judges x {len(CONDITIONS)} conditions x {N_ATTEMPTS} attempts, "
        f"{N_TRAJECTORIES} trajectory clusters, {args.resamples} resamples, metrics {', '.join(JUDGE_QUALITY_METRICS)}"
    )
    print(f"Algorithm 2: {N_PAIRS} pairs x {N_CEMS} metrics")
    print(f"{'what':52} {'median s':>10} {'target s':>9}")
    for what, seconds, target in rows:
        print(f"{what:52} {seconds:10.3f} {'' if target is None else f'{target:9.0f}'}")
    ratio = slow_median / fast_median
    gap = max_interval_gap(fast, slow)
    print(f"straightforward / vectorised: {ratio:.1f}x; largest difference between their interval bounds: {gap:.2e}")
    print(f"Algorithm 2 thresholds: {thresholds}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform()},
        "bootstrap": {
            "judges": len(JUDGES),
            "conditions": len(CONDITIONS),
            "attempts": N_ATTEMPTS,
            "clusters": N_TRAJECTORIES,
            "resamples": args.resamples,
            "metrics": JUDGE_QUALITY_METRICS,
            "vectorised_s": {"median": fast_median, "runs": fast_times},
            "straightforward_s": {"median": slow_median, "runs": slow_times},
            "ratio": ratio,
            "max_interval_bound_difference": gap,
            "target_s": 10.0,
        },
        "algorithm_2": {
            "pairs": N_PAIRS,
            "metrics": N_CEMS,
            "step": 0.01,
            "seconds": {"median": alg2_median, "runs": alg2_times},
            "thresholds": thresholds.__dict__,
            "target_s": 30.0,
        },
    }
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
