"""Differential-fuzzing harness (paper 002, LoCaL, Algorithm 1). It runs inside the jail (the jail's
/usr/bin/python3, 3.11, standard library only) as the jail's PID 1, for ONE side of a pair: the executor starts
one jail for the reference and one for the candidate, so neither program can see, signal or outlive the other's
process, nor read its results. The comparison is made on the host, from the data this supervisor reports.

Invocation:  python3 -I -S -B /src/diff_runner.py        (/src: the harness directory, read-only; this file
             imports function_runner.py beside it for the value encoding)
fd 0:        the request: one JSON header line, then one JSON line per repetition (its inputs).
             header: {"mode": "function"|"stdio", "entry_point": str, "program": path, "argv": [...],
                      "timeout": per-input seconds, "budget": T seconds, "load_timeout": seconds,
                      "counts": [N per repetition], "reply_cap": bytes, "side_cap": bytes, "output_cap": bytes}
             function mode: a repetition line is a list of inputs, each a list of encoded arguments
             (function_runner.encode_value); stdio mode: a list of stdin texts.
fd 1, 2:     unused by the harness; the programs' own output never reaches them (see below).
fd 4:        RESULT_FD, written by this supervisor only: length-prefixed frames (4-byte big-endian length + JSON):
             {"loaded": bool, "message": str}, then per repetition {"rep": i, "elapsed": s, "timed_out": bool,
             "frames": k, "restarts": m} followed by k per-input frames, then {"end": true}.

Trust: the supervisor makes itself non-dumpable and, as PID 1, receives no signal it has no handler for (it
installs none but SIGINT's ignore). It measures every time itself (monotonic clock, never the worker's), decides
whether a repetition ran out of its budget, and frames what it forwards, so a worker can only make claims about
its own outputs: a per-input frame is the worker's reply, forwarded as opaque bytes inside the supervisor's own
length framing (the host parses and validates each one), or a marker the supervisor wrote (timeout, crash...).

Function mode: the supervisor forks a worker that closes the result channel, points fds 0, 1, 2 at /dev/null,
imports the program once and answers a whole repetition (one process over the batch: each input's arguments
decoded anew from the request, so a function that mutates its arguments changes nothing else; SIGALRM per input
raises _InputTimeout, a BaseException). Worker reply frames (JSON lists):
    [0, value]                  returned (value in function_runner's tagged encoding)
    [1, module, qualname]       raised an exception of that type
    [2]                         the per-input timer fired       [3]  MemoryError
    [4, message]                returned something that is not data
    [5]                         the encoded value is over the reply cap
    [9, message]                the program failed to load (raised while importing, or has no such function)
If the worker overruns an input (blocked SIGALRM, spins in C) or dies, the supervisor kills every other process
in the jail (kill(-1) from PID 1), records the input, and forks a fresh worker for the rest of the repetition.
Supervisor markers: [10] no answer within the per-input backstop; [11, exit_code, signal] the process died;
[12] unreadable reply or reply over the cap; [13] output over the limit (stdio); [14] over the side's total cap.
Stdio mode: the supervisor runs the program once per input itself (stdin a memfd, stdout a pipe read up to
output_cap, stderr /dev/null); frame [20, stdout_text, exit_code] or [21, signal]. A compiled program (and Java)
is started with posix_spawn. A Python program (header "python": its path) is run in a child forked from this
supervisor, which compiles and executes the source as `__main__` the way `python3 -I` would (sys.argv, fresh
sys.stdin/stdout/stderr on fds 0-2, SystemExit and uncaught exceptions giving the interpreter's exit codes), so
an input costs a fork (~1 ms) instead of an interpreter's start (30-40 ms). The child closes every fd it does not
need (the result channel first); the supervisor's memory holds only this side's inputs, nothing secret.
"""

import json
import os
import select
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import function_runner as fr  # noqa: E402

del sys.path[0]

RESULT_FD = 4
_HEADER = struct.Struct(">I")
_PR_SET_DUMPABLE = 4
_MESSAGE_CAP = 300
# After the per-input timeout the worker's own timer should have answered; the supervisor waits this much more
# (at least _BACKSTOP_MIN_S) before it kills the worker.
_BACKSTOP_FRACTION = 0.25
_BACKSTOP_MIN_S = 0.2
_READ_CHUNK = 1 << 20

OK, RAISED, ALARM, MEMORY, NOT_DATA, TOO_LARGE, LOAD_FAILED = 0, 1, 2, 3, 4, 5, 9
NO_ANSWER, DIED, UNREADABLE, OUTPUT_LIMIT, SIDE_CAP = 10, 11, 12, 13, 14
EXITED, SIGNALED = 20, 21


class _InputTimeout(BaseException):
    """Raised in the worker by SIGALRM when one input runs past the per-input timeout."""


def _cap(text):
    text = str(text)
    return text if len(text) <= _MESSAGE_CAP else text[: _MESSAGE_CAP - 3] + "..."


def _dumps(value):
    return json.dumps(value, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _frame(data):
    return _HEADER.pack(len(data)) + data


# --- the worker (function mode): untrusted once the program is imported --------------------------------------


def _worker_main(header, reps, commands, replies):
    """Runs in the forked child: load the program, then answer each command (repetition, first input) with one
    reply frame per input, to the end of that repetition."""
    fired = [False]

    def on_alarm(signum, frame):
        fired[0] = True
        raise _InputTimeout()

    try:
        reply_cap = header["reply_cap"]
        timeout = header["timeout"]
        program = header["program"]
        entry_point = header["entry_point"]
        try:
            with open("/proc/self/oom_score_adj", "w") as adj:
                adj.write("1000")  # the cgroup's OOM killer takes the worker, never the supervisor
        except OSError:
            pass
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGALRM, on_alarm)
        sys.argv = [program]
        module = type(sys)("solution")
        module.__file__ = program
        sys.modules["solution"] = module
        try:
            with open(program, "rb") as source:
                code = compile(source.read(), program, "exec", dont_inherit=True)
            exec(code, module.__dict__)
            function = getattr(module, entry_point, None)
            if not callable(function):
                raise AttributeError("the program does not define a function " + repr(entry_point))
        except BaseException as exc:
            fr._write_all(replies, _frame(_dumps([LOAD_FAILED, _cap(_exception_line(exc))])))
            os._exit(0)
        fr._write_all(replies, _frame(_dumps([OK])))
        decode = fr.decode_value
        encode = fr.encode_value
        depth = fr.MAX_ARGUMENT_DEPTH
        setitimer = signal.setitimer
        real = signal.ITIMER_REAL
        while True:
            command = fr._receive(commands)
            if command is None:
                os._exit(0)
            rep, start = command
            inputs = json.loads(reps[rep])
            for index in range(start, len(inputs)):
                fired[0] = False
                try:
                    args = [decode(arg, 0, depth) for arg in inputs[index]]
                    setitimer(real, timeout)
                    try:
                        value = function(*args)
                        reply = [OK, encode(value)]
                    finally:
                        setitimer(real, 0)
                except _InputTimeout:
                    reply = [ALARM]
                except MemoryError:
                    reply = [MEMORY]
                except fr.NotData as exc:
                    reply = [NOT_DATA, _cap(exc)]
                except BaseException as exc:
                    kind = type(exc)
                    reply = [RAISED, _cap(getattr(kind, "__module__", "")), _cap(getattr(kind, "__qualname__", ""))]
                if fired[0]:
                    reply = [ALARM]
                try:
                    data = _dumps(reply)
                except BaseException:
                    data = _dumps([NOT_DATA, "unencodable"])
                if len(data) > reply_cap:
                    data = _dumps([TOO_LARGE])
                fr._write_all(replies, _frame(data))
    except BaseException:
        os._exit(70)


def _exception_line(exc):
    try:
        return type(exc).__name__ + (": " + str(exc) if str(exc) else "")
    except BaseException:
        return type(exc).__name__


# --- the supervisor's handle on a worker -------------------------------------------------------------------


class _Worker:
    def __init__(self, header, reps):
        commands_r, self.commands = os.pipe()
        self.replies, replies_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(RESULT_FD)
                os.close(self.commands)
                os.close(self.replies)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.close(null)
            except BaseException:
                os._exit(70)
            _worker_main(header, reps, commands_r, replies_w)
            os._exit(0)
        os.close(commands_r)
        os.close(replies_w)
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        os.set_blocking(self.replies, False)
        self.buffer = bytearray()
        self.status = None  # (exit_code, signal) once it ended
        self.eof = False

    def command(self, rep, start):
        try:
            fr._send(self.commands, [rep, start])
            return True
        except OSError:
            return False

    def next(self, deadline, cap):
        """("frame", bytes) | ("timeout",) | ("died", exit_code, signal) | ("bad",)."""
        while True:
            if len(self.buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self.buffer)
                if size > cap:
                    return ("bad",)
                if len(self.buffer) >= _HEADER.size + size:
                    data = bytes(self.buffer[_HEADER.size : _HEADER.size + size])
                    del self.buffer[: _HEADER.size + size]
                    return ("frame", data)
            if self.status is not None or self.eof:
                self._reap()
                return ("died",) + self.status
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return ("timeout",)
            poller = select.poll()
            poller.register(self.replies, select.POLLIN)
            poller.register(self.pidfd, select.POLLIN)
            events = dict(poller.poll(max(1, int(remaining * 1000) + 1)))
            if self.replies in events:
                self._read()
            if self.pidfd in events:
                self._read()  # what it wrote before it ended is still in the pipe
                self._reap()

    def _read(self):
        while True:
            try:
                data = os.read(self.replies, _READ_CHUNK)
            except BlockingIOError:
                return
            if not data:
                self.eof = True
                return
            self.buffer += data
            if len(self.buffer) > 2 * _READ_CHUNK + (1 << 26):
                return

    def _reap(self):
        if self.status is not None:
            return
        if self.eof:
            # It closed its reply pipe but may still run: it is gone for the protocol either way.
            _kill(self.pid)
        _, status = os.waitpid(self.pid, 0)
        if os.WIFSIGNALED(status):
            self.status = (None, os.WTERMSIG(status))
        else:
            self.status = (os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1, None)

    def close(self):
        """Kill the worker and everything else in the jail but this process, and reap them all."""
        for fd in (self.commands, self.replies, self.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.status is None:
            _kill(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.status = (None, signal.SIGKILL)
        _kill_all()


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _kill_all():
    """kill(-1) from a namespace's PID 1 reaches every other process in it; then reap them (orphans are ours)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except OSError:
            return


# --- the supervisor ------------------------------------------------------------------------------------------


class _Output:
    """Result frames, bounded by the side's cap; written to the host one repetition at a time."""

    def __init__(self, side_cap):
        self.side_cap = side_cap
        self.used = 0

    def take(self, data):
        if self.used + len(data) > self.side_cap:
            data = _dumps([SIDE_CAP])
        self.used += len(data) + _HEADER.size
        return data

    @staticmethod
    def emit(frames):
        fr._write_all(RESULT_FD, b"".join(_frame(data) for data in frames))


def _supervise_functions(header, reps):
    out = _Output(header["side_cap"])
    budget = header["budget"]
    timeout = header["timeout"]
    backstop = timeout + max(_BACKSTOP_MIN_S, _BACKSTOP_FRACTION * timeout)
    reply_cap = header["reply_cap"]
    worker = _Worker(header, reps)
    ready = worker.next(time.monotonic() + header["load_timeout"], reply_cap)
    load_error = _load_error(ready)
    out.emit([_dumps({"loaded": load_error is None, "message": load_error or ""})])
    if load_error is not None:
        worker.close()
        worker = None
    for rep, count in enumerate(header["counts"]):
        frames = []
        restarts = 0
        timed_out = False
        started = time.monotonic()
        budget_end = started + budget
        index = 0
        commanded = False
        while index < count:
            if load_error is not None:
                frames.extend(_dumps([LOAD_FAILED, load_error]) for _ in range(index, count))
                break
            if worker is None:
                if time.monotonic() >= budget_end:
                    timed_out = True
                    break
                restarts += 1
                worker = _Worker(header, reps)
                ready = worker.next(budget_end, reply_cap)
                if ready[0] == "timeout":
                    timed_out = True
                    break
                again = _load_error(ready)
                if again is not None:  # loaded once, fails now (it depends on something it changed): a crash
                    frames.append(_dumps([DIED, None, None]))
                    index += 1
                    worker.close()
                    worker = None
                    continue
                commanded = False
            if not commanded:
                commanded = True
                if not worker.command(rep, index):
                    worker.close()
                    worker = None
                    frames.append(_dumps([DIED, None, None]))
                    index += 1
                    continue
            input_deadline = time.monotonic() + backstop
            got = worker.next(min(budget_end, input_deadline), reply_cap)
            if got[0] == "frame":
                frames.append(out.take(got[1]))
                index += 1
                continue
            if got[0] == "timeout" and time.monotonic() >= budget_end:
                timed_out = True
                worker.close()
                worker = None
                break
            if got[0] == "timeout":
                frames.append(_dumps([NO_ANSWER]))
            elif got[0] == "died":
                frames.append(_dumps([DIED, got[1], got[2]]))
            else:
                frames.append(_dumps([UNREADABLE]))
            index += 1
            worker.close()
            worker = None
        elapsed = time.monotonic() - started
        if worker is not None and worker.buffer:
            # Replies beyond the repetition's inputs: a protocol breach. A fresh worker takes the next one.
            worker.close()
            worker = None
        summary = {"rep": rep, "elapsed": elapsed, "timed_out": timed_out, "frames": len(frames), "restarts": restarts}
        out.emit([_dumps(summary)] + frames)
    if worker is not None:
        worker.close()


def _load_error(ready):
    """None if the worker said it is ready, else why it could not load the program."""
    if ready[0] == "frame":
        try:
            reply = json.loads(ready[1])
        except ValueError:
            return "the program's process sent an unreadable reply while loading"
        if reply == [OK]:
            return None
        if type(reply) is list and len(reply) == 2 and reply[0] == LOAD_FAILED and type(reply[1]) is str:
            return _cap(reply[1])
        return "the program's process sent an unreadable reply while loading"
    if ready[0] == "timeout":
        return "loading the program took too long"
    if ready[0] == "died":
        return "the program's process ended while loading"
    return "the program's process sent an unreadable reply while loading"


def _supervise_programs(header, reps):
    out = _Output(header["side_cap"])
    out.emit([_dumps({"loaded": True, "message": ""})])
    budget = header["budget"]
    timeout = header["timeout"]
    argv = header["argv"]
    python_program = header.get("python")
    if python_program:
        fr._site_setup()  # what `site` gives a `python3 -I` program, set up once before the forks
    output_cap = header["output_cap"]
    for rep, count in enumerate(header["counts"]):
        inputs = json.loads(reps[rep])
        frames = []
        timed_out = False
        started = time.monotonic()
        budget_end = started + budget
        for index in range(count):
            now = time.monotonic()
            if now > budget_end:
                timed_out = True
                break
            frame = _run_program(argv, python_program, inputs[index], now + timeout, budget_end, output_cap)
            if frame is None:  # the repetition's budget ran out during this input
                timed_out = True
                break
            frames.append(out.take(frame))
        elapsed = time.monotonic() - started
        summary = {"rep": rep, "elapsed": elapsed, "timed_out": timed_out, "frames": len(frames), "restarts": 0}
        out.emit([_dumps(summary)] + frames)


def _python_child(program, stdin, out_w):
    """In a child forked from the supervisor: run the Python program as `python3 -I program` would, then exit with
    the interpreter's status. Never returns."""
    status = 1
    try:
        os.setpgid(0, 0)
        os.dup2(stdin, 0)
        os.dup2(out_w, 1)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.closerange(3, 1 << 16)  # the result channel, the memfd, the pipes: nothing of the supervisor's stays
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import builtins
        import io
        import types

        def stream(fd, mode, like):
            raw = io.FileIO(fd, mode, closefd=False)
            buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
            return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors, line_buffering=fd == 2)

        sys.stdin = sys.__stdin__ = stream(0, "r", sys.__stdin__)
        sys.stdout = sys.__stdout__ = stream(1, "w", sys.__stdout__)
        sys.stderr = sys.__stderr__ = stream(2, "w", sys.__stderr__)
        sys.argv = [program]
        main = types.ModuleType("__main__")
        main.__file__ = program
        main.__builtins__ = builtins
        sys.modules["__main__"] = main
        with open(program, "rb") as handle:
            source = handle.read()
        try:
            exec(compile(source, program, "exec"), main.__dict__)
            status = 0
        except SystemExit as exc:
            code = exc.code
            if code is None:
                status = 0
            elif isinstance(code, int):
                status = code & 0xFF
            else:
                print(code, file=sys.stderr)
                status = 1
        except BaseException:
            import traceback

            traceback.print_exc()
            status = 1
        try:
            sys.stdout.flush()
        except BaseException:
            status = 120  # as the interpreter exits when flushing stdout fails at shutdown
    finally:
        os._exit(status)


def _run_program(argv, python_program, text, input_deadline, budget_end, output_cap):
    """One run of the program on one input: its frame, or None if the repetition's budget ran out first."""
    deadline = min(input_deadline, budget_end)
    stdin = os.memfd_create("stdin", os.MFD_CLOEXEC)
    fr._write_all(stdin, text.encode("utf-8", "surrogateescape"))
    os.lseek(stdin, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    try:
        if python_program:
            pid = os.fork()
            if pid == 0:
                os.close(out_r)
                _python_child(python_program, stdin, out_w)
            try:
                os.setpgid(pid, pid)  # as the child does itself: whichever runs first, killpg below reaches it
            except OSError:
                pass
        else:
            pid = os.posix_spawn(
                argv[0],
                argv,
                dict(os.environ),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, stdin, 0),
                    (os.POSIX_SPAWN_DUP2, out_w, 1),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setpgroup=0,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT),
                setsigmask=(),
            )
    finally:
        os.close(stdin)
        os.close(out_w)
    pidfd = os.pidfd_open(pid)
    os.set_blocking(out_r, False)
    output = bytearray()
    status = None
    overflow = False
    late = False
    try:
        poller = select.poll()
        poller.register(out_r, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        pipe_open = True
        while status is None or pipe_open:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                late = True
                break
            events = dict(poller.poll(max(1, int(remaining * 1000) + 1)))
            if out_r in events or (status is not None and pipe_open):
                while True:
                    try:
                        data = os.read(out_r, _READ_CHUNK)
                    except BlockingIOError:
                        break
                    if not data:
                        pipe_open = False
                        poller.unregister(out_r)
                        break
                    output += data
                    if len(output) > output_cap:
                        overflow = True
                        break
                if overflow:
                    break
            if pidfd in events and status is None:
                _, status = os.waitpid(pid, 0)
                poller.unregister(pidfd)
                if pipe_open:
                    # It ended; what it (or a child) wrote is in the pipe. A background child that keeps the pipe
                    # open does not hold the answer up: read what is there now.
                    _drain(out_r, output, output_cap)
                    pipe_open = False
    finally:
        os.close(out_r)
        os.close(pidfd)
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        if status is None:
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        _reap_orphans()
    if late:
        _kill_all()
        return None if budget_end <= input_deadline else _dumps([NO_ANSWER])
    if overflow or len(output) > output_cap:
        return _dumps([OUTPUT_LIMIT])
    if os.WIFSIGNALED(status):
        return _dumps([SIGNALED, os.WTERMSIG(status)])
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return _dumps([EXITED, output.decode("utf-8", "surrogateescape"), code])


def _drain(fd, output, cap):
    while len(output) <= cap:
        try:
            data = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return
        if not data:
            return
        output += data


def _reap_orphans():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main():
    try:
        import ctypes

        if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            os._exit(71)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.set_inheritable(RESULT_FD, False)
        with open(0, "rb", closefd=False) as stdin:
            lines = stdin.read().split(b"\n")
        os.close(0)
        os.open(os.devnull, os.O_RDONLY)
        header = json.loads(lines[0])
        reps = lines[1 : 1 + len(header["counts"])]
        if header["mode"] == "function":
            fr._site_setup()
            _supervise_functions(header, reps)
        else:
            _supervise_programs(header, reps)
        _Output.emit([_dumps({"end": True})])
    except BaseException:
        os._exit(70)
    os._exit(0)


if __name__ == "__main__":
    main()
