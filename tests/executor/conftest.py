"""Fixtures for the executor tests: a real Executor (real nsjail, no mocks) on a fresh work root per module."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.run import Executor
from services.kernel.contracts import Checker, ExecutionResult, Limits, TestCase

# Short CPU and memory limits keep the TLE and MLE cases quick. The wall limit is generous: the machine is
# shared, and a program that gets a small share of a core must still reach its CPU limit, not the wall.
FAST = Limits(cpu_time_s=1, wall_time_s=10, memory_mb=128, output_kb=64, processes=16)
# For programs that are meant to hit the wall limit (they sleep or spin in many processes).
SHORT_WALL = Limits(cpu_time_s=1, wall_time_s=1.5, memory_mb=128, output_kb=64, processes=16)
DEFAULT_CHECKER = Checker()
# The build cache is per tenant; unless a test says otherwise, every execute runs as this one.
TENANT = "tenant-a"


def make_executor(work_root: Path, **kwargs: Any) -> Executor:
    return Executor(work_root, slots=kwargs.pop("slots", 2), **kwargs)


def dispose(executor: Executor) -> None:
    """Close the executor and remove what it stored outside its work root (the sandbox staging dir, used
    when the work root sits under pytest's private temp dir)."""
    executor.close()
    if not executor.builds_root.is_relative_to(executor.work_root):
        shutil.rmtree(executor.builds_root.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    executor = make_executor(tmp_path_factory.mktemp("executor"))
    yield executor
    dispose(executor)


async def run(
    executor: Executor,
    language: str,
    source: str,
    tests: list[TestCase] | None = None,
    *,
    stdin: str = "",
    expected: str | None = None,
    limits: Limits = FAST,
    checker: Checker = DEFAULT_CHECKER,
    tenant: str = TENANT,
    **kwargs: Any,
) -> ExecutionResult:
    """One execute (as `tenant`); by default a single stdio test with `stdin` and `expected`."""
    if tests is None:
        tests = [TestCase(input=stdin, expected=expected)]
    return await executor.execute(
        tenant=tenant, language=language, source_code=source, tests=tests, limits=limits, checker=checker, **kwargs
    )


def processes_of(uid: int, executor: Executor | None = None) -> list[int]:
    """Host processes owned by `uid`: after a run, nothing of the jail may survive. With `executor`, the pre-made
    jails that wait for a run (and only those) are not counted; call `settle(executor)` first."""
    waiting = executor.sandbox.waiting_jails()[0] if executor is not None else set()
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                pid = int(entry.name)
                if entry.stat(follow_symlinks=False).st_uid == uid and not _zombie(pid):
                    if not _descends_from(pid, waiting):
                        pids.append(pid)
            except OSError:
                continue
    return pids


def _zombie(pid: int) -> bool:
    """A process that has ended and holds nothing but its pid until its parent reaps it. (A jail whose nsjail was
    SIGKILLed leaves its PID 1 to the machine's init, which on this machine kind does not reap promptly.)"""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def _descends_from(pid: int, ancestors: set[int]) -> bool:
    while pid > 1:
        if pid in ancestors:
            return True
        with open(f"/proc/{pid}/stat", "rb") as handle:
            pid = int(handle.read().rsplit(b")", 1)[1].split()[1])
    return False


def our_cgroups(executor: Executor | None = None) -> list[str]:
    """Per-run cgroups of this process still present (each run must remove its own); with `executor`, not those
    of its pre-made jails that wait for a run."""
    waiting = executor.sandbox.waiting_jails()[1] if executor is not None else set()
    return sorted(
        str(path)
        for controller in ("memory", "pids")
        for path in Path(f"/sys/fs/cgroup/{controller}/NSJAIL").glob(f"tribunal-{os.getpid()}-*")
        if path.name not in waiting
    )


def settle(executor: Executor) -> None:
    """Let the executor's pre-made jails finish refilling and cleaning up, so the host can be inspected."""
    executor.sandbox.settle()


SUM_SOURCES = {
    "python": "a, b = map(int, input().split())\nprint(a + b)\n",
    "c": '#include <stdio.h>\nint main(void) { long a, b; if (scanf("%ld %ld", &a, &b) != 2) return 1;\n'
    '  printf("%ld\\n", a + b); return 0; }\n',
    "cpp": "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << '\\n'; }\n",
    "java": "import java.util.Scanner;\npublic class Main {\n  public static void main(String[] args) {\n"
    "    Scanner in = new Scanner(System.in);\n    System.out.println(in.nextLong() + in.nextLong());\n  }\n}\n",
}
