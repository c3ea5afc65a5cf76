"""A cancel stops work, on the real stack (gateway and workers as processes, nsjail, Redis; SQLite, and PostgreSQL
where the SQL differs): `DELETE /v1/jobs/{id}` of every kind of job ends its running pieces within seconds, with
their jails killed (no process of them left, their cgroups removed), drops what is queued, freezes the job's
progress, and leaves every piece it stopped `cancelled`, never TLE or RE.

How a jail is seen from here: every jail of a worker process has per-run cgroups named `tribunal-<worker pid>-<...>`
(services/lib/sandbox/jail.py); a jail that runs an endless loop is one whose processes use CPU. These stacks give a
task 120 s (TRIBUNAL_JOB_TIMEOUT_S) and the programs 30 s of CPU, so nothing here ends by itself within the seconds
a cancel is given.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from services.kernel.cancel import cancelled_key
from services.kernel.queue import task_key
from services.kernel.registry import QUEUE_OF, Task
from services.launcher.stack import EmbeddedStack
from tests.fake_llm import Behaviour, ScriptedLLM
from tests.helpers import add_sum_problem, fetch_rows, submit, wait_attempt, wait_job

CGROUPS = Path("/sys/fs/cgroup")
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
# A stopped unit's jails must be gone within this; nothing here ends by itself sooner than 30 s.
GONE_WITHIN_S = 15.0
# CPU time a process must have used, in all, to count as a program spinning.
BUSY_TOTAL_S = 0.6
# How long the slow judge's provider takes to answer.
SLOW_LLM_S = 6.0
LOOP = "while True:\n    pass\n"
SPIN_SPEC = {"kind": "function", "args": [{"name": "x", "type": {"type": "int", "min": 0, "max": 9}}]}


# ---- the stack ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_llm() -> Iterator[ScriptedLLM]:
    """A provider that answers every request after SLOW_LLM_S."""
    with ScriptedLLM(script=lambda _request, _nth: Behaviour(delay_s=SLOW_LLM_S)) as server:
        yield server


@pytest.fixture(scope="module", params=["sqlite"])
def cancel_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, redis_url: str, slow_llm: ScriptedLLM
) -> Iterator[EmbeddedStack]:
    judges = tmp_path_factory.mktemp("cancel-judges") / "judges.toml"
    judges.write_text(
        '[[judge]]\nname = "sample_tests"\nkind = "offline"\nmethod = "sample_tests"\n\n'
        f'[[judge]]\nname = "slow"\nkind = "llm"\nrubric = "cocreation"\nbase_url = "{slow_llm.base_url}"\n'
        'model = "slow-model"\nmax_tries = 1\ntimeout_s = 60\n'
    )
    database_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    stack = EmbeddedStack(
        tmp_path_factory.mktemp(f"cancel-{request.param}"),
        database_url=database_url,
        redis_url=f"{redis_url.rsplit('/', 1)[0]}/{3 if request.param == 'sqlite' else 4}",
        judges_file=judges,
        extra_env={
            "TRIBUNAL_RECONCILE_INTERVAL_S": "1",
            "TRIBUNAL_RECONCILE_GRACE_S": "2",
            "TRIBUNAL_JOB_TIMEOUT_S": "120",
        },
    )
    stack.start()
    yield stack
    stack.stop()


@pytest.fixture()
def client(cancel_stack: EmbeddedStack) -> Iterator[httpx.Client]:
    """A fresh tenant with submit+read."""
    admin_key = cancel_stack.admin_key_path.read_text().strip()
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    with httpx.Client(base_url=cancel_stack.url, headers={"Authorization": f"Bearer {admin_key}"}) as admin:
        key = admin.post("/v1/keys", json={"tenant": tenant, "scopes": ["submit", "read"]}).json()["key"]
    with httpx.Client(
        base_url=cancel_stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as tenant_client:
        yield tenant_client


@pytest.fixture()
def queues(cancel_stack: EmbeddedStack) -> Iterator[redis.Redis]:
    assert cancel_stack.redis_url
    client = redis.Redis.from_url(cancel_stack.redis_url)
    yield client
    client.close()


# ---- jails, seen from the host --------------------------------------------------------------------------------


def _worker_pid(stack: EmbeddedStack, kind: str) -> int:
    return stack.processes[f"{kind}-0"].pid


def _jail_cgroups(worker_pid: int) -> set[Path]:
    """Every per-run cgroup of the worker's jails, in every controller."""
    return {
        path
        for controller in ("memory", "pids", "cpuacct")
        for path in (CGROUPS / controller / "NSJAIL").glob(f"tribunal-{worker_pid}-*")
    }


def _processes_in(cgroup: Path) -> set[int]:
    pids: set[int] = set()
    for procs in [cgroup / "cgroup.procs", *cgroup.glob("*/cgroup.procs")]:
        try:
            pids.update(int(line) for line in procs.read_text().split())
        except (OSError, ValueError):
            continue
    return pids


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime of a live process; None once it is gone (or a zombie: it holds nothing but its pid)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == b"Z" else int(fields[11]) + int(fields[12])


def _busy(worker_pid: int, window_s: float = 0.5) -> dict[Path, set[int]]:
    """The worker's jail cgroups (memory controller) whose processes used CPU over `window_s` and BUSY_TOTAL_S in
    all, with those processes: a program spinning, as opposed to a pre-made jail waiting for a run (or starting:
    an interpreter's start costs a fraction of BUSY_TOTAL_S)."""
    cgroups = {c for c in _jail_cgroups(worker_pid) if c.parts[-3] == "memory"}
    before = {(cgroup, pid): _cpu_ticks(pid) for cgroup in cgroups for pid in _processes_in(cgroup)}
    time.sleep(window_s)
    busy: dict[Path, set[int]] = {}
    for (cgroup, pid), ticks in before.items():
        now = _cpu_ticks(pid)
        if ticks is not None and now is not None and (now - ticks) * TICK_S >= 0.05 and now * TICK_S >= BUSY_TOTAL_S:
            busy.setdefault(cgroup, set()).add(pid)
    return busy


def _wait_busy(
    worker_pid: int, at_least: int = 1, timeout_s: float = 90, *, job: Callable[[], dict[str, Any]] | None = None
) -> dict[Path, set[int]]:
    """Wait until `at_least` jails of the worker run a program; `job`, if given, reads the job that should start
    them (an end of it first is the failure to report)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        busy = _busy(worker_pid)
        if len(busy) >= at_least:
            return busy
        if job is not None and (current := job())["status"] not in ("queued", "running"):
            raise AssertionError(f"the job ended before any jail of it ran: {current}")
    raise AssertionError(f"no jail of worker {worker_pid} started running within {timeout_s} s")


def _assert_gone(worker_pid: int, busy: dict[Path, set[int]]) -> float:
    """Within GONE_WITHIN_S: no process of the jails that were running is left, their cgroups are removed from
    every controller, and no jail of the worker runs anything. Returns how long it took (s)."""
    started = time.monotonic()
    names = {cgroup.name for cgroup in busy}
    while True:
        left = sorted(pid for pids in busy.values() for pid in pids if _cpu_ticks(pid) is not None)
        kept = sorted(str(c) for c in _jail_cgroups(worker_pid) if c.name in names)
        running = _busy(worker_pid, window_s=0.3)
        if not left and not kept and not running:
            return time.monotonic() - started
        if time.monotonic() - started > GONE_WITHIN_S:
            raise AssertionError(
                f"{GONE_WITHIN_S} s after the cancel: processes {left}, cgroups {kept}, running jails {running}"
            )
        time.sleep(0.2)


def _frozen(client: httpx.Client, job_id: str, pause_s: float = 2.0) -> dict[str, Any]:
    """The job, read twice `pause_s` apart: cancelled both times, with the same progress and end."""
    first = client.get(f"/v1/jobs/{job_id}").json()
    time.sleep(pause_s)
    second = client.get(f"/v1/jobs/{job_id}").json()
    assert first["status"] == second["status"] == "cancelled", (first, second)
    assert first["progress"] == second["progress"] and first["finished_at"] == second["finished_at"]
    assert second["error"] == "cancelled by the client"
    return second


def _cancel(client: httpx.Client, job_id: str) -> dict[str, Any]:
    response = client.delete(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    return dict(response.json())


def _none_queued(queues: redis.Redis, tasks: list[tuple[Task, str]]) -> list[str]:
    """The tasks still in their queues (waiting or running)."""
    return [task_key(t, s) for t, s in tasks if queues.zscore(QUEUE_OF[t], task_key(t, s)) is not None]


def _eventually(check: Callable[[], Any], timeout_s: float = GONE_WITHIN_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if not value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


# ---- attempts -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cancel_stack", ["sqlite", "postgresql"], indirect=True)
def test_a_cancelled_batch_of_endless_loops_stops_within_seconds(
    cancel_stack: EmbeddedStack, client: httpx.Client, queues: redis.Redis
) -> None:
    """Issue #20's case: 12 endless loops, cancelled about 2 s in. Every one ends `cancelled` (none TLE), no jail of
    them is left, nothing of the job waits in the queue, and its progress does not move."""
    problem_id = add_sum_problem(client, limits={"cpu_time_s": 30, "wall_time_s": 60})
    response = client.post(
        "/v1/attempts:batch",
        json={
            "attempts": [
                {"problem_id": problem_id, "language": "python", "source_code": LOOP + f"# {i}\n", "judges": []}
                for i in range(12)
            ]
        },
    )
    assert response.status_code == 202, response.text
    job_id, ids = response.json()["job_id"], response.json()["attempt_ids"]
    executor = _worker_pid(cancel_stack, "executor")
    submitted = time.monotonic()
    busy = _wait_busy(executor)
    time.sleep(max(0.0, 2.0 - (time.monotonic() - submitted)))
    busy.update(_busy(executor))
    cancelled = _cancel(client, job_id)
    _assert_gone(executor, busy)
    views = [client.get(f"/v1/attempts/{attempt_id}").json() for attempt_id in ids]
    assert [(v["status"], v["verdict"], v["tests"]) for v in views] == [("cancelled", None, [])] * 12
    assert all(v["finished_at"] for v in views)
    job = _frozen(client, job_id)
    assert job["progress"] == cancelled["progress"] == {"done": 0, "total": 12}
    assert _eventually(lambda: _none_queued(queues, [(Task.EXECUTE_ATTEMPT, a) for a in ids])) == []
    assert queues.exists(cancelled_key(job_id))
    # The reconciler (every 1 s, for work older than 2 s) puts none of it back.
    time.sleep(2.5)
    assert _none_queued(queues, [(Task.EXECUTE_ATTEMPT, a) for a in ids]) == []
    # Listed as cancelled, and a second cancel changes nothing.
    listed = client.get("/v1/attempts", params={"status": "cancelled", "limit": 50}).json()["items"]
    assert sorted(item["attempt_id"] for item in listed) == sorted(ids)
    again = client.delete(f"/v1/jobs/{job_id}").json()
    assert (again["status"], again["progress"], again["finished_at"]) == (
        "cancelled",
        job["progress"],
        job["finished_at"],
    )


def test_a_cancel_that_races_the_last_unit_ends_the_job_one_way(client: httpx.Client) -> None:
    """Cancels at several moments around the end of a short batch: the job ends succeeded (the last unit landed
    first: everything done) or cancelled (nothing live, and progress counts exactly the attempts done before the
    cancel, then never moves)."""
    problem_id = add_sum_problem(client)
    source = "a, b = map(int, input().split())\nprint(a + b)\n"
    outcomes = []
    for delay_s in (0.0, 0.1, 0.3, 0.6, 1.0, 2.0):
        batch = client.post(
            "/v1/attempts:batch",
            json={
                "attempts": [
                    {"problem_id": problem_id, "language": "python", "source_code": source + f"# {delay_s} {i}\n"}
                    | {"judges": []}
                    for i in range(3)
                ]
            },
        ).json()
        time.sleep(delay_s)
        answer = client.delete(f"/v1/jobs/{batch['job_id']}").json()
        assert answer["status"] in ("succeeded", "cancelled"), answer
        for _ in range(2):
            job = client.get(f"/v1/jobs/{batch['job_id']}").json()
            views = [client.get(f"/v1/attempts/{a}").json() for a in batch["attempt_ids"]]
            statuses = sorted(v["status"] for v in views)
            assert job["status"] == answer["status"]
            if job["status"] == "succeeded":
                assert statuses == ["done"] * 3 and job["progress"] == {"done": 3, "total": 3}
            else:
                assert set(statuses) <= {"done", "cancelled"}, statuses
                assert job["progress"] == {"done": statuses.count("done"), "total": 3} == answer["progress"]
                assert all(v["verdict"] == "AC" for v in views if v["status"] == "done")
            time.sleep(0.5)
        outcomes.append(answer["status"])
    assert "cancelled" in outcomes  # the first cancel, right after the submission, lands before the end


def test_a_cancel_of_a_finished_or_foreign_job_changes_nothing(
    client: httpx.Client, cancel_stack: EmbeddedStack
) -> None:
    problem_id = add_sum_problem(client)
    accepted = submit(client, problem_id, "python", "a, b = map(int, input().split())\nprint(a + b)\n", judges=[])
    done = wait_attempt(client, accepted["attempt_id"])
    job = wait_job(client, accepted["job_id"])
    assert (done["status"], job["status"]) == ("done", "succeeded")
    answer = client.delete(f"/v1/jobs/{accepted['job_id']}")
    assert answer.status_code == 200 and answer.json() == job
    assert client.get(f"/v1/attempts/{accepted['attempt_id']}").json()["status"] == "done"
    # Another tenant cannot cancel it, nor learn that it exists.
    admin_key = cancel_stack.admin_key_path.read_text().strip()
    with httpx.Client(base_url=cancel_stack.url, headers={"Authorization": f"Bearer {admin_key}"}) as admin:
        other = admin.post("/v1/keys", json={"tenant": f"t-{uuid.uuid4().hex[:10]}", "scopes": ["submit"]}).json()
    foreign = httpx.delete(
        f"{cancel_stack.url}/v1/jobs/{accepted['job_id']}", headers={"Authorization": f"Bearer {other['key']}"}
    )
    assert foreign.status_code == 404
    assert client.get(f"/v1/jobs/{accepted['job_id']}").json() == job


def test_a_cancelled_direct_execution_stops_its_jail(cancel_stack: EmbeddedStack, client: httpx.Client) -> None:
    """A program that ignores SIGTERM, starts a new session and spins in three processes: all of them end."""
    hostile = (
        "import os, signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nos.setsid()\n"
        "for _ in range(2):\n    os.fork()\n" + LOOP
    )
    response = client.post(
        "/v1/executions",
        json={
            "language": "python",
            "source_code": hostile,
            "stdin": "",
            "limits": {"cpu_time_s": 30, "wall_time_s": 60},
        },
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    executor = _worker_pid(cancel_stack, "executor")
    busy = _wait_busy(executor)
    deadline = time.monotonic() + 30
    while sum(len(pids) for pids in busy.values()) < 4 and time.monotonic() < deadline:
        busy = _busy(executor)  # the program and its three children, each spinning
    assert sum(len(pids) for pids in busy.values()) == 4, busy
    _cancel(client, job_id)
    _assert_gone(executor, busy)
    job = _frozen(client, job_id)
    assert job["result"] is None


# ---- similarity pairs -----------------------------------------------------------------------------------------


def test_a_cancelled_similarity_job_stops_its_running_pair_and_runs_no_other(
    cancel_stack: EmbeddedStack, client: httpx.Client, queues: redis.Redis
) -> None:
    """A dataset of heavy pairs (both programs spin on every input), cancelled while its first pair runs: the pair's
    two jails are killed within seconds, every pair ends `cancelled`, and the ones behind it never run. A pair of
    another job queued behind them, whose earlier tries used its budget, then fails at once without running."""
    spin = "def f(x: int) -> int:\n    while True:\n        pass\n"
    pairs = [
        {"id": f"p{i}", "golden_code": spin + f"# reference {i}\n", "generated_code": spin + f"# candidate {i}\n"}
        | {"entry_point": "f", "mode": "function", "input_spec": SPIN_SPEC}
        for i in range(3)
    ]
    heavy = {"pairs": pairs, "n_inputs": 20, "repeats": 1, "time_budget_s": 60, "per_input_timeout_s": 5}
    response = client.post("/v1/similarity/datasets", json=heavy)
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    similarity = _worker_pid(cancel_stack, "similarity")
    busy = _wait_busy(similarity, at_least=2)  # the reference's jail and the candidate's
    # Queued behind the dataset: a trivial pair whose budget earlier tries used up (as if it had been tried).
    trivial = "def f(x: int) -> int:\n    return x\n"
    spent = client.post(
        "/v1/similarity",
        json={
            "reference": {"language": "python", "source_code": trivial},
            "candidate": {"language": "python", "source_code": trivial + "# same\n"},
            "entry_point": "f",
            "input_spec": SPIN_SPEC,
            "n_inputs": 10,
            "repeats": 1,
        },
    ).json()["job_id"]
    queues.set(f"tribunal:pair-spent:0@{spent}", 10_000)
    _cancel(client, job_id)
    _assert_gone(similarity, busy)
    table = client.get(f"/v1/similarity/{job_id}").json()
    assert [(p["status"], p["df_score"]) for p in table["pairs"]] == [("cancelled", None)] * 3
    assert _frozen(client, job_id)["progress"] == {"done": 0, "total": 3}
    pair_tasks = [(Task.SCORE_PAIR, f"{o}@{job_id}") for o in range(3)]
    assert _eventually(lambda: _none_queued(queues, pair_tasks)) == []
    # The running pair has arq's result; the two behind it left the queue in bulk, or, when worker slots took them
    # in the instant before the cancel reached the queue, they ran nothing: every pair above is cancelled without
    # a score, and no jail outlived the cancel. (Asserting how many of them a slot took raced with the slots: CI
    # saw [1, 0, 1] and, with more slots, [1, 1, 1].)
    results = [queues.exists(f"arq:result:{task_key(t, s)}") for t, s in pair_tasks]
    assert results[0] == 1, results
    # The pair behind them ran nothing: its budget was spent, so it failed on this try, and is not tried again.
    after = wait_job(client, spent, timeout_s=60)
    assert after["status"] == "failed" and "budget" in after["error"], after
    assert _busy(similarity, window_s=1.0) == {}
    rows = fetch_rows(
        cancel_stack.database_url, "SELECT status, result FROM similarity_pair WHERE job_id = :j", j=spent
    )
    assert [(row["status"], row["result"]) for row in rows] == [("failed", None)]


# ---- mutants, judging -----------------------------------------------------------------------------------------


def test_a_perturbation_cancelled_mid_way_cancels_its_mutants(
    cancel_stack: EmbeddedStack, client: httpx.Client
) -> None:
    # The seed and most of its ten mutants (all_sites) spin for 3 s or more of CPU; three run at once.
    seed = (
        "import time\nn = int(input())\nspent = 0.0\nstart = time.process_time()\nwhile spent < 3.0:\n"
        "    spent = time.process_time() - start\nprint(n + 1)\n"
    )
    problem_id = f"spin-{uuid.uuid4().hex[:8]}"
    body = {
        "problem_id": problem_id,
        "statement": "Print n + 1, after three seconds of work.",
        "tests": [{"input": "1\n", "expected": "2\n", "public": True}],
        "limits": {"cpu_time_s": 30, "wall_time_s": 60},
    }
    assert client.post("/v1/problems", json=body).status_code == 201
    accepted = wait_attempt(client, submit(client, problem_id, "python", seed, judges=[])["attempt_id"])
    assert accepted["verdict"] == "AC", accepted
    response = client.post("/v1/perturbations", json={"attempt_ids": [accepted["attempt_id"]], "all_sites": True})
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    executor = _worker_pid(cancel_stack, "executor")
    busy = _wait_busy(executor, job=lambda: dict(client.get(f"/v1/jobs/{job_id}").json()))
    _cancel(client, job_id)
    _assert_gone(executor, busy)
    mutants = client.get(f"/v1/perturbations/{job_id}").json()["mutants"]
    assert mutants, "the seed gave no mutants"
    statuses = [m["status"] for m in mutants]
    assert set(statuses) <= {"done", "cancelled"}, statuses
    assert any(m["status"] == "cancelled" and m["verdict"] is None for m in mutants)
    job = _frozen(client, job_id)
    assert job["progress"]["done"] <= job["progress"]["total"]
    # What ended before the cancel is what the progress counts: the seed's unit and the mutants done by then.
    assert _frozen(client, job_id, pause_s=1.0)["progress"] == job["progress"]


def test_cancelled_judging_ends_its_provider_calls(client: httpx.Client, slow_llm: ScriptedLLM) -> None:
    """A re-judge job, and an attempt at its judge stage, cancelled while the provider is answering: no judgment is
    written after the cancel, the attempt ends `cancelled` with the verdict its execute stage gave it."""
    problem_id = add_sum_problem(client)
    marker = uuid.uuid4().hex
    source = f"a, b = map(int, input().split())\nprint(a + b)  # {marker}\n"
    judged = submit(client, problem_id, "python", source, judges=[])
    wait_attempt(client, judged["attempt_id"])
    rejudge = client.post(
        "/v1/judgments", json={"attempt_ids": [judged["attempt_id"]], "judges": ["slow"], "conditions": ["blind"]}
    )
    assert rejudge.status_code == 202, rejudge.text
    staged = submit(client, problem_id, "python", source + "# staged\n", judges=["slow"], conditions=["blind"])

    def asked() -> int:
        return sum(1 for request in slow_llm.requests if marker.encode() in request.body)

    deadline = time.monotonic() + 60
    while asked() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert asked() == 2, "the provider was not asked for both judgments"
    asked_at = time.monotonic()
    _cancel(client, rejudge.json()["job_id"])
    _cancel(client, staged["job_id"])
    ended = client.get(f"/v1/attempts/{staged['attempt_id']}").json()
    assert (ended["status"], ended["verdict"]) == ("cancelled", "AC")
    # Past the moment the provider answers: nothing was written from either call.
    time.sleep(max(0.0, SLOW_LLM_S + 2 - (time.monotonic() - asked_at)))
    for attempt_id in (judged["attempt_id"], staged["attempt_id"]):
        assert client.get(f"/v1/attempts/{attempt_id}").json()["judgments"] == []
    assert _frozen(client, rejudge.json()["job_id"], pause_s=0.5)["progress"] == {"done": 0, "total": 1}
    assert client.get(f"/v1/attempts/{staged['attempt_id']}").json()["status"] == "cancelled"


# ---- a pair's cost --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_a_pair_that_runs_past_its_budget_fails_once_and_is_not_tried_again(
    stack: EmbeddedStack, tenant_client: httpx.Client
) -> None:
    """The shared stack gives a task 10 s (tests/conftest.py), so a pair's budget is that try's 8 s: a pair whose
    programs spin for a minute fails when its budget runs out, on its first try, instead of holding the similarity
    worker for the task limit times its tries."""
    spin = "def f(x: int) -> int:\n    while True:\n        pass\n"
    response = tenant_client.post(
        "/v1/similarity",
        json={
            "reference": {"language": "python", "source_code": spin},
            "candidate": {"language": "python", "source_code": spin + "# candidate\n"},
            "entry_point": "f",
            "input_spec": SPIN_SPEC,
            "n_inputs": 20,
            "repeats": 1,
            "time_budget_s": 60,
            "per_input_timeout_s": 5,
        },
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    job = wait_job(tenant_client, job_id, timeout_s=90)
    assert job["status"] == "failed" and "ran past its budget" in job["error"], job
    assert "lower R x T" in job["error"]
    # One try: it was not tried again, and what it took was recorded against the pair's budget.
    (row,) = fetch_rows(stack.database_url, "SELECT tries FROM job WHERE job_id = :j", j=job_id)
    assert row["tries"] == 1
    assert stack.redis_url
    with redis.Redis.from_url(stack.redis_url) as queues:
        assert float(queues.get(f"tribunal:pair-spent:0@{job_id}") or 0) >= 7.0
    table = tenant_client.get(f"/v1/similarity/{job_id}").json()
    assert [p["status"] for p in table["pairs"]] == ["failed"]
    assert _busy(_worker_pid(stack, "similarity"), window_s=1.0) == {}
