"""Calibrated judges (metrics/recalibration.py): out-of-fold isotonic and Platt maps, grouped folds, and the rule
that serves a map only when its out-of-fold ECE improvement excludes 0."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from metrics import calibration, recalibration
from metrics.errors import MetricInputError, UndefinedMetricError

N = 400


def _items(seed: int = 1) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """True acceptance probabilities q, labels drawn from them, and trajectories of four attempts each."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.05, 0.95, N)
    y = (rng.uniform(size=N) < q).astype(int)
    return q, y, [f"t{i // 4}" for i in range(N)]


def _overconfident(q: np.ndarray) -> np.ndarray:
    """p = sigmoid(3 * logit(q)): a judge three times too sure on the logit scale."""
    return 1.0 / (1.0 + np.exp(-3.0 * np.log(q / (1.0 - q))))


@pytest.mark.parametrize("method", recalibration.METHODS)
def test_a_miscalibrated_judge_gets_an_applied_map_whose_ece_gain_excludes_0(method: str) -> None:
    q, y, groups = _items()
    for raw in (_overconfident(q), np.full(N, 0.9)):
        result = recalibration.calibrate(method, raw, y, groups, bootstrap=500, seed=3)
        low, high = result["ece_difference"]["ci"]
        assert high < 0 and result["applied"] is True
        assert result["ece_difference"]["value"] == pytest.approx(
            result["ece_after"]["value"] - result["ece_before"]["value"]
        )
        # The before side is the plain ECE of the raw probabilities.
        assert result["ece_before"]["value"] == pytest.approx(calibration.ece(y, raw, 15))
        assert (result["n"], result["clusters"], result["positives"]) == (N, N // 4, int(y.sum()))
        assert result["brier_difference"]["value"] < 0 and result["brier_difference"]["ci"][1] < 0


@pytest.mark.parametrize("method", recalibration.METHODS)
def test_an_already_calibrated_judge_is_reported_and_not_applied(method: str) -> None:
    q, y, groups = _items()
    result = recalibration.calibrate(method, q, y, groups, bootstrap=500, seed=3)
    low, high = result["ece_difference"]["ci"]
    assert low < 0 < high and result["applied"] is False
    assert result["map"]["method"] == method and result["rule"] == recalibration.APPLY_RULE
    for metric in recalibration.METRICS:
        assert result[f"{metric}_difference"]["ci"] is not None


def test_platt_undoes_a_threefold_overconfidence() -> None:
    q, y, _ = _items(seed=5)
    fitted = recalibration.fit_map("platt", _overconfident(q), y)
    assert fitted["coef"] == pytest.approx(1 / 3, abs=0.08) and abs(fitted["intercept"]) < 0.3


def test_no_fold_sees_its_own_group() -> None:
    q, y, groups = _items()
    folds = recalibration.fold_assignment(y, groups, folds=10, seed=0)
    assert sorted(set(folds.tolist())) == list(range(10))
    for fold in range(10):
        inside = {g for g, f in zip(groups, folds, strict=True) if f == fold}
        outside = {g for g, f in zip(groups, folds, strict=True) if f != fold}
        assert inside and not inside & outside
    # Each item's calibrated value is the map of the other folds applied to it, never one fitted on it.
    raw = _overconfident(q)
    calibrated, maps = recalibration.out_of_fold("isotonic", raw, y, folds)
    for fold, fitted in enumerate(maps):
        train = folds != fold
        assert fitted == recalibration.fit_map("isotonic", raw[train], y[train])
        assert np.allclose(calibrated[~train], recalibration.apply_map(fitted, raw[~train]))
    # Problem-sized groups: fewer groups than folds gives one fold per group.
    few = [f"p{i % 3}" for i in range(N)]
    assert sorted(set(recalibration.fold_assignment(y, few, folds=10).tolist())) == [0, 1, 2]


def test_stored_maps_predict_as_scikit_learn_does() -> None:
    q, y, _ = _items(seed=7)
    raw = _overconfident(q)
    grid = np.linspace(0.0, 1.0, 101)
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, y)
    assert np.allclose(recalibration.apply_map(recalibration.fit_map("isotonic", raw, y), grid), iso.predict(grid))
    features = np.log(raw / (1 - raw)).reshape(-1, 1)
    logistic = LogisticRegression(C=1e6, max_iter=1000).fit(features, y)
    expected = logistic.predict_proba(
        np.log(np.clip(grid, 1e-6, 1 - 1e-6) / (1 - np.clip(grid, 1e-6, 1 - 1e-6))).reshape(-1, 1)
    )[:, 1]
    assert np.allclose(recalibration.apply_map(recalibration.fit_map("platt", raw, y), grid), expected)
    assert recalibration.fit_map("platt", raw[:5], np.ones(5, dtype=int)) == {"method": "constant", "value": 1.0}


def test_too_few_labelled_items_say_why() -> None:
    q, y, groups = _items()
    with pytest.raises(UndefinedMetricError, match="at least 20 labelled items; got 10"):
        recalibration.calibrate("isotonic", q[:10], y[:10], groups[:10], bootstrap=10)
    with pytest.raises(UndefinedMetricError, match="accepted and 2 rejected"):
        recalibration.calibrate("isotonic", q[:30], np.ones(30, dtype=int), groups[:30], bootstrap=10)
    with pytest.raises(UndefinedMetricError, match="at least 2 clusters"):
        recalibration.calibrate("isotonic", q[:30], y[:30], ["one"] * 30, bootstrap=10)
    with pytest.raises(MetricInputError, match="method must be one of isotonic, platt"):
        recalibration.calibrate("beta", q, y, groups)


def test_without_a_bootstrap_nothing_is_applied() -> None:
    q, y, groups = _items()
    result = recalibration.calibrate("platt", _overconfident(q), y, groups, bootstrap=0)
    assert result["ece_difference"]["ci"] is None and result["ece_difference"]["value"] < 0
    assert result["applied"] is False


def test_the_raw_probability_prefers_the_finest_reading() -> None:
    assert recalibration.raw_probability(0.7, 4, 0.66, 3.9) == 0.66
    assert recalibration.raw_probability(0.7, 4, None, 3.9) == 0.7
    assert recalibration.raw_probability(None, 4, None, 3.5) == pytest.approx(0.7)
    assert recalibration.raw_probability(None, 4) == pytest.approx(0.8)
    assert recalibration.raw_probability(None, None) is None


def test_judge_quality_shows_calibration_before_and_after_when_asked() -> None:
    from metrics.reports import judge_quality

    q, y, groups = _items()
    rows = [
        {
            "attempt_id": f"a{i}",
            "problem_id": "p",
            "trajectory": groups[i],
            "label_ac": int(y[i]),
            "judge": judge,
            "condition": "blind",
            "repeat": 0,
            "status": "ok",
            "p_ac": float(p[i]),
        }
        for judge, p in (("sure", _overconfident(q)), ("honest", q))
        for i in range(N)
    ]
    report = judge_quality.build(rows, bootstrap=300, seed=3, calibration="platt").to_json()
    table = {r["judge"]: r for r in report["tables"]["calibration_differences"]["rows"]}
    assert table["sure"]["applied"] == "yes" and table["honest"]["applied"] == "no"
    assert table["sure"]["ece_difference"]["ci"][1] < 0 < table["honest"]["ece_difference"]["ci"][1]
    assert table["sure"]["n"] == N and table["sure"]["clusters"] == N // 4
    assert "calibration_differences" not in judge_quality.build(rows, bootstrap=0).to_json()["tables"]
