"""Algorithm 2's protocols: the RQ3 preset on a dataset worked by hand, both protocols against a plain brute-force
loop (ties included), and ``local_thresholds`` through ``metrics.compute``."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from metrics import MetricInputError, UndefinedMetricError, compute
from metrics.similarity import (
    LOCAL_RQ3,
    PROTOCOLS,
    PSEUDOCODE,
    RegionThresholds,
    SearchProtocol,
    region_masks,
    select_region_thresholds,
    threshold_grid,
)

# --- a dataset worked by hand ----------------------------------------------------------------------------------------
#
# (x = SurfaceSim, y = df_score, m = one metric's score; error |m - y|)
#   50 DFS pairs     (0.65, 0.95, 0.25): error 0.70
#   50 SFD pairs     (0.95, 0.05, 0.95): error 0.90
#   150 Control      (0.50, 0.50, 0.50): error 0
#   1 pair P         (0.30, 0.87, 0.12): error 0.75
#
# RQ3 (grid 0.10..0.90 step 0.05, x_lo, y_lo <= 0.65, DFS >= 50, SFD >= 50, Control >= 150): with P in Control
# (y_hi > 0.87) the objective is (0.70 + 0.90) / 2 - 0.75 / 151 = 0.79503; with P in DFS (y_hi <= 0.85) it is
# (35.75 / 51 + 0.90) / 2 - 0 = 0.80049. Both round to 0.80, and no tuple does better (a corner of >= 50 pairs has
# at most the mean error 35.75 / 51). Among the tuples at 0.80 the rule prefers the larger y_hi: 0.90 (P back in
# Control), then the smaller y_lo: 0.10 (holds the SFD pairs, y = 0.05), then the larger x_hi: 0.90 (x = 0.95),
# then the smaller x_lo that still holds the DFS pairs (x = 0.65): 0.65. Those are LoCaL's printed thresholds.
#
# The pseudo-code keeps the raw maximum, 0.80049 (P in DFS), at the first tuple of its loop order: x1 = 0.65 (the
# smallest holding the DFS pairs), x2 = 0.66, y1 = 0.05 (the smallest holding the SFD pairs), y2 = 0.51 (the
# smallest keeping the Control pairs, y = 0.5, out of DFS).

P_ERROR = 0.75


def worked_dataset() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = [(0.65, 0.95, 0.25)] * 50 + [(0.95, 0.05, 0.95)] * 50 + [(0.5, 0.5, 0.5)] * 150 + [(0.30, 0.87, 0.12)]
    x, y, m = (np.array(column) for column in zip(*rows, strict=True))
    return x, y, m


def test_rq3_preset_gives_the_papers_thresholds_on_the_worked_dataset() -> None:
    x, y, m = worked_dataset()
    found = select_region_thresholds(x, y, [m], protocol="local_rq3")
    assert (found.x_lo, found.x_hi, found.y_lo, found.y_hi) == (0.65, 0.90, 0.10, 0.90)
    assert found.objective == pytest.approx((0.70 + 0.90) / 2 - P_ERROR / 151)
    assert (found.n_dfs, found.n_sfd, found.n_control) == (50, 50, 151)
    masks = region_masks(x, y, found)
    assert [int(masks[name].sum()) for name in ("dfs", "sfd", "control")] == [50, 50, 151]
    assert found.to_json() == {
        "x_lo": 0.65,
        "x_hi": 0.9,
        "y_lo": 0.1,
        "y_hi": 0.9,
        "objective": found.objective,
        "n_dfs": 50,
        "n_sfd": 50,
        "n_control": 151,
    }
    # Without rounding, the raw maximum (P in DFS) would win: the tie rule is what picks the paper's tuple.
    raw = select_region_thresholds(x, y, [m], protocol=replace(LOCAL_RQ3, tie_rule="first"))
    assert raw.y_hi <= 0.85 and raw.objective == pytest.approx((35.75 / 51 + 0.90) / 2)


def test_pseudocode_on_the_worked_dataset_keeps_the_first_raw_maximum() -> None:
    x, y, m = worked_dataset()
    found = select_region_thresholds(x, y, [m])
    assert found == RegionThresholds(0.65, 0.66, 0.05, 0.51, objective=found.objective)  # sizes not compared
    assert found.objective == pytest.approx((35.75 / 51 + 0.90) / 2)
    assert (found.n_dfs, found.n_sfd, found.n_control) == (51, 50, 150)
    assert select_region_thresholds(x, y, [m], protocol="pseudocode") == found
    assert select_region_thresholds(x, y, [m], protocol=PSEUDOCODE, step=0.01) == found


def test_minimum_region_sizes_bind() -> None:
    x, y, m = worked_dataset()
    # 49 DFS-corner pairs: DFS must take P or Control pairs to reach 50.
    keep = np.ones(x.size, dtype=bool)
    keep[0] = False
    found = select_region_thresholds(x[keep], y[keep], [m[keep]], protocol="local_rq3")
    assert found.n_dfs is not None and found.n_control is not None
    assert found.n_dfs >= 50 and found.n_sfd == 50 and found.n_control >= 150
    # Too few pairs for the preset at all.
    with pytest.raises(UndefinedMetricError, match="local_rq3.*DFS >= 50"):
        select_region_thresholds(x[:120], y[:120], [m[:120]], protocol="local_rq3")


def test_protocols_by_name_and_checks() -> None:
    assert set(PROTOCOLS) == {"pseudocode", "local_rq3"}
    assert PSEUDOCODE.step == 0.01 and (PSEUDOCODE.low, PSEUDOCODE.high) == (0.0, 1.0)
    assert (LOCAL_RQ3.step, LOCAL_RQ3.low, LOCAL_RQ3.high, LOCAL_RQ3.max_lower, LOCAL_RQ3.max_upper) == (
        0.05,
        0.10,
        0.90,
        0.65,
        0.90,
    )
    assert (LOCAL_RQ3.min_dfs, LOCAL_RQ3.min_sfd, LOCAL_RQ3.min_control) == (50, 50, 150)
    assert threshold_grid(0.05, 0.10, 0.90).tolist() == [round(0.10 + 0.05 * i, 2) for i in range(17)]
    with pytest.raises(MetricInputError, match="protocol"):
        select_region_thresholds([0.5], [0.5], [[0.5]], protocol="rq3")
    with pytest.raises(MetricInputError, match="tie_rule"):
        SearchProtocol(name="x", step=0.1, tie_rule="last")
    with pytest.raises(MetricInputError, match="min_control"):
        SearchProtocol(name="x", step=0.1, min_control=0)
    with pytest.raises(MetricInputError, match="low"):
        SearchProtocol(name="x", step=0.1, low=0.9, high=0.1)


# --- against a brute-force loop ------------------------------------------------------------------------------------


def brute_force(
    x: np.ndarray, y: np.ndarray, scores: np.ndarray, protocol: SearchProtocol, error: str = "absolute"
) -> tuple[tuple[float, float, float, float], float, tuple[int, int, int]] | None:
    """Every tuple of the protocol's grid, one at a time, per-metric errors as the pseudo-code writes them."""
    grid = [float(g) for g in threshold_grid(protocol.step, protocol.low, protocol.high)]
    best_key: tuple[float, ...] | None = None
    best = None
    for x1, x2, y1, y2 in itertools.product(grid, repeat=4):
        if not (x1 < x2 and y1 < y2):
            continue
        if x1 > protocol.max_lower or y1 > protocol.max_lower or x2 > protocol.max_upper or y2 > protocol.max_upper:
            continue
        dfs = (x <= x1) & (y >= y2)
        sfd = (x >= x2) & (y <= y1)
        ctrl = ~(dfs | sfd)
        sizes = (int(dfs.sum()), int(sfd.sum()), int(ctrl.sum()))
        if sizes[0] < protocol.min_dfs or sizes[1] < protocol.min_sfd or sizes[2] < protocol.min_control:
            continue
        gaps = []
        for metric in scores:
            e = np.abs(y - metric) if error == "absolute" else (y - metric) ** 2
            gaps.append(np.mean([e[dfs].mean() - e[ctrl].mean(), e[sfd].mean() - e[ctrl].mean()]))
        objective = float(np.mean(gaps))
        if protocol.tie_rule == "first":
            key: tuple[float, ...] = (objective,)
        else:
            scale = 10**protocol.decimals
            rounded = math.floor(objective * scale + 0.5 + 1e-9) / scale
            key = (rounded, y2, -y1, x2, -x1)
        if best_key is None or key > best_key:
            best_key, best = key, ((x1, x2, y1, y2), objective, sizes)
    return best


SMALL = SearchProtocol(
    name="small",
    step=0.1,
    low=0.1,
    high=0.9,
    max_lower=0.6,
    max_upper=0.8,
    min_dfs=3,
    min_sfd=3,
    min_control=5,
    tie_rule="rounded",
    decimals=2,
)
CASES = [
    ("pseudocode, step 0.2", replace(PSEUDOCODE, step=0.2)),
    ("pseudocode with minimum sizes", replace(PSEUDOCODE, step=0.1, min_dfs=3, min_sfd=2, min_control=10)),
    ("rq3-like, small grid", SMALL),
    ("rq3-like, 1 decimal (many ties)", replace(SMALL, decimals=1)),
    ("rq3-like, 0 decimals (all tie)", replace(SMALL, decimals=0, min_dfs=1, min_sfd=1, min_control=1)),
]


def random_data(seed: int, n: int, on_grid: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x, y = rng.random(n), rng.random(n)
    scores = np.clip(np.vstack([x, 0.5 * x + 0.5 * y]) + rng.normal(0, 0.1, (2, n)), 0, 1)
    if on_grid:  # many tuples share a partition, so the tie rule decides
        x, y, scores = np.round(x, 1), np.round(y, 1), np.round(scores, 1)
    return x, y, scores


@pytest.mark.parametrize(("name", "protocol"), CASES, ids=[name for name, _ in CASES])
@pytest.mark.parametrize(("seed", "on_grid"), [(0, False), (1, False), (2, True), (3, True)])
def test_fast_search_equals_the_brute_force_loop(name: str, protocol: SearchProtocol, seed: int, on_grid: bool) -> None:
    x, y, scores = random_data(seed, 60, on_grid)
    expected = brute_force(x, y, scores, protocol)
    if expected is None:
        with pytest.raises(UndefinedMetricError):
            select_region_thresholds(x, y, scores, protocol=protocol)
        return
    thresholds, objective, sizes = expected
    found = select_region_thresholds(x, y, scores, protocol=protocol)
    assert (found.x_lo, found.x_hi, found.y_lo, found.y_hi) == pytest.approx(thresholds)
    assert found.objective == pytest.approx(objective)
    assert (found.n_dfs, found.n_sfd, found.n_control) == sizes


def test_the_rq3_preset_equals_the_brute_force_loop() -> None:
    # The preset itself (17 grid values: 83,521 tuples) on data dense enough for its minimum sizes.
    x, y, scores = random_data(5, 420, on_grid=True)
    expected = brute_force(x, y, scores, LOCAL_RQ3)
    assert expected is not None
    found = select_region_thresholds(x, y, scores, protocol="local_rq3")
    assert (found.x_lo, found.x_hi, found.y_lo, found.y_hi) == pytest.approx(expected[0])
    assert found.objective == pytest.approx(expected[1])
    assert (found.n_dfs, found.n_sfd, found.n_control) == expected[2]


# --- through metrics.compute ----------------------------------------------------------------------------------------


def test_local_thresholds_through_compute() -> None:
    x, y, m = worked_dataset()
    result = compute(
        ["local_thresholds"],
        y_true=y.tolist(),
        surface_sim=x.tolist(),
        metric_scores={"codebleu": m.tolist()},
        params={"protocol": "local_rq3"},
    )
    assert result["errors"] == {}
    value = result["values"]["local_thresholds"]
    assert value == select_region_thresholds(x, y, [m], protocol="local_rq3").to_json()
    assert (value["x_lo"], value["x_hi"], value["y_lo"], value["y_hi"]) == (0.65, 0.9, 0.1, 0.9)
    assert isinstance(value["n_dfs"], int)
    default = compute(["local_thresholds"], y_true=y, surface_sim=x, metric_scores={"codebleu": m})
    assert default["values"]["local_thresholds"]["y_hi"] == 0.51  # the pseudo-code
    coarse = compute(["local_thresholds"], y_true=y, surface_sim=x, metric_scores={"a": m}, params={"step": 0.05})[
        "values"
    ]["local_thresholds"]
    assert coarse == select_region_thresholds(x, y, [m], step=0.05).to_json()


def test_local_thresholds_is_not_bootstrapped_and_says_so() -> None:
    x, y, m = worked_dataset()
    result = compute(
        ["local_thresholds", "mae"],
        y_true=y,
        y_score=m,
        surface_sim=x,
        metric_scores={"m": m},
        params={"protocol": "local_rq3"},
        bootstrap=20,
    )
    assert "local_thresholds" in result["values"] and "local_thresholds" not in result["ci"]
    assert "no bootstrap interval" in result["ci_errors"]["local_thresholds"]
    assert "mae" in result["ci"]
    alone = compute(["local_thresholds"], y_true=y, surface_sim=x, metric_scores={"m": m}, bootstrap=20)
    assert alone["ci"] == {} and "local_thresholds" in alone["ci_errors"]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"params": {"protocol": "rq3"}}, "params.protocol"),
        ({"params": {"step": 0.001}}, "params.step"),
        ({"surface_sim": None}, "surface_sim"),
        ({"metric_scores": None}, "metric_scores"),
        ({"metric_scores": {}}, "metric_scores"),
        ({"y_true": None}, "y_true"),
        ({"surface_sim": [0.5, 0.5]}, "surface_sim"),
        ({"metric_scores": {"a": [0.5, 0.5, 0.5], "b": [0.5]}}, "metric_scores.b"),
        ({"metric_scores": {"a": [0.5, None, 0.5]}}, "metric_scores.a"),
        ({"y_true": [0.5, 1.5, 0.5]}, "y_true"),
        ({"surface_sim": [0.5, -0.1, 0.5]}, "surface_sim"),
    ],
)
def test_malformed_input_names_the_field(kwargs: dict, named: str) -> None:
    arguments: dict = {
        "y_true": [0.5, 0.5, 0.5],
        "surface_sim": [0.5, 0.5, 0.5],
        "metric_scores": {"a": [0.5, 0.5, 0.5]},
        **kwargs,
    }
    with pytest.raises(MetricInputError) as raised:
        compute(["local_thresholds"], **arguments)
    assert str(raised.value).startswith(named) or f" {named}" in str(raised.value)


def test_undefined_thresholds_are_an_error_with_a_reason() -> None:
    result = compute(["local_thresholds"], y_true=[0.5, 0.5], surface_sim=[0.5, 0.5], metric_scores={"a": [0.1, 0.2]})
    assert result["values"] == {} and "non-empty" in result["errors"]["local_thresholds"]
