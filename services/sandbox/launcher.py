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
1. The preloaded harness (function mode) runs in this process, as the jail's PID 1, as it would in a cold jail; it
   forks the candidate itself. The launcher compiles `check` (the Python program) first: if it does not compile
   (a SyntaxError, or the compiler giving up: too deep, out of memory) it answers {"syntax_error": text} and
   exits, so the compile error is decided before any of the candidate's code exists in a process; else it
   answers {"launcher_cpu_s": c}, the CPU time it used before the run, for the host to subtract.
2. Anything else runs in a child: `python3 <flags> SCRIPT ARGS` in a fork of this interpreter, or execv(argv) (a
   compiled program, the JVM). The child gets the run's stdin on fd 0, RLIMIT_CPU soft at t (rounded up: SIGXCPU)
   and hard a second later (SIGKILL), and never holds the channel; it compiles `check` itself (so the compile is
   charged to the run, as in a cold one) and tells the launcher on a pipe, before it runs anything of the
   program's, whether that failed. The launcher stays PID 1 as the run's supervisor: non-dumpable (nothing in
   the jail can read or write its memory), deaf to signals from the jail (PID 1 of a namespace gets none it has
   no handler for, and SIGINT is ignored). When the child ends it kills whatever else is left in the jail, reaps
   it all, and answers {"syntax_error": text} or {"exit_code": n | "signal": s, "run_cpu_s": x}: the child's
   ending and the CPU time of every process of the run (precise, from getrusage), written when no process of
   the run exists any more.
If the host goes away (the channel reads EOF), the launcher ends the jail.

Nothing in this process is secret: it has seen nothing but its own run's request, which is public to the run.
"""

import _socket
import builtins
import ctypes
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

CHANNEL_FD = 0
MAX_MESSAGE = 1 << 20
# A compiler message is capped (its head and tail kept): one quoting an 800 KB line must still fit a message.
MAX_ERROR_HEAD = 24 * 1024
MAX_ERROR_TAIL = 8 * 1024
_PR_SET_DUMPABLE = 4
_PR_SET_PDEATHSIG = 1

# What a Python solution typically imports, loaded ahead of time like the interpreter itself (typing alone is
# several milliseconds). Standard-library modules only; a run sees them in sys.modules, as it would after
# importing them itself. Everything else the launcher needs is kept to cheap modules: each one is paid for every
# jail (json, socket and traceback would add ~25 ms of CPU per jail on this machine kind).
_WARM_MODULES = ("typing",)  # and with it re, functools, collections, operator


def _preload(argv: list[str]) -> dict[str, types.CodeType]:
    compiled: dict[str, types.CodeType] = {}
    if len(argv) == 3 and argv[1] == "--preload":
        with open(argv[2], "rb") as handle:
            compiled[argv[2]] = compile(handle.read(), argv[2], "exec", dont_inherit=True)
    if sys.flags.no_site == 0 or compiled:  # a Python run's launcher (compiled programs are not run by one)
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


def _without_launcher_frames(hook: Callable[..., object]) -> Callable[..., object]:
    here = __file__

    def excepthook(kind: type[BaseException], value: BaseException, tb: types.TracebackType | None) -> None:
        while tb is not None and tb.tb_frame.f_code.co_filename == here:
            tb = tb.tb_next
        hook(kind, value.with_traceback(tb), tb)

    return excepthook


def _reply(channel: _socket.socket, message: bytes) -> None:
    """One message to the host: b"E" + the compiler's message (UTF-8), b"L <cpu_s>" (the harness runs here), or
    b"R <run_cpu_s> exit <code>" / b"R <run_cpu_s> signal <number>" (services/sandbox/warm.py reads them)."""
    channel.send(message)


def _receive_run(channel: _socket.socket) -> tuple[dict[str, object], int] | None:
    """The run's request (marshal data from the host) and its stdin fd, or None if the host is gone."""
    try:
        data, ancillary, _, _ = channel.recvmsg(MAX_MESSAGE, _socket.CMSG_SPACE(4))
    except OSError:
        return None
    fds = [
        int.from_bytes(item[i : i + 4], sys.byteorder)
        for level, kind, item in ancillary
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
        for i in range(0, len(item) - len(item) % 4, 4)
    ]
    if not data or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        return None
    request = marshal.loads(data)
    return (request, fds[0]) if isinstance(request, dict) else None


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
    sys.excepthook = _without_launcher_frames(sys.__excepthook__)
    # This module's frame (and exec()) sit under the program's: two more levels, so the program reaches the depth
    # it would in a cold run (tests/executor/test_warm.py compares the two).
    sys.setrecursionlimit(sys.getrecursionlimit() + 2)
    return main


def _set_cpu_limit(seconds: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    wanted_hard = seconds + 1 if hard == resource.RLIM_INFINITY else min(seconds + 1, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (min(seconds, wanted_hard), wanted_hard))


def _supervise(channel: _socket.socket, child: int, verdict_r: int) -> None:
    """PID 1 while the run's child runs: learn whether the program compiled (the child says so on `verdict_r`
    before it runs anything of the program's, then closes it), wait for the child (or for the host to go away),
    end everything else in the jail, reap it all and answer how the run went."""
    syntax_error = _read_all(verdict_r).decode("utf-8", "replace")
    os.close(verdict_r)
    pidfd = os.pidfd_open(child)
    while True:
        ready, _, _ = select.select([pidfd, channel.fileno()], [], [])
        if pidfd in ready:
            break
        try:
            if not channel.recv(1, _socket.MSG_PEEK):
                _end_jail()  # the host is gone: nobody will read this run's result
        except OSError:
            _end_jail()
        channel.recv(MAX_MESSAGE)  # nothing else is expected; drop it
    _, status = os.waitpid(child, 0)
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


def _end_jail() -> None:
    _kill_the_rest()
    os._exit(0)


def main() -> tuple[str, types.CodeType, list[str]] | None:
    """Wait for the run and start it. Returns (path, code, argv) in a child that is to run a Python program in
    this interpreter (the caller runs it at module level, so as few frames as possible sit under it)."""
    # If nsjail dies (killed from outside), so does this jail: its PID 1 goes, and the kernel ends the rest.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    compiled = _preload(sys.argv)
    channel = _socket.socket(fileno=CHANNEL_FD)
    received = _receive_run(channel)
    if received is None:
        os._exit(0)  # the host is gone (or sent nothing we can use): there is no run
    request, stdin_fd = received
    fds = [stdin_fd]
    raw_argv, raw_script, raw_check = request.get("argv"), request.get("script"), request.get("check")
    argv = [str(arg) for arg in raw_argv] if isinstance(raw_argv, list) else []
    script = raw_script if isinstance(raw_script, int) else None
    check = raw_check if isinstance(raw_check, str) and raw_check else None
    cpu_time_s = request.get("cpu_time_s")
    cpu_limit = max(1, math.ceil(float(cpu_time_s))) if isinstance(cpu_time_s, int | float) else 1
    path = argv[script] if script is not None else ""
    libc = ctypes.CDLL(None, use_errno=True)
    if path in compiled:
        # The function-mode harness: the jail's PID 1 and its trust boundary, exactly as in a cold jail. The CPU
        # time used so far is not the run's; the compile check below is (a cold run compiles too).
        launcher_cpu_s = _cpu_s()
        if check is not None:
            _, error = _syntax_error(check)
            if error is not None:
                _reply(channel, b"E" + error.encode("utf-8", "replace"))
                os._exit(0)
        _reply(channel, f"L {launcher_cpu_s!r}".encode())
        _set_cpu_limit(cpu_limit)
        channel.detach()
        os.dup2(fds[0], 0)
        os.close(fds[0])
        return path, compiled[path], argv[script:]
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        os._exit(70)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    verdict_r, verdict_w = os.pipe()
    child = os.fork()
    if child != 0:
        os.close(fds[0])
        os.close(verdict_w)
        _supervise(channel, child, verdict_r)
    # The run's process: still ours until the program starts, and it closes everything of ours first.
    channel.close()
    os.close(verdict_r)
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # the run's process is an ordinary one, as in a cold jail
    os.dup2(fds[0], 0)
    os.close(fds[0])
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
