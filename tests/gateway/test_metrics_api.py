"""POST /v1/metrics:compute: values equal the reference libraries', intervals are reproducible, reasons not NaN."""

from __future__ import annotations

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
