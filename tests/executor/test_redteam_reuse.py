"""Red team of reusable jails (da2cf49, 9a83f55): one jail serves run after run, of any tenant, through a zygote that
forks each run into fresh mount, IPC and PID namespaces (services/lib/sandbox/zygote.py, warm.py, warm_runs.py).

The promise under test: isolation between runs is no weaker than a fresh jail per run, so nothing one run does may
change what the next run in the same jail sees or the verdict it gets. Each test below is a finding of this pass: it
asserts the secure behaviour (each failed before its fix: idle memory baseline with a calibration run and memory
settled back to idle between runs, a network namespace per run, CPU time from the jail's cpuacct cgroup). Every test
gets an executor of its own with one slot, so consecutive runs of one kind share one jail (the attack's
precondition), and no earlier test's jails crowd the pool.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from executor.run import Executor
from services.kernel.contracts import ExecutionResult, Limits, TestCase
from tests.executor.conftest import FAST, dispose, make_executor, our_cgroups, processes_of, run, settle

SANDBOX_UID = 64181


@pytest.fixture()
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    executor = make_executor(tmp_path_factory.mktemp("redteam-reuse"), sandbox_uid=SANDBOX_UID, slots=1)
    yield executor
    settle(executor)
    assert processes_of(SANDBOX_UID, executor) == []
    assert our_cgroups(executor) == []
    dispose(executor)


def c_hog(mb: int) -> str:
    """A C program that touches `mb` MiB of anonymous memory (volatile: the compiler cannot drop it)."""
    return (
        "#include <stdio.h>\n#include <stdlib.h>\n"
        "int main(void) {\n"
        f"  size_t n = (size_t){mb} << 20; volatile char *p = malloc(n); long s = 0;\n"
        "  for (size_t i = 0; i < n; i += 4096) p[i] = 1;\n"
        "  for (size_t i = 0; i < n; i += 4096) s += p[i];\n"
        '  printf("%ld\\n", s); return 0;\n}\n'
    )


# Files under /usr that no process keeps mapped: dropping their page cache first (POSIX_FADV_DONTNEED, allowed on any
# file one can read) makes every byte read afterwards page cache charged to the reading jail's memory cgroup, where
# it stays after the run: nothing of the run is left, but its cache is.
_BIG_FILES = (
    "/usr/lib/jvm/java-17-openjdk-amd64/lib/modules",
    "/usr/lib/jvm/temurin-25-jdk-amd64/lib/modules",
    "/usr/lib/jvm/temurin-25-jdk-amd64/lib/src.zip",
    "/usr/lib/x86_64-linux-gnu/libicudata.a",
    "/usr/lib/gcc/x86_64-linux-gnu/12/lto1",
)
C_FILL_CACHE = (
    "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <unistd.h>\n"
    "int main(void) {\n  static char buf[1 << 20];\n"
    "  const char *files[] = {" + ", ".join(f'"{path}"' for path in _BIG_FILES) + ", 0};\n"
    "  for (int i = 0; files[i]; i++) {\n"
    "    int fd = open(files[i], O_RDONLY); if (fd < 0) continue;\n"
    "    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);\n"
    "    while (read(fd, buf, sizeof buf) > 0) {}\n    close(fd);\n  }\n  return 0;\n}\n"
)
PY_FILL_CACHE = f"""
import os
for path in {_BIG_FILES!r}:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        continue
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)
"""


def only(outcome: ExecutionResult) -> tuple[str, int, str]:
    assert outcome.tests, outcome
    test = outcome.tests[0]
    return test.status, test.memory_kb, test.message


# --- FINDING 1: page cache a run leaves in its jail's memory cgroup is charged to the runs after it ----------------


async def test_page_cache_left_by_a_run_does_not_raise_the_next_runs_memory_limit(executor: Executor) -> None:
    """An exec'd program's limit is set to the jail's current usage plus the run's limit (RunCgroups.start_run),
    and its peak is measured from that usage. Page cache left by earlier runs is in that usage, so each run that
    fills the cache raises the next run's limit by its own: after three, a program that touches 100 MiB under a
    64 MiB limit is accepted with a reported peak of a few MiB, and one killed by the kernel for memory is a TLE."""
    limits = Limits(cpu_time_s=2, wall_time_s=10, memory_mb=64, output_kb=64, processes=16)
    for _ in range(3):
        filled = await run(executor, "c", C_FILL_CACHE, limits=limits)
        assert filled.verdict == "AC", filled
    over = await run(executor, "c", c_hog(100), limits=limits)
    assert only(over)[0] == "MLE", over
    far_over = await run(executor, "c", c_hog(140), limits=limits)
    assert only(far_over)[0] == "MLE", far_over


async def test_page_cache_left_by_a_run_does_not_count_as_the_next_python_runs_memory(executor: Executor) -> None:
    """A Python run's peak is the jail's whole peak, from the usage at its start: another run's leftover cache.
    The next program that fails with exit code 3 is judged MLE (its peak is 'at the limit'), not RE."""
    limits = Limits(cpu_time_s=1, wall_time_s=10, memory_mb=64, output_kb=64, processes=16)
    for _ in range(2):
        filled = await run(executor, "python", PY_FILL_CACHE, limits=limits)
        assert filled.verdict == "AC", filled
    status, memory_kb, message = only(await run(executor, "python", "raise SystemExit(3)\n", limits=limits))
    assert (status, message) == ("RE", "exit code 3")
    assert memory_kb < 40 * 1024


# --- FINDING 2: memory a run frees only after its processes are gone is charged to the next run ------------------

# The IPC namespace of a run is freed by a kernel work item after its last process exits (with its SysV shared
# memory), and fds in flight on AF_UNIX sockets are freed by the asynchronous unix garbage collector: the zygote
# reports the run over, and the host starts the next run, while that memory is still charged to the jail.
LEAVE_SHM = """
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    size = 100 << 20
    address = libc.shmat(libc.shmget(0, size, 0o1600), None, 0)
    ctypes.memset(address, 1, size)
"""
LEAVE_IN_FLIGHT = """
    import os, socket
    fd = os.memfd_create("left")
    chunk = b"x" * (1 << 20)
    for _ in range(60):
        os.write(fd, chunk)
    a, b = socket.socketpair()
    socket.send_fds(a, [b"x"], [fd, a.fileno(), b.fileno()])
    socket.send_fds(b, [b"x"], [fd, a.fileno(), b.fileno()])
"""


@pytest.mark.parametrize("leave", [LEAVE_SHM, LEAVE_IN_FLIGHT], ids=["sysv-shm", "unix-in-flight"])
async def test_memory_a_run_leaves_behind_is_not_charged_to_the_next_run(executor: Executor, leave: str) -> None:
    """Tests of one execute alternate: a 'leave' run that holds ~100 MiB the kernel frees late, then a 'look' run
    that needs ~45 MiB of a 128 MiB limit. Each look run must be judged on its own memory."""
    source = "if input() == 'leave':\n" + textwrap.indent(textwrap.dedent(leave), "    ")
    source += "else:\n    data = bytearray(30 << 20)\n    print('ok')\n"
    limits = Limits(cpu_time_s=2, wall_time_s=10, memory_mb=128, output_kb=64, processes=16)
    tests = [TestCase(input="leave" if index % 2 == 0 else "look") for index in range(16)]
    outcome = await run(executor, "python", source, tests, limits=limits)
    looks = [(test.status, test.memory_kb) for test in outcome.tests if test.index % 2 == 1]
    assert len(looks) == 8, outcome
    assert all(status == "AC" for status, _ in looks), looks
    assert max(memory_kb for _, memory_kb in looks) < 60 * 1024, looks


# --- FINDING 3: an exec'd program's memory baseline is not the idle jail's -----------------------------------------


async def test_an_exec_program_gets_the_memory_a_cold_jail_gives(executor: Executor) -> None:
    """A C program that touches 64 MiB under a 70 MiB limit, and 62 MiB under 64 MiB, uses ~66 resp. ~63 MiB at its
    peak in a cold jail: accepted. In a reusable jail the first run's baseline is read before the zygote has even
    started (take() spawns the jail and the run is sent at once), so the zygote's start-up is charged to the run;
    and every run pays for its setup process and supervisor, copies of the zygote. With many kinds in use every
    run is the first in its jail."""
    for limit_mb, touched_mb in ((70, 64), (64, 62)):
        limits = Limits(cpu_time_s=1, wall_time_s=10, memory_mb=limit_mb, output_kb=64, processes=16)
        outcomes = [await run(executor, "c", c_hog(touched_mb), limits=limits) for _ in range(3)]
        assert [only(outcome)[0] for outcome in outcomes] == ["AC"] * 3, [only(outcome) for outcome in outcomes]


# --- FINDING 4: the jail's network namespace is shared by every run it serves ---------------------------------------


async def test_a_runs_sockets_leave_nothing_for_the_next_run(executor: Executor) -> None:
    """Sockets die with their run, but TCP TIME_WAIT entries (for 60 s), the loopback counters and /proc/net/tcp
    are the network namespace's, which the zygote never renews: a run can leave data there for the next run of
    any tenant (ports and byte counts encode anything), and make a fixed port unusable to it."""
    leave = """
        import socket, time
        server = socket.socket()
        server.bind(("127.0.0.1", 8080))
        server.listen(1)
        client = socket.socket()
        client.bind(("127.0.0.1", 31337))
        client.connect(("127.0.0.1", 8080))
        accepted, _ = server.accept()
        accepted.close()  # the server side closes first: TIME_WAIT on 127.0.0.1:8080
        time.sleep(0.05)
        client.close()
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x" * 12345, ("127.0.0.1", 9))
    """
    look = """
        import socket
        tcp = [line.split()[1:4] for line in open("/proc/net/tcp").read().splitlines()[1:]]
        lo_rx_bytes = int(open("/proc/net/dev").read().split("lo:")[1].split()[0])
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", 8080))
            bound = True
        except OSError:
            bound = False
        print(tcp, lo_rx_bytes, bound)
    """
    left = await run(executor, "python", textwrap.dedent(leave), limits=FAST)
    assert left.verdict == "AC", left
    looked = await run(executor, "python", textwrap.dedent(look), limits=FAST)
    assert looked.verdict == "AC", looked
    assert looked.tests[0].stdout == "[] 0 True\n"


# --- FINDING 5 (not from reuse: cold jails do the same): CPU of auto-reaped processes is never charged -------------


async def test_cpu_of_processes_nobody_waits_for_is_charged(executor: Executor) -> None:
    """The run's CPU time is getrusage(RUSAGE_CHILDREN) of its supervisor (or wait4 of nsjail, cold): a process whose
    parent ignores SIGCHLD is reaped by the kernel and its CPU time is added to nobody's. Four workers of 0.8 s
    each (3.2 s of CPU under a 1 s limit) are reported as a few milliseconds and accepted. The run's cgroup counts
    them: the run is stopped as their CPU time together reaches the limit."""
    source = """
        import os, signal, time
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        for _ in range(4):
            if os.fork() == 0:
                start = time.process_time()
                while time.process_time() - start < 0.8:
                    pass
                os._exit(0)
        time.sleep(2.5)
        print("done")
    """
    outcome = await run(executor, "python", textwrap.dedent(source), limits=FAST)
    status, _, _ = only(outcome)
    test = outcome.tests[0]
    assert status == "TLE" and test.stopped_by == "cpu" and test.cpu_time_ms >= FAST.cpu_time_s * 1000, outcome
