"""The first process of a pre-made ("warm") jail. It runs inside the jail (the jail's /usr/bin/python3, standard
library only) and is started before any run is known, so that creating the jail and starting the interpreter
are off the critical path of the run that will use it.

Invocation:  python3 <flags> launcher.py [--preload SCRIPT]
             <flags> are the run's own interpreter flags (-I, -S, -B), so a Python run can happen in this very
             interpreter; --preload compiles a fixed script (the function-mode harness) ahead of time.
fd 0:        the channel, one end of an AF_UNIX SOCK_SEQPACKET pair; the host holds the other.
fd 1, 2, 4:  the run's stdout, stderr (and result channel), created for this jail alone.

One jail serves exactly one run. The launcher waits for one message, the run:
    {"argv": [...], "script": k | null, "check": path | null, "cpu_time_s": t}  with the run's stdin as an fd
and then:
1. compiles `check` (the Python program): on a SyntaxError it answers {"cpu_s": c, "syntax_error": text} and exits,
   running nothing: the compile error is decided before any of the candidate's code exists in a process;
2. answers {"cpu_s": c}: the CPU time this process used before the run, which the host subtracts;
3. sets RLIMIT_CPU to c + t (rounded up; t alone for a preloaded harness, which forks the candidate; SIGXCPU
   there, SIGKILL a second later), puts the run's stdin on fd 0 (which closes the channel), and
4. becomes the run: argv[script:] in this interpreter, as `python3 <flags> SCRIPT ARGS` would run it, or
   execv(argv) for anything else (a compiled program, the JVM).

Nothing in this process is secret: it has seen nothing but its own run's request, which is public to the run.
If the host goes away before sending a run, the channel reads EOF and the jail ends.
"""

import builtins
import json
import math
import os
import resource
import signal
import socket
import sys
import traceback
import types
from collections.abc import Callable

CHANNEL_FD = 0
MAX_MESSAGE = 1 << 20

# What a solution typically imports, loaded ahead of time like the interpreter itself (typing alone is several
# milliseconds). They are standard-library modules only; a run sees them in sys.modules, as it would after
# importing them itself.
_WARM_MODULES = ("typing", "collections", "itertools", "functools", "math", "re", "heapq", "bisect", "string")


def _preload(argv: list[str]) -> dict[str, types.CodeType]:
    compiled: dict[str, types.CodeType] = {}
    if len(argv) == 3 and argv[1] == "--preload":
        with open(argv[2], "rb") as handle:
            compiled[argv[2]] = compile(handle.read(), argv[2], "exec", dont_inherit=True)
    for name in _WARM_MODULES:
        __import__(name)
    return compiled


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def _syntax_error(path: str) -> tuple[types.CodeType | None, str | None]:
    """(code, None) or (None, the compiler's message). The message names the file as `main.py`, as the
    separate syntax check did; the code object keeps the full path for run-time tracebacks."""
    try:
        with open(path, "rb") as handle:
            source = handle.read()
    except OSError as exc:
        return None, "cannot read the program: " + (exc.strerror or "error")
    try:
        return compile(source, path, "exec", dont_inherit=True), None
    except (SyntaxError, ValueError) as exc:
        if isinstance(exc, SyntaxError):
            exc.filename = path.rsplit("/", 1)[-1]
        return None, "".join(traceback.format_exception_only(type(exc), exc))


def _without_launcher_frames(hook: Callable[..., object]) -> Callable[..., object]:
    here = __file__

    def excepthook(kind: type[BaseException], value: BaseException, tb: types.TracebackType | None) -> None:
        while tb is not None and tb.tb_frame.f_code.co_filename == here:
            tb = tb.tb_next
        hook(kind, value.with_traceback(tb), tb)

    return excepthook


def _run_script(path: str, code: types.CodeType, argv: list[str]) -> None:
    """Run `code` as the __main__ module of this interpreter, as `python3 path` would."""
    from importlib.machinery import SourceFileLoader

    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=path, __cached__=None, __builtins__=builtins, __loader__=SourceFileLoader("__main__", path)
    )
    sys.argv = list(argv)
    sys.modules["__main__"] = main
    sys.excepthook = _without_launcher_frames(sys.__excepthook__)
    exec(code, main.__dict__)


def main() -> None:
    compiled = _preload(sys.argv)
    channel = socket.socket(fileno=CHANNEL_FD)
    try:
        data, fds, _, _ = socket.recv_fds(channel, MAX_MESSAGE, 1)
    except OSError:
        os._exit(0)
    if not data or len(fds) != 1:
        os._exit(0)  # the host is gone (or sent nothing we can use): there is no run
    request = json.loads(data)
    argv = [str(arg) for arg in request["argv"]]
    script = request.get("script")
    checked = None
    if request.get("check"):
        checked, error = _syntax_error(request["check"])
        if error is not None:
            channel.sendall(json.dumps({"cpu_s": _cpu_s(), "syntax_error": error}).encode())
            os._exit(0)
    cpu_s = _cpu_s()
    channel.sendall(json.dumps({"cpu_s": cpu_s}).encode())
    # This process's CPU clock already shows its start-up, and neither running in it nor execv resets it: the
    # run gets its limit on top. A preloaded script (the function-mode harness) runs the candidate in a process
    # it forks, whose clock starts at zero: it gets the limit as a cold jail would.
    # The soft limit sends SIGXCPU, which ends a program (Python's default too) with a signal that can only mean
    # the CPU limit: under heavy host load the kernel's tick-sampled CPU clock, which RLIMIT_CPU reads, can run
    # ahead of the precise time wait4 reports, so a bare SIGKILL at the limit could pass for anything. The hard
    # limit, a second later, stops a program that ignores SIGXCPU.
    preloaded = script is not None and argv[script] in compiled
    limit = max(1, math.ceil(float(request["cpu_time_s"]) + (0.0 if preloaded else cpu_s)))
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
    channel.detach()
    os.dup2(fds[0], 0)
    os.close(fds[0])
    if script is None:
        # A cold start would give the program default dispositions: Python ignores these two at start-up.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        os.execv(argv[0], argv)
    path = argv[script]
    code = compiled.get(path)
    if code is None:
        code = checked if request.get("check") == path else None
    if code is None:
        with open(path, "rb") as handle:
            code = compile(handle.read(), path, "exec", dont_inherit=True)
    del compiled, checked, request, data, fds, channel
    _run_script(path, code, argv[script:])


if __name__ == "__main__":
    main()
