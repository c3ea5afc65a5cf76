"""A synthesis job's steps on both databases, run one by one in process (the queue is absent, as if Redis had
lost every task): each step does its work once however often it runs (a retry, a duplicate), records what
happened in the job's units, and the perturb service's pending query (services/kernel/pending.py: what the
reconciler re-enqueues) names the next step at every point, until the job ends."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from gateway.routes.benchmarks import plan_slots
from services.kernel import attempts, db, jobs, pending, subjects
from services.kernel.attempts import NewAttempt
from services.kernel.contracts import AttemptStatus, JobKind, JobStatus, Language, Stage
from services.kernel.db import session_scope
from services.kernel.jobs import job_units
from services.kernel.models import Attempt, Execution, Job, utcnow
from services.kernel.pending import synthesis_work
from services.kernel.plans import SynthesisPlan, SynthesisRequirement
from services.kernel.registry import Task
from services.lib.llm import Answer, Failure, LLMRequest
from services.perturb import llms, worker
from tests.databases import BACKENDS, migrated_database

PROBLEM: dict[str, Any] = {
    "title": "sum",
    "statement": "Print a + b.",
    "mode": "stdio",
    "entry_point": None,
    "tests": [{"input": "1 2\n", "expected": "3\n", "public": True}],
    "checker": {"kind": "tokens"},
    "limits": {},
    "references": [],
    "input_spec": None,
}
SEED = "a, b = map(int, input().split())\nprint(a + b)\n"
QUALITY = {"summary": "fine", "issues": []}


class FakeRunner:
    """Answers like a well-behaved LLM (each rewrite new), or fails every call while `failing`."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.failing = False

    async def run(self, request: LLMRequest) -> Answer | Failure:
        name = request.schema.name
        self.calls.append(name)
        if self.failing:
            return Failure("http 429", "fake", None, 3, "h")
        if name == "axiom_applicability":
            fields: dict[str, Any] = {"applicable": True, "reason": "it applies"}
        elif name == "axiom_rewrite":
            found = re.search(r"Program:\n```[a-z+]*\n(.*?)\n```", request.messages[-1]["content"], re.DOTALL)
            assert found is not None
            fields = {"code": found.group(1) + f"\n# edit {len(self.calls)}\n", "summary": "edited"}
        else:
            fields = QUALITY
        return Answer(fields, json.dumps(fields), "fake", "fake", 1, 1, None, None, "h")


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
    postgres_url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    async with migrated_database(tmp_path, postgres_url) as url:
        await db.dispose_engine()
        db.init_engine("tests", url)
        try:
            yield
        finally:
            await db.dispose_engine()


async def _setup() -> tuple[str, str]:
    """A problem, an accepted seed, and a synthesis job for targets 4 and 2, M = 1, two draws per slot."""
    async with session_scope() as session:
        problem, _ = await attempts.put_problem(session, "t", "sum", dict(PROBLEM), ["body"])
        spec = NewAttempt(language=Language.PYTHON, source_code=SEED, content={"source_code": SEED}, judges=[])
        seed, _ = await attempts.create_attempt(session, "t", problem, spec, "job_submit", ["body"])
        seed.status, seed.stage, seed.verdict = AttemptStatus.DONE, None, "AC"
        slots = plan_slots([1], [4, 2], 1)
        plan = SynthesisPlan(
            requirements=[SynthesisRequirement(problem_id="sum", problem_pk=problem.id, seed_ids=[seed.attempt_id])],
            seed_ids=[seed.attempt_id],
            targets=[4, 2],
            m=1,
            select=90,
            max_draws=2,
            seed=0,
            llms=["fake"],
            slots=slots,
            judges=[],
            conditions=["blind"],
            repeats=1,
        )
        job = jobs.create_job(session, tenant="t", kind=JobKind.SYNTHESIZE, total=len(slots) + 1, plan=plan)
        return job.job_id, seed.attempt_id


async def _state(job_id: str) -> tuple[Job, set[str], list[Attempt]]:
    async with session_scope() as session:
        job = await session.get(Job, job_id)
        assert job is not None
        made = (await session.scalars(select(Attempt).where(Attempt.job_id == job_id))).all()
        return job, await job_units(session, job_id), list(made)


async def _pending(job_id: str) -> list[tuple[Task, str]]:
    """What the reconciler would re-enqueue for this job (the perturb service's pending query)."""
    async with session_scope() as session:
        work = await pending.PENDING["perturb"](session, utcnow() + timedelta(seconds=1), 100)
    return [(task, subject) for task, subject, tenant in work if subject.endswith(job_id) and tenant == "t"]


async def _execute(attempt_id: str, verdict: str) -> None:
    """What the executor does: claim the execute stage, store run 0, move the attempt to verify."""
    async with session_scope() as session:
        assert await attempts.claim(session, attempt_id, Stage.EXECUTE) is not None
        session.add(
            Execution(
                attempt_id=attempt_id, run=0, verdict=verdict, passed=3 if verdict == "AC" else 1, total=3, tests=[]
            )
        )
        await attempts.finish_stage(session, attempt_id, Stage.EXECUTE, verdict=verdict, total=3)


async def test_every_step_runs_once_and_the_pending_query_names_the_next(
    database: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = FakeRunner()
    monkeypatch.setattr(llms, "runners", lambda _ctx, _names: [runner])
    job_id, seed_id = await _setup()
    t4, t2 = f"r0:t4:0:0@{job_id}", f"r0:t2:0:0@{job_id}"
    job, units, _ = await _state(job_id)
    assert synthesis_work(job, units) == [(Task.SYNTHESIZE_PROGRAM, t4, "t"), (Task.SYNTHESIZE_PROGRAM, t2, "t")]
    assert await _pending(job_id) == [(Task.SYNTHESIZE_PROGRAM, t4), (Task.SYNTHESIZE_PROGRAM, t2)]

    # A draw makes one candidate attempt, however often its task runs.
    for _ in range(2):
        await worker.synthesize_program({}, t4)
    job, units, made = await _state(job_id)
    assert len(made) == 1 and units == {"draw:r0:t4:0:0:candidate"}
    four = made[0]
    assert four.parent_attempt_id == seed_id and four.operator is not None and four.operator.startswith("axiom:R")
    assert (four.pipeline, four.stage, four.arm) == (["execute", "verify"], "execute", "control")
    assert four.mutation is not None and four.mutation["axiom"]["slot"] == "r0:t4:0"
    assert job.progress_total == 4  # 2 slots + the final step + the candidate's attempt
    assert await _pending(job_id) == [(Task.SYNTHESIZE_PROGRAM, t2)]  # the 4-point slot waits for its verdict

    # Passing every test matches target 4: kept, the slot counted, once.
    await _execute(four.attempt_id, "AC")
    for _ in range(2):
        await worker.verify_mutant({}, four.attempt_id)
    job, units, made = await _state(job_id)
    assert {"axiom:r0:t4:0", "draw:r0:t4:0:0:kept"} <= units
    assert made[0].mutation is not None and made[0].mutation["axiom"]["kept"] is True
    assert made[0].label == {"score": 4} and made[0].status == AttemptStatus.DONE
    assert job.progress_done == 2  # the attempt and its slot

    # Target 2 must fail a test; a candidate that passes every test is dropped, and the slot draws again.
    await worker.synthesize_program({}, t2)
    two = next(a for a in (await _state(job_id))[2] if a.attempt_id != four.attempt_id)
    await _execute(two.attempt_id, "AC")
    await worker.verify_mutant({}, two.attempt_id)
    job, units, made = await _state(job_id)
    dropped = next(a for a in made if a.attempt_id == two.attempt_id)
    assert dropped.mutation is not None and dropped.mutation["axiom"]["kept"] is False
    assert dropped.status == AttemptStatus.DONE and dropped.stage is None and "draw:r0:t2:0:0:mismatch" in units
    assert await _pending(job_id) == [(Task.SYNTHESIZE_PROGRAM, f"r0:t2:0:1@{job_id}")]

    # An LLM that fails is a recorded, classified outcome; the draws then run out and the slot is given up.
    runner.failing = True
    await worker.synthesize_program({}, f"r0:t2:0:1@{job_id}")
    _, units, _ = await _state(job_id)
    assert "draw:r0:t2:0:1:provider" in units and "axiom:r0:t2:0" not in units
    assert await _pending(job_id) == [(Task.SYNTHESIZE_PROGRAM, f"r0:t2:0:2@{job_id}")]
    for _ in range(2):
        await worker.synthesize_program({}, f"r0:t2:0:2@{job_id}")
    job, units, made = await _state(job_id)
    assert "axiom:r0:t2:0" in units and len(made) == 2
    assert await _pending(job_id) == [(Task.FINISH_SYNTHESIS, job_id)]

    # The final step: selection and the result, once; then one calibration report per representative.
    runner.failing = False
    for _ in range(2):
        await worker.finish_synthesis({}, job_id)
    job, units, _ = await _state(job_id)
    result = job.result or {}
    assert result["outcomes"] == {"kept": 1, "mismatch": 1, "provider": 1}
    assert result["unfilled"] == ["r0:t2:0"] and result["filled"] == 1
    assert result["selected"] == {"5": [seed_id], "4": [four.attempt_id]}
    assert result["reports"] == [seed_id, four.attempt_id]
    assert result["context_disruption"] == {"status": "not_requested", "pairs": 0}
    reports = [
        (Task.PREPARE_CALIBRATION, f"{seed_id}@{job_id}"),
        (Task.PREPARE_CALIBRATION, f"{four.attempt_id}@{job_id}"),
    ]
    assert await _pending(job_id) == reports
    quality_calls = runner.calls.count("axiom_quality_report")
    for attempt_id in (seed_id, four.attempt_id):
        for _ in range(2):
            await worker.prepare_calibration({}, f"{attempt_id}@{job_id}")
    assert runner.calls.count("axiom_quality_report") == quality_calls + 2
    job, units, made = await _state(job_id)
    assert await _pending(job_id) == []
    assert (
        job.status == JobStatus.SUCCEEDED and job.progress_done == job.progress_total == 7
    )  # 2 slots, 2 attempts, final, 2 reports
    kept = next(a for a in made if a.attempt_id == four.attempt_id)
    assert kept.mutation is not None
    report = kept.mutation["axiom"]["calibration_report"]
    assert report["target_score"] == 4 and report["llm_quality"]["report"] == QUALITY
    assert report["diff"]["unified"].startswith("--- parent")
    async with session_scope() as session:
        seed = await session.get(Attempt, seed_id)
        assert seed is not None and seed.mutation is not None
        assert seed.mutation["axiom_benchmarks"][job_id]["calibration_report"]["allowed_scores"] == [3, 4, 5]
        count = await session.scalar(select(func.count()).select_from(Attempt).where(Attempt.job_id == job_id))
        assert count == 2


def test_the_draw_records_say_what_comes_next_and_how_draws_ended() -> None:
    rows = {
        "axiom:r0:t4:0",
        "draw:r0:t4:0:0:candidate",
        "draw:r0:t4:0:0:kept",
        "draw:r0:t2:0:0:refusal",
        "draw:r0:t2:0:1:candidate",
        "draw:r0:t2:0:1:mismatch",
        "draw:r0:t3:0:0:candidate",
        "att_seed",
    }
    draws = pending.synthesis_draws(rows)
    assert draws["r0:t2:0"] == {0: {"refusal"}, 1: {"candidate", "mismatch"}}
    assert pending.next_draw(draws["r0:t2:0"]) == 2  # the last draw missed: draw again
    assert pending.next_draw(draws["r0:t3:0"]) is None  # its candidate is being verified
    assert pending.next_draw({}) == 0
    assert pending.synthesis_tally(rows) == {"kept": 1, "mismatch": 1, "pending": 1, "refusal": 1}
    assert subjects.parse_synthesis_slot("r12:t3:1") == (12, 3, 1)


def test_a_job_keeps_its_data_on_its_own_programs_and_apart_on_references() -> None:
    from services.lib.mutation.axiom_records import benchmark_entry, with_benchmark_entry

    own = {"axiom": {"job_id": "job_a", "target_score": 2}, "verification": {"verified": True}}
    updated = with_benchmark_entry(own, "job_a", calibration={"score": 1})
    assert updated["axiom"] == {"job_id": "job_a", "target_score": 2, "calibration": {"score": 1}}
    assert own["axiom"] == {"job_id": "job_a", "target_score": 2}  # a new value, never changed in place
    # The same program as a reference of another job: that job's data sit apart, the record stays as it was.
    other = with_benchmark_entry(updated, "job_b", calibration={"score": 5})
    assert other["axiom"] == updated["axiom"] and other["axiom_benchmarks"] == {"job_b": {"calibration": {"score": 5}}}
    assert benchmark_entry(other, "job_b") == {"calibration": {"score": 5}}
    assert benchmark_entry(other, "job_a")["calibration"] == {"score": 1}
    assert benchmark_entry(None, "job_c") == {}
