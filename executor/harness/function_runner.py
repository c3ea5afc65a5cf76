"""Function-mode harness. It runs inside the jail (the jail's /usr/bin/python3, 3.11, standard library only) as
the jail's PID 1, and it is built so that nothing the candidate can do makes the platform believe a wrong result.

Invocation:  python3 -I -S -B function_runner.py /prog/main.py   (see _site_setup for -S)
fd 0:        the request, JSON: {"entry_point": "f", "args": [...]}      (an argument test: call f(*args))
                             or {"entry_point": "f", "code": "..."}     (a code test: run the code, then check(f))
fd 1, 2:     the candidate's (and the test code's) own output; the host counts every byte of it.
fd 4:        RESULT_FD, the result channel to the host: one JSON document, written by this supervisor only.

Two processes, one trust boundary:
- the supervisor (this process, PID 1) makes itself non-dumpable first, so no other process in the jail can
  read its memory, open its file descriptors or attach to it (/proc/1/mem, /proc/1/fd/*, pidfd_getfd: EPERM);
  as PID 1 of its namespace it receives no signal from inside the jail that it has no handler for, and it
  ignores SIGINT, the only signal Python handles by default. It holds the request (the hidden test code) and
  the result channel, and runs the problem's test code.
- the candidate process is forked from the supervisor *before* the request is read, so its memory holds no test
  code; it closes fd 0 and the result channel before it imports the program. It answers calls: the supervisor
  sends arguments, the candidate sends back its return value (or the exception it raised) as data.

Everything crossing between the two is data in one strict encoding (`encode_value`/`decode_value`: JSON, with
one-key tagged objects for tuple, dict, set, deque, bytes... ; never pickle, never an object with behaviour). A candidate that lies in its replies can only claim a return value, which the test code
(code tests) or the host (argument tests) then compares itself. `__eq__`, `__abs__` or `__sub__` of a returned
object never run on the trusted side, because the object never gets there: only its data does.

Result statuses written to RESULT_FD: value (argument tests: the return value as JSON data; the host compares it),
pass | fail (code tests), error (the candidate raised, or has no such function), died (the candidate's process
ended: exit code or signal; the host classifies it as RE/TLE/MLE), memory, bad_test (the test itself is broken:
the platform's or the author's fault, never the candidate's), internal (a bug in this harness).
"""

import builtins
import json
import os
import resource
import select
import signal
import struct
import sys
import time

RESULT_FD = 4
# Bounds on what crosses a trust boundary: one message between the two processes (inside the jail), the result
# sent to the executor, the nesting depth of a value (the test may wrap what the candidate returned, so values
# it sends may be deeper), and integers in an argument test's result, which are JSON numbers.
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
MAX_RESULT_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 100
MAX_ARGUMENT_DEPTH = 2 * MAX_DEPTH + 2
MAX_INT_DIGITS = 4000
MAX_INT_BITS = 13287  # 4000 decimal digits
_MESSAGE_CAP = 500
_PR_SET_DUMPABLE = 4
_HEADER = struct.Struct(">I")


# --- the data encoding between the candidate and the supervisor ----------------------------------------------
# JSON, where what JSON says natively is itself (None, bool, int, finite float, str, list) and everything else is
# an object with one key naming its type: {"tuple": [...]}, {"dict": [[k, v], ...]}, {"set": [...]},
# {"frozenset": [...]}, {"odict": [[k, v], ...]}, {"deque": [...]}, {"iter": [...]}, {"range": [start, stop,
# step]}, {"bytes": "hex"}, {"complex": [re, im]}, {"float": "nan"|"inf"|"-inf"}, {"int": "hex"} (beyond
# MAX_INT_DIGITS digits).


class NotData(TypeError):
    """A value that is not plain data and cannot cross between processes."""


_DICT_VIEWS = ("dict_keys", "dict_values", "dict_items")


def encode_value(value, depth=0, limit=MAX_DEPTH):
    """A JSON-able copy of `value`. The real type decides (`type()`, not `isinstance()`, which a `__class__`
    attribute fools), and a subclass is reduced to its base value with the base type's own methods, so nothing a
    subclass overrides changes what is sent. Iterators are consumed (what they raise, propagates)."""
    if depth > limit:
        raise NotData("a value nested more than " + str(limit) + " levels deep")
    kind = type(value)
    if value is None or value is True or value is False:
        return value
    if issubclass(kind, int):
        number = int.__index__(value)
        return {"int": int.__format__(number, "x")} if number.bit_length() > MAX_INT_BITS else number
    if issubclass(kind, float):
        number = float.__float__(value)
        return number if number - number == 0.0 else {"float": float.__repr__(number)}
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, list):
        return [encode_value(item, depth + 1, limit) for item in list.__iter__(value)]
    if issubclass(kind, tuple):
        return {"tuple": [encode_value(item, depth + 1, limit) for item in tuple.__iter__(value)]}
    if issubclass(kind, dict):
        pairs = [[encode_value(k, depth + 1, limit), encode_value(v, depth + 1, limit)] for k, v in dict.items(value)]
        ordered = sys.modules.get("collections")
        return {"odict" if ordered and issubclass(kind, ordered.OrderedDict) else "dict": pairs}
    if issubclass(kind, frozenset):
        return {"frozenset": [encode_value(item, depth + 1, limit) for item in frozenset.__iter__(value)]}
    if issubclass(kind, set):
        return {"set": [encode_value(item, depth + 1, limit) for item in set.__iter__(value)]}
    if issubclass(kind, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if issubclass(kind, complex):
        return {"complex": [encode_value(value.real), encode_value(value.imag)]}
    if issubclass(kind, range):
        return {"range": [encode_value(value.start), encode_value(value.stop), encode_value(value.step)]}
    deques = sys.modules.get("collections")
    if deques and issubclass(kind, deques.deque):
        return {"deque": [encode_value(item, depth + 1, limit) for item in deques.deque.__iter__(value)]}
    if kind.__name__ in _DICT_VIEWS or (hasattr(kind, "__next__") and hasattr(kind, "__iter__")):
        # A generator, another iterator or a dict view travels as its items (a test may call list() on it).
        return {"iter": [encode_value(item, depth + 1, limit) for item in value]}
    raise NotData(
        "a " + kind.__name__[:100] + ", which is not data (None, bool, int, float, complex, str, bytes, list, tuple, "
        "dict, set, frozenset, range, deque, an iterator)"
    )


def decode_value(node, depth=0, limit=MAX_DEPTH):
    """The value an `encode_value` document describes. Anything malformed raises ValueError; only built-in types
    (and OrderedDict, deque) are constructed, nothing that runs code."""
    if depth > limit:
        raise ValueError("nested too deeply")
    kind = type(node)
    if node is None or kind is bool or kind is int or kind is float or kind is str:
        return node
    if kind is list:
        return [decode_value(item, depth + 1, limit) for item in node]
    if kind is not dict or len(node) != 1:
        raise ValueError("not an encoded value")
    ((tag, payload),) = node.items()
    try:
        if tag == "int" and type(payload) is str:
            return int(payload, 16)
        if tag == "float" and payload in ("nan", "inf", "-inf"):
            return float(payload)
        if tag == "bytes" and type(payload) is str:
            return bytes.fromhex(payload)
        if type(payload) is not list:
            raise ValueError("malformed " + tag[:20])
        if tag == "complex" and len(payload) == 2:
            return complex(_number(payload[0]), _number(payload[1]))
        if tag == "range" and len(payload) == 3 and all(type(part) is int for part in payload):
            return range(*payload)
        items = [decode_value(item, depth + 1, limit) for item in payload]
        if tag == "tuple":
            return tuple(items)
        if tag == "iter":
            return iter(items)
        if tag == "set":
            return set(items)
        if tag == "frozenset":
            return frozenset(items)
        if tag == "deque":
            import collections

            return collections.deque(items)
        if tag in ("dict", "odict"):
            if not all(type(pair) is list and len(pair) == 2 for pair in items):
                raise ValueError("malformed dict item")
            if tag == "odict":
                import collections

                return collections.OrderedDict(items)
            return dict(items)
    except TypeError as exc:  # an unhashable key or element
        raise ValueError(str(exc)) from None
    raise ValueError("unknown tag " + repr(str(tag)[:20]))


def _number(node):
    if type(node) in (int, float):
        return node
    if type(node) is dict and set(node) == {"float"}:
        return decode_value(node)
    raise ValueError("expected a number")


def loads_limited(data, limit=MAX_MESSAGE_BYTES):
    """JSON from untrusted bytes: size-capped, and deep nesting is an error, not a crash."""
    if len(data) > limit:
        raise ValueError("message too large")
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


# --- framing on the pipes between supervisor and candidate ---------------------------------------------------


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _frame(message):
    data = json.dumps(message, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if len(data) > MAX_MESSAGE_BYTES:
        raise ValueError("a message of more than " + str(MAX_MESSAGE_BYTES >> 20) + " MiB")
    return _HEADER.pack(len(data)) + data


def _send(fd, message):
    _write_all(fd, _frame(message))


def _read_exactly(fd, size):
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _receive(fd):
    """One message, or None at end of file. ValueError for anything malformed or too large."""
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE_BYTES:
        raise ValueError("a message of " + str(size) + " bytes is over the limit")
    data = _read_exactly(fd, size)
    if data is None:
        return None
    return loads_limited(data)


# --- the candidate process -------------------------------------------------------------------------------------


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _candidate_main(calls, replies, program):
    """Runs in the forked child: import the program, then answer calls until the supervisor hangs up."""
    try:
        message = _receive(calls)
        if message is None:
            os._exit(0)
        entry_point = message["entry_point"]
        sys.argv = [program]
        # A plain module object and exec: what importlib would do for a source file, without the 5 ms of
        # importing importlib.util into every run.
        module = type(sys)("solution")
        module.__file__ = program
        sys.modules["solution"] = module
        try:
            with open(program, "rb") as source:
                code = compile(source.read(), program, "exec", dont_inherit=True)
            exec(code, module.__dict__)
        except BaseException as exc:
            _flush()
            _send(replies, {"raised_importing": _exception_data(exc)})
            os._exit(0)
        function = getattr(module, entry_point, None)
        if not callable(function):
            _send(replies, {"missing": entry_point})
            os._exit(0)
        _send(replies, {"ready": True})
        while True:
            message = _receive(calls)
            if message is None:
                _flush()
                os._exit(0)
            args = [decode_value(arg, 0, MAX_ARGUMENT_DEPTH) for arg in message["args"]]
            kwargs = {name: decode_value(value, 0, MAX_ARGUMENT_DEPTH) for name, value in message["kwargs"]}
            try:
                value = function(*args, **kwargs)
            except BaseException as exc:
                reply = {"raised": _exception_data(exc)}
            else:
                try:
                    reply = {"value": encode_value(value)}
                except (NotData, RecursionError) as exc:
                    reply = {"not_data": _cap(str(exc)) if isinstance(exc, NotData) else _describe(exc)}
                except BaseException as exc:  # raised by a returned generator as it is consumed
                    reply = {"raised": _exception_data(exc)}
            _flush()  # the program's prints reach stdout before its answer, even if it is killed after
            try:
                data = _frame(reply)
            except ValueError as exc:
                data = _frame({"not_data": _cap("a value of " + str(exc))})
            _write_all(replies, data)
    except BaseException:
        os._exit(70)


def _exception_data(exc):
    """[type name, message, the built-in classes it derives from, the type's module, its qualified name]: what
    crosses the boundary of an exception the candidate raised (differential fuzzing matches two exceptions by
    module and qualified name)."""
    try:
        if isinstance(exc, SystemExit):
            detail = str(exc.code)
        elif isinstance(exc, KeyError) and len(exc.args) == 1:
            detail = str(exc.args[0])  # not str(exc), which quotes it
        else:
            detail = str(exc)
    except BaseException:
        detail = ""
    kind = type(exc)
    bases = [cls.__name__ for cls in kind.__mro__ if cls.__module__ == "builtins"][:20]
    try:
        module, qualname = _cap(str(kind.__module__)), _cap(str(kind.__qualname__))
    except BaseException:
        module, qualname = "", ""
    return [kind.__name__[:100], _cap(detail), bases, module, qualname]


# --- the supervisor ------------------------------------------------------------------------------------------


class CandidateGone(BaseException):
    """The candidate's process ended or broke the protocol. A BaseException, so `except Exception` in test code
    cannot swallow it (and if a bare `except:` does, the supervisor still knows: `_Candidate.gone`)."""

    def __init__(self, status):
        super().__init__(status.get("message", "the program's process ended"))
        self.status = status


_UNREADABLE = {"status": "error", "message": "the program's process sent an unreadable reply"}


class CandidateError(Exception):
    """An exception the candidate raised whose nearest built-in class is Exception itself."""


class CandidateBaseError(BaseException):
    """One that is not an Exception (SystemExit, KeyboardInterrupt...): `except Exception` must not catch it."""


class _BadTest(Exception):
    pass


# Built-in exceptions with control-flow meaning: rebuilt, they would end the test's own loops (a StopIteration
# raised into map() or filter() silently ends the iteration, and the asserts after it never run).
_NOT_REBUILT = (StopIteration, StopAsyncIteration)


def _valid_reply(reply):
    """The reply if it has exactly the shape of one of the candidate's messages, else CandidateGone: nothing a
    candidate sends can make the supervisor fail in a way that looks like the platform's fault."""
    if type(reply) is dict and len(reply) == 1:
        (key, value), = reply.items()
        if key == "ready" and value is True:
            return reply
        if key in ("missing", "not_data") and type(value) is str:
            return reply
        if key == "value":  # any JSON: decode_value checks it where it is used
            return reply
        if key in ("raised", "raised_importing") and exception_shaped(value):
            return reply
    raise CandidateGone(_UNREADABLE)


def exception_shaped(value):
    """Whether `value` has the shape of _exception_data's answer."""
    if type(value) is not list or len(value) != 5 or not all(type(part) is str for part in value[:2] + value[3:]):
        return False
    bases = value[2]
    return type(bases) is list and len(bases) <= 20 and all(type(base) is str for base in bases)


class _Candidate:
    """The supervisor's handle on the candidate process: call() sends arguments and returns the reply's data."""

    def __init__(self, pid, calls, replies):
        self.pid = pid
        self.calls = calls
        self.replies = replies
        self.raised = []
        # Set once the candidate's process ended or broke the protocol: the test's outcome no longer counts.
        self.gone = None

    def start(self, entry_point):
        reply = self._exchange({"entry_point": entry_point})
        if "ready" in reply:
            return None
        if "missing" in reply:
            return {"status": "error", "message": _cap("the program does not define a function " + repr(reply["missing"]))}
        if "raised_importing" in reply:
            return _error_status(reply["raised_importing"], " while importing the program")
        raise self._gone(_UNREADABLE)

    def call(self, args, kwargs):
        reply = self._exchange(_call_message(args, kwargs))
        if "value" in reply:
            return self._decoded(reply["value"])
        if "raised" in reply:
            exc = _rebuilt_exception(reply["raised"])
            self.raised.append((exc, reply["raised"]))
            raise exc
        if "not_data" in reply:
            # Not the candidate raising: its value simply is not what any test can compare (WA, as before).
            raise CandidateError("the function returned " + reply["not_data"])
        raise self._gone(_UNREADABLE)

    def value(self, args):
        """An argument test: the return value as JSON data, or the status that ends the test."""
        try:
            message = _call_message(args, {})
        except _BadTest as exc:
            return {"status": "bad_test", "message": _cap(str(exc))}
        reply = self._exchange(message)
        if "value" in reply:
            value = self._decoded(reply["value"])
            try:
                data = json_data(value)
            except (ValueError, TypeError, RecursionError, OverflowError) as exc:
                return {"status": "bad_value", "message": _cap("the function returned " + str(exc))}
            return {"status": "value", "value": data}
        if "raised" in reply:
            return _error_status(reply["raised"])
        if "not_data" in reply:
            return {"status": "bad_value", "message": _cap("the function returned " + reply["not_data"])}
        raise self._gone(_UNREADABLE)

    def _exchange(self, message):
        if self.gone is not None:
            raise CandidateGone(self.gone)
        try:
            _send(self.calls, message)
        except OSError:
            raise self._gone(self._ended()) from None
        try:
            reply = _receive(self.replies)
        except (ValueError, OSError, MemoryError):
            raise self._gone(_UNREADABLE) from None
        if reply is None:
            raise self._gone(self._ended())
        try:
            return _valid_reply(reply)
        except CandidateGone as gone:
            raise self._gone(gone.status) from None

    def _decoded(self, node):
        """A returned value, decoded; a malformed one ends the test as the candidate's fault."""
        try:
            return decode_value(node)
        except (ValueError, RecursionError, OverflowError, MemoryError):
            raise self._gone(_UNREADABLE) from None

    def _gone(self, status):
        self.gone = status
        return CandidateGone(status)

    def _ended(self):
        """The candidate hung up: wait for it and describe how it ended."""
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if os.WIFSIGNALED(status):
            return {"status": "died", "signal": os.WTERMSIG(status)}
        return {"status": "died", "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1}

    def stop(self):
        """Kill the candidate's process and reap it before the report. (The executor reads the test's CPU time, every
        process of the run included, from the jail's cgroup: it counts whether or not anyone waited for it.)"""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None


def _call_message(args, kwargs):
    """The call message for the test's arguments; _BadTest if they are not data or too large (the test's fault:
    checked here, before anything is sent)."""
    try:
        message = {
            "args": [encode_value(arg, 0, MAX_ARGUMENT_DEPTH) for arg in args],
            "kwargs": [[str(name), encode_value(value, 0, MAX_ARGUMENT_DEPTH)] for name, value in kwargs.items()],
        }
        _frame(message)
    except (NotData, RecursionError, ValueError) as exc:
        raise _BadTest("the test passes the candidate " + _describe(exc)) from None
    return message


def _rebuilt_exception(data):
    """The candidate's exception as the nearest built-in class it derives from (statistics.StatisticsError is
    caught by `except ValueError`), except StopIteration and StopAsyncIteration (see _NOT_REBUILT); a class with
    no nearer built-in base than Exception or BaseException becomes CandidateError or CandidateBaseError."""
    name, message, bases = data[:3]
    described = _cap(name + (": " + message if message else ""))
    for base in bases:
        kind = getattr(builtins, base, None)
        if not isinstance(kind, type) or not issubclass(kind, BaseException) or issubclass(kind, _NOT_REBUILT):
            continue
        if kind is Exception:
            return CandidateError(described)
        if not issubclass(kind, Exception):
            return CandidateBaseError(described)
        try:
            if kind is UnicodeDecodeError:
                return UnicodeDecodeError("unknown", b"", 0, 0, message)
            if kind is UnicodeEncodeError or kind is UnicodeTranslateError:
                return kind(*(("unknown",) if kind is UnicodeEncodeError else ()), "", 0, 0, message)
            return kind(message)
        except BaseException:
            continue  # a class whose constructor wants more: the next built-in base will do
    return CandidateBaseError(described)


def _error_status(data, where=""):
    name, detail, bases = data[:3]
    if name == "SystemExit":
        return {"status": "error", "message": _cap("the program called exit(" + detail + ")" + where)}
    if "KeyError" in bases:
        detail = repr(detail)  # as Python shows it: KeyError: 'k'
    message = _cap(name + (": " + detail if detail else "") + where)
    return {"status": "memory" if name == "MemoryError" else "error", "message": message}


def json_data(value, depth=0):
    """An argument test's return value as the JSON data the executor compares: tuples, ranges, deques and iterators
    become lists, dicts (OrderedDict too) objects. Runs here, inside the jail, so expanding a huge range costs the
    jail's limits, not the executor's. Raises ValueError for values JSON has no form for (sets, bytes, complex
    numbers, integers of more than MAX_INT_DIGITS digits, and dicts with a key that is not a str: a JSON object's
    keys are strings, so {1: 'a'} or {True: 'a'} is not {"1": "a"}, and turning keys into text would make
    {1: 'a', '1': 'b'} one key)."""
    if depth > MAX_DEPTH:
        raise ValueError("a value nested more than " + str(MAX_DEPTH) + " levels deep")
    if value is None or type(value) in (bool, str):
        return value
    if type(value) is int:
        if value.bit_length() > MAX_INT_BITS:
            raise ValueError("an integer of more than " + str(MAX_INT_DIGITS) + " digits")
        return value
    if type(value) is float:
        return value  # NaN and the infinities travel as JSON's NaN/Infinity extension, which the executor reads
    if type(value) in (list, tuple, range) or hasattr(type(value), "__next__") or type(value).__name__ == "deque":
        return [json_data(item, depth + 1) for item in value]
    if type(value) in (set, frozenset):
        # JSON has no set, and sorting it into a list would accept an unsorted answer to "sorted, unique".
        raise ValueError("a " + type(value).__name__ + ", which JSON has no form for (use a code test)")
    if isinstance(value, dict):
        converted = {}
        for key, item in value.items():
            if type(key) is not str:
                raise ValueError(
                    "a dict with a key of type " + type(key).__name__ + ", which JSON has no form for (its keys are "
                    "strings; use a code test to compare other keys)"
                )
            converted[key] = json_data(item, depth + 1)
        return converted
    raise ValueError("a " + type(value).__name__ + ", which JSON has no form for")


def _report(result):
    """Write the one result document to the host and end the jail (PID 1 exiting ends every process in it)."""
    _flush()
    try:
        data = json.dumps(result, separators=(",", ":")).encode("utf-8", "surrogatepass")
    except BaseException as exc:
        data = json.dumps({"status": "internal", "message": "cannot encode the result: " + _describe(exc)}).encode()
    if len(data) > MAX_RESULT_BYTES:
        if result.get("status") == "value":
            message = "the function returned a value of more than " + str(MAX_RESULT_BYTES >> 20) + " MiB as JSON"
            data = json.dumps({"status": "bad_value", "message": message}).encode()
        else:
            data = json.dumps({"status": "internal", "message": "the harness's result is too large"}).encode()
    try:
        _write_all(RESULT_FD, data)
    finally:
        os._exit(0)


def undefined_names(code, entry_point):
    """Names the test code reads but never binds and that are not built-ins: a test that uses them is broken
    (the candidate module's globals are not visible to it). Empty if the code could bind names dynamically
    (`from m import *`)."""
    import ast

    tree = ast.parse(code)
    bound = {"candidate", entry_point, "__name__", "__file__", "__builtins__"}
    loaded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return []
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return sorted(name for name in loaded - bound if not hasattr(builtins, name))


def _site_setup():
    """What `site` gives a program, minus the .pth files: the interpreter runs with -S, because processing the
    system's .pth files (certifi, setuptools' distutils hack, Debian's sitecustomize) costs 6 ms of every run.
    The site-packages directories go on sys.path, and exit(), quit(), help() and friends into builtins, so the
    candidate sees the same Python as a stdio program does."""
    import site

    site.setquit()
    site.setcopyright()
    site.sethelper()
    for directory in site.getsitepackages():
        if directory not in sys.path and os.path.isdir(directory):
            sys.path.append(directory)


def _supervise(program):
    _site_setup()
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        _report({"status": "internal", "message": "cannot make the harness non-dumpable"})
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.set_inheritable(RESULT_FD, False)
    calls_r, calls_w = os.pipe()
    replies_r, replies_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(RESULT_FD)
            os.close(calls_w)
            os.close(replies_r)
            os.close(0)
            os.open(os.devnull, os.O_RDONLY)  # fd 0 again: the candidate's stdin is empty
            signal.signal(signal.SIGINT, signal.default_int_handler)
        except BaseException:
            os._exit(70)
        _candidate_main(calls_r, replies_w, program)
        os._exit(0)
    os.close(calls_r)
    os.close(replies_w)
    # The mode is in the data: a test's request is one line; a fuzzing request's first line says so, and the
    # inputs follow it, one a line (read as they are needed). The candidate's process was made before either.
    stdin = open(0, "rb", closefd=False)
    request = json.loads(stdin.readline())
    if type(request) is dict and "fuzz" in request:
        _fuzz(pid, calls_w, replies_r, request, stdin)
    stdin.close()
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)
    entry_point = request["entry_point"]
    compiled = None
    if "code" in request:
        # Checked before the candidate runs, so nothing it does can make a test look broken.
        try:
            compiled = compile(request["code"], "<test>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            _report({"status": "bad_test", "message": "the test code does not compile: " + _describe(exc)})
    candidate = _Candidate(pid, calls_w, replies_r)
    try:
        result = candidate.start(entry_point)
        if result is None:
            if compiled is None:
                result = candidate.value(request["args"])
            else:
                result = _code_test(candidate, compiled, request["code"], entry_point)
        # A test that swallowed the candidate's end (`except:`) does not turn it into a pass.
        if candidate.gone is not None:
            result = candidate.gone
    except CandidateGone as gone:
        result = gone.status
    candidate.stop()  # reaped before the report: its CPU time must count
    _report(result)


# --- fuzzing: the same candidate process, answering a batch of inputs ------------------------------------------
# Differential fuzzing (executor/differential/) runs a program exactly as a test run does: this file, the same
# argv, jail and candidate process, made the same way before the request is read. Only the request differs, which
# the candidate never sees: its first line is {"entry_point": f, "fuzz": {...options}}, and each further line is
# one input's encoded arguments. The supervisor sends them one call at a time, in the very message a test's call
# is, and forwards each reply unread to the host, which decodes and compares it. A run answers a *segment* of a
# repetition: it ends when the inputs do, or when a clock or the candidate's end calls for a fresh run (the host
# then starts one for the rest), so every candidate process is one a test run could have made.
#
# Result frames on RESULT_FD (4-byte big-endian length, then a tag byte and JSON), written by this process only:
#   H {"loaded": bool, "message": str, "load_s": s}   once, after the program was imported (or failed to be)
#   R <the candidate's reply, as it sent it>           per input answered
#   M [code, ...]                                      per input the supervisor answers for (FUZZ_* below)
#   E {"stopped": why, "elapsed": s}                   last: done | budget | cut | ended | internal
# `cut`: the run stopped before the next input (its clock, its CPU share, or a call it had to interrupt that was
# not its first): the host runs the rest in a fresh run. `ended`: the candidate's process ended (a marker says
# how). `budget`: the repetition's time budget ran out.
FUZZ_TIMED_OUT, FUZZ_TOO_LARGE, FUZZ_DIED, FUZZ_SIDE_CAP = 2, 5, 11, 14
# A run stops before the next input once the candidate's process and this one have used this share of the run's CPU
# limit (the test's, which the host enforces on the whole run): the next run's candidate starts from zero.
_CPU_SHARE = 0.5
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class _Timed:
    """The candidate as the fuzzing loop sees it: calls sent as bytes, replies read as bytes before a deadline."""

    def __init__(self, pid, calls, replies):
        self.pid = pid
        self.calls = calls
        self.replies = replies
        self.buffer = bytearray()
        self.poller = select.poll()
        self.poller.register(replies, select.POLLIN)
        self.stat = None
        self.status = None
        self.eof = False

    def send(self, data):
        try:
            _write_all(self.calls, _HEADER.pack(len(data)) + data)
            return True
        except OSError:
            return False

    def call(self, data, deadline, cap):
        """Send one call and wait for its reply (as receive). The wait begins right after the write, as a test's
        does (_Candidate._exchange), so that the candidate finds this process waiting, not busy, as in a test."""
        frame = _HEADER.pack(len(data)) + data
        wait_ms = max(1, int((deadline - time.monotonic()) * 1000) + 1)
        try:
            _write_all(self.calls, frame)
        except OSError:
            return ("gone",)
        if not self.buffer:
            self.poller.poll(wait_ms)
        return self.receive(deadline, cap)

    def receive(self, deadline, cap):
        """("reply", bytes) | ("large",) | ("timeout",) | ("gone",): one reply frame, a frame over `cap` bytes
        (skipped), the deadline, or the candidate's end of the pipe."""
        if not self._fill(_HEADER.size, deadline):
            return self._why()
        (size,) = _HEADER.unpack_from(self.buffer)
        del self.buffer[: _HEADER.size]
        if size > cap:
            while size:
                if not self._fill(1, deadline):
                    return self._why()
                dropped = min(size, len(self.buffer))
                del self.buffer[:dropped]
                size -= dropped
            return ("large",)
        if not self._fill(size, deadline):
            return self._why()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return ("reply", data)

    def _fill(self, size, deadline):
        self.eof = False
        while len(self.buffer) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if not self.poller.poll(max(1, int(remaining * 1000) + 1)):
                continue
            chunk = os.read(self.replies, 65536)
            if not chunk:
                self.eof = True
                return False
            self.buffer += chunk
        return True

    def _why(self):
        return ("gone",) if self.eof else ("timeout",)

    def load(self, deadline):
        """None once the program is imported and defines the function (the entry point was sent), else why not."""
        got = self.receive(deadline, MAX_MESSAGE_BYTES)
        if got[0] == "timeout":
            return "loading the program took too long"
        if got[0] != "reply":
            return "the program's process ended while loading"
        try:
            reply = _valid_reply(loads_limited(got[1]))
        except (ValueError, CandidateGone):
            return "the program's process sent an unreadable reply while loading"
        if "ready" in reply:
            return None
        if "missing" in reply:
            return _cap("the program does not define a function " + repr(reply["missing"]))
        if "raised_importing" in reply:
            name, detail = reply["raised_importing"][:2]
            return _cap(name + (": " + detail if detail else ""))
        return "the program's process sent an unreadable reply while loading"

    def cpu_s(self):
        """The candidate's CPU time so far (also readable once it ended, until it is reaped)."""
        try:
            if self.stat is None:
                self.stat = os.open("/proc/" + str(self.pid) + "/stat", os.O_RDONLY | os.O_CLOEXEC)
            fields = os.pread(self.stat, 1024, 0).rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        except (OSError, IndexError, ValueError):
            return 0.0

    def reap(self):
        """Wait for the candidate's process (which ended) and say how: (exit code, signal)."""
        if self.status is None:
            _, status = os.waitpid(self.pid, 0)
            if os.WIFSIGNALED(status):
                self.status = (None, os.WTERMSIG(status))
            else:
                self.status = (os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1, None)
        return self.status

    def stop(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self.reap()


def _dumps(value):
    return json.dumps(value, separators=(",", ":")).encode("utf-8", "surrogatepass")


class _FuzzOutput:
    """Frames to the host, written as they come (nothing accumulates here); replies bounded by `room` bytes."""

    def __init__(self, room):
        self.room = room

    def frame(self, tag, data):
        _write_all(RESULT_FD, _HEADER.pack(len(data) + 1) + tag + data)

    def reply(self, data):
        if len(data) > self.room:
            self.mark([FUZZ_SIDE_CAP])
            return
        self.room -= len(data)
        self.frame(b"R", data)

    def mark(self, marker):
        self.frame(b"M", _dumps(marker))


def _fuzz(pid, calls, replies, request, stdin):
    """Answer one segment of a repetition (see above), then end the run. Never returns."""
    out = None
    started = time.monotonic()
    candidate = _Timed(pid, calls, replies)
    # The entry point goes to the candidate first, as early as a test sends it: how long it waits for it (its
    # context switches, its clock) must not depend on what this run does next.
    sent = candidate.send(_dumps({"entry_point": str(request.get("entry_point"))}))
    try:
        options = request["fuzz"]
        timeout = float(options["timeout"])
        stop_at = started + float(options["stop_after"])
        reply_cap = int(options["reply_cap"])
        out = _FuzzOutput(int(options["result_cap"]))
        soft, _ = resource.getrlimit(resource.RLIMIT_CPU)
        cpu_cap = _CPU_SHARE * float(options["cpu_limit"])
        deadline = min(stop_at, started + float(options["load_timeout"]))
        error = candidate.load(deadline) if sent else "the program's process ended while loading"
        ready = time.monotonic()
        out.frame(b"H", _dumps({"loaded": error is None, "message": error or "", "load_s": ready - started}))
        budget_from = started if options["count_load"] else ready
        stopped = _fuzz_inputs(candidate, out, stdin, error is None, timeout, budget_from + float(options["budget"]),
                               stop_at, reply_cap, soft, cpu_cap)  # fmt: skip
        candidate.stop()  # reaped before the end frame: its CPU time is the run's
        out.frame(b"E", _dumps({"stopped": stopped, "elapsed": time.monotonic() - budget_from}))
    except BaseException as exc:
        candidate.stop()
        if out is not None:
            out.frame(b"E", _dumps({"stopped": "internal", "message": _describe(exc)}))
    _flush()
    os._exit(0)


def _fuzz_inputs(candidate, out, stdin, loaded, timeout, budget_end, stop_at, reply_cap, soft, cpu_cap):
    """Send the inputs one call at a time; the reason the segment stopped."""
    if not loaded:
        return "ended"
    first = True
    while True:
        line = stdin.readline().rstrip(b"\n")
        if not line:
            return "done"
        now = time.monotonic()
        if now >= budget_end:
            return "budget"
        if not first and now >= stop_at:
            return "cut"
        # The very bytes of a test's call message (_call_message, _frame): {"args":[...],"kwargs":[]}.
        got = candidate.call(b'{"args":' + line + b',"kwargs":[]}', min(now + timeout, budget_end, stop_at), reply_cap)
        if got[0] == "reply":
            out.reply(got[1])
        elif got[0] == "large":
            out.mark([FUZZ_TOO_LARGE])
        elif got[0] == "timeout":
            now = time.monotonic()
            if now >= budget_end:
                return "budget"
            if now < stop_at or first:
                out.mark([FUZZ_TIMED_OUT])  # its own clock; or a first call that had all a run allows
                return "ended"
            return "cut"  # interrupted by the run's clock: the next run starts with it
        else:
            used = candidate.cpu_s()
            code, signum = candidate.reap()
            if soft != resource.RLIM_INFINITY and (signum == signal.SIGXCPU or used >= soft - 0.05):
                if not first:
                    return "cut"  # its process had used its CPU before this call: a fresh one tries it
                out.mark([FUZZ_TIMED_OUT])
            else:
                out.mark([FUZZ_DIED, code, signum])
            return "ended"
        first = False
        if candidate.cpu_s() + _own_cpu_s() >= cpu_cap:
            return "cut"


def _own_cpu_s():
    times = os.times()
    return times.user + times.system


def _code_test(candidate, compiled, code, entry_point):
    def proxy(*args, **kwargs):
        return candidate.call(args, kwargs)

    # The test code sees the candidate by name (MBPP's bare asserts) and as check()'s argument (HumanEval).
    # It does not see the candidate module's other globals: a helper the test needs must be part of the test.
    namespace = {"__name__": "__test__", "__builtins__": builtins, entry_point: proxy, "candidate": proxy}
    try:
        exec(compiled, namespace)
        check = namespace.get("check")
        if callable(check):
            check(proxy)
    except CandidateGone:
        raise
    except _BadTest as exc:
        return {"status": "bad_test", "message": _cap(str(exc))}
    except BaseException as exc:
        if candidate.raised and candidate.raised[-1][0] is exc:
            return _error_status(candidate.raised[-1][1])
        if isinstance(exc, MemoryError):
            return {"status": "memory", "message": "MemoryError"}
        if type(exc) is NameError and getattr(exc, "name", None) in undefined_names(code, entry_point):
            # The test reads a name it never binds anywhere: the test is broken, whatever the candidate did.
            # (The name is undefined in the text of the test, which the candidate cannot change.)
            return {
                "status": "bad_test",
                "message": _cap(
                    "the test code uses " + exc.name + ", which it never defines (tests see only `candidate` and "
                    "the entry point, not the program's globals: define helpers in the test)"
                ),
            }
        if isinstance(exc, AssertionError):
            return {"status": "fail", "message": _failed_assertion(exc, code)}
        return {"status": "fail", "message": "the test raised " + _describe(exc)}
    return {"status": "pass"}


def _describe(exc):
    """`Type: message`, capped; never raises (a message built from a candidate's value may not render)."""
    try:
        import traceback  # only on the way to a failure: it costs 3 ms to import

        line = traceback.format_exception_only(type(exc), exc)[-1].strip()
    except BaseException:
        line = type(exc).__name__
    return _cap(line)


def _failed_assertion(exc, code):
    """The failing assert's source line: HumanEval's asserts usually carry no message."""
    try:
        detail = str(exc)
    except BaseException:
        detail = "(a message that cannot be shown)"
    import traceback

    lines = code.splitlines()
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == "<test>" and 0 < frame.lineno <= len(lines):
            text = "failed: " + lines[frame.lineno - 1].strip()
            return _cap(text + (" (" + detail + ")" if detail else ""))
    return _cap("failed: " + (detail or "AssertionError"))


def _cap(text):
    return text if len(text) <= _MESSAGE_CAP else text[: _MESSAGE_CAP - 3] + "..."


def main():
    try:
        _supervise(sys.argv[1])
    except SystemExit:
        raise
    except MemoryError:
        _report({"status": "memory", "message": "MemoryError"})
    except BaseException as exc:
        _report({"status": "internal", "message": _describe(exc)})


if __name__ == "__main__":
    main()
