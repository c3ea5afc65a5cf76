"""Reports over stored judgments: computed by the metrics worker, served as JSON, PNG plots and one HTML page."""

from __future__ import annotations

import httpx

from tests.helpers import SUM_SOURCES, add_sum_problem, submit, wait_attempt, wait_job


def _judged_attempts(client: httpx.Client) -> list[str]:
    problem_id = add_sum_problem(client)
    sources = [SUM_SOURCES["python"], "print(0)\n", "a, b = map(int, input().split())\nprint(a - b)\n"]
    ids = []
    for index in range(12):
        source = f"# {index}\n" + ("# judge-script: low\n" if index % 3 else "") + sources[index % 3]
        ids.append(submit(client, problem_id, "python", source, participant=f"u{index % 4}", turn=index)["attempt_id"])
    for attempt_id in ids:
        wait_attempt(client, attempt_id)
    return ids


def test_judge_quality_report_is_built_with_plots_and_a_page(tenant_client: httpx.Client) -> None:
    _judged_attempts(tenant_client)
    response = tenant_client.post("/v1/reports", json={"kind": "judge_quality", "bootstrap": 200, "folds": 3})
    assert response.status_code == 202, response.text
    accepted = response.json()
    job = wait_job(tenant_client, accepted["job_id"])
    assert job["status"] == "succeeded", job
    report = tenant_client.get(f"/v1/reports/{accepted['report_id']}").json()
    assert report["status"] == "succeeded" and report["kind"] == "judge_quality"
    assert report["result"]["kind"] == "judge_quality"
    assert report["plots"], "a judge-quality report has ROC and reliability plots"
    for url in report["plots"].values():
        png = tenant_client.get(url)
        assert png.status_code == 200 and png.headers["content-type"] == "image/png"
        assert png.content.startswith(b"\x89PNG\r\n\x1a\n")
    page = tenant_client.get(report["html"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "data:image/png;base64," in page.text and "scripted" in page.text


def test_report_of_unknown_kind_is_named(tenant_client: httpx.Client) -> None:
    response = tenant_client.post("/v1/reports", json={"kind": "vibes"})
    assert response.status_code == 422 and response.json()["errors"][0]["loc"] == ["body", "kind"]


def test_reports_are_private_to_their_tenant(tenant_client: httpx.Client, admin: httpx.Client) -> None:
    accepted = tenant_client.post("/v1/reports", json={"kind": "cocreation", "bootstrap": 0}).json()
    assert admin.get(f"/v1/reports/{accepted['report_id']}").status_code == 404
