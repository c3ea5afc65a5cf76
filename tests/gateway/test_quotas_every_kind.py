"""Every kind of work under the tenant's quotas (issue #20), on the real stack: similarity pairs, perturbation
mutants, synthesis programs and judgments all count. A request over a cap is refused whole, 429 naming the limit,
before anything of it is stored or queued; a job that grows after it was accepted (a perturbation's mutants, a
synthesis job's programs) waits at its tenant's cap instead of filling the queue, and still ends with all of them.

The quotas are counted the same way on both databases (one COUNT, one Redis script): SQLite only."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import redis

from services.kernel.registry import ALL_QUEUES
from services.launcher.stack import EmbeddedStack
from tests.fake_llm import ScriptedLLM
from tests.gateway.test_quotas import _assert_quota_problem, _new_key
from tests.gateway.test_similarity_api import EQUIVALENT, NEGATED, SMALL, _humaneval_problem, _python
from tests.gateway.test_synthesis import (
    PRODUCT,
    PRODUCT_TESTS,
    SUM_TESTS,
    AxiomScript,
    WellBehaved,
    _accepted,
    _problem,
)
from tests.helpers import add_sum_problem, count_rows, fetch_rows, submit, wait_attempt, wait_job

pytestmark = pytest.mark.parametrize("stack", ["sqlite"], indirect=True)

SUM = "a, b = map(int, input().split())\nprint(a + b)\n"
# An accepted seed with six Python mutants under all_sites (a control, two AOR, two ROR, one COI).
BRANCHY_SUM = "a, b = map(int, input().split())\nif a > b:\n    print(a + b)\nelse:\n    print(a + b)\n"


@pytest.fixture()
def keyed(stack: EmbeddedStack) -> Iterator[Any]:
    clients: list[httpx.Client] = []

    def open_client(key: str) -> httpx.Client:
        client = httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        client.close()


@pytest.fixture(scope="module")
def axiom(scripted_llm: ScriptedLLM) -> Iterator[AxiomScript]:
    """The session's scripted LLM, answering AXIOM's requests as tests/gateway/test_synthesis.py's scenarios do."""
    original = scripted_llm.script
    script = AxiomScript(original)
    scripted_llm.script = script
    yield script
    scripted_llm.script = original


class Stored:
    """What a tenant has in the database, and what the queues hold: compared before and after a refusal."""

    def __init__(self, stack: EmbeddedStack, tenant: str) -> None:
        self.stack = stack
        self.tenant = tenant
        self.redis = redis.Redis.from_url(stack.redis_url or "")

    def rows(self) -> dict[str, int]:
        url, tenant = self.stack.database_url, self.tenant
        return {
            "jobs": count_rows(url, "SELECT count(*) FROM job WHERE tenant = :t", t=tenant),
            "attempts": count_rows(url, "SELECT count(*) FROM attempt WHERE tenant = :t", t=tenant),
            "problems": count_rows(url, "SELECT count(*) FROM problem WHERE tenant = :t", t=tenant),
            "pairs": count_rows(
                url,
                "SELECT count(*) FROM similarity_pair p JOIN job j ON j.job_id = p.job_id WHERE j.tenant = :t",
                t=tenant,
            ),
            "judgments": count_rows(
                url,
                "SELECT count(*) FROM judgment g JOIN attempt a ON a.attempt_id = g.attempt_id WHERE a.tenant = :t",
                t=tenant,
            ),
            "units": count_rows(
                url, "SELECT count(*) FROM job_unit u JOIN job j ON j.job_id = u.job_id WHERE j.tenant = :t", t=tenant
            ),
        }

    def queued(self) -> set[bytes]:
        return {member for name in ALL_QUEUES for member in self.redis.zrange(name, 0, -1)}

    def judgments_today(self) -> int:
        key = f"tribunal:quota:judgments:{self.tenant}:{datetime.now(UTC).date().isoformat()}"
        return int(self.redis.get(key) or 0)

    def judge_tokens_today(self) -> int:
        key = f"tribunal:quota:judge_tokens:{self.tenant}:{datetime.now(UTC).date().isoformat()}"
        return int(self.redis.get(key) or 0)

    def refused(self, response: httpx.Response, limit: str, value: int, before: dict[str, Any]) -> dict[str, Any]:
        """The response is the quota's 429, and nothing of the request is stored or queued."""
        problem = _assert_quota_problem(response, limit, value)
        assert self.rows() == before["rows"], "a refused request left rows behind"
        assert not self.queued() - before["queued"], "a refused request queued work"
        assert self.judgments_today() == before["judgments"], "a refused request counted judgments"
        return problem

    def snapshot(self) -> dict[str, Any]:
        return {"rows": self.rows(), "queued": self.queued(), "judgments": self.judgments_today()}


def _tenant(admin: httpx.Client, keyed: Any, stack: EmbeddedStack, **quotas: Any) -> tuple[httpx.Client, Stored]:
    created = _new_key(admin, **quotas)
    return keyed(created["key"]), Stored(stack, created["tenant"])


def _live_intervals(stack: EmbeddedStack, job_id: str) -> list[tuple[datetime, datetime]]:
    rows = fetch_rows(
        stack.database_url,
        "SELECT created_at, finished_at FROM attempt WHERE job_id = :job ORDER BY created_at",
        job=job_id,
    )
    assert all(row["finished_at"] is not None for row in rows)
    return [(_when(row["created_at"]), _when(row["finished_at"])) for row in rows]


def _when(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def _assert_one_live_at_a_time(intervals: list[tuple[datetime, datetime]]) -> None:
    """Under queued_attempts 1, each program is created only once the one before it has ended."""
    for (_, ended), (created, _) in zip(intervals, intervals[1:], strict=False):
        assert created >= ended, f"a program was created at {created} while another was live until {ended}"


# ---- similarity pairs -------------------------------------------------------------------------------------------


def test_similarity_pairs_count_under_queued_pairs(stack: EmbeddedStack, admin: httpx.Client, keyed: Any) -> None:
    client, stored = _tenant(admin, keyed, stack, queued_pairs=3)
    problem_id = _humaneval_problem(client)

    def record(i: int) -> dict[str, Any]:
        return {
            "id": f"p{i}",
            "golden_code": EQUIVALENT,
            "generated_code": NEGATED + f"# {i}\n",
            "problem_id": problem_id,
        }

    # A dataset over the cap is refused whole, before its CrystalBLEU corpus is even built.
    before = stored.snapshot()
    over = client.post("/v1/similarity/datasets", json={**SMALL, "pairs": [record(i) for i in range(4)]})
    assert stored.refused(over, "queued_pairs", 3, before)["requested"] == 4
    # At the cap it is accepted; while its pairs are not scored, not even one more pair is.
    accepted = client.post("/v1/similarity/datasets", json={**SMALL, "pairs": [record(i) for i in range(3)]})
    assert accepted.status_code == 202, accepted.text
    pair = {**SMALL, "reference": _python(EQUIVALENT), "candidate": _python(NEGATED), "problem_id": problem_id}
    before = stored.snapshot()
    single = client.post("/v1/similarity", json=pair)
    if single.status_code == 429:  # the dataset's pairs are scored one at a time: some are still queued
        assert stored.refused(single, "queued_pairs", 3, before)["scope"] == "tenant"
    else:  # the machine scored a pair first: one fewer was queued, so one more fit (never more than the cap)
        queued = count_rows(
            stack.database_url,
            "SELECT count(*) FROM similarity_pair p JOIN job j ON j.job_id = p.job_id "
            "WHERE j.tenant = :t AND p.status = 'queued'",
            t=stored.tenant,
        )
        assert single.status_code == 202 and queued <= 3, single.text
    # Cancelled, the dataset's pairs no longer count: a single pair fits again.
    assert client.delete(f"/v1/jobs/{accepted.json()['job_id']}").status_code == 200
    wait_job(client, accepted.json()["job_id"], timeout_s=60)
    if single.status_code == 202:
        wait_job(client, single.json()["job_id"], timeout_s=120)
    again = client.post("/v1/similarity", json=pair)
    assert again.status_code == 202, again.text
    assert wait_job(client, again.json()["job_id"], timeout_s=120)["status"] == "succeeded"


def test_a_dataset_of_jsonl_lines_counts_every_line(stack: EmbeddedStack, admin: httpx.Client, keyed: Any) -> None:
    client, stored = _tenant(admin, keyed, stack, queued_pairs=2)
    problem_id = _humaneval_problem(client)
    lines = "\n".join(
        json.dumps({"id": f"l{i}", "golden_code": EQUIVALENT, "generated_code": NEGATED, "problem_id": problem_id})
        for i in range(3)
    )
    before = stored.snapshot()
    response = client.post(
        "/v1/similarity/datasets",
        content=lines.encode(),
        params={"n_inputs": 50, "repeats": 1},
        headers={"content-type": "application/x-ndjson"},
    )
    assert stored.refused(response, "queued_pairs", 2, before)["requested"] == 3


def test_a_key_held_to_one_queued_attempt_is_held_to_one_pair(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any
) -> None:
    # The audit's key: queued_attempts 1 and nothing else set. Its pairs are bounded by it too.
    client, stored = _tenant(admin, keyed, stack, queued_attempts=1)
    problem_id = _humaneval_problem(client)
    records = [
        {"id": f"p{i}", "golden_code": EQUIVALENT, "generated_code": NEGATED, "problem_id": problem_id}
        for i in range(50)
    ]
    before = stored.snapshot()
    refused = client.post("/v1/similarity/datasets", json={**SMALL, "pairs": records})
    assert stored.refused(refused, "queued_pairs", 1, before)["requested"] == 50
    key = next(k for k in admin.get("/v1/keys").json() if k["tenant"] == stored.tenant)
    assert key["quotas"]["queued_pairs"] is None  # not set: bounded by queued_attempts, not stored as its own


# ---- perturbation mutants ---------------------------------------------------------------------------------------


def _accepted_seed(client: httpx.Client, source: str = BRANCHY_SUM) -> tuple[str, dict[str, Any]]:
    problem_id = add_sum_problem(client)
    seed = wait_attempt(client, submit(client, problem_id, "python", source, judges=[])["attempt_id"])
    assert seed["verdict"] == "AC", seed
    return problem_id, seed


@pytest.mark.timeout(240)
def test_a_perturbation_waits_at_queued_attempts_and_still_ends_with_every_mutant(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any, tenant_client: httpx.Client
) -> None:
    client, stored = _tenant(admin, keyed, stack, queued_attempts=1)
    _, seed = _accepted_seed(client)
    # The same seed perturbed by a tenant without the cap: every mutant the job must end with.
    _, free_seed = _accepted_seed(tenant_client)
    free = tenant_client.post("/v1/perturbations", json={"attempt_ids": [free_seed["attempt_id"]], "all_sites": True})
    assert free.status_code == 202, free.text
    assert wait_job(tenant_client, free.json()["job_id"], timeout_s=180)["status"] == "succeeded"
    expected = sorted(
        (m["operator"], m["diff"])
        for m in tenant_client.get(f"/v1/perturbations/{free.json()['job_id']}").json()["mutants"]
    )
    assert len(expected) >= 5

    response = client.post("/v1/perturbations", json={"attempt_ids": [seed["attempt_id"]], "all_sites": True})
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    most_live = 0
    deadline = time.monotonic() + 200
    while True:
        live = count_rows(
            stack.database_url,
            "SELECT count(*) FROM attempt WHERE tenant = :t AND status IN ('queued', 'running')",
            t=stored.tenant,
        )
        most_live = max(most_live, live)
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] not in ("queued", "running"):
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    assert job["status"] == "succeeded", job
    assert most_live <= 1, f"{most_live} attempts of the tenant were live at once under queued_attempts 1"
    _assert_one_live_at_a_time(_live_intervals(stack, job_id))
    view = client.get(f"/v1/perturbations/{job_id}").json()
    mutants = sorted((m["operator"], m["diff"]) for m in view["mutants"])
    # Every mutant once: none lost while the seed waited, none made twice by its tries.
    assert mutants == expected
    assert all(m["status"] == "done" for m in view["mutants"])
    assert view["progress"]["done"] == view["progress"]["total"] == 1 + len(expected)


@pytest.mark.timeout(240)
def test_a_confirmed_perturbation_waits_at_queued_pairs(stack: EmbeddedStack, admin: httpx.Client, keyed: Any) -> None:
    client, stored = _tenant(admin, keyed, stack, queued_pairs=1)
    _, seed = _accepted_seed(client)
    body = {"attempt_ids": [seed["attempt_id"]], "all_sites": True, "confirm": True, "confirm_inputs": 20}
    response = client.post("/v1/perturbations", json={**body, "confirm_repeats": 1})
    assert response.status_code == 202, response.text
    job_id, confirm_id = response.json()["job_id"], response.json()["confirm_job_id"]
    assert wait_job(client, job_id, timeout_s=220)["status"] == "succeeded"
    assert wait_job(client, confirm_id, timeout_s=60)["status"] == "succeeded"
    mutants = client.get(f"/v1/perturbations/{job_id}").json()["mutants"]
    pairs = fetch_rows(
        stack.database_url,
        "SELECT ordinal, pair_key, created_at, finished_at FROM similarity_pair WHERE job_id = :job "
        "ORDER BY created_at",
        job=confirm_id,
    )
    # One pair per mutant, each once, though the seed's mutants were created over several tries.
    assert sorted(p["pair_key"] for p in pairs) == sorted(m["attempt_id"] for m in mutants) and len(pairs) >= 5
    assert len({p["ordinal"] for p in pairs}) == len(pairs)
    assert all(m["fuzzing"] is not None and m["fuzzing"]["status"] == "scored" for m in mutants)
    # Under queued_pairs 1, each pair was created once the one before it was scored.
    _assert_one_live_at_a_time([(_when(p["created_at"]), _when(p["finished_at"])) for p in pairs])


def test_a_judged_perturbation_over_judgments_per_request_is_refused(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any
) -> None:
    client, stored = _tenant(admin, keyed, stack, judgments_per_request=50)
    _, seed = _accepted_seed(client)
    body = {"attempt_ids": [seed["attempt_id"]], "judge": True, "judges": ["sample_tests"]}
    before = stored.snapshot()
    # all_sites may make up to 200 mutants of the seed, each judged once, and the seed: 201 > 50.
    problem = stored.refused(
        client.post("/v1/perturbations", json={**body, "all_sites": True}), "judgments_per_request", 50, before
    )
    assert problem["scope"] == "request" and problem["requested"] == 201
    # One site per operator (12 Python operators) and the seed: 13 <= 50, accepted; the seed's judging is counted.
    accepted = client.post("/v1/perturbations", json=body)
    assert accepted.status_code == 202, accepted.text
    assert wait_job(client, accepted.json()["job_id"], timeout_s=180)["status"] == "succeeded"
    view = client.get(f"/v1/perturbations/{accepted.json()['job_id']}").json()
    # The seed's judgment at submission, each mutant's as the worker created it.
    assert stored.judgments_today() == 1 + len(view["mutants"])


# ---- judgments --------------------------------------------------------------------------------------------------


def test_rejudging_counts_under_judgments_per_request_and_per_day(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any
) -> None:
    client, stored = _tenant(admin, keyed, stack, judgments_per_request=10, judgments_per_day=12)
    problem_id = add_sum_problem(client)
    attempt = wait_attempt(client, submit(client, problem_id, "python", SUM, judges=["sample_tests"])["attempt_id"])
    assert stored.judgments_today() == 1
    body = {"attempt_ids": [attempt["attempt_id"]], "judges": ["sample_tests"], "conditions": ["blind", "nonblind"]}
    # 1 attempt x 1 judge x 2 conditions x 6 repeats = 12 rows in one request: over 10.
    before = stored.snapshot()
    problem = stored.refused(
        client.post("/v1/judgments", json={**body, "repeats": 6}), "judgments_per_request", 10, before
    )
    assert problem["requested"] == 12 and problem["scope"] == "request"
    # 5 repeats: 10 rows, within the request's cap; the day now holds 11 of 12.
    accepted = client.post("/v1/judgments", json={**body, "repeats": 5})
    assert accepted.status_code == 202, accepted.text
    assert wait_job(client, accepted.json()["job_id"], timeout_s=120)["status"] == "succeeded"
    assert stored.judgments_today() == 11
    # Two more rows would pass the day's 12: refused until the next UTC day.
    before = stored.snapshot()
    day = client.post("/v1/judgments", json={**body, "conditions": ["blind"], "repeats": 2})
    problem = stored.refused(day, "judgments_per_day", 12, before)
    assert 1 <= int(day.headers["retry-after"]) <= 86_400 and problem["requested"] == 2
    # One fits exactly.
    last = client.post("/v1/judgments", json={**body, "conditions": ["blind"], "repeats": 1})
    assert last.status_code == 202, last.text
    assert stored.judgments_today() == 12
    wait_job(client, last.json()["job_id"], timeout_s=120)
    # An attempt asking for judging is a request for judgments too: the day is spent, so it is refused.
    before = stored.snapshot()
    judged = {
        "problem_id": problem_id,
        "language": "python",
        "source_code": SUM + "# more\n",
        "judges": ["sample_tests"],
    }
    stored.refused(client.post("/v1/attempts", json=judged), "judgments_per_day", 12, before)
    # Unjudged, it asks for none.
    assert client.post("/v1/attempts", json={**judged, "judges": []}).status_code == 202


def test_attempts_whose_judges_times_repeats_pass_the_request_cap_are_refused(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any
) -> None:
    client, stored = _tenant(admin, keyed, stack, judgments_per_request=3)
    problem_id = add_sum_problem(client)
    one = {"problem_id": problem_id, "language": "python", "source_code": SUM}
    before = stored.snapshot()
    # 2 judges x 1 condition x 2 repeats = 4 > 3.
    single = client.post("/v1/attempts", json={**one, "judges": ["sample_tests", "edit_similarity"], "repeats": 2})
    assert stored.refused(single, "judgments_per_request", 3, before)["requested"] == 4
    # A batch is one request: two attempts x 1 judge x 2 repeats = 4 > 3, refused whole.
    batch = [{**one, "source_code": SUM + f"# {i}\n", "judges": ["sample_tests"], "repeats": 2} for i in range(2)]
    stored.refused(client.post("/v1/attempts:batch", json={"attempts": batch}), "judgments_per_request", 3, before)
    # An inline problem is not left behind by a refusal either.
    inline = {
        "problem": {"problem_id": f"inline-{uuid.uuid4().hex[:6]}", "statement": "sum", "tests": [{"input": "1 2\n"}]},
        "language": "python",
        "source_code": SUM,
        "judges": ["sample_tests"],
        "conditions": ["blind", "nonblind"],
        "repeats": 2,
    }
    stored.refused(client.post("/v1/attempts", json=inline), "judgments_per_request", 3, before)
    # Within the cap both are accepted.
    assert client.post("/v1/attempts", json={**one, "judges": ["sample_tests"], "repeats": 3}).status_code == 202
    ok_batch = [{**one, "source_code": SUM + f"# ok {i}\n", "judges": ["sample_tests"]} for i in range(3)]
    assert client.post("/v1/attempts:batch", json={"attempts": ok_batch}).status_code == 202


def test_rejudging_with_an_llm_judge_is_refused_once_the_days_tokens_are_spent(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any
) -> None:
    client, stored = _tenant(admin, keyed, stack, judge_tokens_per_day=1)
    problem_id = add_sum_problem(client)
    attempt = wait_attempt(client, submit(client, problem_id, "python", SUM, judges=["scripted"])["attempt_id"])
    assert [j["status"] for j in attempt["judgments"]] == ["ok"]  # spends the day's one token and more
    before = stored.snapshot()
    body = {"attempt_ids": [attempt["attempt_id"]], "judges": ["scripted"], "repeats": 2}
    refused = client.post("/v1/judgments", json=body)
    stored.refused(refused, "judge_tokens_per_day", 1, before)
    assert int(refused.headers["retry-after"]) >= 1
    # An offline judge spends no tokens: re-judging with it is accepted.
    offline = client.post("/v1/judgments", json={**body, "judges": ["sample_tests"]})
    assert offline.status_code == 202, offline.text


# ---- synthesis programs -----------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_synthesis_programs_are_attempts_under_queued_attempts(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any, axiom: AxiomScript
) -> None:
    client, stored = _tenant(admin, keyed, stack, queued_attempts=1, judgments_per_request=4)
    scenario = axiom.add(WellBehaved())
    problem_id = _problem(client, scenario, "sum", [{"input": "1 2\n", "expected": "3\n", "public": True}])
    seed = _accepted(client, problem_id, SUM)
    body = {"llm": "scripted", "attempt_ids": [seed["attempt_id"]], "m": 1, "seed": 3}
    # Judged, the job may ask for a judgment of the seed and of one program per slot (targets 1-4): 5 > 4.
    before = stored.snapshot()
    refused = client.post("/v1/benchmarks:synthesize", json={**body, "judge": True, "judges": ["sample_tests"]})
    assert stored.refused(refused, "judgments_per_request", 4, before)["requested"] == 5
    # Unjudged it is accepted, and its programs are made one at a time under queued_attempts 1.
    accepted = client.post("/v1/benchmarks:synthesize", json=body)
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["job_id"]
    job = wait_job(client, job_id, timeout_s=280)
    assert job["status"] == "succeeded", job
    view = client.get(f"/v1/benchmarks/{job_id}").json()
    assert view["slots"] == {"total": 4, "counted": 4} and view["result"]["unfilled"] == []
    made = [p for p in view["programs"] + view["dropped"] if p["kind"] != "reference"]
    assert len(made) >= 4 and all(p["status"] == "done" for p in made)
    # WellBehaved's first functional and first other rewrites miss their targets: dropped, their slots drew again.
    assert view["dropped"]
    intervals = _live_intervals(stack, job_id)
    assert len(intervals) == len(made)
    _assert_one_live_at_a_time(intervals)
    # Its LLM calls (draws and calibration reports) spent the tenant's judge tokens.
    assert stored.judge_tokens_today() > 0


@pytest.mark.timeout(300)
def test_a_synthesis_jobs_zero_point_pairs_wait_at_queued_attempts(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any, axiom: AxiomScript
) -> None:
    client, stored = _tenant(admin, keyed, stack, queued_attempts=1, judgments_per_request=5)
    scenario = axiom.add(WellBehaved())
    sum_id = _problem(client, scenario, "sum", SUM_TESTS)
    product_id = _problem(client, scenario, "product", PRODUCT_TESTS)
    seeds = [_accepted(client, sum_id, SUM)["attempt_id"], _accepted(client, product_id, PRODUCT)["attempt_id"]]
    body = {"llm": "scripted", "attempt_ids": seeds, "targets": [1, 0], "m": 1, "seed": 5}
    # Judged: 2 seeds, 2 slots (target 1, one per requirement) and 2 0-point pairs (one per requirement): 6 > 5.
    before = stored.snapshot()
    refused = client.post("/v1/benchmarks:synthesize", json={**body, "judge": True, "judges": ["sample_tests"]})
    assert stored.refused(refused, "judgments_per_request", 5, before)["requested"] == 6
    accepted = client.post("/v1/benchmarks:synthesize", json=body)
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["job_id"]
    assert wait_job(client, job_id, timeout_s=280)["status"] == "succeeded"
    view = client.get(f"/v1/benchmarks/{job_id}").json()
    pairs = [p for p in view["programs"] if p["kind"] == "context_disruption"]
    # The final step made its two 0-point pairs one at a time (the second waited for the first to end), once each.
    assert len(pairs) == 2 and {p["problem_id"] for p in pairs} == {sum_id, product_id}
    assert view["result"]["context_disruption"] == {"status": "ok", "pairs": 2}
    assert sorted(view["result"]["selected"]["0"]) == sorted(p["attempt_id"] for p in pairs)
    _assert_one_live_at_a_time(_live_intervals(stack, job_id))


def test_synthesis_waits_while_the_tenants_llm_tokens_are_spent(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any, axiom: AxiomScript
) -> None:
    created = _new_key(admin, judge_tokens_per_day=1)
    client, stored = keyed(created["key"]), Stored(stack, created["tenant"])
    scenario = axiom.add(WellBehaved())
    problem_id = _problem(client, scenario, "sum", [{"input": "1 2\n", "expected": "3\n", "public": True}])
    seed = wait_attempt(client, submit(client, problem_id, "python", SUM, judges=["scripted"])["attempt_id"])
    assert seed["verdict"] == "AC" and stored.judge_tokens_today() >= 1  # the day's one token is spent
    accepted = client.post(
        "/v1/benchmarks:synthesize", json={"llm": "scripted", "attempt_ids": [seed["attempt_id"]], "m": 1}
    )
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["job_id"]

    def programs() -> int:
        return count_rows(stack.database_url, "SELECT count(*) FROM attempt WHERE job_id = :job", job=job_id)

    time.sleep(4)
    # Its draws wait before asking the LLM anything: no request, no program, the job still live.
    assert scenario.counts == {} and programs() == 0
    assert client.get(f"/v1/jobs/{job_id}").json()["status"] in ("queued", "running")
    # The owner's key is read at each step: with tokens back, the draws go on.
    assert admin.put(f"/v1/keys/{created['key_id']}/quotas", json={"judge_tokens_per_day": 10**9}).status_code == 200
    deadline = time.monotonic() + 60
    while programs() == 0:
        assert time.monotonic() < deadline, "the synthesis job did not go on once its tenant had tokens again"
        time.sleep(0.5)
    assert client.delete(f"/v1/jobs/{job_id}").status_code == 200


# ---- parent_attempt_id ------------------------------------------------------------------------------------------


def test_parent_attempt_id_must_be_the_tenants_own_attempt(
    stack: EmbeddedStack, admin: httpx.Client, keyed: Any, tenant_client: httpx.Client
) -> None:
    client, stored = _tenant(admin, keyed, stack)
    problem_id = add_sum_problem(client)
    own = submit(client, problem_id, "python", SUM, judges=[])["attempt_id"]
    foreign = submit(tenant_client, add_sum_problem(tenant_client), "python", SUM, judges=[])["attempt_id"]
    body = {"problem_id": problem_id, "language": "python", "source_code": SUM + "# derived\n", "judges": []}
    answers = []
    for parent in (foreign, "att_does_not_exist"):
        before = stored.rows()
        response = client.post("/v1/attempts", json={**body, "parent_attempt_id": parent})
        assert response.status_code == 404, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        (error,) = response.json()["errors"]
        assert error["loc"] == ["body", "parent_attempt_id"]
        answers.append(error["msg"].replace(parent, "<id>"))
        second = {**body, "source_code": SUM, "parent_attempt_id": parent}
        batch = client.post("/v1/attempts:batch", json={"attempts": [body, second]})
        assert batch.status_code == 404, batch.text
        assert batch.json()["errors"][0]["loc"] == ["body", "attempts", 1, "parent_attempt_id"]
        assert stored.rows() == before
    # Another tenant's attempt and no attempt at all get the same answer, as for a foreign id anywhere else.
    assert answers[0] == answers[1]
    assert client.get(f"/v1/attempts/{foreign}").status_code == 404
    # Its own attempt is accepted as the parent, and recorded.
    derived = client.post("/v1/attempts", json={**body, "parent_attempt_id": own})
    assert derived.status_code == 202, derived.text
    view = wait_attempt(client, derived.json()["attempt_id"])
    assert view["parent_attempt_id"] == own and view["verdict"] == "AC"
    item = {**body, "source_code": SUM + "# b\n", "parent_attempt_id": own}
    batch = client.post("/v1/attempts:batch", json={"attempts": [item]})
    assert batch.status_code == 202, batch.text
    (batch_id,) = batch.json()["attempt_ids"]
    assert wait_attempt(client, batch_id)["parent_attempt_id"] == own
