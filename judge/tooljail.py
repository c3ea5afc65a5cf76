"""The jail for the judge's tools that read an attempt's source (pylint and cppcheck for the `lint` judge).

Such a tool is the untrusted source's first reader, just as a compiler is: cppcheck follows `#include
"/abs/path"`, astroid may look for modules on disk. So it runs where compilers run, in nsjail through the
executor's `Sandbox`: the toolchain (/usr and the merged-/usr links) read-only, /proc, /dev/null, tmpfs /box (the
working directory) and /tmp, and one fresh host directory holding only the files written for this run, bound
read-only at /prog. Nothing else of the host (the data dir, admin.key, /etc, /root, the checkout) is visible.

A run is either cold (`reusable=False`: a jail of its own, made for it and ended after it) or in a reusable jail
(`reusable=True`: services/lib/sandbox/warm.py; a long-lived zygote execs the tool in fresh namespaces of the run's
own, with its own /box, /tmp and /prog, so no file of another run is in reach and jail creation is paid ahead).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from services.lib.sandbox import (
    INSIDE_ID,
    JAIL_PROGRAM_DIR,
    ZYGOTE_SOURCE,
    JailProfile,
    RunResult,
    Sandbox,
    default_nsjail_path,
    ensure_cgroup_parents,
    install_readable,
    sandbox_visible_root,
    write_program,
)

# Where the files given to run() appear inside the jail.
TOOL_FILES_DIR = JAIL_PROGRAM_DIR
TOOL_PROCESSES = 32
# Run folders older than this were left by a process that died (a live run lasts seconds).
_STALE_S = 3600


class ToolJail:
    """Runs one tool per call, each in a jail of its own or in a reusable one. One per process; thread-safe, at
    most `slots` at once. `close()` ends the reusable jails."""

    def __init__(
        self,
        work_root: Path,
        *,
        slots: int | None = None,
        nsjail_path: Path | None = None,
        sandbox_uid: int = INSIDE_ID,
    ) -> None:
        work_root = Path(work_root).absolute()
        work_root.mkdir(parents=True, exist_ok=True)
        ensure_cgroup_parents()
        self.work_root = work_root
        self._sandbox = Sandbox(nsjail_path or default_nsjail_path(), work_root / "jail", sandbox_uid)
        self.files_root = sandbox_visible_root(work_root) / "tools"
        with contextlib.suppress(FileExistsError):
            self.files_root.mkdir(mode=0o711)
        self.files_root.chmod(0o711)
        self.slots = max(1, slots or os.cpu_count() or 1)
        self._slots = threading.BoundedSemaphore(self.slots)
        visible = self.files_root.parent
        self._sandbox.enable_warm(
            zygote=install_readable(visible / "tools-zygote", ZYGOTE_SOURCE),
            slots_root=visible / "tools-warm",
            per_kind=self.slots,
        )
        self._remove_stale()

    def close(self) -> None:
        """End the reusable jails waiting for a run."""
        self._sandbox.close()

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox

    def run(
        self,
        argv: list[str],
        files: dict[str, bytes],
        *,
        cpu_time_s: float,
        wall_time_s: float,
        memory_mb: int,
        output_limit: int,
        stdin: bytes = b"",
        reusable: bool = False,
    ) -> RunResult:
        """Write `files` (plain names) into a fresh folder, bind it read-only at TOOL_FILES_DIR and run argv there
        (cwd: the jail's tmpfs /box), `stdin` on its standard input, in a jail of its own or (`reusable`) in a
        reusable one. Blocking: call from a worker thread. Each of stdout and stderr is kept whole up to
        `output_limit` bytes; past it the run is stopped and the result says so."""
        profile = JailProfile(
            cpu_time_s=cpu_time_s,
            wall_time_s=wall_time_s,
            memory_mb=memory_mb,
            processes=TOOL_PROCESSES,
            # No /dev/zero or /dev/urandom: `#include "/dev/zero"` must fail at once, not fill memory.
            devices=("/dev/null",),
            warm=reusable,
        )
        run = functools.partial(
            self._sandbox.run,
            profile,
            argv,
            stdin=stdin,
            stdout_limit=output_limit,
            stderr_limit=output_limit,
            stdout_keep=output_limit,
            stderr_keep=(output_limit, 0),
        )
        with self._slots:
            if reusable:
                return run(program_files=files)
            folder = Path(tempfile.mkdtemp(prefix="run-", dir=self.files_root))
            try:
                folder.chmod(0o755)
                write_program(files, folder)
                return run(program_dir=folder)
            finally:
                shutil.rmtree(folder, ignore_errors=True)

    def _remove_stale(self) -> None:
        cutoff = time.time() - _STALE_S
        for entry in os.scandir(self.files_root):
            with contextlib.suppress(OSError):
                if entry.name.startswith("run-") and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    shutil.rmtree(entry.path, ignore_errors=True)
