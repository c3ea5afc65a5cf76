"""Fixtures for the judge tests: the real jail (real nsjail) the lint judge runs its tools in."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from judge.tooljail import ToolJail


# Per module, not per session: its waiting jails hold cgroups named after this process, which the executor tests'
# "no cgroup of ours is left" would see if a worker ran them after a judge module (tests run on xdist's workers).
@pytest.fixture(scope="module")
def tool_jail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolJail]:
    jail = ToolJail(tmp_path_factory.mktemp("judge"), slots=2)
    yield jail
    jail.close()
    # The jail-visible files live in a staging folder of their own (outside pytest's private temp dir).
    if not jail.files_root.is_relative_to(jail.work_root):
        shutil.rmtree(jail.files_root.parent, ignore_errors=True)
