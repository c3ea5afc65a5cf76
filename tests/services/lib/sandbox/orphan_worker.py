"""A stand-in for an executor worker, for tests/services/lib/sandbox/test_orphans.py: it runs one long program in a
cold jail and waits, until the test SIGKILLs it. Run as  python -m tests.services.lib.sandbox.orphan_worker WORK_ROOT"""

from __future__ import annotations

import sys
from pathlib import Path

from services.lib.sandbox import (
    JailProfile,
    Sandbox,
    default_nsjail_path,
    ensure_cgroup_parents,
    sandbox_visible_root,
)

if __name__ == "__main__":
    work_root = Path(sys.argv[1])
    ensure_cgroup_parents()
    program_dir = sandbox_visible_root(work_root) / "orphan-program"
    program_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    sandbox = Sandbox(default_nsjail_path(), work_root / "jail")
    profile = JailProfile(cpu_time_s=120, wall_time_s=120, memory_mb=64, processes=16)
    # A shell that starts a sleeper of its own, in a new session: it leaves the jail's process group.
    script = "setsid /usr/bin/sleep 120 & exec /usr/bin/sleep 120"
    sandbox.run(profile, ["/bin/sh", "-c", script], program_dir=program_dir, stdout_limit=1024, stderr_limit=1024)
