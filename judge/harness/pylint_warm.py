"""The warm pylint supervisor: runs INSIDE the lint jail (judge/tooljail.py), never in the judge process.

    /usr/bin/python3 -I -B -c <this file's text>  < batch (the manifest's length, the manifest, then the sources)

It runs on the jail's Debian python3 (3.11) with the standard library and Debian's pylint only. Before anything
else it makes itself non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`, inherited by every child it forks): no process of
the jail, though it has the same uid, can open its `/proc/1/mem`, `/proc/1/environ` or `/proc/1/fd/*` (where its
stdin, the batch, is), nor a child's. If it cannot, it exits NOT_ISOLATED and the judge lints every file cold.
It reads the manifest (the files' keys and sizes, pylint's arguments, the limits, the modules worth warming:
nothing of any source), imports pylint once, warms astroid by linting a small file of its own (then forgets that
module), and for each file of the batch forks one child that lints exactly that file with the same driver code the
cold path runs as `python3 -I -c` (judge/offline/pylint_driver.py `PYLINT_DRIVER`). Every child starts from the same
post-warm-up state, so nothing one file leaves in astroid's caches or pylint's state reaches another, and each
file's report is what a cold run prints.

A batch holds several tenants' files, and a child holds only its own. The supervisor reads a file's source from
stdin only when that file's turn comes, into a buffer it writes /box/solution.py from and then zeroes, before it
forks the child: at every fork its memory holds no source at all (the files not yet read are still in stdin, which
the child closes first thing, and earlier files were zeroed). The child's stdout and stderr are read into buffers
of their own, zeroed once forwarded. These buffers are never copied into Python objects, and are not even mapped in
a child (`MADV_DONTFORK`). Children run one at a time, and whatever a child started is killed before the next one.

The child runs as the cold run does: the file is /box/solution.py, alone in the working directory (the cold run
reads /prog/solution.py; pylint sees a module `solution` in a directory of its own in both), the same pylint
arguments, the same Python recursion headroom at the driver's top level, and the cold run's limits applied to the
child alone: RLIMIT_CPU, the wall clock (enforced here) and a cap on each of stdout and stderr. The jail's memory
limit is the cold run's: this process holds ~60 MB, so a child that reaches the limit is far the larger and is the
one the OOM killer picks (the jail's /proc is read-only: oom_score_adj cannot be raised).

Output (stdout): `ready` once pylint is imported and warm, then for each file, in the manifest's order, one JSON
header line {"key", "outcome", "code", "signal", "stdout"} followed by exactly `stdout` raw bytes: the child's
whole stdout when outcome is "exit". Outcomes: "exit" (code), "signal" (signal), "timeout", "memory", "output".
A file without a record (this process was stopped mid-batch) is for the judge to lint again on its own.
"""

from __future__ import annotations

import gc
import json
import math
import mmap
import os
import re
import resource
import selectors
import shutil
import signal
import sys
import time
import traceback
from types import FrameType
from typing import Any

WORK_DIR = "/box"
TARGET = "/box/solution.py"
WARMUP = "/box/tribunal_warmup.py"
WARMUP_MODULE = "tribunal_warmup"
# What attempts typically use (typing, math, collections, itertools, heapq, str methods): astroid builds their trees
# once here instead of once per file (typing alone is ~0.3 s of CPU).
WARMUP_SOURCE = '''\
"""Warm-up."""
import heapq
import math
from collections import Counter, defaultdict, deque
from itertools import accumulate, permutations
from typing import Dict, List, Optional, Tuple


def mean(values: List[float], default: Optional[float] = None) -> float:
    """Mean."""
    if not values:
        return default or 0.0
    total = sum(values) + math.fsum(values) * 0
    words = " ".join(str(v) for v in sorted(values)).split()
    return total / len(words) if words else math.sqrt(abs(total))


def count(text: str) -> Tuple[int, Dict[str, int]]:
    """Count."""
    found = Counter(text.lower()) + Counter(defaultdict(int))
    queue = deque(permutations(heapq.nlargest(2, text)))
    return len(queue) + max(accumulate(found.values()), default=0), dict(found)
'''
# Modules that cost ~0.1-0.3 s each to build: warmed only for a batch where two files or more import them.
WARMUP_IF_IMPORTED = {
    "re": 'import re\nWORDS = re.compile("[a-z]+").findall("a b")\n',
    "functools": "from functools import lru_cache, reduce\nTOTAL = reduce(max, [1], 0)\nCACHED = lru_cache(None)\n",
    "sys": "import sys\nLINE = sys.stdin.readline().split()\n",
    "os": 'import os\nPATH = os.path.join("a", "b")\n',
}
IMPORT_LINES = re.compile(rb"^[ \t]*(?:import|from)[ \t][^\n]*", re.MULTILINE)
COSTLY_NAMES = re.compile(rb"\b(re|functools|sys|os)\b")
NO_PYLINT = 4
# Could not make itself non-dumpable: no file is linted here (the judge lints them cold).
NOT_ISOLATED = 5
# A child whose peak RSS reached this fraction of the jail's memory limit was stopped by the limit.
NEAR_LIMIT = 0.95
READ_CHUNK = 65536
# Recursion levels exec() itself adds between the child's frame and the driver's top-level frame.
EXEC_LEVELS = 1
# The batch starts with the manifest's length in decimal and a newline: at most this many bytes.
LENGTH_LINE_MAX = 16
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4


def warm_modules(sources: list[bytes]) -> list[str]:
    """The costly modules worth warming for a batch: those two files or more import. Building a module in the
    supervisor costs what building it in one child costs. Computed by the judge (judge/offline/pylint_batch.py),
    which holds the batch, so that the supervisor never needs more than one file at a time."""
    importers: dict[str, int] = dict.fromkeys(WARMUP_IF_IMPORTED, 0)
    for source in sources:
        for name in {name.decode() for line in IMPORT_LINES.findall(source) for name in COSTLY_NAMES.findall(line)}:
            importers[name] += 1
    return sorted(name for name, count in importers.items() if count >= 2)


def main() -> int:
    if not make_undumpable():
        return NOT_ISOLATED
    manifest = read_manifest()
    try:
        import pylint.lint  # noqa: F401 - imported once here, inherited by every child
        import pylint.reporters  # noqa: F401
    except ImportError:
        return NO_PYLINT
    warm_up(manifest)
    buffers = Buffers(max((entry["size"] for entry in manifest["files"]), default=0), manifest["output_limit"])
    gc.freeze()  # the children's collections leave the inherited objects (and their pages) alone
    write_all(b"ready\n")
    driver = compile(manifest["driver"], "<string>", "exec")
    for entry in manifest["files"]:
        header, length = lint_file(driver, entry, manifest, buffers)
        write_all(json.dumps(header).encode() + b"\n")
        write_all(memoryview(buffers.stdout)[:length])
        buffers.stdout[:length] = bytes(length)
    return 0


def make_undumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0), checked; the ctypes modules are then dropped from sys.modules, so that the
    children's interpreter state is the cold run's."""
    loaded = set(sys.modules)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        zero = ctypes.c_ulong(0)
        libc.prctl(PR_SET_DUMPABLE, zero, zero, zero, zero)
        return bool(libc.prctl(PR_GET_DUMPABLE, zero, zero, zero, zero) == 0)
    except (ImportError, OSError, AttributeError):
        return False
    finally:
        for name in set(sys.modules) - loaded:
            del sys.modules[name]


class Buffers:
    """Where a file's source and its child's output pass through this process: private anonymous memory, never
    copied into Python objects, zeroed after use, and not mapped in the children (MADV_DONTFORK)."""

    def __init__(self, source_size: int, output_limit: int) -> None:
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        self.source = mmap.mmap(-1, max(1, source_size), flags=flags)
        # The child's stdout up to the limit and one byte more (which says it passed the limit); stderr is counted
        # only, READ_CHUNK at a time.
        self.stdout = mmap.mmap(-1, output_limit + 1, flags=flags)
        self.stderr = mmap.mmap(-1, READ_CHUNK, flags=flags)
        for buffer in (self.source, self.stdout, self.stderr):
            buffer.madvise(mmap.MADV_DONTFORK)


def write_all(data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def read_exactly(fd: int, view: memoryview) -> None:
    while view:
        count = os.readv(fd, [view])
        if count == 0:
            raise EOFError("the batch ended early")
        view = view[count:]


def read_manifest() -> dict[str, Any]:
    """The manifest, from stdin; the sources stay there until their turn (lint_file)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(0, 1)
        if not byte or len(line) >= LENGTH_LINE_MAX:
            raise EOFError("no manifest")
        line += byte
    manifest = bytearray(int(line))
    read_exactly(0, memoryview(manifest))
    return dict(json.loads(manifest))


def warm_up(manifest: dict[str, Any]) -> None:
    """Lint a file of our own in this process (loading pylint's checkers and astroid's trees of the builtins, of
    common modules and of the costly modules several of the batch's files import), then drop that module from
    astroid's caches and the file from disk. What is warmed never changes a file's result (only module trees are
    kept, which any run builds alike); it only saves each child the time to build them."""
    from pylint.lint import Run
    from pylint.reporters import CollectingReporter

    wanted = [name for name in manifest.get("warm", []) if name in WARMUP_IF_IMPORTED]
    with open(WARMUP, "w", encoding="utf-8") as handle:
        handle.write(WARMUP_SOURCE + "".join(WARMUP_IF_IMPORTED[name] for name in wanted))
    saved_path = list(sys.path)
    try:
        Run([*manifest["args"], WARMUP], reporter=CollectingReporter(), exit=False)
    except BaseException:  # noqa: BLE001 - warming is an optimisation; the children lint on their own
        pass
    finally:
        sys.path[:] = saved_path
    forget(WARMUP_MODULE, WARMUP)
    clean(WORK_DIR)


def forget(module: str, path: str) -> None:
    """Keep only the module trees astroid built while warming (the library's own modules, parsed as any run
    parses them): drop the warm-up module itself and every cache of inference results, which astroid keys
    without the inference context (so a result cached here could differ from what a cold run infers)."""
    from astroid import MANAGER
    from astroid._cache import CACHE_MANAGER
    from astroid.context import _invalidate_cache
    from astroid.inference_tip import clear_inference_tip_cache
    from astroid.interpreter.objectmodel import ObjectModel
    from astroid.nodes.node_classes import LookupMixIn
    from astroid.nodes.scoped_nodes import ClassDef

    MANAGER.astroid_cache.pop(module, None)
    file_cache = getattr(MANAGER, "_mod_file_cache", {})
    for key in [key for key in file_cache if module in str(key) or path in str(key)]:
        file_cache.pop(key, None)
    clear_inference_tip_cache()
    _invalidate_cache()
    CACHE_MANAGER.clear_all_caches()
    for cached in (LookupMixIn.lookup, ObjectModel.attributes, ClassDef._metaclass_lookup_attribute):
        cached.cache_clear()


def clean(directory: str) -> None:
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def lint_file(
    driver: Any, entry: dict[str, Any], manifest: dict[str, Any], buffers: Buffers
) -> tuple[dict[str, Any], int]:
    """Lint the next file of stdin in a child; returns its record's header and how many bytes of
    `buffers.stdout` the record carries."""
    clean(WORK_DIR)
    clean("/tmp")
    size = entry["size"]
    source = memoryview(buffers.source)[:size]
    read_exactly(0, source)
    target = os.open(TARGET, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        written = source
        while written:
            written = written[os.write(target, written) :]
    finally:
        os.close(target)
    source[:] = bytes(size)  # from here on the file is only in /box, for this file's child alone
    source.release()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(driver, out_w, err_w, manifest)
    with_suppressed(os.setpgid, pid, pid)  # also here, so the group exists whichever of the two runs first
    os.close(out_w)
    os.close(err_w)
    try:
        length, stopped = supervise(pid, out_r, err_r, started + manifest["wall_s"], manifest["output_limit"], buffers)
    finally:
        with_suppressed(os.killpg, pid, signal.SIGKILL)  # what the child started ends with it
    _, status, usage = os.wait4(pid, 0)
    end_strays()
    header: dict[str, Any] = {"key": entry["key"], "outcome": "exit", "code": None, "signal": None, "stdout": 0}
    cpu = usage.ru_utime + usage.ru_stime
    killed_by = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    # The child's peak RSS (KiB) counts the pages it shares with this process: near the jail's limit when the
    # limit is what stopped it.
    near_limit = usage.ru_maxrss >= NEAR_LIMIT * manifest["memory_mb"] * 1024
    # As a cold run is classified (services/lib/sandbox/verdicts.py `classify`, then judge/offline/tools.py `run_tool`).
    if stopped == "output":
        header["outcome"] = "output"
    elif stopped == "timeout" or killed_by == signal.SIGXCPU or cpu >= manifest["cpu_s"]:
        # Stopped by a clock while at the memory limit: the limit is what stopped it (reclaim stalls).
        header["outcome"] = "memory" if near_limit else "timeout"
    elif killed_by == signal.SIGKILL:
        # Not our clock, not RLIMIT_CPU (SIGXCPU comes first): the OOM kill of the jail's memory limit, which
        # picks the largest process.
        header["outcome"] = "memory"
    elif killed_by is not None:
        header["outcome"], header["signal"] = "signal", killed_by
    else:
        header["code"], header["stdout"] = os.WEXITSTATUS(status), length
        return header, length
    buffers.stdout[:length] = bytes(length)
    return header, 0


def end_strays() -> None:
    """End every process in the jail but this one (a process the child started that left its group too), and
    reap them. This process is the jail's PID 1, so kill(-1) reaches exactly the jail's other processes."""
    if os.getpid() != 1:
        return
    with_suppressed(os.kill, -1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def child(driver: Any, out_w: int, err_w: int, manifest: dict[str, Any]) -> None:
    """Lint TARGET as the cold run does, then exit with its status; never returns."""
    status = 1
    try:
        # First of all: stdin (the rest of the batch) is /dev/null, and no fd of the supervisor's is left open.
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.setpgid(0, 0)
        # SIGXCPU at the limit (as a cold run's RLIMIT_CPU), SIGKILL a second later if it is caught.
        cpu = max(1, math.ceil(manifest["cpu_s"]))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        # The cold run's driver is the interpreter's top-level frame; here it runs below this module's frames and
        # exec's own level: the limit grows by as much, so recursion stops the child where it stops a cold run.
        frames = 0
        frame: FrameType | None = sys._getframe()
        while frame is not None:
            frames, frame = frames + 1, frame.f_back
        sys.setrecursionlimit(sys.getrecursionlimit() + frames + EXEC_LEVELS)
        sys.argv = ["-c", *manifest["args"], TARGET]
        gc.enable()
        try:
            exec(driver, {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: S102 - our driver
            status = 0
        except SystemExit as stop:
            status = exit_status(stop.code)
        except BaseException:  # noqa: BLE001 - as the interpreter does with an uncaught exception
            traceback.print_exc()
            status = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                status = status or 120  # as the interpreter does when flushing stdout at exit fails
    finally:
        os._exit(status)


def exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def supervise(
    pid: int, out_r: int, err_r: int, deadline: float, limit: int, buffers: Buffers
) -> tuple[int, str | None]:
    """Read the child's stdout (kept in `buffers.stdout`) and stderr (counted, then zeroed) until it exits; kill it at
    the deadline or when either stream passes `limit`. Returns (stdout's length, None | "timeout" | "output")."""
    stdout = memoryview(buffers.stdout)
    scratch = memoryview(buffers.stderr)
    length = 0
    stderr_bytes = 0
    pidfd = os.pidfd_open(pid)
    selector = selectors.DefaultSelector()
    selector.register(out_r, selectors.EVENT_READ)
    selector.register(err_r, selectors.EVENT_READ)
    selector.register(pidfd, selectors.EVENT_READ)
    stopped: str | None = None
    pipes = {out_r, err_r}
    exited = False
    try:
        while (pipes or not exited) and not stopped:
            left = deadline - time.monotonic()
            if left <= 0:
                stopped = "timeout"
                break
            # Once the child is gone its pipes reach EOF at once, unless something it started holds them open.
            events = selector.select(min(left, 0.5) if exited else left)
            if exited and not events:
                break
            for key, _ in events:
                if key.fd == pidfd:
                    exited = True
                    selector.unregister(pidfd)
                    continue
                if key.fd == out_r:
                    count = os.readv(out_r, [stdout[length:]])
                    length += count
                    size = length
                else:
                    count = os.readv(err_r, [scratch])
                    scratch[:count] = bytes(count)
                    stderr_bytes += count
                    size = stderr_bytes
                if not count:
                    selector.unregister(key.fd)
                    pipes.discard(key.fd)
                    continue
                if size > limit:
                    stopped = "output"
                    break
    finally:
        if stopped:
            with_suppressed(os.kill, pid, signal.SIGKILL)
        selector.close()
        for fd in (out_r, err_r, pidfd):
            with_suppressed(os.close, fd)
        stdout.release()
        scratch.release()
    return length, stopped


def with_suppressed(function: Any, *args: Any) -> None:
    try:
        function(*args)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
