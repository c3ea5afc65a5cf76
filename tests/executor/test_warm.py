"""Pre-made ("warm") jails: a run starts in a jail made before it was known, and still shares nothing with any
other run. Each hostile program below tries to leave something behind for the next run, or to forge what the
zygote tells the host; the next run (same executor, same kind of jail) must see none of it.

The design under attack: services/lib/sandbox/warm.py, services/lib/sandbox/zygote.py, docs/sandbox.md.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import textwrap
from collections.abc import Iterator

import pytest

from executor.run import Executor
from services.kernel.contracts import Limits, TestCase
from tests.executor.conftest import (
    FAST,
    SHORT_WALL,
    SUM_SOURCES,
    dispose,
    make_executor,
    our_cgroups,
    processes_of,
    run,
    settle,
)

# Jail tier: executors of its own beside the fixture's, not only through the `executor` or `tool_jail` fixture.
pytestmark = pytest.mark.jail

SANDBOX_UID = 64125


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    executor = make_executor(tmp_path_factory.mktemp("warm"), sandbox_uid=SANDBOX_UID)
    yield executor
    dispose(executor)


async def stdout_of(executor: Executor, source: str, stdin: str = "", limits: Limits = FAST) -> str:
    outcome = await run(executor, "python", textwrap.dedent(source), stdin=stdin, limits=limits)
    assert outcome.verdict == "AC", outcome
    return outcome.tests[0].stdout


async def leave_then_look(executor: Executor, leave: str, look: str) -> str:
    """Run `leave` (which tries to leave state behind) on both jails of the pool, then `look` twice; return what
    the lookers printed."""
    for _ in range(2):
        await run(executor, "python", textwrap.dedent(leave), limits=FAST)
    looked = [await stdout_of(executor, look) for _ in range(2)]
    assert looked[0] == looked[1]
    return looked[0]


async def test_runs_are_served_by_reusable_jails(executor: Executor) -> None:
    await stdout_of(executor, "print('hello')\n")
    settle(executor)
    waiting, _ = executor.sandbox.waiting_jails()
    assert waiting, "the pool keeps jails ready for the next run"
    # The next runs take them and give them back: the same jails serve run after run.
    for _ in range(3):
        await stdout_of(executor, "print('again')\n")
    settle(executor)
    after, _ = executor.sandbox.waiting_jails()
    assert after == waiting


async def test_files_written_by_one_run_are_not_seen_by_the_next(executor: Executor) -> None:
    leave = """
        import os
        for folder in ("/tmp", "/box", os.getcwd()):
            with open(os.path.join(folder, "left-behind"), "w") as handle:
                handle.write("x")
            os.makedirs(os.path.join(folder, "left-dir"), exist_ok=True)
    """
    look = """
        import os
        print(sorted(os.listdir("/tmp")), sorted(os.listdir("/box")), sorted(os.listdir(os.getcwd())))
    """
    assert await leave_then_look(executor, leave, look) == "[] [] []\n"


async def test_a_background_process_does_not_outlive_its_run(executor: Executor) -> None:
    leave = """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open("/tmp/alive", "w"):
                    pass
                time.sleep(60)
            os._exit(0)
        time.sleep(0.2)
    """
    look = """
        import os
        # The run's first process, its supervisor, is PID 1 (and the program's parent).
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (os.getpid(), os.getppid())]
        print(others, os.path.exists("/tmp/alive"))
    """
    assert await leave_then_look(executor, leave, look) == "[] False\n"
    settle(executor)
    assert processes_of(SANDBOX_UID, executor) == []
    assert our_cgroups(executor) == []


async def test_patched_modules_environment_and_signal_handlers_do_not_reach_the_next_run(executor: Executor) -> None:
    leave = """
        import builtins, json, math, os, signal, sys
        builtins.print = lambda *a, **k: sys.stdout.write("forged\\n")
        json.dumps = lambda *a, **k: "forged"
        math.sqrt = lambda x: 42
        sys.modules["collections"] = None
        sys.modules["poisoned"] = type(sys)("poisoned")
        os.environ["TRIBUNAL_LEFT"] = "1"
        os.environ["PATH"] = "/nowhere"
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGALRM, lambda *a: None)
        sys.setrecursionlimit(50)
    """
    look = """
        import collections, json, math, os, signal, sys
        print(json.dumps([1]), math.sqrt(16), "poisoned" in sys.modules, os.environ.get("TRIBUNAL_LEFT"),
              os.environ["PATH"], signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
              signal.getsignal(signal.SIGALRM) is signal.SIG_DFL, sys.getrecursionlimit() >= 1000,
              collections.Counter("aab")["a"])
    """
    assert await leave_then_look(executor, leave, look) == "[1] 4.0 False None /usr/bin:/bin True True True 2\n"


async def test_a_run_cannot_find_an_earlier_runs_input_in_its_memory(executor: Executor) -> None:
    """The zygote's memory holds nothing but its own run's request: another run's stdin is nowhere in it."""
    secret = secrets.token_hex(16)
    await stdout_of(executor, "input()\n", stdin=f"{secret}\n")
    # Scan every readable mapping of this process (which started as a pre-made jail's zygote) for the secret. The two
    # halves are looked for apart, so the needle itself never exists whole in the scanner's memory.
    head, tail = secret[:16].encode().hex(), secret[16:].encode().hex()
    scan = f"""
        head, tail = bytes.fromhex("{head}"), bytes.fromhex("{tail}")
        found = False
        with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
            for line in maps:
                start, end = (int(x, 16) for x in line.split()[0].split("-"))
                if "r" not in line.split()[1] or end - start > 1 << 28:
                    continue
                try:
                    mem.seek(start)
                    data = mem.read(end - start)
                except OSError:
                    continue
                at = data.find(head)
                while at >= 0 and not found:
                    found = data[at + len(head) : at + len(head) + len(tail)] == tail
                    at = data.find(head, at + 1)
        print(found)
    """
    assert await stdout_of(executor, scan) == "False\n"
    # The scanner does find the secret where it is: in the memory of the run it was given to.
    assert await stdout_of(executor, "kept = input()\n" + textwrap.dedent(scan), stdin=f"{secret}\n") == "True\n"


async def test_the_reply_channel_is_closed_before_the_program_runs(executor: Executor) -> None:
    """A program cannot reach the channel on which the run's first process told the host its CPU time or a syntax error:
    fd 0 is the run's stdin (a sealed memfd), and no socket is open."""
    look = """
        import os, stat
        sockets = [fd for fd in map(int, os.listdir("/proc/self/fd"))
                   if os.path.exists(f"/proc/self/fd/{fd}") and stat.S_ISSOCK(os.fstat(fd).st_mode)]
        print(stat.S_ISSOCK(os.fstat(0).st_mode), sockets, input())
    """
    assert await stdout_of(executor, look, stdin="given\n") == "False [] given\n"


async def test_cpu_time_is_the_programs_own(executor: Executor) -> None:
    """The zygote's start-up and nsjail's set-up happen before the run and are not charged to it."""
    idle = await run(executor, "python", "pass\n", limits=FAST)
    assert idle.verdict == "AC"
    busy = await run(
        executor,
        "python",
        "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n    pass\n",
        limits=FAST,
    )
    assert busy.verdict == "AC"
    assert idle.tests[0].cpu_time_ms < 150
    assert 300 <= busy.tests[0].cpu_time_ms < 300 + 150


async def test_time_and_memory_limits_still_hold(executor: Executor) -> None:
    spin = await run(executor, "python", "while True:\n    pass\n", limits=FAST)
    assert spin.verdict == "TLE"
    hog = await run(executor, "python", "x = bytearray(512 << 20)\n", limits=FAST)
    assert hog.verdict == "MLE"


async def test_a_jail_killed_while_it_waits_is_replaced(executor: Executor) -> None:
    await stdout_of(executor, "print(1)\n")
    settle(executor)
    waiting, _ = executor.sandbox.waiting_jails()
    for pid in waiting:
        os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(0.1)
    outcome = await run(executor, "python", SUM_SOURCES["python"], stdin="2 2", expected="4")
    assert outcome.verdict == "AC", outcome


async def test_syntax_errors_are_decided_before_anything_runs(executor: Executor) -> None:
    """CE comes from the zygote's compile, in the jail, before the program exists as a process; with the
    compiler's message, and the run's side effects never happen."""
    source = "import sys\nsys.stdout.write('ran')\ndef broken(:\n    pass\n"
    outcome = await run(executor, "python", source, [TestCase(input="", expected="ran"), TestCase(input="")])
    assert outcome.verdict == "CE"
    assert outcome.compile_output.startswith('File "main.py", line 3') and "SyntaxError" in outcome.compile_output
    assert outcome.tests == []
    function = await run(
        executor,
        "python",
        "def add(a, b:\n    return a + b\n",
        [TestCase(input=[1, 2], expected=3)],
        mode="function",
        entry_point="add",
    )
    assert function.verdict == "CE" and "SyntaxError" in function.compile_output


async def test_tracebacks_show_the_program_not_the_zygote(executor: Executor) -> None:
    outcome = await run(executor, "python", "def f():\n    raise KeyError('k')\nf()\n", limits=FAST)
    assert outcome.verdict == "RE"
    stderr = outcome.tests[0].stderr
    assert "zygote" not in stderr and 'File "/prog/main.py", line 3' in stderr and "KeyError: 'k'" in stderr


async def test_closing_the_executor_ends_every_waiting_jail(tmp_path_factory: pytest.TempPathFactory) -> None:
    other = make_executor(tmp_path_factory.mktemp("warm-close"), sandbox_uid=SANDBOX_UID + 1)
    slots = other.builds_root.parent / "warm"
    try:
        assert (await run(other, "python", SUM_SOURCES["python"], stdin="1 2", expected="3")).verdict == "AC"
        settle(other)
        assert other.sandbox.waiting_jails()[0] and list(slots.iterdir())
        other.close()
        assert processes_of(SANDBOX_UID + 1) == []
        assert list(slots.iterdir()) == []
    finally:
        dispose(other)


async def test_the_pool_stays_small_whatever_limits_requests_carry(executor: Executor) -> None:
    """Every distinct set of limits is a kind of jail; requests with ever-new limits must not make the pool keep
    jails for each: at most twice one kind's share (2 x slots) wait in all."""
    for step in range(8):
        limits = Limits(cpu_time_s=1 + step / 100, wall_time_s=5, memory_mb=128, output_kb=64, processes=16)
        assert (await run(executor, "python", "print(1)\n", expected="1", limits=limits)).verdict == "AC"
    settle(executor)
    assert 1 <= executor.sandbox.ready_jails() <= 2 * 2
    waiting, cgroups = executor.sandbox.waiting_jails()
    assert len(cgroups) == len(waiting)
    assert processes_of(SANDBOX_UID, executor) == []


# --- reuse: what a run could use to reach the runs after it in the same jail ----------------------------------


async def test_a_run_holds_no_privilege_and_can_make_no_namespace_or_mount(executor: Executor) -> None:
    """The zygote may unshare and mount; a run may not: every capability is dropped (bounding set included) and a
    second seccomp filter forbids again what the jail's policy allowed the zygote. Unmounting the run's /box would
    uncover the zygote's: refused too."""
    look = """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        status = dict(line.split(":", 1) for line in open("/proc/self/status"))
        caps = {int(status[name].strip(), 16) for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
        refused = []
        def eperm(result):
            refused.append(result == -1 and ctypes.get_errno() == 1)
        for flags in (0x00020000, 0x10000000, 0x08000000, 0x20000000, 0x40000000, 0x04000000):
            eperm(libc.unshare(flags))  # mount, user, IPC, PID, network, UTS namespaces
        eperm(libc.mount(b"tmpfs", b"/box", b"tmpfs", 0, None))
        eperm(libc.umount2(b"/box", 2))
        eperm(libc.umount2(b"/tmp", 2))
        eperm(libc.syscall(430, b"tmpfs", 0))  # fsopen
        eperm(libc.syscall(428, -100, b"/box", 1))  # open_tree
        print(sorted(caps), status["Seccomp"].strip(), status["Seccomp_filters"].strip(), refused.count(False))
    """
    assert await stdout_of(executor, look) == "[0] 2 2 0\n"


async def test_sysv_ipc_objects_do_not_reach_the_next_run(executor: Executor) -> None:
    leave = """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        shm = libc.shmget(0x7472, 4096, 0o1666)  # IPC_CREAT | 0666
        queue = libc.msgget(0x7472, 0o1666)
        semaphores = libc.semget(0x7472, 1, 0o1666)
        assert min(shm, queue, semaphores) >= 0, ctypes.get_errno()
        address = libc.shmat(shm, None, 0)
        ctypes.memmove(address, b"left by an earlier run", 22)
    """
    look = """
        counts = [len(open(f"/proc/sysvipc/{kind}").read().splitlines()) - 1 for kind in ("shm", "msg", "sem")]
        print(counts)
    """
    assert await leave_then_look(executor, leave, look) == "[0, 0, 0]\n"


async def test_a_run_sees_its_own_processes_only_and_learns_no_count_of_runs(executor: Executor) -> None:
    """Each run has a PID namespace of its own: its supervisor is PID 1, the program PID 2, in every run."""
    look = """
        import os
        print(os.getpid(), os.getppid(), sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
    """
    outputs = {await stdout_of(executor, look) for _ in range(4)}
    assert outputs == {"2 1 [1, 2]\n"}


async def test_memory_peak_is_each_runs_own(executor: Executor) -> None:
    hog = await run(executor, "python", "x = bytearray(80 << 20)\nx[::4096] = b'1' * len(x[::4096])\n")
    assert hog.verdict == "AC" and hog.tests[0].memory_kb > 80 * 1024
    small = await run(executor, "python", "print(1)\n")
    assert small.verdict == "AC" and small.tests[0].memory_kb < 40 * 1024


async def test_a_jail_whose_run_was_stopped_is_not_reused(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A run stopped from outside (the wall clock, an output flood) ends its whole jail: it may have left
    anything behind, so no other run enters it. (One slot: one jail per kind, so the run's jail is known.)"""
    single = make_executor(tmp_path_factory.mktemp("warm-stopped"), sandbox_uid=SANDBOX_UID + 2, slots=1)
    stopped_runs = [
        ("import time\ntime.sleep(30)\n", SHORT_WALL, "TLE"),
        ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", SHORT_WALL, "OLE"),
    ]
    try:
        for source, limits, verdict in stopped_runs:
            await stdout_of(single, "print(1)\n", limits=limits)
            await stdout_of(single, "print(2)\n", limits=limits)
            settle(single)
            before, _ = single.sandbox.waiting_jails()
            assert len(before) == 1, "one jail served both runs"
            outcome = await run(single, "python", source, limits=limits)
            assert outcome.verdict == verdict
            settle(single)
            after, _ = single.sandbox.waiting_jails()
            assert len(after) == 1 and after != before, "the stopped run's jail was replaced"
    finally:
        dispose(single)
    assert processes_of(SANDBOX_UID + 2) == []


async def test_function_mode_runs_share_nothing_through_a_reused_jail(executor: Executor) -> None:
    """The harness runs in each run's own first process: a candidate that patches everything it can reach
    leaves nothing for the next candidate in the same jail."""
    poison = """
        import builtins, sys
        builtins.len = lambda x: 0
        sys.modules["json"] = None
        def add(a, b):
            return a + b
    """
    honest = "def add(a, b):\n    return a + b + len([])\n"
    for source in (poison, poison, honest, honest):
        # A poisoned candidate breaks its own process (its reply cannot be encoded): RE, never AC.
        outcome = await run(
            executor,
            "python",
            textwrap.dedent(source),
            [TestCase(input=[1, 2], expected=3)],
            mode="function",
            entry_point="add",
        )
        assert outcome.verdict == ("RE" if source is poison else "AC"), outcome
