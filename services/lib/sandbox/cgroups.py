"""A run's cgroups: the v1 memory and pids controllers nsjail limits a jail with (per-run parents, so that the
jail's peak memory and OOM kills outlive nsjail's own cgroups), and a cgroup v2 directory per run for what every
cgroup v2 has: the CPU time of every process of the run and how long they waited for a CPU. Also the host's setup
(the parents, the v2 mount) and the clean-up of cgroups a dead worker left behind, jails and all."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PARENT = "NSJAIL"
# The cgroup v2 hierarchy, used without any controller for what every cgroup v2 has: cpu.stat (the CPU time of
# every process that ever ran in it) and cpu.pressure (how long its processes waited for a CPU). The host's mount
# is used if it has one (a hybrid host: /sys/fs/cgroup/unified); else the worker mounts one here.
CGROUP2_FALLBACK_MOUNT = Path("/run/tribunal-cgroup2")


class RunCgroups:
    """Per-run parents for the cgroups nsjail creates (passed as --cgroup_mem_parent/--cgroup_pids_parent), and the
    run's cgroup v2 directory (its CPU time and its waiting for a CPU: see Meter).

    nsjail removes its own cgroups the moment the program ends, and the memory peak with them; the parent's
    memory.max_usage_in_bytes keeps the peak of the whole jail. That, not wait4's ru_maxrss, is the memory
    figure: ru_maxrss of nsjail also counts the RSS of the process that spawned it (exec records the old
    mm's high-water mark, and a vfork child's old mm is the parent's), i.e. this whole worker. The parents
    also gather what a SIGKILLed nsjail would leave behind, for remove_stale_cgroups to find.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.paths = [CGROUP_ROOT / controller / CGROUP_PARENT / name for controller in ("memory", "pids")]
        self.unified = cgroup2_root() / CGROUP_PARENT / name
        self.paths.append(self.unified)
        self.nsjail_args = ["--cgroup_mem_parent", f"{CGROUP_PARENT}/{name}"]
        self.nsjail_args += ["--cgroup_pids_parent", f"{CGROUP_PARENT}/{name}"]
        created: list[Path] = []
        try:
            for path in self.paths:
                path.mkdir()
                created.append(path)
        except BaseException:
            for path in created:
                _remove_cgroup(path)
            raise

    def peak_kb(self) -> int | None:
        """The jail's peak memory in KiB (None if unreadable)."""
        try:
            return int((self.paths[0] / "memory.max_usage_in_bytes").read_text()) // 1024
        except (OSError, ValueError) as exc:
            log.warning("cannot read the peak memory of %s: %s", self.paths[0], exc)
            return None

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in the jail so far (its cgroups below included)."""
        try:
            for line in (self.paths[0] / "memory.oom_control").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError) as exc:
            log.warning("cannot read the OOM kills of %s: %s", self.paths[0], exc)
        return 0

    @property
    def procs_file(self) -> Path:
        return self.unified / "cgroup.procs"

    def adopt(self, pid: int) -> None:
        """Account the CPU time of `pid` and of every process it starts from now on to this jail."""
        self.procs_file.write_text(str(pid))

    def cpu_us(self) -> int:
        """CPU time used by every process that ran in this cgroup, in µs (exited ones included, waited for or
        not): cgroup v2's cpu.stat, which every cgroup has, controllers or not."""
        for line in (self.unified / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value)
        raise OSError(f"no usage_usec in {self.unified / 'cpu.stat'}")

    def pressure_us(self) -> int | None:
        """How long, in µs, at least one process of this cgroup was ready to run and had no CPU (cpu.pressure's
        "some" total; None without pressure stall information)."""
        try:
            first = (self.unified / "cpu.pressure").read_text().split("\n", 1)[0]
        except OSError:
            return None
        total = first.rpartition("total=")[2]
        return int(total) if first.startswith("some ") and total.isdigit() else None

    def threads(self) -> list[int]:
        """The threads in this cgroup now (host tids)."""
        try:
            return [int(tid) for tid in (self.unified / "cgroup.threads").read_text().split()]
        except (OSError, ValueError):
            return []

    def usage_kb(self) -> int:
        """The jail's memory now, in KiB."""
        return int((self.paths[0] / "memory.usage_in_bytes").read_text()) // 1024

    def start_run(self, limit_kb: int | None) -> None:
        """Before a run of a reusable jail: a new peak from the current usage, and `limit_kb` (if given) as the
        jail's limit for the run."""
        memory = self.paths[0]
        (memory / "memory.max_usage_in_bytes").write_text("0")
        if limit_kb is not None:
            (memory / "memory.limit_in_bytes").write_text(str(limit_kb * 1024))

    def settle(self, target_kb: int, wait_s: float) -> bool:
        """After a run of a reusable jail: bring its memory back to `target_kb` (the idle jail's, with some slack)
        by lowering its limit there, so the kernel reclaims what the run left reclaimable (page cache), waiting up
        to `wait_s` for memory the kernel frees late (a run's IPC namespace, fds in flight on its sockets). False
        if the memory stays above: the jail must not serve another run. The limit is lifted again either way."""
        limit = self.paths[0] / "memory.limit_in_bytes"
        deadline = time.monotonic() + wait_s
        try:
            while self.usage_kb() > target_kb:
                try:
                    limit.write_text(str(target_kb * 1024))
                    return True
                except OSError:  # EBUSY: not (yet) reclaimable
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(0.005)
            return True
        finally:
            limit.write_text("-1")

    def remove(self) -> None:
        for path in self.paths:
            _remove_cgroup(path)

    def close(self) -> int | None:
        """The jail's peak memory in KiB (None if unreadable), then remove the cgroups."""
        peak = self.peak_kb()
        self.remove()
        return peak


def _remove_cgroup(path: Path, attempts: int = 50) -> None:
    # nsjail's own child cgroup is normally gone; it is left behind only if nsjail was SIGKILLed, and an orphaned
    # nsjail may be removing it at the same moment. A cgroup whose last process has just been killed can answer
    # EBUSY for a moment: tried again, briefly.
    for attempt in range(attempts):
        try:
            for child in path.iterdir():
                if child.is_dir():
                    with contextlib.suppress(FileNotFoundError):
                        child.rmdir()
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or attempt == attempts - 1:
                log.warning("cannot remove cgroup %s: %s", path, exc)
                return
            time.sleep(0.01)


def remove_stale_cgroups() -> None:
    """Per-run cgroups left by a worker that died mid-run (named tribunal-<pid>-<n>, <pid> gone). The jails still
    running in them (an orphaned nsjail runs its jail to the end) are killed first: every process of a jail is in
    its cgroup, which a process group would not guarantee (a program can setsid() out of one). Then the cgroups
    are removed, empty."""
    parents = [CGROUP_ROOT / controller / CGROUP_PARENT for controller in ("memory", "pids", "cpuacct")]
    parents.append(cgroup2_root() / CGROUP_PARENT)
    for parent in parents:
        for entry in parent.glob("tribunal-*-*"):
            pid = entry.name.split("-")[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                _kill_cgroup(entry)
                _remove_cgroup(entry)


def _kill_cgroup(path: Path, wait_s: float = 5.0) -> None:
    """SIGKILL every process in cgroup `path` and its children, until none is left (or `wait_s` passed: the
    removal that follows then fails, logged, and the next worker's start tries again)."""
    deadline = time.monotonic() + wait_s
    while True:
        pids: set[int] = set()
        for procs in [path / "cgroup.procs", *path.glob("*/cgroup.procs")]:
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(line) for line in procs.read_text().split())
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= deadline:
            log.warning("processes are left in %s after SIGKILL", path)
            return
        time.sleep(0.01)


def ensure_cgroup_parents() -> None:
    """nsjail puts each jail in <controller>/NSJAIL/NSJAIL.<pid>; without the parents every run fails. The runs'
    cgroup v2 directories (CPU time, waiting for a CPU) live under the v2 hierarchy's NSJAIL."""
    for controller in CGROUP_CONTROLLERS:
        mount = CGROUP_ROOT / controller
        if not mount.is_dir():
            raise RuntimeError(f"cgroup v1 controller {controller!r} is not mounted at {mount}")
        (mount / CGROUP_PARENT).mkdir(exist_ok=True)
    parent = cgroup2_root() / CGROUP_PARENT
    parent.mkdir(exist_ok=True)
    if not (parent / "cpu.pressure").exists():
        log.warning(
            "no pressure stall information (cpu.pressure) in %s: a run's waiting for a CPU is measured per thread "
            "only (boot with psi=1 for the cgroup's own figure)",
            parent,
        )


_cgroup2_lock = threading.Lock()
_cgroup2: Path | None = None


def cgroup2_root() -> Path:
    """Where the cgroup v2 hierarchy is mounted: the host's mount (on a hybrid host, /sys/fs/cgroup/unified), or one
    this process makes at CGROUP2_FALLBACK_MOUNT. It is used with no controller enabled, so the v1 controllers the
    jails' limits use stay where they are."""
    global _cgroup2
    with _cgroup2_lock:
        if _cgroup2 is None:
            _cgroup2 = _find_cgroup2() or _mount_cgroup2()
        return _cgroup2


def _find_cgroup2() -> Path | None:
    """The mount point of the cgroup v2 hierarchy's root in this mount namespace, if it is mounted."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields, _, rest = line.partition(" - ")
            parts = fields.split()
            if rest.split(" ", 1)[0] == "cgroup2" and len(parts) > 4 and parts[3] == "/":
                return Path(parts[4].replace("\\040", " "))
    return None


def _mount_cgroup2() -> Path:
    import ctypes

    CGROUP2_FALLBACK_MOUNT.mkdir(mode=0o755, parents=True, exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    flags = 2 | 4 | 8  # MS_NOSUID | MS_NODEV | MS_NOEXEC
    if libc.mount(b"cgroup2", str(CGROUP2_FALLBACK_MOUNT).encode(), b"cgroup2", flags, None) != 0:
        error = ctypes.get_errno()
        raise RuntimeError(f"no cgroup v2 hierarchy is mounted and mounting one failed: {os.strerror(error)}")
    return CGROUP2_FALLBACK_MOUNT
