"""GET /v1/judges/{name}/trust end to end: a few attempts judged twice by the scripted LLM judge give cards with
intervals, n, clusters, provenance and verdicts; an unknown judge is a 404 naming it."""

from __future__ import annotations

import httpx

from tests.fake_llm import ScriptedLLM
from tests.helpers import SUM_SOURCES, add_sum_problem, submit, wait_attempt, wait_job

WRONG = "a, b = map(int, input().split())\nprint(a - b)\n"


def test_trust_cards_of_a_judge_with_repeats(tenant_client: httpx.Client, scripted_llm: ScriptedLLM) -> None:
    problem_id = add_sum_problem(tenant_client)
    attempt_ids = []
    for i, source in enumerate([SUM_SOURCES["python"]] * 3 + [WRONG] * 3):
        tagged = f"# trust card {i}\n{source}"
        attempt = submit(tenant_client, problem_id, "python", tagged, judges=["scripted"], participant=f"u{i}")
        attempt_ids.append(attempt["attempt_id"])
    for attempt_id in attempt_ids:
        wait_attempt(tenant_client, attempt_id)
    job = tenant_client.post("/v1/judgments", json={"attempt_ids": attempt_ids, "judges": ["scripted"], "repeats": 2})
    assert job.status_code == 202
    assert wait_job(tenant_client, job.json()["job_id"])["status"] == "succeeded"

    answer = tenant_client.get("/v1/judges/scripted/trust")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["judge"] == "scripted" and body["condition"] == "blind"
    cards = {card["use"]: card for card in body["cards"]}
    assert list(cards) == ["ranking", "gating", "defect_detection", "quality_grading", "stability"]
    for card in cards.values():
        assert card["verdict"].startswith(f"fit for {card['use'].replace('_', ' ')}:")
        assert card["status"] in ("fit", "unfit", "too_few", "no_data")
        for figure in card["figures"]:
            assert {"name", "value", "ci", "n", "clusters"} <= set(figure)
    ranking = {f["name"]: f for f in cards["ranking"]["figures"]}
    assert ranking["roc_auc"]["n"] >= 6 and ranking["roc_auc"]["clusters"] >= 6
    # Six attempts are fewer than the default minimums (30 items, 10 clusters).
    assert cards["ranking"]["status"] == "too_few" and "too few to judge" in cards["ranking"]["verdict"]
    stability = {f["name"]: f for f in cards["stability"]["figures"]}
    assert set(stability) == {"variance", "flip_rate", "noise_floor"}
    assert stability["variance"]["n"] >= 6 and stability["variance"]["ci"] is not None
    data = cards["stability"]["data"]
    assert data["repeats"] == 2 and data["dataset"]["attempts"] >= 6 and data["dataset"]["problems"] >= 1
    assert data["date_range"] is not None and "blind" in data["conditions"]

    missing = tenant_client.get("/v1/judges/nosuch/trust")
    assert missing.status_code == 404 and "nosuch" in missing.text
    unknown_condition = tenant_client.get("/v1/judges/scripted/trust", params={"condition": "sideways"})
    assert unknown_condition.status_code == 422 and "condition" in unknown_condition.text
