"""The first process of a reusable ("warm") jail: the zygote. It runs inside the jail (the jail's /usr/bin/python3,
standard library only) and is started before any run is known, so that creating the jail and starting the
interpreter are off the critical path; then it serves run after run, each in fresh namespaces of its own.

Invocation:  python3 <flags> zygote.py [--preload SCRIPT]
             <flags> are the runs' own interpreter flags (-I, -S, -B), so a Python run happens in a fork of this
             interpreter; --preload compiles a fixed script (the function-mode harness) ahead of time.
fd 0:        the channel, one end of an AF_UNIX SOCK_SEQPACKET pair; the host holds the other. The zygote says
             b"ready" on it once it has started (the host measures the idle jail then).

The zygote (Z) is the jail's PID 1. nsjail gave it CAP_SYS_ADMIN, CAP_NET_ADMIN and CAP_SETPCAP in the jail's user
namespace (and nothing outside it), and a seccomp policy that lets it unshare mount, IPC, PID and network namespaces
and mount (services/lib/sandbox/profile.py). It is non-dumpable and deaf to signals from inside the jail. For each
run it receives one message:
    {"argv": [...], "script": k | null, "check": path | null, "cpu_time_s": t, "dir": name, "tmpfs_mb": m,
     "memory_mb": n}
with the run's fds (stdin, stdout, stderr, the run's reply socket and, in function mode, the result channel), forks
the run's setup process C and closes its copies of them: Z never reads a run's data, so nothing in its memory
belongs to any run, and a run forked from it inherits nothing of another's.

C (the setup): unshares new mount, IPC, PID and network namespaces (bringing up its loopback); mounts fresh tmpfs on
/box and /tmp and the run's own program folder (`/prog/<dir>`, written by the host) read-only on /prog; then forks G
and waits for it. When G, PID 1 of the run's PID namespace, ends, the kernel has killed and reaped every other
process of the run; C tells Z how G ended and what C itself cost, and exits. Z then reaps C, kills anything left,
and answers the host on the channel:
    b"D <cpu of the whole run, from getrusage> <C's own cpu> exit|signal <G's status>"
(or b"F <cpu>" if the setup failed before the run began), after which the jail is ready for the next run. The run's
mount namespace (its tmpfs files), IPC namespace (SysV objects) and PID namespace (its processes) are gone by then.

G (the run's first process): mounts /proc for the new PID namespace, covers its host-wide files with neutral ones
(NEUTRAL_PROC_FILES: the load, the CPU and memory counters of the whole machine are other tenants' activity), drops
every capability (bounding, ambient,
permitted, effective, inheritable), installs a second seccomp filter that forbids again what the jail's policy
let Z do (unshare, mount and the new mount API), sets the run's RLIMIT_CPU and then is exactly what the first
process of a single-use jail was:
1. The preloaded harness (function mode) runs in G itself, the PID 1 of its namespace, as in a cold jail; it forks
   the candidate itself. G compiles `check` (the Python program) first: if it does not compile (a SyntaxError, or
   the compiler giving up: too deep, out of memory) it answers b"E" + the message and exits, so the compile error
   is decided before any of the candidate's code exists in a process; else it answers b"L <cpu>", the CPU time it
   used before the harness, for the host to subtract.
2. Anything else runs in a child: `python3 <flags> SCRIPT ARGS` in a fork of this interpreter, or execv(argv). The
   child gets the run's stdin on fd 0, RLIMIT_CPU soft a second past t (rounded up: SIGXCPU; the host stops the
   run at t from the cgroup's precise figure, this is a backstop) and hard a second later (SIGKILL), and never
   holds the reply socket; it compiles `check` itself (charged to the run, as in a cold one) and tells G on a
   pipe, before it runs anything of the program's, whether that failed. G stays PID 1 as the run's supervisor:
   when the child ends it kills whatever else is left, reaps it all, and answers b"E" + message or
   b"R <cpu> exit|signal <n>": the child's ending and the CPU time of every process of the run (precise, from
   getrusage), written when no process of the run exists any more.
If the host goes away (the channel reads EOF), the zygote ends the jail.
"""

import _socket
import builtins
import ctypes
import gc
import io
import marshal
import math
import os
import resource
import select
import signal
import sys
import types
from collections.abc import Callable
from typing import NoReturn

CHANNEL_FD = 0
MAX_MESSAGE = 1 << 20
# A compiler message is capped (its head and tail kept): one quoting an 800 KB line must still fit a message.
MAX_ERROR_HEAD = 24 * 1024
MAX_ERROR_TAIL = 8 * 1024
_PR_SET_DUMPABLE = 4
_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = (
    1,
    2,
    4,
    8,
    32,
    4096,
    16384,
    1 << 18,
)
# In a run's G, after the run's setup: the fds it holds (the rest are closed).
RUN_STDIN, RUN_STDOUT, RUN_STDERR, RUN_REPLY, RUN_RESULT = 0, 1, 2, 3, 4
_HIGH_FD = 100
# Paths as the jail sees them (services/lib/sandbox/profile.py mounts them).
PROGRAM_DIR = "/prog"
WORK_DIR = "/box"
# What a run's own seccomp filter forbids again (the jail's policy let the zygote do these): namespaces and mounts,
# through the old and the new mount API. Each fails with EPERM, as under the jail's policy.
_RUN_FORBIDDEN_SYSCALLS = (
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
)
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO_EPERM = 0x00050000 | 1
# Exit codes of a run's setup (C or G) that failed before the run began: the host reports a sandbox failure.
SETUP_FAILED = 71

# What a Python solution typically imports, loaded ahead of time like the interpreter itself (typing alone is
# several milliseconds). Standard-library modules only; a run sees them in sys.modules, as it would after
# importing them itself. Everything else the zygote needs is kept to cheap modules: each one is paid for every
# jail (json, socket and traceback would add ~25 ms of CPU per jail on this machine kind).
_WARM_MODULES = ("typing",)  # and with it re, functools, collections, operator

# Files of /proc that show the whole machine's activity (its load, CPU and memory counters, free memory by zone,
# swap use, I/O, interrupts, the kernel's open files and cached inodes and dentries, async I/O in flight): what other
# tenants' programs do. Every run sees the same neutral content instead, as LXCFS gives a container its own view:
# nothing running, no CPU time spent, all of the run's memory limit free, no file open. The CPU lines keep the
# machine's CPU names, since glibc counts them (os.cpu_count() reads /proc/stat when /sys is absent, as in a jail).
# The host's boot id goes too (it names the machine a run ran on). A cold jail gets these files from its nsjail
# config (services/lib/sandbox/profile.py), a warm run from _mask_proc: the same bytes. Files a kernel lacks are
# skipped.
# Left as they are, on purpose: the per-process files (/proc/self/sched's clock, /proc/self/stat's start time)
# count from the host's boot, as CLOCK_MONOTONIC does for every program; they show no other tenant's work.
NEUTRAL_PROC_FILES = (
    "/proc/loadavg",
    "/proc/stat",
    "/proc/uptime",
    "/proc/meminfo",
    "/proc/vmstat",
    "/proc/zoneinfo",
    "/proc/buddyinfo",
    "/proc/swaps",
    "/proc/diskstats",
    "/proc/interrupts",
    "/proc/softirqs",
    "/proc/schedstat",
    "/proc/sys/fs/file-nr",
    "/proc/sys/fs/inode-nr",
    "/proc/sys/fs/inode-state",
    "/proc/sys/fs/dentry-state",
    "/proc/sys/fs/aio-nr",
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/kernel/random/entropy_avail",
)
# Directories of such files, covered by an empty read-only tmpfs (as on a kernel without pressure stall information).
NEUTRAL_PROC_DIRS = ("/proc/pressure",)
_MEMINFO_KEYS = (
    ("MemTotal", True),
    ("MemFree", True),
    ("MemAvailable", True),
    ("Buffers", False),
    ("Cached", False),
    ("SwapCached", False),
    ("Active", False),
    ("Inactive", False),
    ("SwapTotal", False),
    ("SwapFree", False),
    ("Dirty", False),
    ("Writeback", False),
    ("AnonPages", False),
    ("Mapped", False),
    ("Shmem", False),
)


def cpu_names(proc_stat: bytes) -> list[str]:
    """The CPUs a /proc/stat lists (`cpu0`, `cpu1`, ...), in its order."""
    names = []
    for line in proc_stat.decode("ascii", "replace").splitlines():
        name = line.split(" ", 1)[0]
        if name.startswith("cpu") and name[3:].isdigit():
            names.append(name)
    return names


def neutral_proc_content(memory_mb: int, cpus: list[str]) -> dict[str, bytes]:
    """What each of NEUTRAL_PROC_FILES reads in a run with `memory_mb` of memory on a machine with CPUs `cpus`."""
    idle = " 0 0 0 0 0 0 0 0 0 0"
    stat = ["cpu " + idle, *(name + idle for name in cpus)]
    stat += ["intr 0", "ctxt 0", "btime 0", "processes 1", "procs_running 1", "procs_blocked 0", "softirq 0"]
    memory_kb = memory_mb * 1024
    meminfo = [(key + ":").ljust(16) + str(memory_kb if free else 0).rjust(8) + " kB" for key, free in _MEMINFO_KEYS]
    header = "".join("CPU" + name[3:].ljust(8) for name in cpus)
    content = {
        "/proc/loadavg": "0.00 0.00 0.00 1/1 1\n",
        "/proc/stat": "\n".join(stat) + "\n",
        "/proc/uptime": "0.00 0.00\n",
        "/proc/meminfo": "\n".join(meminfo) + "\n",
        "/proc/vmstat": "nr_free_pages " + str(memory_kb // 4) + "\n",
        "/proc/zoneinfo": "Node 0, zone   Normal\n  pages free     " + str(memory_kb // 4) + "\n",
        "/proc/buddyinfo": "Node 0, zone   Normal" + "      0" * 11 + "\n",
        "/proc/swaps": "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
        "/proc/sys/fs/file-nr": "0\t0\t1048576\n",
        "/proc/sys/fs/inode-nr": "0\t0\n",
        "/proc/sys/fs/inode-state": "0\t0\t0\t0\t0\t0\t0\n",
        "/proc/sys/fs/dentry-state": "0\t0\t45\t0\t0\t0\n",
        "/proc/sys/fs/aio-nr": "0\n",
        "/proc/sys/kernel/random/boot_id": "00000000-0000-4000-8000-000000000000\n",
        "/proc/sys/kernel/random/entropy_avail": "256\n",
        # No disk, no interrupt counted (nsjail binds no empty content, hence the one line each).
        "/proc/diskstats": "\n",
        "/proc/interrupts": " " * 11 + header + "\n",
        "/proc/softirqs": " " * 20 + header + "\n",
        "/proc/schedstat": "version 15\ntimestamp 0\n",
    }
    return {path: content[path].encode() for path in NEUTRAL_PROC_FILES}


def _preload(argv: list[str]) -> dict[str, types.CodeType]:
    compiled: dict[str, types.CodeType] = {}
    if len(argv) == 3 and argv[1] == "--preload":
        with open(argv[2], "rb") as handle:
            compiled[argv[2]] = compile(handle.read(), argv[2], "exec", dont_inherit=True)
    if sys.flags.no_site == 0 or compiled:  # a zygote of Python runs (one of exec'd programs needs none of them)
        for name in _WARM_MODULES:
            __import__(name)
    return compiled


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def _capped(text: str) -> str:
    if len(text) <= MAX_ERROR_HEAD + MAX_ERROR_TAIL:
        return text
    omitted = len(text) - MAX_ERROR_HEAD - MAX_ERROR_TAIL
    return text[:MAX_ERROR_HEAD] + f"\n... [{omitted} characters omitted] ...\n" + text[-MAX_ERROR_TAIL:]


def _syntax_error(path: str) -> tuple[types.CodeType | None, str | None]:
    """(code, None) or (None, the compiler's message). The message names the file as `main.py`, as the
    separate syntax check did; the code object keeps the full path for run-time tracebacks. Whatever stops the
    compiler (a SyntaxError, a NUL byte, nesting too deep for it, memory) is the program's compile error."""
    try:
        with open(path, "rb") as handle:
            source = handle.read()
    except OSError as exc:
        return None, "cannot read the program: " + (exc.strerror or "error")
    try:
        return compile(source, path, "exec", dont_inherit=True), None
    except Exception as exc:
        import traceback  # only now: it costs milliseconds at start-up

        if isinstance(exc, SyntaxError):
            exc.filename = path.rsplit("/", 1)[-1]
        return None, _capped("".join(traceback.format_exception_only(type(exc), exc)))


def _without_zygote_frames(hook: Callable[..., object]) -> Callable[..., object]:
    here = __file__

    def excepthook(kind: type[BaseException], value: BaseException, tb: types.TracebackType | None) -> None:
        while tb is not None and tb.tb_frame.f_code.co_filename == here:
            tb = tb.tb_next
        hook(kind, value.with_traceback(tb), tb)

    return excepthook


def _reply(channel: _socket.socket, message: bytes) -> None:
    """One message to the host: b"E" + the compiler's message (UTF-8), b"L <cpu_s>" (the harness runs here), or
    b"R <run_cpu_s> exit <code>" / b"R <run_cpu_s> signal <number>" (services/lib/sandbox/protocol.py reads them)."""
    channel.send(message)


def _receive_run(channel: _socket.socket) -> tuple[dict[str, object], list[int]] | None:
    """The run's request (marshal data from the host) and its fds, or None if the host is gone."""
    try:
        data, ancillary, _, _ = channel.recvmsg(MAX_MESSAGE, _socket.CMSG_SPACE(4 * 5))
    except OSError:
        return None
    fds = [
        int.from_bytes(item[i : i + 4], sys.byteorder)
        for level, kind, item in ancillary
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
        for i in range(0, len(item) - len(item) % 4, 4)
    ]
    if not data or len(fds) not in (4, 5):
        for fd in fds:
            os.close(fd)
        return None
    request = marshal.loads(data)
    return (request, fds) if isinstance(request, dict) else None


def _fresh_stdin() -> None:
    """sys.stdin as the interpreter makes it at start-up, on the new fd 0 (the one made at start-up read the
    channel and remembered it as unseekable)."""
    old = sys.stdin
    raw = io.FileIO(0, "rb", closefd=False)
    buffered = io.BufferedReader(raw)
    encoding = old.encoding if old is not None else "utf-8"
    errors = old.errors if old is not None else "strict"
    sys.stdin = io.TextIOWrapper(buffered, encoding=encoding, errors=errors, newline="\n")
    sys.__stdin__ = sys.stdin  # type: ignore[misc]


def _main_module(path: str, argv: list[str]) -> types.ModuleType:
    """A fresh __main__ module for the program, as `python3 path` would make it."""
    from importlib.machinery import SourceFileLoader

    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=path, __cached__=None, __builtins__=builtins, __loader__=SourceFileLoader("__main__", path)
    )
    sys.argv = list(argv)
    sys.modules["__main__"] = main
    sys.excepthook = _without_zygote_frames(sys.__excepthook__)
    # This module's frame (and exec()) sit under the program's: two more levels, so the program reaches the depth
    # it would in a cold run (tests/executor/test_warm.py compares the two).
    sys.setrecursionlimit(sys.getrecursionlimit() + 2)
    return main


def _set_cpu_limit(seconds: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    wanted_hard = seconds + 1 if hard == resource.RLIM_INFINITY else min(seconds + 1, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (min(seconds, wanted_hard), wanted_hard))


def _supervise(channel: _socket.socket, child: int, verdict_r: int | None) -> NoReturn:
    """PID 1 while the run's child runs: learn whether the program compiled (a Python child says so on
    `verdict_r` before it runs anything of the program's, then closes it), wait for the child (or for the host to
    go away), let the run's other processes that are still running finish (_finish_running), end everything else in
    the jail, reap it all and answer how the run went."""
    syntax_error = ""
    if verdict_r is not None:
        syntax_error = _read_all(verdict_r).decode("utf-8", "replace")
        os.close(verdict_r)
    _wait_for(child, channel)
    _, status = os.waitpid(child, 0)
    if not syntax_error:
        _finish_running(channel)
    _kill_the_rest()
    if syntax_error:
        _reply(channel, b"E" + syntax_error.encode("utf-8", "replace"))
        os._exit(0)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        _reply(channel, f"R {cpu_s!r} signal {os.WTERMSIG(status)}".encode())
    else:
        _reply(channel, f"R {cpu_s!r} exit {os.WEXITSTATUS(status)}".encode())
    os._exit(0)


def _finish_running(channel: _socket.socket) -> None:
    """The program's main process has ended: the run's other processes that are still running (or ready to run)
    are its work in flight, so the run goes on while any of them is, bounded by the host's clocks like the rest of
    the run. Otherwise the verdict of a program whose children compute while it sleeps would depend on how much
    CPU the machine's load left them before it woke: its children's CPU time is the run's whether they finish
    before it or after. Processes that only wait (sleep, block) are killed once none is running (twice in a row,
    10 ms apart), as before. If the host goes away meanwhile, the jail ends."""
    quiet = 0
    while quiet < 2:
        _reap_ended()
        state = _others_state()
        if state is None:
            return  # nothing else is left
        quiet = 0 if state else quiet + 1
        ready, _, _ = select.select([channel.fileno()], [], [], 0.01)
        if ready:
            try:
                if not channel.recv(1, _socket.MSG_PEEK):
                    _end_jail()
            except OSError:
                _end_jail()
            channel.recv(MAX_MESSAGE)  # nothing else is expected while a run runs; drop it


def _reap_ended() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _others_state() -> bool | None:
    """Whether any thread of the run's other processes is running or ready to run (None: no other process)."""
    others = False
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        others = True
        try:
            tasks = os.listdir("/proc/" + name + "/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open("/proc/" + name + "/task/" + task + "/stat", "rb") as handle:
                    if handle.read().rpartition(b")")[2][:3] == b" R ":
                        return True
            except OSError:
                continue
    return False if others else None


def _exit_status_child(status: int) -> int:
    """A child that only exits with `status`: the run's process when its program could not even start."""
    child = os.fork()
    if child == 0:
        os._exit(status)
    return child


def _wait_for(child: int, channel: _socket.socket) -> None:
    """Wait until `child` has ended (it stays unreaped); if the host goes away meanwhile (`channel` reads EOF),
    nobody will read this run's result: end everything."""
    pidfd = os.pidfd_open(child)
    try:
        while True:
            ready, _, _ = select.select([pidfd, channel.fileno()], [], [])
            if pidfd in ready:
                return
            try:
                if not channel.recv(1, _socket.MSG_PEEK):
                    _end_jail()
            except OSError:
                _end_jail()
            channel.recv(MAX_MESSAGE)  # nothing else is expected while a run runs; drop it
    finally:
        os.close(pidfd)


def _kill_the_rest() -> None:
    """SIGKILL every other process in the jail (PID 1 may signal them all) until none is left, reaping each."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            while os.waitpid(-1, 0):
                pass
        except ChildProcessError:
            pass
        try:
            os.kill(-1, 0)
        except ProcessLookupError:
            return


def _end_jail() -> NoReturn:
    _kill_the_rest()
    os._exit(0)


class _Confinement:
    """What a run's first process does to itself before the run: prepared once in the zygote (libseccomp loaded,
    the filter built), applied in each run's process (`apply`)."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        with open("/proc/sys/kernel/cap_last_cap", "rb") as handle:
            self.last_capability = int(handle.read())
        self.seccomp = ctypes.CDLL("libseccomp.so.2", use_errno=True)
        self.seccomp.seccomp_init.restype = ctypes.c_void_p
        self.seccomp.seccomp_init.argtypes = [ctypes.c_uint32]
        self.seccomp.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
        self.seccomp.seccomp_load.argtypes = [ctypes.c_void_p]
        self.seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        self.context = self.seccomp.seccomp_init(_SCMP_ACT_ALLOW)
        if not self.context:
            raise OSError("seccomp_init failed")
        for name in _RUN_FORBIDDEN_SYSCALLS:
            number = self.seccomp.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                raise OSError(f"libseccomp does not know {name}")
            rule = self.seccomp.seccomp_rule_add(self.context, _SCMP_ACT_ERRNO_EPERM, number, 0)
            _check(rule, f"seccomp rule {name}")

    def apply(self) -> None:
        """No capability left in any set (checked, not assumed), then the run's own seccomp filter, stacked on
        the jail's: every call in _RUN_FORBIDDEN_SYSCALLS fails with EPERM."""
        libc = self.libc
        for capability in range(self.last_capability + 1):
            _check(libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0), "PR_CAPBSET_DROP")
        _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "PR_CAP_AMBIENT_CLEAR_ALL")
        header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
        _check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")
        left = (ctypes.c_uint32 * 6)()
        _check(libc.capget(header, left), "capget")
        if any(left):
            raise OSError("a capability is left")
        _check(self.seccomp.seccomp_load(self.context), "seccomp_load")


def main() -> tuple[str, types.CodeType, list[str]] | None:
    """Serve runs until the host goes away. Returns (path, code, argv) in a run's process that is to run a Python
    program in this interpreter (the caller runs it at module level, so as few frames as possible sit under it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    # If nsjail dies (killed from outside), so does this jail: its PID 1 goes, and the kernel ends the rest.
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The zygote holds capabilities: nothing in the jail may read or write its memory.
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        os._exit(70)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    compiled = _preload(sys.argv)
    # Everything the zygote holds goes to the collector's permanent generation: a run's collections (and its
    # interpreter's at exit) never walk these objects, so they never copy the pages they share with the zygote.
    try:
        confinement: _Confinement | None = _Confinement()
    except (OSError, ValueError):
        confinement = None  # every run's setup fails, and the host reports a sandbox failure
    # What serving a run creates once and keeps (the keyword tuple CPython makes on the first pidfd_open call) is
    # made now, before the freeze: else every run but a jail's first would inherit one more young object (its
    # gc.get_objects() would tell it whether runs came before it in this jail).
    os.close(os.pidfd_open(os.getpid()))
    gc.freeze()
    channel = _socket.socket(fileno=CHANNEL_FD)
    _reply(channel, b"ready")  # the host measures the idle jail now
    while True:
        received = _receive_run(channel)
        if received is None:
            _end_jail()  # the host is gone (or sent nothing we can use): no run will come
        request, fds = received
        run = _serve(channel, request, fds, compiled, confinement)
        if run is not None:
            return run  # only in a run's process


def _serve(
    channel: _socket.socket,
    request: dict[str, object],
    fds: list[int],
    compiled: dict[str, types.CodeType],
    confinement: _Confinement | None,
) -> tuple[str, types.CodeType, list[str]] | None:
    """In the zygote: one run, in a fork, reaped before the answer. Returns only in the run's own process."""
    status_r, status_w = os.pipe()
    before = _children_cpu_s()
    setup = os.fork()
    if setup == 0:
        os.close(status_r)
        return _setup_run(channel, request, fds, status_w, compiled, confinement)
    for fd in fds:
        os.close(fd)
    os.close(status_w)
    _wait_for(setup, channel)
    report = _read_all(status_r).decode("ascii", "replace").split()
    os.close(status_r)
    os.waitpid(setup, 0)
    _kill_the_rest()
    total_s = _children_cpu_s() - before
    if len(report) != 2:
        _reply(channel, f"F {total_s!r}".encode())  # the setup failed: the run never began
        return None
    status, setup_cpu = int(report[0]), report[1]
    ending = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
    _reply(channel, f"D {total_s!r} {setup_cpu} {ending}".encode())
    return None


def _setup_run(
    channel: _socket.socket,
    request: dict[str, object],
    fds: list[int],
    status_w: int,
    compiled: dict[str, types.CodeType],
    confinement: _Confinement | None,
) -> tuple[str, types.CodeType, list[str]] | None:
    """In C, the run's setup process: fresh namespaces and file systems, then G. Returns only in the run."""
    try:
        channel.close()
        libc = ctypes.CDLL(None, use_errno=True)
        run_dir = request.get("dir")
        tmpfs_mb, memory_mb = request.get("tmpfs_mb"), request.get("memory_mb")
        if not (isinstance(run_dir, str) and run_dir.isalnum() and isinstance(tmpfs_mb, int) and tmpfs_mb > 0):
            raise OSError("a malformed run request")
        if not (isinstance(memory_mb, int) and memory_mb > 0):
            raise OSError("a malformed run request")
        _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWPID | _CLONE_NEWNET), "unshare")
        _loopback_up()
        _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
        for directory in (WORK_DIR, "/tmp"):
            options = f"size={tmpfs_mb}m,mode=1777".encode()
            _check(libc.mount(b"tmpfs", directory.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options), "tmpfs")
        program = f"{PROGRAM_DIR}/{run_dir}".encode()
        _check(libc.mount(program, PROGRAM_DIR.encode(), None, _MS_BIND, None), "bind /prog")
        flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
        _check(libc.mount(None, PROGRAM_DIR.encode(), None, flags, None), "remount /prog")
        # The old /box (the zygote's) is hidden under the new one, but a cwd still in it would not be.
        os.chdir(WORK_DIR)
        status_w = _arrange_fds(fds, status_w)
        run = os.fork()
    except BaseException:
        os._exit(SETUP_FAILED)
    if run == 0:
        os.close(status_w)
        return _enter_run(request, compiled, confinement)
    try:
        # By number: /proc is the run's now (G mounted it), where this process does not exist.
        for fd in range(len(fds)):
            os.close(fd)
        _, status = os.waitpid(run, 0)
        _write_all(status_w, f"{status} {_own_cpu_s()!r}".encode())
    finally:
        os._exit(0)


def _enter_run(
    request: dict[str, object], compiled: dict[str, types.CodeType], confinement: _Confinement | None
) -> tuple[str, types.CodeType, list[str]]:
    """In G, PID 1 of the run's namespace: its own /proc, no privilege left, the run's filter; then the run."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        proc_flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        _check(libc.mount(b"proc", b"/proc", b"proc", proc_flags, None), "mount /proc")
        memory_mb = request.get("memory_mb")
        _mask_proc(libc, memory_mb if isinstance(memory_mb, int) else 0)
        if confinement is None:
            raise OSError("the zygote could not prepare the run's confinement")
        confinement.apply()
    except BaseException:
        os._exit(SETUP_FAILED)
    return _start(request, compiled, libc)


def _mask_proc(libc: ctypes.CDLL, memory_mb: int) -> None:
    """Cover the new /proc's host-wide files with neutral ones (see NEUTRAL_PROC_FILES), read-only. Each is written
    in the run's fresh /tmp, bound on its /proc file and unlinked at once: the bind keeps the file, and nothing
    else can reach it. (The jail's policy lets the zygote mount but not unmount, so no tmpfs of their own.) Named
    as nsjail names them for a cold jail, so /proc/self/mountinfo reads much alike."""
    with open("/proc/stat", "rb") as handle:
        content = neutral_proc_content(memory_mb, cpu_names(handle.read()))
    for index, (path, data) in enumerate(content.items(), start=1):
        if not os.path.exists(path):
            continue  # not on this kernel (/proc/schedstat without CONFIG_SCHEDSTATS)
        source = "/tmp/dynamic." + str(index)
        fd = os.open(source, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
        try:
            _write_all(fd, data)
            _check(libc.mount(source.encode(), path.encode(), None, _MS_BIND, None), "bind " + path)
        finally:
            os.close(fd)
            os.unlink(source)
        remount = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
        _check(libc.mount(None, path.encode(), None, remount, None), "remount " + path)
    for path in NEUTRAL_PROC_DIRS:
        if os.path.isdir(path):
            options = b"size=4k,mode=555"
            _check(libc.mount(b"none", path.encode(), b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, options), path)


def _loopback_up() -> None:
    """The run's new network namespace has a loopback interface, down: bring it up, as nsjail does for a jail."""
    import fcntl
    import struct

    probe = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, b""))
    finally:
        probe.close()


def _arrange_fds(fds: list[int], status_w: int) -> int:
    """The run's fds on RUN_STDIN.. RUN_RESULT (fd 4 stays closed without a result channel) and the status pipe
    on a high fd of its own; every other fd closed. Returns the status pipe's fd."""
    if len(fds) not in (4, 5):
        raise OSError("a run needs 4 or 5 fds")
    moved = [_move(fd, _HIGH_FD + index) for index, fd in enumerate(fds)]
    status_w = _move(status_w, _HIGH_FD - 1)
    for target, fd in enumerate(moved):
        os.dup2(fd, target)
    _close_from(len(fds), keep=status_w)
    return status_w


def _move(fd: int, target: int) -> int:
    os.dup2(fd, target, inheritable=False)
    os.close(fd)
    return target


def _close_from(lowest: int, keep: int = -1) -> None:
    """Close every fd from `lowest` up but `keep` (the zygote's, the run's other copies): /proc/self/fd lists them."""
    for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
        if fd >= lowest and fd != keep:
            with _suppress_os_error():
                os.close(fd)


class _suppress_os_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, tb: object) -> bool:
        return isinstance(value, OSError)


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


def _start(
    request: dict[str, object], compiled: dict[str, types.CodeType], libc: ctypes.CDLL
) -> tuple[str, types.CodeType, list[str]]:
    """In G: the run itself (see the module's docstring). Returns in the process that runs a Python program."""
    channel = _socket.socket(fileno=RUN_REPLY)
    raw_argv, raw_script, raw_check = request.get("argv"), request.get("script"), request.get("check")
    argv = [str(arg) for arg in raw_argv] if isinstance(raw_argv, list) else []
    script = raw_script if isinstance(raw_script, int) else None
    check = raw_check if isinstance(raw_check, str) and raw_check else None
    cpu_time_s = request.get("cpu_time_s")
    # A backstop a second past the limit: the host stops the run when its cgroup's CPU time reaches the limit. (The
    # kernel's RLIMIT_CPU reads a tick-sampled clock that can run ahead of the precise one under load.)
    cpu_limit = max(1, math.ceil(float(cpu_time_s))) + 1 if isinstance(cpu_time_s, int | float) else 2
    path = argv[script] if script is not None else ""
    if path in compiled:
        # The function-mode harness: PID 1 of the run's namespace and its trust boundary, as in a cold jail. The
        # CPU time used so far is not the run's; the compile check below is (a cold run compiles too).
        before_harness_cpu_s = _cpu_s()
        if check is not None:
            _, error = _syntax_error(check)
            if error is not None:
                _reply(channel, b"E" + error.encode("utf-8", "replace"))
                os._exit(0)
        _reply(channel, f"L {before_harness_cpu_s!r}".encode())
        channel.close()
        _set_cpu_limit(cpu_limit)
        return path, compiled[path], argv[script:]
    if script is None and check is None:
        # An exec'd program (its compile check, if any, was the compiler's): spawned with vfork semantics, not a
        # copy of this interpreter, which would cost a page-table copy and its faults (~1.5 ms). What the child
        # of the fork below would do before execv is set here, for it to inherit: the CPU limit (this process
        # uses a few ms of its own and only waits from now on) and no fd of ours; a cold start's dispositions.
        _set_cpu_limit(cpu_limit)
        for fd in (RUN_REPLY, RUN_RESULT):
            with _suppress_os_error():
                os.set_inheritable(fd, False)
        try:
            child = os.posix_spawn(
                argv[0], argv, os.environ, setsigmask=(), setsigdef=(signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ)
            )
        except Exception:  # noqa: BLE001 - OSError, or an argv it cannot encode (ValueError): never a traceback
            child = _exit_status_child(127)  # as execv failing in a fork would end
        _supervise(channel, child, None)
    verdict_r, verdict_w = os.pipe()
    child = os.fork()
    if child != 0:
        os.close(verdict_w)
        _supervise(channel, child, verdict_r)
    # The run's process: still ours until the program starts, and it closes everything of ours first.
    channel.close()
    os.close(verdict_r)
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # the run's process is an ordinary one, as in a cold jail
    with _suppress_os_error():
        os.close(RUN_RESULT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _set_cpu_limit(cpu_limit)
    code = None
    if check is not None:
        # Compiled here, in the run's process, so the compile is charged to the run, as in a cold one.
        code, error = _syntax_error(check)
        if error is not None:
            _write_all(verdict_w, error.encode("utf-8", "surrogateescape"))
            os._exit(0)
    os.close(verdict_w)
    if script is None:
        # A cold start gives the program default dispositions: Python ignores these two at start-up.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _fresh_stdin()
    if code is None or check != path:
        with open(path, "rb") as handle:
            code = compile(handle.read(), path, "exec", dont_inherit=True)
    return path, code, argv[script:]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


if __name__ == "__main__":
    _run = main()
    if _run is not None:
        _path, _code, _argv = _run
        del _run
        _module = _main_module(_path, _argv)
        del _path, _argv
        exec(_code, _module.__dict__)
