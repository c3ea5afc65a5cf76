"""A SIGKILLed worker's jails do not run on: the next worker to start kills every process left in their cgroups
(a process group would miss one that called setsid) and removes the cgroups (services/lib/sandbox/cgroups.py
`remove_stale_cgroups`). Real nsjail, real cgroups."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.lib.sandbox import Sandbox, default_nsjail_path, sandbox_visible_root
from services.lib.sandbox.cgroups import CGROUP_PARENT, CGROUP_ROOT

# Jail tier: a worker process's jails, not only through the `executor` or `tool_jail` fixture.
pytestmark = pytest.mark.jail


REPO = Path(__file__).resolve().parents[4]


def _jail_cgroups(owner: int) -> list[Path]:
    return [
        path
        for controller in ("memory", "pids")
        for path in (CGROUP_ROOT / controller / CGROUP_PARENT).glob(f"tribunal-{owner}-*")
    ]


def _processes_in(cgroups: list[Path]) -> set[int]:
    pids: set[int] = set()
    for cgroup in cgroups:
        for procs in [cgroup / "cgroup.procs", *cgroup.glob("*/cgroup.procs")]:
            try:
                pids.update(int(line) for line in procs.read_text().split())
            except OSError:
                pass
    return pids


def test_a_dead_workers_jails_are_killed_and_their_cgroups_removed(tmp_path: Path) -> None:
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.services.lib.sandbox.orphan_worker", str(tmp_path)], cwd=REPO
    )
    try:
        deadline = time.monotonic() + 30
        while len(_sleepers(_processes_in(_jail_cgroups(worker.pid)))) < 2:  # the shell's and the setsid one
            assert time.monotonic() < deadline, "the jail never started"
            time.sleep(0.05)
        cgroups = _jail_cgroups(worker.pid)
        orphans = _sleepers(_processes_in(cgroups))
        assert len(orphans) == 2
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        # nsjail does not die with its parent: the jail would run to its 120 s limit. (Any sandbox starting now
        # cleans it up, another test's included, so this is not asserted after the kill.)
        # The next worker's sandbox starts: it ends them and removes the cgroups.
        Sandbox(default_nsjail_path(), tmp_path / "next-jail")
        assert [pid for pid in orphans if _alive(pid)] == []
        assert [cgroup for cgroup in cgroups if cgroup.exists()] == []
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        shutil.rmtree(sandbox_visible_root(tmp_path), ignore_errors=True)


def _sleepers(pids: set[int]) -> set[int]:
    """Those of `pids` that run sleep (the jail's shell execs one and starts the other)."""
    found = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                found.add(pid)
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (the machine's init may reap late)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
