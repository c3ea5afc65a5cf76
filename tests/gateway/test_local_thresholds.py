"""POST /v1/metrics:compute with `local_thresholds` (LoCaL Algorithm 2): the library's value, both protocols, 422s
naming the field, and no bootstrap interval."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from metrics.similarity import select_region_thresholds


def worked_pairs() -> dict[str, list[float]]:
    """50 DFS, 50 SFD and 150 Control pairs plus one pair P between them (tests/metrics/test_similarity_protocols.py
    derives the thresholds by hand): RQ3 gives LoCaL's printed (0.65, 0.90, 0.10, 0.90)."""
    rows = [(0.65, 0.95, 0.25)] * 50 + [(0.95, 0.05, 0.95)] * 50 + [(0.5, 0.5, 0.5)] * 150 + [(0.30, 0.87, 0.12)]
    x, y, m = (list(column) for column in zip(*rows, strict=True))
    return {"surface_sim": x, "y_true": y, "codebleu": m}


def body(**overrides: object) -> dict[str, object]:
    pairs = worked_pairs()
    request: dict[str, object] = {
        "metrics": ["local_thresholds"],
        "y_true": pairs["y_true"],
        "surface_sim": pairs["surface_sim"],
        "metric_scores": {"codebleu": pairs["codebleu"], "chrf": pairs["codebleu"]},
    }
    request.update(overrides)
    return request


def test_both_protocols(tenant_client: httpx.Client) -> None:
    pairs = worked_pairs()
    rq3 = tenant_client.post("/v1/metrics:compute", json=body(params={"protocol": "local_rq3"}))
    assert rq3.status_code == 200, rq3.text
    value = rq3.json()["values"]["local_thresholds"]
    assert set(value) == {"x_lo", "x_hi", "y_lo", "y_hi", "objective", "n_dfs", "n_sfd", "n_control"}
    assert (value["x_lo"], value["x_hi"], value["y_lo"], value["y_hi"]) == (0.65, 0.9, 0.1, 0.9)
    assert (value["n_dfs"], value["n_sfd"], value["n_control"]) == (50, 50, 151)
    expected = select_region_thresholds(
        pairs["surface_sim"], pairs["y_true"], [pairs["codebleu"]] * 2, protocol="local_rq3"
    ).to_json()
    assert value == pytest.approx(expected)

    default = tenant_client.post("/v1/metrics:compute", json=body())
    assert default.status_code == 200, default.text
    pseudo = default.json()["values"]["local_thresholds"]
    assert (pseudo["x_lo"], pseudo["x_hi"], pseudo["y_lo"], pseudo["y_hi"]) == (0.65, 0.66, 0.05, 0.51)
    explicit = tenant_client.post("/v1/metrics:compute", json=body(params={"protocol": "pseudocode"}))
    assert explicit.json()["values"]["local_thresholds"] == pseudo


def test_bootstrap_gives_no_interval_and_says_why(tenant_client: httpx.Client) -> None:
    pairs = worked_pairs()
    request = body(metrics=["local_thresholds", "mae"], y_score=pairs["codebleu"], bootstrap=50)
    response = tenant_client.post("/v1/metrics:compute", json=request)
    assert response.status_code == 200, response.text
    result = response.json()
    assert "local_thresholds" in result["values"] and "local_thresholds" not in result["ci"]
    assert "no bootstrap interval" in result["ci_errors"]["local_thresholds"]
    assert "mae" in result["ci"]


def test_thresholds_that_cannot_be_found_come_back_with_a_reason(tenant_client: httpx.Client) -> None:
    request = body(y_true=[0.5] * 20, surface_sim=[0.5] * 20, metric_scores={"a": np.linspace(0, 1, 20).tolist()})
    request["params"] = {"protocol": "local_rq3"}
    response = tenant_client.post("/v1/metrics:compute", json=request)
    assert response.status_code == 200, response.text
    assert "local_rq3" in response.json()["errors"]["local_thresholds"]


@pytest.mark.parametrize(
    ("overrides", "loc"),
    [
        ({"params": {"protocol": "rq3"}}, ["body", "params", "protocol"]),
        ({"params": {"step": 0.001}}, ["body", "params", "step"]),
        ({"surface_sim": None}, ["body", "surface_sim"]),
        ({"surface_sim": [0.5, 0.5]}, ["body", "surface_sim"]),
        ({"surface_sim": [2.0] * 251}, ["body", "surface_sim"]),
        ({"metric_scores": None}, ["body", "metric_scores"]),
        ({"metric_scores": {}}, ["body", "metric_scores"]),
        ({"metric_scores": {"codebleu": [0.5, 0.5]}}, ["body", "metric_scores", "codebleu"]),
        ({"metric_scores": {"codebleu": [None] * 251}}, ["body", "metric_scores", "codebleu"]),
        ({"metric_scores": {"codebleu": "abc"}}, ["body", "metric_scores", "codebleu"]),
        ({"metric_scores": [0.5] * 251}, ["body", "metric_scores"]),
        ({"y_true": None}, ["body", "y_true"]),
        ({"y_true": [0.5] * 250}, ["body", "surface_sim"]),  # surface_sim is checked against y_true
    ],
)
def test_malformed_input_is_422_naming_the_field(
    tenant_client: httpx.Client, overrides: dict[str, object], loc: list[str]
) -> None:
    response = tenant_client.post("/v1/metrics:compute", json=body(**overrides))
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"][: len(loc)] == loc, response.json()
