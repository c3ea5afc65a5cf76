"""Reports over stored judgments: computed by the reports worker, served as JSON, PNG plots and one HTML page."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.schemas import ReportIn
from metrics.reports import BUILDERS, KINDS, ReportKind
from services.launcher.stack import EmbeddedStack
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
    # Twelve attempts are too few to judge by the deployment's minimums (TRIBUNAL_MIN_ITEMS, 30 by default): the
    # stored JSON and the page say so of every figure.
    assert (report["result"]["params"]["min_items"], report["result"]["params"]["min_clusters"]) == (30, 10)
    figures = [v for row in report["result"]["tables"]["metrics"]["rows"] for v in row.values() if isinstance(v, dict)]
    assert figures and all(f["trust"] == "too_few" and f["n"] <= 12 for f in figures)
    assert 'class="too-few"' in page.text and "too few to judge (n=" in page.text


def test_a_minimum_below_one_is_named(tenant_client: httpx.Client) -> None:
    for field in ("min_items", "min_clusters"):
        response = tenant_client.post("/v1/reports", json={"kind": "judge_quality", field: 0})
        assert response.status_code == 422 and response.json()["errors"][0]["loc"] == ["body", field], response.text


def test_report_of_unknown_kind_is_named(tenant_client: httpx.Client) -> None:
    response = tenant_client.post("/v1/reports", json={"kind": "vibes"})
    assert response.status_code == 422 and response.json()["errors"][0]["loc"] == ["body", "kind"]


def test_reports_are_private_to_their_tenant(tenant_client: httpx.Client, admin: httpx.Client) -> None:
    accepted = tenant_client.post("/v1/reports", json={"kind": "cocreation", "bootstrap": 0}).json()
    assert admin.get(f"/v1/reports/{accepted['report_id']}").status_code == 404


def test_the_api_offers_exactly_the_kinds_there_are_builders_for(tenant_client: httpx.Client) -> None:
    assert ReportIn.model_fields["kind"].annotation is ReportKind
    assert set(BUILDERS) == set(KINDS) == set(ReportKind)
    response = tenant_client.post("/v1/reports", json={"kind": "horoscope"})
    assert response.status_code == 422 and response.json()["errors"][0]["loc"] == ["body", "kind"], response.text


def test_a_cluster_the_kind_cannot_resample_is_named(tenant_client: httpx.Client) -> None:
    response = tenant_client.post("/v1/reports", json={"kind": "cocreation", "cluster": "seed"})
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == ["body", "cluster"]


# ------------------------------------------------------------------------------------- every kind, end to end

# Sources of the sum problem (three tests): how many tests each passes, so df_score and verdicts vary.
VARIANTS = [
    (SUM_SOURCES["python"], 3),
    ("a, b = map(int, input().split())\nprint(a + b if abs(a) < 1000 else 0)\n", 2),
    ("print(0)\n", 0),
    ("a, b = map(int, input().split())\nprint(a - b)\n", 0),
]
PROBLEMS, PARTICIPANTS, TURNS = 3, 4, 2


@pytest.fixture(scope="module")
def populated(stack: EmbeddedStack, admin_key: str) -> Iterator[httpx.Client]:
    """A tenant with 24 judged attempts: 3 problems with a Python reference x 4 participants x 2 turns, each with a
    0..5 label score; judged by sample_tests, edit_similarity (against the reference) and the scripted LLM."""
    with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as admin:
        tenant = f"t-{uuid.uuid4().hex[:10]}"
        key = admin.post("/v1/keys", json={"tenant": tenant, "scopes": ["submit", "read"]}).json()["key"]
    with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        reference = [{"language": "python", "source_code": SUM_SOURCES["python"]}]
        problems = [add_sum_problem(client, references=reference) for _ in range(PROBLEMS)]
        ids = []
        for p, problem_id in enumerate(problems):
            for u in range(PARTICIPANTS):
                for turn in range(1, TURNS + 1):
                    index = (p + u + turn) % len(VARIANTS)
                    source, passed = VARIANTS[index]
                    marker = "" if passed == 3 else "# judge-script: low\n"
                    body = {"participant": f"u{u}", "turn": turn, "label": {"score": float(passed + (u % 3))}}
                    ids.append(submit(client, problem_id, "python", f"# {p}.{u}.{turn}\n{marker}{source}", **body))
        for accepted in ids:
            wait_attempt(client, accepted["attempt_id"])
        yield client


def _report(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/reports", json=body)
    assert response.status_code == 202, response.text
    accepted = response.json()
    job = wait_job(client, accepted["job_id"])
    assert job["status"] == "succeeded", job
    report = client.get(f"/v1/reports/{accepted['report_id']}").json()
    assert report["status"] == "succeeded" and report["kind"] == body["kind"]
    result = report["result"]
    assert result["kind"] == body["kind"] and result["sections"] and result["tables"]
    for section in result["sections"]:
        assert {"id", "title", "explanation", "tables", "plots"} <= set(section)
    for url in report["plots"].values():
        png = client.get(url)
        assert png.status_code == 200 and png.content.startswith(b"\x89PNG\r\n\x1a\n")
    page = client.get(report["html"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    return dict(report)


def _rows(report: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return list(report["result"]["tables"][table]["rows"])


@pytest.mark.parametrize(
    ("kind", "tables", "filled"),
    [
        ("judge_quality", {"metrics"}, "metrics"),
        ("agreement", {"pairwise", "multi_rater"}, "pairwise"),
        ("cocreation", {"summary", "turns"}, "turns"),
        ("axiom", {"axiom"}, "axiom"),
        ("similarity", {"metrics"}, "metrics"),
        ("perturbation", {"perturbation"}, None),
        ("panels", {"panel_members", "error_correlation", "effective_judges", "panel_comparison"}, "panel_members"),
    ],
)
def test_every_report_kind_answers_with_a_body(
    populated: httpx.Client, kind: str, tables: set[str], filled: str | None
) -> None:
    report = _report(populated, kind=kind, bootstrap=50, folds=3)
    assert tables <= set(report["result"]["tables"]), report["result"]["errors"]
    if filled is not None:
        assert _rows(report, filled), report["result"]["errors"]
    else:
        # The platform cannot make mutants yet: the report says so in a section, and in errors.
        notes = [s["note"] for s in report["result"]["sections"] if s.get("note")]
        assert notes and notes[0].startswith("No data") and "perturbation" in report["result"]["errors"]
        assert report["params"]["cluster"] == "seed"  # its kind's default, stored as used


def test_agreement_requested_by_problem_is_clustered_by_problem(populated: httpx.Client) -> None:
    by_problem = _report(populated, kind="agreement", bootstrap=200, cluster="problem")
    by_trajectory = _report(populated, kind="agreement", bootstrap=200)
    assert by_problem["params"]["cluster"] == by_problem["result"]["params"]["cluster"] == "problem"
    assert by_trajectory["params"]["cluster"] == by_trajectory["result"]["params"]["cluster"] == "trajectory"
    for table in ("pairwise", "multi_rater"):
        assert {r["clusters"] for r in _rows(by_problem, table)} == {PROBLEMS}
        assert {r["clusters"] for r in _rows(by_trajectory, table)} == {PROBLEMS * PARTICIPANTS}
    intervals = [
        (a.get(metric, {}).get("ci"), b.get(metric, {}).get("ci"))
        for a, b in zip(_rows(by_problem, "pairwise"), _rows(by_trajectory, "pairwise"), strict=True)
        for metric in ("cohen_kappa", "spearman", "kendall_tau")
    ]
    assert any(lo is not None and lo != hi for lo, hi in intervals)


def test_similarity_report_reads_reference_scores_and_executions(populated: httpx.Client) -> None:
    report = _report(populated, kind="similarity", bootstrap=100)
    result = report["result"]
    assert result["params"]["cluster"] == "problem"
    row = next(r for r in _rows(report, "metrics") if r["metric"] == "edit_similarity")
    assert row["n"] == PROBLEMS * PARTICIPANTS * TURNS and row["clusters"] == PROBLEMS
    assert "mae" in row and "distinguishability" in row, result["errors"]
    scatter = result["plots"]["similarity_scatter"]
    assert sorted(set(scatter["df_score"])) == [0.0, 2 / 3, 1.0]
    assert "similarity_scatter" in report["plots"]
    only_llm = _report(populated, kind="similarity", bootstrap=0, judges=["scripted"])
    assert _rows(only_llm, "metrics") == []
    assert only_llm["result"]["errors"]["similarity"].startswith("no code pairs")


def test_a_pass_at_k_request_reaches_its_builder_with_k_and_problem_clusters() -> None:
    """Schema and parameter mapping only (no stack): `k` is validated, reaches the pass_at_k builder, and the kind
    resamples problems only."""
    from pydantic import ValidationError

    from metrics.reports import ReportParamError, builder_arguments, resolve_cluster

    body = ReportIn.model_validate({"kind": "pass_at_k", "k": [1, 10], "bootstrap": 100})
    arguments = builder_arguments(body.kind, body.model_dump(mode="json"))
    assert arguments["k"] == [1, 10] and arguments["cluster"] == "problem"
    assert "k" not in builder_arguments("judge_quality", body.model_dump(mode="json"))
    with pytest.raises(ReportParamError):
        resolve_cluster("pass_at_k", "trajectory")
    for bad in ([0], [], "ten"):
        with pytest.raises(ValidationError):
            ReportIn.model_validate({"kind": "pass_at_k", "k": bad})


def test_a_panels_request_reaches_its_builder_with_budgets_and_folds() -> None:
    """Schema and parameter mapping only (no stack): `panels` is a kind, and `k` (the selected panels' budgets),
    `folds` and `cluster` reach its builder."""
    from metrics.reports import builder_arguments

    body = ReportIn.model_validate({"kind": "panels", "k": [1, 3], "folds": 4, "bootstrap": 100})
    arguments = builder_arguments(body.kind, body.model_dump(mode="json"))
    assert arguments["k"] == [1, 3] and arguments["folds"] == 4 and arguments["cluster"] == "trajectory"


def test_a_judge_with_only_not_applicable_rows_is_listed_with_its_counts(tenant_client: httpx.Client) -> None:
    """A problem with neither public tests nor a reference: sample_tests and edit_similarity do not apply to any of
    its attempts, yet the report lists them (with the scripted judge, the one that scores) and says why they have
    no figures; the page shows it too."""
    problem_id = add_sum_problem(tenant_client, tests=[{"input": "1 2\n", "expected": "3\n"}])
    sources = [SUM_SOURCES["python"], "print(0)\n"]
    ids = [
        submit(
            tenant_client, problem_id, "python", f"# {i}\n{'# judge-script: low' if i % 2 else ''}\n{sources[i % 2]}"
        )["attempt_id"]
        for i in range(4)
    ]
    for attempt_id in ids:
        wait_attempt(tenant_client, attempt_id)
    report = _report(tenant_client, kind="judge_quality", bootstrap=0, folds=2, filter={"problem_ids": [problem_id]})
    rows = {row["judge"]: row for row in _rows(report, "judge_rows")}
    assert {judge: (r["ok"], r["failed"], r["not_applicable"]) for judge, r in rows.items()} == {
        "sample_tests": (0, 0, 4),
        "edit_similarity": (0, 0, 4),
        "scripted": (4, 0, 0),
    }
    assert '"no public tests", 4 rows' in rows["sample_tests"]["note"]
    assert '"no reference solution in python", 4 rows' in rows["edit_similarity"]["note"]
    assert rows["scripted"]["note"] is None
    assert {row["judge"] for row in _rows(report, "metrics")} <= {"scripted", "panel"}
    page = tenant_client.get(report["html"]).text
    assert "Judges and their rows" in page and "no reference solution in python" in page
