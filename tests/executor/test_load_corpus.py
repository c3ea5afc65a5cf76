"""The demo's corpus on a machine loaded on purpose (issue #20): HumanEval's 164 canonical solutions and the demo's
variants of them (a wrong value, a crash, a syntax error, an endless loop, a memory bomb: services/launcher/demo.py) get
exactly the verdicts beside a CPU hog that they get without it, and those are the verdicts the demo expects.

Marked `corpus` (a whole corpus, minutes: deselect with `-m "not corpus"`). Each attempt runs HumanEval's own
`check` with the demo's limits, straight on the executor (the verdicts are the executor's; the HTTP stack adds no
verdict of its own)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from executor.run import Executor
from services.kernel.contracts import ExecutionResult, Limits, Mode, TestCase
from services.launcher.demo import build_attempts, humaneval_problems
from services.lib.datasets import HUMANEVAL_LIMITS
from tests.executor.loadhog import Hog, host_procs_running

pytestmark = [pytest.mark.corpus, pytest.mark.timeout(900)]

LIMITS = Limits(**HUMANEVAL_LIMITS)


@dataclass(frozen=True)
class Judged:
    verdict: str
    statuses: tuple[str, ...]
    runs: int
    cpu_ms: int
    wall_ms: int
    wait_ms: int


@dataclass
class Corpus:
    attempts: list[dict[str, Any]]
    entry_points: dict[str, str]
    checks: dict[str, str]


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    problems = humaneval_problems()
    return Corpus(
        attempts=build_attempts(problems),
        entry_points={p["problem"]["problem_id"]: p["problem"]["entry_point"] for p in problems},
        # HumanEval's hidden check (with the prompt's helpers), as the demo's problems carry it.
        checks={p["problem"]["problem_id"]: p["problem"]["tests"][0]["code"] for p in problems},
    )


async def _judge(executor: Executor, corpus: Corpus, attempt: dict[str, Any]) -> Judged:
    problem_id = attempt["body"]["problem_id"]
    outcome: ExecutionResult = await executor.execute(
        tenant="corpus",
        language="python",
        source_code=attempt["body"]["source_code"],
        tests=[TestCase(code=corpus.checks[problem_id])],
        mode=Mode.FUNCTION,
        entry_point=corpus.entry_points[problem_id],
        limits=LIMITS,
    )
    tests = outcome.tests
    return Judged(
        verdict=outcome.verdict,
        statuses=tuple(test.status for test in tests),
        runs=sum(test.runs for test in tests),
        cpu_ms=sum(test.cpu_time_ms for test in tests),
        wall_ms=sum(test.wall_time_ms for test in tests),
        wait_ms=sum(test.wait_time_ms for test in tests),
    )


async def _judge_all(executor: Executor, corpus: Corpus) -> tuple[dict[str, Judged], float]:
    started = time.monotonic()
    judged = await asyncio.gather(*(_judge(executor, corpus, attempt) for attempt in corpus.attempts))
    uids = [attempt["body"]["attempt_uid"] for attempt in corpus.attempts]
    return dict(zip(uids, judged, strict=True)), time.monotonic() - started


def _figures(name: str, judged: dict[str, Judged], elapsed_s: float) -> str:
    reruns = sum(j.runs - len(j.statuses) for j in judged.values())
    rerun_attempts = sum(j.runs > len(j.statuses) for j in judged.values())
    wall = sum(j.wall_ms for j in judged.values())
    wait = sum(j.wait_ms for j in judged.values())
    verdicts = dict(sorted(Counter(str(j.verdict) for j in judged.values()).items()))
    return (
        f"{name}: {len(judged)} attempts in {elapsed_s:.1f} s; verdicts {verdicts}; re-runs {reruns} (in "
        f"{rerun_attempts} attempts); waiting for a CPU {wait / max(wall, 1):.0%} of the runs' time"
    )


async def test_humaneval_and_the_demo_variants_get_the_same_verdicts_beside_a_cpu_hog(
    executor: Executor, corpus: Corpus
) -> None:
    idle, idle_s = await _judge_all(executor, corpus)
    with Hog() as hog:
        assert host_procs_running() >= hog.count
        loaded, loaded_s = await _judge_all(executor, corpus)
    print("\n" + _figures("idle", idle, idle_s) + "\n" + _figures("loaded", loaded, loaded_s))
    changed = {uid: (idle[uid], loaded[uid]) for uid in idle if idle[uid].statuses != loaded[uid].statuses}
    assert not changed, changed
    expected = {attempt["body"]["attempt_uid"]: attempt["expected"] for attempt in corpus.attempts}
    missed = {uid: (expected[uid], judged.verdict) for uid, judged in idle.items() if judged.verdict != expected[uid]}
    assert not missed, missed
    # The loaded phase was loaded: its runs waited for a CPU for much of their time.
    assert sum(j.wait_ms for j in loaded.values()) >= 0.3 * sum(j.wall_ms for j in loaded.values())
