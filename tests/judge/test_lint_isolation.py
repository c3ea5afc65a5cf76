"""The warm pylint supervisor between tenants (issue #20 item 7): a batch holds several tenants' files, and a child
holds only its own; the supervisor is non-dumpable, so no process of the jail can read its memory or a child's.

pylint never runs the code it lints, so a hostile source cannot itself go looking; the invariants are checked
directly instead, in the real jail: from outside (this process is root on the host: it reads the jail's processes'
memory through /proc/<pid>/mem while a child is paused) and from inside (a probe driver in the child tries what a
subverted child would try).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
import time
from pathlib import Path

import pytest

from judge.offline import PylintBatcher, lint, pylint_batch, pylint_driver, tools
from judge.tooljail import ToolJail
from services.lib.sandbox import INSIDE_ID

# The real driver, unless the file asks for the probe: then the child reports what it can reach of its supervisor
# (the jail's PID 1) and of its own fds, and waits for SIGUSR1 from the test before it ends.
PROBE_DRIVER = (
    "import ctypes, json, os, signal, sys\n"
    "text = open(sys.argv[-1], encoding='utf-8').read()\n"
    "if 'PROBE_WAIT' in text:\n"
    "    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\n"
    "    probe = {'dumpable': ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), 'ppid': os.getppid()}\n"
    "    for name, path in (('mem', '/proc/1/mem'), ('environ', '/proc/1/environ'), ('maps', '/proc/1/maps')):\n"
    "        try:\n"
    "            open(path, 'rb').close()\n"
    "            probe[name] = 'opened'\n"
    "        except OSError as error:\n"
    "            probe[name] = error.errno\n"
    "    for name, call in (('fd0', lambda: os.readlink('/proc/1/fd/0')), ('fds', lambda: os.listdir('/proc/1/fd'))):\n"
    "        try:\n"
    "            call()\n"
    "            probe[name] = 'read'\n"
    "        except OSError as error:\n"
    "            probe[name] = error.errno\n"
    "    fds = os.listdir('/proc/self/fd')  # the listing's own fd is closed by now\n"
    "    probe['own_fds'] = {\n"
    "        fd: os.readlink(f'/proc/self/fd/{fd}') for fd in fds if os.path.lexists(f'/proc/self/fd/{fd}')\n"
    "    }\n"
    "    probe['stdin'] = os.read(0, 100).decode()\n"
    "    probe['go'] = signal.sigtimedwait([signal.SIGUSR1], 60) is not None\n"
    "    print(json.dumps(probe))\n"
    "    sys.exit(0)\n"
) + pylint_driver.PYLINT_DRIVER


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _memory_holds(pid: int, needles: list[bytes]) -> set[bytes]:
    """Which of `needles` are anywhere in the readable memory of `pid` (read from outside, as root)."""
    found: set[bytes] = set()
    chunk = 16 << 20
    overlap = max(len(needle) for needle in needles)
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
        for line in maps:
            fields = line.split()
            if fields[1][0] != "r" or (len(fields) > 5 and fields[5] in ("[vvar]", "[vvar_vclock]", "[vsyscall]")):
                continue
            start, end = (int(value, 16) for value in fields[0].split("-"))
            position = start
            while position < end:
                try:
                    memory.seek(position)
                    data = memory.read(min(chunk + overlap, end - position))
                except OSError:
                    break
                found.update(needle for needle in needles if needle in data)
                position += chunk
    return found


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def _paused_child(own_marker: bytes, deadline: float) -> tuple[int, int]:
    """(supervisor, child) of this process's warm pylint jail, once the child linting the file with `own_marker`
    waits: the supervisor is a jail's PID 1 running the supervisor's script, the child its fork."""
    while time.monotonic() < deadline:
        for pid in _descendants(os.getpid()):
            try:
                parent = _parent(pid)
                if (
                    b"warm pylint supervisor" not in Path(f"/proc/{parent}/cmdline").read_bytes()
                    or _status(parent)["NSpid"].split()[-1] != "1"
                    or os.readlink(f"/proc/{parent}/exe") != os.readlink(f"/proc/{pid}/exe")
                ):
                    continue
                target = Path(f"/proc/{pid}/root/box/solution.py")
                if own_marker in target.read_bytes() and _status(pid)["State"].startswith("S"):
                    return parent, pid
            except (OSError, KeyError):
                continue
        time.sleep(0.02)
    raise AssertionError("the paused child was never seen")


@pytest.mark.timeout(300)
def test_a_child_holds_only_its_own_file_and_nobody_reads_the_supervisor(
    tool_jail: ToolJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "LINT_WALL_S", 60.0)  # the paused child is not stopped by the wall clock
    markers = [f"tribunal_marker_{secrets.token_hex(12)}".encode() for _ in range(4)]
    first, own, after, last = markers
    sources = [
        b'"""First tenant."""\nFIRST = "' + first + b'"\nprint(FIRST)\n',
        b'"""Second tenant."""\nPROBE_WAIT = "' + own + b'"\n',
        b'"""Third tenant."""\nTHIRD = "' + after + b'"\nprint(THIRD)\n',
        b'"""Fourth tenant."""\nFOURTH = "' + last + b'"\nprint(FOURTH)\n',
    ]
    outcome: dict[str, tuple[bool, list[pylint_batch.WarmRecord]]] = {}

    def batch() -> None:
        outcome["result"] = pylint_batch.warm_run(tool_jail, sources, driver=PROBE_DRIVER)

    worker = threading.Thread(target=batch)
    worker.start()
    child = None
    try:
        supervisor, child = _paused_child(own, time.monotonic() + 120)
        assert _status(supervisor)["NSpid"].split()[-1] == "1"  # the jail's PID 1
        # Non-dumpable, seen from outside: the kernel gives a non-dumpable process's /proc files to root, not to
        # the process's own uid (the sandbox uid).
        for pid in (supervisor, child):
            assert _status(pid)["Uid"].split() == [str(INSIDE_ID)] * 4
            assert os.stat(f"/proc/{pid}/mem").st_uid != INSIDE_ID
            assert os.stat(f"/proc/{pid}/environ").st_uid != INSIDE_ID
        # While the second file's child runs: the supervisor holds no file's source (the first was zeroed, the
        # second too once written to /box, the rest are still unread in stdin); the child holds its own file
        # (the positive control: the search finds what is there) and nobody else's.
        assert _memory_holds(supervisor, markers) == set()
        assert _memory_holds(child, markers) == {own}
        assert sorted(os.listdir(f"/proc/{child}/root/box")) == ["solution.py"]
    finally:
        if child is not None:
            os.kill(child, signal.SIGUSR1)
        worker.join(120)
    ready, records = outcome["result"]
    assert ready and [record.outcome for record in records] == ["exit"] * 4
    probe = json.loads(records[1].stdout)
    assert probe["go"] and probe["dumpable"] == 0 and probe["ppid"] == 1
    # What a subverted child would try on its supervisor: refused (EACCES/EPERM), not merely empty.
    for name in ("mem", "environ", "maps", "fd0", "fds"):
        assert probe[name] in (1, 13), (name, probe[name])
    # Its own fds: /dev/null as stdin (the rest of the batch is out of reach), its two pipes, nothing else.
    assert probe["stdin"] == ""
    own_fds = {int(fd): target for fd, target in probe["own_fds"].items()}
    assert own_fds[0] == "/dev/null" and own_fds[1].startswith("pipe:") and own_fds[2].startswith("pipe:")
    assert sorted(own_fds) == [0, 1, 2]
    # The other files were linted as usual.
    for record in (records[0], records[2], records[3]):
        assert json.loads(record.stdout)["score"] is not None


def test_a_supervisor_that_cannot_become_non_dumpable_lints_nothing(
    tool_jail: ToolJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It exits before reading anything; the judge lints each file cold, with the cold result."""
    script = pylint_batch.warm_script()
    failing = script.replace("def make_undumpable() -> bool:\n", "def make_undumpable() -> bool:\n    return False\n")
    assert failing != script
    monkeypatch.setattr(pylint_batch, "warm_script", lambda: failing)
    sources = [b'"""A."""\nprint(1)\n', b"def broken(:\n"]
    assert pylint_batch.warm_run(tool_jail, sources) == (False, [])
    source = "import os\nprint(os.sep)\n"
    assert PylintBatcher(tool_jail).submit(source).result() == lint(source, "python", jail=tool_jail, warm=False)
