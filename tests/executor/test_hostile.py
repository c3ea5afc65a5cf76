"""Hostile programs: each must get the right verdict, leave the host exactly as it was, and leave the next
ordinary run unaffected."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from executor.run import Executor
from services.kernel.contracts import ExecutionResult, Limits, TestCase
from tests.executor.conftest import (
    SHORT_WALL,
    SUM_SOURCES,
    dispose,
    make_executor,
    our_cgroups,
    processes_of,
    run,
    settle,
)

# A uid of its own, so "no process of the sandbox uid is left on the host" cannot be confused with any
# other process on the machine.
SANDBOX_UID = 64123


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    executor = make_executor(tmp_path_factory.mktemp("hostile"), sandbox_uid=SANDBOX_UID)
    yield executor
    dispose(executor)


def snapshot(executor: Executor) -> dict[str, object]:
    """What a contained program cannot change on the host (the pre-made jails waiting for their runs aside)."""
    settle(executor)
    return {
        "processes": processes_of(SANDBOX_UID, executor),
        "cgroups": our_cgroups(executor),
        "canaries": [
            p for p in ("/etc/tribunal-canary", "/usr/tribunal-canary", "/tribunal-canary") if os.path.exists(p)
        ],
    }


def build_files(executor: Executor) -> dict[str, tuple[int, int, int]]:
    return {
        str(path.relative_to(executor.builds_root)): (path.lstat().st_mode, path.lstat().st_size, path.lstat().st_uid)
        for path in executor.builds_root.rglob("*")
        if ".tmp" not in path.parts
    }


@pytest.fixture()
async def host_unchanged(executor: Executor) -> AsyncIterator[None]:
    """Around each test: the host looks the same afterwards, and an ordinary program still passes."""
    await run(executor, "python", SUM_SOURCES["python"], stdin="1 2", expected="3")  # warm the build cache
    before = snapshot(executor)
    builds_before = build_files(executor)
    assert before["processes"] == [] and before["canaries"] == []
    yield
    assert snapshot(executor) == before
    # Existing builds are untouched; the only new files are the builds of the programs under test.
    builds_after = build_files(executor)
    assert {path: builds_after.get(path) for path in builds_before} == builds_before
    old_keys = {path.split("/")[0] for path in builds_before}
    new_keys = {path.split("/")[0] for path in builds_after if path not in builds_before}
    assert not new_keys & old_keys
    for language in ("python", "c"):
        normal = await run(executor, language, SUM_SOURCES[language], stdin="20 22", expected="42")
        assert normal.verdict == "AC", normal


def assert_verdict(outcome: ExecutionResult, allowed: set[str]) -> None:
    assert outcome.verdict in allowed, outcome


pytestmark = pytest.mark.usefixtures("host_unchanged")


PYTHON_FORK_BOMB = """\
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
C_FORK_BOMB = "#include <unistd.h>\nint main(void) { for (;;) fork(); }\n"


@pytest.mark.parametrize(("language", "source"), [("python", PYTHON_FORK_BOMB), ("c", C_FORK_BOMB)])
async def test_fork_bomb_is_contained(executor: Executor, language: str, source: str) -> None:
    assert_verdict(await run(executor, language, source, limits=SHORT_WALL), {"TLE", "RE", "MLE"})


async def test_memory_bomb(executor: Executor) -> None:
    source = (
        "#include <stdlib.h>\n#include <string.h>\nint main(void) { for (;;) memset(malloc(1 << 24), 1, 1 << 24); }\n"
    )
    assert_verdict(await run(executor, "c", source), {"MLE"})


async def test_memory_bomb_in_tmpfs(executor: Executor) -> None:
    """Files in the jail's tmpfs are memory too: filling /tmp must not fill the host."""
    source = "chunk = b'x' * (1 << 20)\nwith open('/tmp/fill', 'wb') as f:\n    while True:\n        f.write(chunk)\n"
    assert_verdict(await run(executor, "python", source), {"MLE", "RE"})


async def test_busy_loop_and_sleep(executor: Executor) -> None:
    assert_verdict(await run(executor, "python", "while True:\n    pass\n"), {"TLE"})
    assert_verdict(await run(executor, "python", "import time\ntime.sleep(60)\n", limits=SHORT_WALL), {"TLE"})


async def test_output_flood_on_both_streams(executor: Executor) -> None:
    stdout = await run(executor, "c", '#include <stdio.h>\nint main(void) { for (;;) fputs("flood\\n", stdout); }\n')
    stderr = await run(executor, "c", '#include <stdio.h>\nint main(void) { for (;;) fputs("flood\\n", stderr); }\n')
    assert_verdict(stdout, {"OLE"})
    assert_verdict(stderr, {"OLE"})
    assert len(stderr.tests[0].stderr) < 64 * 1024


async def test_file_size_limit(executor: Executor) -> None:
    source = "with open('big', 'wb') as f:\n    f.write(b'x' * (100 << 20))\n"
    limits = Limits(cpu_time_s=2, wall_time_s=20, memory_mb=512, output_kb=64, processes=16)
    assert_verdict(await run(executor, "python", source, limits=limits), {"RE", "MLE"})


async def test_writes_outside_the_work_dir_fail(executor: Executor) -> None:
    targets = [
        "/etc/tribunal-canary",
        "/usr/tribunal-canary",
        "/tribunal-canary",
        "/prog/planted",
        "/usr/bin/python3",
        str(executor.builds_root / "planted"),
        str(executor.work_root / "planted"),
    ]
    source = (
        f"import os\ntargets = {targets!r}\n"
        "for path in targets:\n"
        "    try:\n"
        "        with open(path, 'a') as f:\n"
        "            f.write('x')\n"
        "        print('WROTE', path)\n"
        "    except OSError as e:\n"
        "        print('denied', type(e).__name__)\n"
        "with open('scratch', 'w') as f:\n"
        "    f.write('the work dir is writable')\n"
        "with open('/tmp/scratch', 'w') as f:\n"
        "    f.write('so is /tmp')\n"
        "print('done')\n"
    )
    outcome = await run(executor, "python", source)
    assert outcome.verdict == "AC", outcome
    assert "WROTE" not in outcome.tests[0].stdout
    assert outcome.tests[0].stdout.count("denied") == len(targets)
    assert outcome.tests[0].stdout.endswith("done\n")
    assert not (executor.builds_root / "planted").exists() and not (executor.work_root / "planted").exists()


async def test_no_network(executor: Executor) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    port = server.getsockname()[1]
    source = (
        "import socket\n"
        "try:\n"
        "    print(sorted(name for _, name in socket.if_nameindex()))\n"
        "except OSError as e:  # glibc asks netlink, which seccomp refuses\n"
        "    print('netlink refused', e.errno)\n"
        "print(sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:]))\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        "    print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('refused', type(e).__name__)\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=1)\n"
        "    print('CONNECTED OUT')\n"
        "except OSError as e:\n"
        "    print('unreachable', type(e).__name__)\n"
    )
    try:
        outcome = await run(executor, "python", source)
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    assert outcome.verdict == "AC", outcome
    lines = outcome.tests[0].stdout.splitlines()
    assert lines[0] == "netlink refused 1"
    assert lines[1] == "['lo']"
    assert lines[2].startswith("refused")
    assert lines[3].startswith("unreachable")


async def test_platform_secrets_are_out_of_reach(
    executor: Executor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = secrets.token_hex(16)
    monkeypatch.setenv("TRIBUNAL_ADMIN_TOKEN", token)
    admin_key = tmp_path / "admin.key"
    admin_key.write_text(token)
    admin_key.chmod(0o600)
    database = tmp_path / "tribunal.db"
    database.write_bytes(b"SQLite format 3\x00" + token.encode())
    source = (
        "import os\n"
        "print(sorted(os.environ))\n"
        "print(open('/proc/self/environ', 'rb').read())\n"
        # PID 1 is the run's first process, its supervisor: non-dumpable, so its environ is not even readable.
        "try:\n    print(open('/proc/1/environ', 'rb').read())\n"
        "except OSError as e:\n    print('hidden', type(e).__name__)\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        f"for path in [{str(admin_key)!r}, {str(database)!r}, '/etc/shadow', '/etc/passwd',\n"
        f"             '/proc/{os.getpid()}/environ', '/root/.bash_history']:\n"
        "    try:\n"
        "        print('READ', path, open(path, 'rb').read())\n"
        "    except OSError as e:\n"
        "        print('hidden', type(e).__name__)\n"
    )
    outcome = await run(executor, "python", source)
    assert outcome.verdict == "AC", outcome
    stdout = outcome.tests[0].stdout
    assert token not in stdout
    assert "READ" not in stdout
    assert stdout.splitlines()[0] == "['HOME', 'LANG', 'PATH']"
    assert stdout.splitlines()[2] == "hidden PermissionError"
    # The jail has its own pid namespace: the program sees the run's supervisor (pid 1) and itself, nothing of the host.
    assert stdout.splitlines()[3] == "['1', '2']"


async def test_planted_symlinks_do_not_leak(executor: Executor, tmp_path: Path) -> None:
    secret = tmp_path / "admin.key"
    secret.write_text(secrets.token_hex(16))
    secret.chmod(0o600)
    source = (
        "import os\n"
        f"for name, target in [('shadow', '/etc/shadow'), ('key', {str(secret)!r}), ('root', '/')]:\n"
        "    os.symlink(target, name)\n"
        "    try:\n"
        "        print('READ', name, open(name).read() if name != 'root' else os.listdir(name))\n"
        "    except OSError as e:\n"
        "        print('nothing', type(e).__name__)\n"
        "for place in ['/prog/link', '/src/link']:\n"
        "    try:\n"
        f"        os.symlink({str(secret)!r}, place)\n"
        "        print('PLANTED', place)\n"
        "    except OSError as e:\n"
        "        print('refused', type(e).__name__)\n"
    )
    outcome = await run(executor, "python", source)
    stdout = outcome.tests[0].stdout
    assert outcome.verdict == "AC", outcome
    assert secret.read_text() not in stdout
    assert "READ shadow" not in stdout and "READ key" not in stdout and "PLANTED" not in stdout
    # The host never follows them: nothing in the build cache is a link (the run only had tmpfs to write).
    assert not any(path.is_symlink() for path in executor.builds_root.rglob("*"))


@pytest.mark.parametrize(
    ("language", "source"),
    [
        ("python", "import sys\nsys.setrecursionlimit(10 ** 6)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n"),
        (
            "c",
            "int f(int n) { volatile char pad[512]; pad[0] = n; return f(n + 1) + pad[0]; }\n"
            "int main(void) { return f(0); }\n",
        ),
        (
            "java",
            "public class Main { static int f(int n) { return f(n + 1) + 1; }\n"
            "  public static void main(String[] a) { f(0); } }\n",
        ),
    ],
)
async def test_deep_recursion_stays_in_the_jail(executor: Executor, language: str, source: str) -> None:
    assert_verdict(await run(executor, language, source), {"RE", "MLE"})


async def test_template_recursion_is_a_compile_error(executor: Executor) -> None:
    source = (
        "template <int N> struct Deep { static const int value = Deep<N + 1>::value + 1; };\n"
        "int main() { return Deep<0>::value; }\n"
    )
    outcome = await run(executor, "cpp", source)
    assert outcome.verdict == "CE"
    assert "template instantiation depth" in outcome.compile_output


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/stdin"])
async def test_including_an_endless_file_is_a_compile_error(executor: Executor, device: str) -> None:
    outcome = await run(executor, "c", f'#include "{device}"\nint main(void) {{ return 0; }}\n')
    assert outcome.verdict == "CE", outcome


async def test_including_host_files_is_a_compile_error(executor: Executor, tmp_path: Path) -> None:
    secret = tmp_path / "admin.key"
    secret.write_text("int leaked = 1;\n")
    outcome = await run(executor, "c", f'#include "{secret}"\nint main(void) {{ return leaked; }}\n')
    assert outcome.verdict == "CE"
    assert "No such file" in outcome.compile_output


async def test_java_thread_bomb(executor: Executor) -> None:
    source = (
        "public class Main { public static void main(String[] a) {\n"
        "  while (true) {\n"
        "    Thread t = new Thread(() -> { try { Thread.sleep(60000); } catch (InterruptedException e) {} });\n"
        "    t.setDaemon(true); t.start(); } } }\n"
    )
    assert_verdict(await run(executor, "java", source), {"RE", "TLE", "MLE"})


async def test_cannot_signal_or_trace_outside(executor: Executor) -> None:
    source = (
        "import os, signal\n"
        f"for pid in [1, {os.getpid()}, {os.getppid()}]:\n"
        "    try:\n"
        "        os.kill(pid, 0 if pid == 1 else signal.SIGKILL)\n"
        "        print('signalled', pid)\n"
        "    except OSError as e:\n"
        "        print('no such process', pid, type(e).__name__)\n"
    )
    outcome = await run(executor, "python", source)
    assert outcome.verdict == "AC"
    assert outcome.tests[0].stdout.splitlines() == [
        "signalled 1",
        f"no such process {os.getpid()} ProcessLookupError",
        f"no such process {os.getppid()} ProcessLookupError",
    ]


async def test_no_nested_namespaces_or_tracing(executor: Executor) -> None:
    """Kernel attack surface a judged program has no use for is closed (seccomp), threads still work."""
    source = (
        "import ctypes, os, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def errno_of(result):\n    return ctypes.get_errno() if result == -1 else 'ALLOWED'\n"
        "print('unshare', errno_of(libc.unshare(0x10000000)))\n"
        "pid = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER | SIGCHLD)\n"
        "if pid == 0:\n    os._exit(0)\n"
        "print('clone', errno_of(pid))\n"
        "print('ptrace', errno_of(libc.ptrace(16, 1, 0, 0)))  # PTRACE_ATTACH\n"
        "thread = threading.Thread(target=print, args=('thread',))\nthread.start()\nthread.join()\n"
        "child = os.fork()\nif child == 0:\n    os._exit(7)\n"
        "print('fork', os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))\n"
    )
    outcome = await run(executor, "python", source)
    assert outcome.tests[0].stdout.splitlines() == ["unshare 1", "clone 1", "ptrace 1", "thread", "fork 7"]


async def test_no_file_descriptors_leak_into_the_jail(executor: Executor) -> None:
    source = "import os\nprint(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))\n"
    outcome = await run(executor, "python", source, [TestCase(), TestCase()])
    # 0-2, plus the descriptor listdir itself opens.
    assert [t.stdout for t in outcome.tests] == ["[0, 1, 2, 3]\n"] * 2


async def test_no_capabilities_and_no_new_privileges(executor: Executor) -> None:
    source = (
        "lines = open('/proc/self/status').read().splitlines()\n"
        "status = dict(line.split(':\\t', 1) for line in lines if ':\\t' in line)\n"
        "print(status['Uid'].split()[0], status['CapEff'], status['NoNewPrivs'], status['Seccomp'])\n"
    )
    outcome = await run(executor, "python", source)
    assert outcome.tests[0].stdout == "65534 0000000000000000 1 2\n"


# x86-64 system call numbers, for calls that glibc or Python do not wrap.
_SYSCALLS = {
    "modify_ldt": 154,
    "personality": 135,
    "memfd_secret": 447,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "kcmp": 312,
    "prlimit64": 302,
    "setpriority": 141,
    "sched_setaffinity": 203,
    "sched_setscheduler": 144,
    "sched_setparam": 142,
    "sched_setattr": 314,
    "ioprio_set": 251,
}


async def test_seccomp_refuses_kernel_surface_and_cross_process_calls(executor: Executor) -> None:
    """vsock/netlink sockets, LDT, personality changes, secret memory, pidfd/kcmp/process_madvise, and the
    resource and scheduling calls aimed at another process (in function mode a trusted runner will share the
    jail as pid 1) fail with EPERM; the same calls on the program itself still work."""
    calls = [
        # (label, syscall, args, expected)
        ("modify_ldt", "modify_ldt", "0, addr, 16", 1),
        ("personality query", "personality", "0xffffffff", "ALLOWED"),
        ("personality linux", "personality", "0", "ALLOWED"),
        ("personality bsd", "personality", "0x0006", 1),
        ("personality addr_no_randomize", "personality", "0x0040000", 1),
        ("memfd_secret", "memfd_secret", "0", 1),
        ("pidfd_getfd", "pidfd_getfd", "3, 0, 0", 1),
        ("process_madvise", "process_madvise", "3, addr, 1, 0, 0", 1),
        ("kcmp", "kcmp", "1, child, 0, 0, 0", 1),
        ("prlimit64 self", "prlimit64", "0, 7, 0, addr", "ALLOWED"),
        ("prlimit64 child", "prlimit64", "child, 7, 0, addr", 1),
        ("prlimit64 init", "prlimit64", "1, 7, addr, 0", 1),
        ("setpriority self", "setpriority", "0, 0, 1", "ALLOWED"),
        ("setpriority child", "setpriority", "0, child, 1", 1),
        ("setpriority init", "setpriority", "0, 1, 5", 1),
        ("setpriority own group", "setpriority", "1, 0, 5", 1),
        ("setpriority own user", "setpriority", "2, 0, 5", 1),
        ("sched_setaffinity self", "sched_setaffinity", "0, 128, cpus", "ALLOWED"),
        ("sched_setaffinity child", "sched_setaffinity", "child, 128, cpus", 1),
        ("sched_setscheduler child", "sched_setscheduler", "child, 0, addr", 1),
        ("sched_setparam child", "sched_setparam", "child, addr", 1),
        ("sched_setattr child", "sched_setattr", "child, addr, 0", 1),
        ("ioprio_set self", "ioprio_set", "1, 0, 0", "ALLOWED"),
        ("ioprio_set child", "ioprio_set", "1, child, 0", 1),
        ("ioprio_set own user", "ioprio_set", "3, 0, 0", 1),
    ]
    lines = [
        "import ctypes, os, resource, socket, time",
        "libc = ctypes.CDLL(None, use_errno=True)",
        "libc.syscall.restype = ctypes.c_long",
        f"NR = {_SYSCALLS!r}",
        "def call(label, name, *args):",
        "    ctypes.set_errno(0)",
        "    result = libc.syscall(ctypes.c_long(NR[name]), *(ctypes.c_ulong(a) for a in args))",
        "    print(label, ctypes.get_errno() if result == -1 else 'ALLOWED')",
        "buffer = ctypes.create_string_buffer(128)",
        "addr = ctypes.addressof(buffer)",
        "cpu_mask = ctypes.create_string_buffer(128)",
        "libc.sched_getaffinity(0, 128, cpu_mask)",
        "cpus = ctypes.addressof(cpu_mask)",
        "child = os.fork()",
        "if child == 0:",
        "    time.sleep(30)",
        "    os._exit(0)",
        "for family, kind, label in [(40, socket.SOCK_STREAM, 'vsock'), (16, socket.SOCK_RAW, 'netlink'),",
        "                            (socket.AF_UNIX, socket.SOCK_STREAM, 'unix'),",
        "                            (socket.AF_INET, socket.SOCK_DGRAM, 'inet')]:",
        "    try:",
        "        socket.socket(family, kind).close()",
        "        print('socket', label, 'ALLOWED')",
        "    except OSError as e:",
        "        print('socket', label, e.errno)",
        *(f"call({label!r}, {name!r}, {args})" for label, name, args, _ in calls),
        "os.kill(child, 9)",
        "os.waitpid(child, 0)",
        "print('nice', os.nice(1) > 0, 'rlimit', resource.getrlimit(7)[0] > 0,",
        "      'affinity', len(os.sched_getaffinity(0)) > 0)",
    ]
    outcome = await run(executor, "python", "\n".join(lines) + "\n")
    assert outcome.verdict == "AC", outcome
    expected = [
        "socket vsock 1",
        "socket netlink 1",
        "socket unix ALLOWED",
        "socket inet ALLOWED",
        *(f"{label} {result}" for label, _, _, result in calls),
        "nice True rlimit True affinity True",
    ]
    assert outcome.tests[0].stdout.splitlines() == expected


async def test_seccomp_refusals_from_c(executor: Executor) -> None:
    source = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char *label, long result) {
    if (result == -1) printf("%s %d\n", label, errno); else printf("%s ALLOWED\n", label);
}

int main(void) {
    pid_t child = fork();
    if (child == 0) { sleep(30); _exit(0); }
    struct rlimit limit;
    cpu_set_t cpus;
    sched_getaffinity(0, sizeof cpus, &cpus);
    report("vsock", socket(40, SOCK_STREAM, 0));
    report("netlink", socket(AF_NETLINK, SOCK_RAW, 0));
    report("prlimit child", prlimit(child, RLIMIT_NOFILE, NULL, &limit));
    report("prlimit self", prlimit(0, RLIMIT_NOFILE, NULL, &limit));
    report("getrlimit", getrlimit(RLIMIT_NOFILE, &limit));
    report("setpriority child", setpriority(PRIO_PROCESS, child, 10));
    report("setpriority self", setpriority(PRIO_PROCESS, 0, 1));
    report("sched_setaffinity child", sched_setaffinity(child, sizeof cpus, &cpus));
    report("sched_setaffinity self", sched_setaffinity(0, sizeof cpus, &cpus));
    report("personality query", personality(0xffffffff));
    report("personality bsd", personality(PER_BSD));
    report("modify_ldt", syscall(SYS_modify_ldt, 0, &limit, sizeof limit));
    report("kcmp", syscall(SYS_kcmp, getpid(), child, 0, 0, 0));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}
"""
    outcome = await run(executor, "c", source)
    assert outcome.verdict == "AC", outcome
    assert outcome.tests[0].stdout.splitlines() == [
        "vsock 1",
        "netlink 1",
        "prlimit child 1",
        "prlimit self ALLOWED",
        "getrlimit ALLOWED",
        "setpriority child 1",
        "setpriority self ALLOWED",
        "sched_setaffinity child 1",
        "sched_setaffinity self ALLOWED",
        "personality query ALLOWED",
        "personality bsd 1",
        "modify_ldt 1",
        "kcmp 1",
    ]


def _host_words(work_roots: list[Path]) -> list[str]:
    """What a mount table must not contain: the work roots, their names, their parents' names, and the
    host's usual prefixes."""
    words = ["/work", "/root", "/tmp/pytest", "/tmp/tribunal", "pytest-of"]
    for work_root in work_roots:
        words += [str(work_root), work_root.name, work_root.parent.name]
    return words


def _assert_no_host_paths(text: str, work_roots: list[Path]) -> None:
    leaked = [word for word in _host_words(work_roots) if word in text]
    assert not leaked, (leaked, text)


MOUNT_TABLES = "print(open('/proc/self/mountinfo').read())\nprint(open('/proc/self/mounts').read())\n"
FUNCTION_MOUNT_TABLES = (
    "def tables():\n    return open('/proc/self/mountinfo').read() + open('/proc/self/mounts').read()\n"
)
C_MOUNT_TABLES = (
    "#include <stdio.h>\n"
    "int main(void) {\n"
    '  const char *paths[] = {"/proc/self/mountinfo", "/proc/self/mounts"};\n'
    "  for (int i = 0; i < 2; i++) {\n"
    '    FILE *f = fopen(paths[i], "r"); int c;\n'
    "    if (!f) return 1;\n"
    "    while ((c = fgetc(f)) != EOF) putchar(c);\n"
    "    fclose(f);\n"
    "  }\n"
    "  return 0;\n"
    "}\n"
)


async def test_mount_tables_show_no_host_paths(executor: Executor) -> None:
    """The jail reads its mounts' host paths in /proc/self/mountinfo: they must not name the data dir, even
    for a work root the sandbox user could reach (which used to be mounted from directly)."""
    base = Path(tempfile.mkdtemp(prefix="tribunal-leak-"))
    base.chmod(0o711)
    reachable = make_executor(base / "datadir-secret-name" / "executor")
    try:
        for each in (executor, reachable):
            outcome = await run(each, "python", MOUNT_TABLES)
            assert outcome.verdict == "AC", outcome
            stdout = outcome.tests[0].stdout
            assert " /prog " in stdout and "/var/cache/tribunal-sandbox/" in stdout
            _assert_no_host_paths(stdout, [each.work_root])

            # Function mode mounts the harness too; the harness keeps the program's stdout, so the check runs
            # inside the jail and names the first leaked word.
            check = (
                "def check(candidate):\n"
                "    text = candidate()\n"
                "    assert 'function_runner.py' in text, text\n"
                f"    for word in {_host_words([each.work_root])!r}:\n"
                "        assert word not in text, word\n"
            )
            function = await each.execute(
                tenant="tenant-a",
                language="python",
                source_code=FUNCTION_MOUNT_TABLES,
                tests=[TestCase(code=check)],
                mode="function",
                entry_point="tables",
            )
            assert function.verdict == "AC", function

            # A compiled program's /prog is the compiler's output folder, another host path.
            compiled = await run(each, "c", C_MOUNT_TABLES)
            assert compiled.verdict == "AC", compiled
            assert "/prog/main" not in compiled.tests[0].stdout and " /prog " in compiled.tests[0].stdout
            _assert_no_host_paths(compiled.tests[0].stdout, [each.work_root])
    finally:
        dispose(reachable)
        shutil.rmtree(base)
