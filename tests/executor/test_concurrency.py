"""Many executes at once share a fixed number of sandbox slots, and a cancelled execute stops its jail."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.run import Executor
from services.kernel.contracts import Limits, TestCase
from tests.executor.conftest import SUM_SOURCES, dispose, make_executor, our_cgroups, processes_of, run, settle

SANDBOX_UID = 64124


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    # A work root the sandbox uid could reach (unlike pytest's 0700 temp dir); builds are staged outside anyway.
    base = Path(tempfile.mkdtemp(prefix="tribunal-concurrency-"))
    base.chmod(0o711)
    executor = make_executor(base / "work", slots=2, sandbox_uid=SANDBOX_UID)
    yield executor
    dispose(executor)
    shutil.rmtree(base)


@pytest.fixture()
def peak_jails(executor: Executor, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the jails running at once (around the real Sandbox.run)."""
    lock = threading.Lock()
    state = {"now": 0}
    peak = [0]
    real_run = executor.engine.sandbox.run

    def counting_run(*args: Any, **kwargs: Any) -> Any:
        with lock:
            state["now"] += 1
            peak[0] = max(peak[0], state["now"])
        try:
            return real_run(*args, **kwargs)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(executor.engine.sandbox, "run", counting_run)
    return peak


async def test_sixteen_executes_with_two_slots(executor: Executor, peak_jails: list[int]) -> None:
    assert not executor.builds_root.is_relative_to(executor.work_root)
    languages = ["python", "c", "cpp", "java"]
    requests = []
    for i in range(16):
        language = languages[i % 4]
        wrong = i % 3 == 0
        tests = [
            TestCase(input=f"{i} {i}", expected=str(2 * i)),
            TestCase(input=f"{i} 1", expected="-1" if wrong else str(i + 1)),
        ]
        requests.append((language, tests, "WA" if wrong else "AC"))
    outcomes = await asyncio.gather(
        *(run(executor, language, SUM_SOURCES[language], tests) for language, tests, _ in requests)
    )
    assert [o.verdict for o in outcomes] == [verdict for _, _, verdict in requests]
    assert [o.passed for o in outcomes] == [1 if verdict == "WA" else 2 for _, _, verdict in requests]
    assert 1 <= peak_jails[0] <= 2
    settle(executor)
    assert processes_of(SANDBOX_UID, executor) == [] and our_cgroups(executor) == []


async def test_cancelled_execute_stops_its_jail(executor: Executor) -> None:
    sleeper = "import time\ntime.sleep(60)\n"
    # Built beforehand: a compile in progress is shared with other callers and deliberately not cancelled.
    assert (await run(executor, "python", sleeper, limits=Limits(wall_time_s=0.5))).verdict == "TLE"
    task = asyncio.create_task(run(executor, "python", sleeper, limits=Limits(cpu_time_s=5, wall_time_s=60)))
    for _ in range(400):
        if processes_of(SANDBOX_UID, executor):
            break
        await asyncio.sleep(0.025)
    else:
        pytest.fail("the jailed program never started")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    settle(executor)
    assert processes_of(SANDBOX_UID, executor) == []
    assert our_cgroups(executor) == []
    # Its slot is free again.
    after = await run(executor, "python", SUM_SOURCES["python"], stdin="1 1", expected="2")
    assert after.verdict == "AC"


async def test_cgroups_left_by_a_dead_worker_are_removed(executor: Executor) -> None:
    """A worker killed mid-run leaves its per-run cgroups (with nsjail's inside); the next start clears them."""
    with subprocess.Popen(["true"]) as finished:
        finished.wait()
    leftovers = [Path(f"/sys/fs/cgroup/{c}/NSJAIL/tribunal-{finished.pid}-0") for c in ("memory", "pids")]
    for path in leftovers:
        path.mkdir()
        (path / "NSJAIL.1").mkdir()
    fresh = make_executor(executor.work_root, slots=1)
    fresh.close()
    assert not any(path.exists() for path in leftovers)
