"""Verdicts are a property of the program, not of the machine's load (issue #20, Found 6).

The same programs run twice on the real sandbox: once beside whatever else the machine does, once beside a CPU hog
made on purpose (three busy processes per CPU at normal priority: tests/executor/loadhog.py). Their verdicts, and
the clock that stopped them, must be the same. The loaded runs must also show the load (they waited for a CPU), or
the comparison would prove nothing. Then: what a run's CPU time counts (every process, in function mode too), a run
the load starves is run again and, if it stays starved, is IE and retryable, and every kind of jail reads neutral
/proc files while the host is loaded.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from executor.run import MAX_RERUNS, Executor
from judge.tooljail import ToolJail
from services.kernel.contracts import ExecutionResult, Limits, Mode, TestCase, TestResult
from services.lib.sandbox import RunResult, classify, unjudged_reason
from services.lib.sandbox.clocks import starved_after_s
from services.lib.sandbox.zygote import NEUTRAL_PROC_FILES, cpu_names, neutral_proc_content
from tests.executor.conftest import run
from tests.executor.loadhog import Hog, host_procs_running

pytestmark = pytest.mark.timeout(400)

# A wall limit only a little above the CPU limit: under the hog an honest program's elapsed time is well past it,
# so only a wall clock that leaves out the waiting lets it finish.
LIMITS = Limits(cpu_time_s=1.5, wall_time_s=2.5, memory_mb=128, output_kb=64, processes=16)

_BURN = (
    "import time\n\ndef burn(seconds):\n    end = time.process_time() + seconds\n"
    "    while time.process_time() < end:\n        pass\n"
)
_CHILDREN = (
    _BURN + "\nimport os\n\ndef children(n, seconds, wait=True):\n    pids = []\n    for _ in range(n):\n"
    "        pid = os.fork()\n        if pid == 0:\n            burn(seconds)\n            os._exit(0)\n"
    "        pids.append(pid)\n    if wait:\n        for pid in pids:\n            os.waitpid(pid, 0)\n"
)


@dataclass(frozen=True)
class Program:
    source: str
    verdict: str
    # The clock that must stop it (None: it ends by itself, or by its memory limit).
    stopped_by: str | None = None
    mode: Mode = Mode.STDIO
    expected: Any = None
    # At least this much CPU time must be reported (every process counted).
    min_cpu_ms: int = 1


PROGRAMS: dict[str, Program] = {
    "memory_bomb": Program("hoard = []\nwhile True:\n    hoard.append(bytearray(1 << 24))\n", "MLE"),
    # Two thirds of its CPU limit: on an idle machine well inside its wall limit, under the hog far past it.
    "honest_cpu": Program(_BURN + "burn(1.0)\nprint('done')\n", "AC", expected="done", min_cpu_ms=1000),
    "endless_loop": Program("while True:\n    pass\n", "TLE", "cpu", min_cpu_ms=1500),
    "sleeper": Program("import time\ntime.sleep(100)\n", "TLE", "wall"),
    "blocked_on_a_pipe": Program("import os\nr, w = os.pipe()\nos.read(r, 1)\n", "TLE", "wall"),
    # The children do the work and the parent waits: their CPU time is the run's.
    "children_within_limit": Program(
        _CHILDREN + "children(2, 0.5)\nprint('done')\n", "AC", expected="done", min_cpu_ms=1000
    ),
    "children_past_limit": Program(_CHILDREN + "children(2, 1.2)\nprint('done')\n", "TLE", "cpu", min_cpu_ms=1500),
    # Nobody waits for these children: the CPU limit still counts them, and stops the run.
    "orphans_past_limit": Program(
        _CHILDREN + "children(2, 1.2, wait=False)\nimport time\ntime.sleep(30)\n", "TLE", "cpu", min_cpu_ms=1500
    ),
    # The parent sleeps while its children compute, then exits: their work in flight is the run's, however little
    # of it the load let them do before the parent woke (idle, they pass the limit while it sleeps).
    "children_outlive_parent": Program(
        _CHILDREN + "import signal, time\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        "children(2, 1.2, wait=False)\ntime.sleep(0.3)\nprint('done')\n",
        "TLE",
        "cpu",
        min_cpu_ms=1500,
    ),
    # A child that only sleeps is not work in flight: killed when the parent ends, as always.
    "sleeping_leftover": Program(
        "import os, time\nif os.fork() == 0:\n    time.sleep(100)\nprint('done')\n", "AC", expected="done"
    ),
    # Function mode: the harness's supervisor and the candidate's process, and what the candidate forks.
    "function_ok": Program("def f(x):\n    return x + 1\n", "AC", mode=Mode.FUNCTION),
    "function_honest_cpu": Program(
        _BURN + "\ndef f(x):\n    burn(1.0)\n    return x + 1\n", "AC", mode=Mode.FUNCTION, min_cpu_ms=1000
    ),
    "function_memory_bomb": Program(
        "def f(x):\n    hoard = []\n    while True:\n        hoard.append(bytearray(1 << 24))\n",
        "MLE",
        mode=Mode.FUNCTION,
    ),
    "function_endless_loop": Program(
        "def f(x):\n    while True:\n        pass\n", "TLE", "cpu", mode=Mode.FUNCTION, min_cpu_ms=1500
    ),
    "function_sleeper": Program("import time\n\ndef f(x):\n    time.sleep(100)\n", "TLE", "wall", mode=Mode.FUNCTION),
    "function_children_past_limit": Program(
        _CHILDREN + "\ndef f(x):\n    children(2, 1.2)\n    return x + 1\n",
        "TLE",
        "cpu",
        mode=Mode.FUNCTION,
        min_cpu_ms=1500,
    ),
}


async def _execute(executor: Executor, program: Program) -> ExecutionResult:
    if program.mode == Mode.FUNCTION:
        tests = [TestCase(input=[1], expected=2)]
        return await run(executor, "python", program.source, tests, limits=LIMITS, mode=Mode.FUNCTION, entry_point="f")
    return await run(executor, "python", program.source, [TestCase(input="", expected=program.expected)], limits=LIMITS)


@dataclass
class Phase:
    results: dict[str, TestResult]
    elapsed_s: float


async def _phase(executor: Executor) -> Phase:
    started = time.monotonic()
    outcomes = await asyncio.gather(*(_execute(executor, program) for program in PROGRAMS.values()))
    results = {}
    for name, outcome in zip(PROGRAMS, outcomes, strict=True):
        assert len(outcome.tests) == 1, (name, outcome)
        results[name] = outcome.tests[0]
    return Phase(results, time.monotonic() - started)


@pytest.fixture(scope="module")
async def phases(executor: Executor) -> dict[str, Phase]:
    """Every program once on the machine as it is, then once beside the hog (killed as soon as that is done)."""
    idle = await _phase(executor)
    with Hog() as hog:
        assert host_procs_running() >= hog.count  # the hog is really there
        loaded = await _phase(executor)
        assert hog.running() == hog.count
    _report(idle, loaded)
    return {"idle": idle, "loaded": loaded}


def _report(idle: Phase, loaded: Phase) -> None:
    reruns = {phase: sum(r.runs - 1 for r in p.results.values()) for phase, p in (("idle", idle), ("loaded", loaded))}
    print(
        f"\nidle phase {idle.elapsed_s:.1f} s, loaded phase {loaded.elapsed_s:.1f} s; "
        f"re-runs: idle {reruns['idle']}, loaded {reruns['loaded']} (of {len(PROGRAMS)} tests each)"
    )
    for name in PROGRAMS:
        a, b = idle.results[name], loaded.results[name]
        print(
            f"  {name:30} {a.status:4} cpu {a.cpu_time_ms:5} wall {a.wall_time_ms:5} wait {a.wait_time_ms:5} | "
            f"{b.status:4} cpu {b.cpu_time_ms:5} wall {b.wall_time_ms:5} wait {b.wait_time_ms:5} runs {b.runs}"
        )


@pytest.mark.parametrize("name", list(PROGRAMS))
async def test_verdict_is_the_same_idle_and_loaded(phases: dict[str, Phase], name: str) -> None:
    program = PROGRAMS[name]
    for phase in ("idle", "loaded"):
        result = phases[phase].results[name]
        assert (result.status, result.stopped_by) == (program.verdict, program.stopped_by), (phase, result)
        assert result.cpu_time_ms >= program.min_cpu_ms, (phase, result)
        # Run again only if the load starved a run; whatever it took, the verdict is one.
        assert not result.retryable and result.runs == len(result.rerun_reasons) + 1, (phase, result)
    idle, loaded = phases["idle"].results[name], phases["loaded"].results[name]
    if program.verdict == "TLE" and program.stopped_by == "cpu":
        # Stopped at its CPU limit, however long that took: the CPU time reported is the limit's, idle or loaded.
        for result in (idle, loaded):
            assert LIMITS.cpu_time_s * 1000 <= result.cpu_time_ms <= LIMITS.cpu_time_s * 1000 + 300, result
    if program.stopped_by == "wall":
        # A program that does not run is stopped by the wall clock, deterministically: its own time reached the
        # limit, whatever the load (it hardly waits: it sleeps).
        for result in (idle, loaded):
            own_ms = result.wall_time_ms - result.wait_time_ms
            assert LIMITS.wall_time_s * 1000 <= own_ms <= LIMITS.wall_time_s * 1000 + 1000, result


async def test_the_loaded_runs_really_waited_for_a_cpu(phases: dict[str, Phase]) -> None:
    """Without this the comparison would prove nothing: under the hog, a CPU-bound run waits for most of its time,
    and its elapsed time goes past a wall limit that only its own time is held to."""
    honest = phases["loaded"].results["honest_cpu"]
    assert honest.wait_time_ms >= 0.3 * honest.wall_time_ms, honest
    loop = phases["loaded"].results["endless_loop"]
    assert loop.wait_time_ms >= 0.3 * loop.wall_time_ms, loop
    assert loop.wall_time_ms > LIMITS.wall_time_s * 1000, loop


async def test_a_run_the_load_starves_is_run_again_and_then_retryable(executor: Executor) -> None:
    """A program that keeps to CPU 0, where the hog has twenty busy processes, gets a twentieth of a CPU: its elapsed
    time reaches starved_after_s(wall limit) long before its own time reaches the wall limit. That stop says
    nothing about the program: it is run again MAX_RERUNS times, and then reported IE, retryable, with the
    reasons. (The other CPUs stay free meanwhile.)"""
    limits = Limits(cpu_time_s=1, wall_time_s=0.5, memory_mb=128, output_kb=64, processes=16)
    source = "import os\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass\n"
    with Hog(20, cpu=0):
        started = time.monotonic()
        outcome = await run(executor, "python", source, limits=limits)
        elapsed = time.monotonic() - started
    result = outcome.tests[0]
    print(f"\nstarved: {result.runs} runs in {elapsed:.1f} s: {result.rerun_reasons}")
    assert (result.status, result.stopped_by, result.retryable) == ("IE", "starved", True), result
    assert result.runs == MAX_RERUNS + 1 and len(result.rerun_reasons) == MAX_RERUNS, result
    assert all(reason.startswith("not judged: the machine was too busy") for reason in result.rerun_reasons)
    assert result.message.startswith("not judged")
    assert result.cpu_time_ms < limits.cpu_time_s * 1000, result
    assert result.wall_time_ms >= starved_after_s(limits.wall_time_s) * 1000, result
    assert elapsed < (MAX_RERUNS + 1) * (starved_after_s(limits.wall_time_s) + 3)


# --- the rules, on runs that are hard to provoke on purpose ---------------------------------------------------


def _run(**fields: Any) -> RunResult:
    values: dict[str, Any] = {
        "exit_code": None,
        "signal": signal.SIGKILL,
        "cpu_s": 0.1,
        "wall_s": 4.0,
        "memory_kb": 10_000,
        "stdout": b"",
        "stderr": b"",
    }
    values.update(fields)
    return RunResult(**values)


@pytest.mark.parametrize(
    ("run_result", "verdict", "rerun"),
    [
        # A sleeper: its own time reached the wall limit, it hardly waited: TLE, final.
        (_run(stop="wall", wall_timeout=True, wait_s=0.01), "TLE", False),
        # The load held it past STARVED_WALL_FACTOR wall limits: not judged.
        (_run(stop="starved", wall_timeout=True, wall_s=12.0, wait_s=10.0), "IE", True),
        # ...even with much CPU time used (it had not reached its limit).
        (_run(stop="starved", wall_timeout=True, wall_s=12.0, wait_s=10.0, cpu_s=0.9), "IE", True),
        # A wall stop with little CPU time after waiting most of its time: not trusted.
        (_run(stop="wall", wall_timeout=True, wall_s=8.0, wait_s=5.0, cpu_s=0.2), "IE", True),
        # ...but with half its CPU limit or more, or little waiting, it is a wall TLE.
        (_run(stop="wall", wall_timeout=True, wall_s=8.0, wait_s=5.0, cpu_s=0.5), "TLE", False),
        (_run(stop="wall", wall_timeout=True, wall_s=4.0, wait_s=1.0, cpu_s=0.2), "TLE", False),
        # The memory limit reached decides, whatever clock stopped the run.
        (_run(stop="starved", wall_timeout=True, wall_s=12.0, wait_s=10.0, memory_kb=128 * 1024), "MLE", False),
        (_run(stop="wall", wall_timeout=True, memory_kb=50_000, oom_kills=1), "MLE", False),
        (_run(oom_kills=1), "MLE", False),
        (_run(signal=None, exit_code=1, oom_kills=1), "MLE", False),
        # The CPU limit, on the CPU time of every process: TLE whatever the wall clock did.
        (_run(stop="cpu", cpu_s=1.0), "TLE", False),
        (_run(stop="starved", wall_timeout=True, cpu_s=1.0, wall_s=12.0, wait_s=10.0), "TLE", False),
        # A cancel is not the program's, and never run again.
        (_run(cancelled=True, stop=None), "IE", False),
    ],
)
def test_the_rules(run_result: RunResult, verdict: str, rerun: bool) -> None:
    status, message = classify(run_result, cpu_time_s=1.0, memory_mb=128, output_limit=64 * 1024)
    assert status == verdict, message
    # What the executor runs again: an IE that unjudged_reason explains (classify decided memory and CPU first).
    assert (status == "IE" and unjudged_reason(run_result, cpu_time_s=1.0) is not None) == rerun
    if rerun:
        assert message.startswith("not judged")


# --- CPU time: every process of the run --------------------------------------------------------------------


async def test_cpu_time_counts_children_nobody_waits_for(executor: Executor) -> None:
    """Children the kernel reaps itself (the parent ignores SIGCHLD) take their CPU time out of every rusage; the
    run's cgroup still counts it: a run is every process of it."""
    source = (
        _BURN + "import os, signal\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\nr, w = os.pipe()\n"
        "for _ in range(2):\n    if os.fork() == 0:\n        burn(0.4)\n"
        "        os.write(w, b'x')\n        os._exit(0)\n"
        "done = b''\nwhile len(done) < 2:\n    done += os.read(r, 2)\n"
    )
    outcome = await run(executor, "python", source, limits=LIMITS)
    assert outcome.verdict == "AC", outcome
    assert outcome.tests[0].cpu_time_ms >= 800, outcome.tests[0]


async def test_function_mode_cpu_time_is_the_candidates(executor: Executor) -> None:
    """Function mode's CPU time is the test's: the candidate's process (and what it forks), not only the harness."""
    source = _CHILDREN + "\ndef f(x):\n    burn(0.3)\n    children(2, 0.3)\n    return x\n"
    outcome = await run(
        executor,
        "python",
        source,
        [TestCase(input=[5], expected=5)],
        limits=LIMITS,
        mode=Mode.FUNCTION,
        entry_point="f",
    )
    assert outcome.verdict == "AC", outcome
    assert 900 <= outcome.tests[0].cpu_time_ms <= 1400, outcome.tests[0]


async def test_a_run_stopped_by_a_clock_reports_its_cpu_time(executor: Executor) -> None:
    """A reusable jail stopped by a clock used to report 0 ms (nothing in it reported): its cgroup knows."""
    sleeper = await run(executor, "python", _BURN + "burn(0.5)\nimport time\ntime.sleep(100)\n", limits=LIMITS)
    assert (sleeper.verdict, sleeper.tests[0].stopped_by) == ("TLE", "wall"), sleeper
    assert sleeper.tests[0].cpu_time_ms >= 500, sleeper.tests[0]


# --- /proc: nothing of the host's activity -----------------------------------------------------------------

_READ_PROC = (
    "import os\n"
    "for path in " + repr(list(NEUTRAL_PROC_FILES)) + ":\n"
    "    if os.path.exists(path):\n"
    "        print(path, repr(open(path).read()))\n"
    "print('pressure', sorted(os.listdir('/proc/pressure')))\n"
    "print('sys', os.path.exists('/sys/fs/cgroup'), os.path.exists('/sys'))\n"
    "print('cpus', os.cpu_count())\n"
)


def _expected_proc(memory_mb: int) -> str:
    with open("/proc/stat", "rb") as handle:
        content = neutral_proc_content(memory_mb, cpu_names(handle.read()))
    lines = [f"{path} {data.decode()!r}" for path, data in content.items() if os.path.exists(path)]
    return "\n".join([*lines, "pressure []", "sys False False", f"cpus {os.cpu_count()}"]) + "\n"


@pytest.fixture
def tool_jail(tmp_path: Path) -> Iterator[ToolJail]:
    jail = ToolJail(tmp_path / "tools", slots=1)
    yield jail
    jail.close()


@pytest.fixture
def hog() -> Iterator[Hog]:
    with Hog() as running:
        yield running


async def test_every_kind_of_jail_reads_neutral_proc_files_while_the_host_is_loaded(
    executor: Executor, tool_jail: ToolJail, hog: Hog
) -> None:
    """/proc/loadavg, /proc/stat (its procs_running, its CPU times), /proc/uptime (its idle time), /proc/meminfo,
    /proc/vmstat, interrupts, softirqs, diskstats and /proc/pressure show the whole machine: other tenants. Every
    jail kind reads the same neutral content instead: a test's reusable jail, a cold jail (the compilers' and tools'
    kind) and a tool's reusable jail; the host meanwhile runs the hog."""
    assert host_procs_running() >= hog.count
    with open("/proc/loadavg") as handle:
        assert handle.read() != "0.00 0.00 0.00 1/1 1\n"
    test_run = await run(executor, "python", _READ_PROC, limits=LIMITS)
    assert test_run.verdict == "AC", test_run
    assert test_run.tests[0].stdout == _expected_proc(LIMITS.memory_mb)
    for reusable in (False, True):
        tool_run = await asyncio.to_thread(
            tool_jail.run,
            ["/usr/bin/python3", "-I", "/prog/read.py"],
            {"read.py": _READ_PROC.encode()},
            cpu_time_s=5,
            wall_time_s=10,
            memory_mb=256,
            output_limit=64 * 1024,
            reusable=reusable,
        )
        assert tool_run.exit_code == 0, (reusable, tool_run.stderr_text)
        assert tool_run.stdout.decode() == _expected_proc(256), reusable


async def test_neutral_proc_files_cannot_be_written(executor: Executor) -> None:
    source = (
        "import errno\nfor path in ['/proc/loadavg', '/proc/stat', '/proc/meminfo']:\n"
        "    try:\n        open(path, 'w').write('1')\n    except OSError as exc:\n"
        "        print(errno.errorcode[exc.errno])\n"
        "import os\nprint(sorted(os.listdir('/tmp')))\n"
    )
    outcome = await run(executor, "python", source, limits=LIMITS)
    assert outcome.tests[0].stdout == "EROFS\nEROFS\nEROFS\n[]\n", outcome.tests[0]
