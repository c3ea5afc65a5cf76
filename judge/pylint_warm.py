"""The warm pylint supervisor: runs INSIDE the lint jail (judge/tooljail.py), never in the judge process.

    /usr/bin/python3 -I -B -c <this file's text>  < batch (a JSON manifest line, then the sources, concatenated)

It runs on the jail's Debian python3 (3.11) with the standard library and Debian's pylint only. It reads the batch
from stdin (then stdin is /dev/null: no attempt's source is on the jail's disk or its stdin except the one file
being linted, alone in /box). It imports pylint once, warms astroid by linting a small file of its own (then
forgets that module), and for each file of the batch forks one child that lints exactly that file with the same
driver code the cold path runs as `python3 -I -c` (judge/offline.py `_PYLINT_DRIVER`). Every child starts
from the same post-warm-up state, so nothing one file leaves in astroid's caches or pylint's state reaches
another, and each file's report is what a cold run prints.

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
# A child whose peak RSS reached this fraction of the jail's memory limit was stopped by the limit.
NEAR_LIMIT = 0.95
READ_CHUNK = 65536
# Recursion levels exec() itself adds between the child's frame and the driver's top-level frame.
EXEC_LEVELS = 1


def main() -> int:
    manifest, sources = read_batch()
    try:
        import pylint.lint  # noqa: F401 - imported once here, inherited by every child
        import pylint.reporters  # noqa: F401
    except ImportError:
        return NO_PYLINT
    warm_up(manifest, sources)
    gc.freeze()  # the children's collections leave the inherited objects (and their pages) alone
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    driver = compile(manifest["driver"], "<string>", "exec")
    for entry, source in zip(manifest["files"], sources, strict=True):
        header, data = lint_file(driver, entry, source, manifest)
        out.write(json.dumps(header).encode() + b"\n" + data)
        out.flush()
    return 0


def read_batch() -> tuple[dict[str, Any], list[bytes]]:
    """The manifest and the sources from stdin; stdin is then /dev/null (as empty as a cold run's), so no child
    can read the batch back from it."""
    data = sys.stdin.buffer.read()
    newline = data.index(b"\n")
    manifest = json.loads(data[:newline])
    sources, position = [], newline + 1
    for entry in manifest["files"]:
        sources.append(data[position : position + entry["size"]])
        position += entry["size"]
    del data
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return manifest, sources


def warm_up(manifest: dict[str, Any], sources: list[bytes]) -> None:
    """Lint a file of our own in this process (loading pylint's checkers and astroid's trees of the builtins, of
    common modules and of the costly modules several of the batch's files import), then drop that module from
    astroid's caches and the file from disk. What is warmed never changes a file's result (only module trees are
    kept, which any run builds alike); it only saves each child the time to build them."""
    from pylint.lint import Run
    from pylint.reporters import CollectingReporter

    importers: dict[str, int] = dict.fromkeys(WARMUP_IF_IMPORTED, 0)
    for source in sources:
        for name in {name.decode() for line in IMPORT_LINES.findall(source) for name in COSTLY_NAMES.findall(line)}:
            importers[name] += 1
    # Building a module here costs what building it in one child costs: worth it from two importers on.
    wanted = sorted(name for name, count in importers.items() if count >= 2)
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
    driver: Any, entry: dict[str, Any], source: bytes, manifest: dict[str, Any]
) -> tuple[dict[str, Any], bytes]:
    clean(WORK_DIR)
    clean("/tmp")
    with open(TARGET, "wb") as handle:
        handle.write(source)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        child(driver, out_w, err_w, manifest)
    with_suppressed(os.setpgid, pid, pid)  # also here, so the group exists whichever of the two runs first
    os.close(out_w)
    os.close(err_w)
    try:
        stdout, stopped = supervise(pid, out_r, err_r, started + manifest["wall_s"], manifest["output_limit"])
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
    # As a cold run is classified (services/sandbox/jail.py `classify`, then judge/offline.py `_run_tool`).
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
        header["code"], header["stdout"] = os.WEXITSTATUS(status), len(stdout)
        return header, stdout
    return header, b""


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
        os.setpgid(0, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.close(out_w)
        os.close(err_w)
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


def supervise(pid: int, out_r: int, err_r: int, deadline: float, limit: int) -> tuple[bytes, str | None]:
    """Read the child's stdout (kept) and stderr (counted) until it exits; kill it at the deadline or when either
    stream passes `limit`. Returns (stdout, None | "timeout" | "output")."""
    stdout = bytearray()
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
                data = os.read(key.fd, READ_CHUNK)
                if not data:
                    selector.unregister(key.fd)
                    pipes.discard(key.fd)
                    continue
                if key.fd == out_r:
                    stdout += data
                    size = len(stdout)
                else:
                    stderr_bytes += len(data)
                    size = stderr_bytes
                if size > limit:
                    stopped = "output"
                    break
    finally:
        if stopped:
            with_suppressed(os.kill, pid, signal.SIGKILL)
        selector.close()
        for fd in (out_r, err_r, pidfd):
            with_suppressed(os.close, fd)
    return bytes(stdout), stopped


def with_suppressed(function: Any, *args: Any) -> None:
    try:
        function(*args)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
