"""Function-mode harness: runs inside the jail (the jail's /usr/bin/python3, 3.11, stdlib only), imports the
candidate program, runs one test against its entry point and reports the result to the host.

Invocation: python3 -I -B function_runner.py /prog/main.py
stdin:  line 1: a random nonce chosen by the host for this run
        rest:   JSON, either {"entry_point": "f", "args": [...]}          (call f(*args), report its value)
                or           {"entry_point": "f", "code": "def check(candidate): ..."}
                             (HumanEval/MBPP style: the test passes iff the code, then check(f), run cleanly)
stdout: the program's own prints, and one line "<nonce> <json result>" written by this harness, where the
        result's "status" is value | pass | fail | error | memory | bad_value | bad_test.

Why the nonce: the candidate shares stdout, so it could print a fake result line. The nonce is read, and
stdin closed, before the candidate is imported, so it cannot be read back from stdin or /proc/self/fd/0,
and the host accepts only a line that carries it.
Residual risk (accepted, documented): the candidate runs in this same interpreter, so a program written to
attack this harness could still find the nonce (walking gc.get_objects(), frames, or reading
/proc/self/mem), or monkeypatch json/os before we report, and forge a passing line. Defeating that needs
a second process boundary per test; the payoff is low, since a forged pass only fools the verdict of the
forger's own submission, and the jail still contains everything it does.
"""

import importlib.util
import json
import os
import sys
import traceback

_MESSAGE_CAP = 500


def _main():
    raw = sys.stdin.buffer.read()
    nonce_bytes, _, payload = raw.partition(b"\n")
    nonce = nonce_bytes.decode("ascii").strip()
    request = json.loads(payload)
    del raw, payload
    # Gone before the candidate exists: /proc/self/fd/0 would let it reopen the memfd and read the nonce.
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)
    sys.stdin = open(0, closefd=False)
    # The result goes through a private copy of stdout taken now, with functions bound now, so the
    # candidate closing fd 1 or replacing sys.stdout does not stop (or redirect) the report.
    result_fd = os.dup(1)
    dumps, write, flush_exit = json.dumps, os.write, os._exit

    def report(result):
        """Write the result line and end the process: never returns."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        try:
            text = dumps(result, allow_nan=True)
        except BaseException as exc:
            text = dumps({"status": "bad_value", "message": "cannot encode the result: " + _describe(exc)})
        data = (nonce + " " + text + "\n").encode("utf-8", "surrogatepass")
        while data:
            data = data[write(result_fd, data):]
        # Skip the candidate's atexit hooks and finalizers: nothing it registered runs after the report.
        flush_exit(0)

    module_path = sys.argv[1]
    entry_point = request["entry_point"]
    sys.argv = [module_path]
    try:
        spec = importlib.util.spec_from_file_location("solution", module_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["solution"] = module
        spec.loader.exec_module(module)
    except BaseException as exc:
        report(_error(exc, "while importing the program: "))
    function = getattr(module, entry_point, None)
    if not callable(function):
        report({"status": "error", "message": "the program does not define a function " + repr(entry_point)})

    if "args" in request:
        try:
            value = function(*request["args"])
        except BaseException as exc:
            report(_error(exc, ""))
        try:
            report({"status": "value", "value": _to_json(value)})
        except (TypeError, ValueError, RecursionError) as exc:
            report({"status": "bad_value", "message": _describe(exc)})

    _run_test_code(request["code"], module, function, entry_point, report)


def _run_test_code(code, module, function, entry_point, report):
    try:
        compiled = compile(code, "<test>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        report({"status": "bad_test", "message": "the test code does not compile: " + _describe(exc)})
    raised = []

    def candidate(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except BaseException as exc:
            raised.append(exc)
            raise

    # The test sees the candidate module's globals, as in HumanEval's own harness (some checks call helper
    # functions defined next to the entry point), and the entry point by name (MBPP's bare asserts).
    namespace = dict(vars(module))
    namespace.update({"__name__": "__test__", entry_point: candidate})
    try:
        exec(compiled, namespace)
        check = namespace.get("check")
        if callable(check):
            check(candidate)
    except BaseException as exc:
        if raised and raised[-1] is exc:
            report(_error(exc, ""))
        if isinstance(exc, MemoryError):
            report({"status": "memory", "message": _describe(exc)})
        if isinstance(exc, AssertionError):
            report({"status": "fail", "message": _failed_assertion(exc, code)})
        report({"status": "fail", "message": "the test raised " + _describe(exc)})
    report({"status": "pass"})


def _error(exc, prefix):
    if isinstance(exc, MemoryError):
        return {"status": "memory", "message": prefix + _describe(exc)}
    if isinstance(exc, SystemExit):
        return {"status": "error", "message": prefix + "the program called exit(" + _cap(repr(exc.code)) + ")"}
    return {"status": "error", "message": prefix + _describe(exc)}


def _describe(exc):
    line = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return _cap(line)


def _failed_assertion(exc, code):
    """The failing assert's source line: HumanEval's asserts usually carry no message."""
    lines = code.splitlines()
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == "<test>" and 0 < frame.lineno <= len(lines):
            detail = str(exc)
            text = "failed: " + lines[frame.lineno - 1].strip()
            return _cap(text + (" (" + detail + ")" if detail else ""))
    return _cap("failed: " + (str(exc) or "AssertionError"))


def _cap(text):
    return text if len(text) <= _MESSAGE_CAP else text[: _MESSAGE_CAP - 3] + "..."


def _to_json(value, depth=0):
    """The return value as JSON data: tuples become lists, sets sorted lists; anything else is refused."""
    if depth > 100:
        raise ValueError("the return value is nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value  # NaN and infinities travel as NaN/Infinity, which the host's json accepts
    if isinstance(value, (list, tuple)):
        return [_to_json(item, depth + 1) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [_to_json(item, depth + 1) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, dict):
        converted = {}
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise TypeError("a dict key of type " + type(key).__name__ + " is not JSON")
            converted[key if isinstance(key, str) else json.dumps(key)] = _to_json(item, depth + 1)
        return converted
    raise TypeError("the function returned a " + type(value).__name__ + ", which is not JSON data")


if __name__ == "__main__":
    _main()
