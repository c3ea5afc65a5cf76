"""Hostile candidates against function mode: every program here is WRONG, and tries to get AC anyway.

Each test names the verdict a correct platform gives. None may be AC, and none may be IE (a failure the candidate
causes is its own, RE, never the platform's). The harness design these attack is in
executor/harness/function_runner.py and docs/sandbox.md ("Function mode").
"""

from __future__ import annotations

import secrets
import textwrap

import pytest

from executor.run import Executor
from services.kernel.contracts import Limits, TestCase
from tests.executor.conftest import FAST, run

# The right answer is 3; every candidate below returns something else unless it forges.
WRONG = "def add(a, b):\n    return a - b\n"
CODE_TEST = TestCase(code="def check(candidate):\n    assert candidate(1, 2) == 3\n")
ARG_TEST = TestCase(input=[1, 2], expected=3)
NOT_ACCEPTED = {"WA", "RE", "TLE", "MLE", "OLE"}


async def verdicts(executor: Executor, source: str, tests: list[TestCase], limits: Limits = FAST) -> list[str]:
    outcome = await run(
        executor, "python", textwrap.dedent(source), tests, mode="function", entry_point="add", limits=limits
    )
    return [t.status for t in outcome.tests]


async def assert_refused(executor: Executor, source: str, expected: set[str] | str = "WA") -> None:
    """Both test forms: the forgery gets the verdict a correct platform gives (never AC, never IE)."""
    allowed = {expected} if isinstance(expected, str) else expected
    got = await verdicts(executor, source, [CODE_TEST, ARG_TEST])
    assert set(got) <= allowed, got
    assert set(got) <= NOT_ACCEPTED, got


# --- the four forgeries the audit showed, and variants -------------------------------------------------------


async def test_walking_the_stack_to_the_reporter(executor: Executor) -> None:
    """Find any function in any frame or module that looks like the harness's reporter and call it with pass."""
    await assert_refused(
        executor,
        """
        import sys, gc
        def add(a, b):
            frame = sys._getframe()
            while frame is not None:
                for scope in (frame.f_globals, frame.f_locals):
                    for name, value in list(scope.items()):
                        if callable(value) and "report" in name:
                            for result in ({"status": "pass"}, {"status": "value", "value": ["int", "3"]}):
                                try:
                                    value(result)
                                except BaseException:
                                    pass
                frame = frame.f_back
            return a - b
        """,
        {"WA", "RE"},
    )


async def test_writing_forged_results_to_every_descriptor(executor: Executor) -> None:
    """Print pass lines everywhere: stdout, stderr, and every fd number a result channel could have."""
    await assert_refused(
        executor,
        """
        import os, json
        def add(a, b):
            forged = json.dumps({"status": "pass"}).encode()
            value = json.dumps({"status": "value", "value": ["int", "3"]}).encode()
            for fd in range(0, 64):
                for data in (forged, value, b"\\n" + forged + b"\\n"):
                    try:
                        os.write(fd, data)
                    except OSError:
                        pass
            print(json.dumps({"status": "pass"}))
            return a - b
        """,
        {"WA", "RE"},
    )


async def test_scanning_process_memory_for_secrets(executor: Executor) -> None:
    """The nonce attack, generalised: read our own memory and try the supervisor's (PID 1)."""
    await assert_refused(
        executor,
        """
        import os, re
        found = []
        for pid in ("self", "1"):
            try:
                with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
                    for line in maps:
                        start, end = (int(x, 16) for x in line.split()[0].split("-"))
                        try:
                            mem.seek(start)
                            found += re.findall(rb"[0-9a-f]{32}", mem.read(min(end - start, 1 << 22)))
                        except (OSError, ValueError, OverflowError):
                            pass
            except OSError:
                pass
        def add(a, b):
            for token in found[:2000]:
                print(token.decode() + ' {"status": "pass"}')
            return a - b
        """,
        {"WA", "RE"},
    )


async def test_replacing_exec_compile_and_builtins(executor: Executor) -> None:
    await assert_refused(
        executor,
        """
        import builtins
        builtins.exec = lambda *args, **kwargs: None
        builtins.compile = lambda *args, **kwargs: compile("pass", "<x>", "exec")
        builtins.AssertionError = type("AssertionError", (BaseException,), {})
        builtins.isinstance = lambda *args: True
        def add(a, b):
            return a - b
        """,
        {"WA", "RE"},
    )


async def test_liar_objects_that_equal_everything(executor: Executor) -> None:
    await assert_refused(
        executor,
        """
        class Liar:
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            def __sub__(self, other): return 0
            __rsub__ = __sub__
            def __abs__(self): return 0
            def __lt__(self, other): return True
            def __bool__(self): return True
            __hash__ = object.__hash__
        def add(a, b):
            return Liar()
        """,
    )


@pytest.mark.parametrize(
    "base, value",
    [("int", "0"), ("float", "0.0"), ("str", "'x'"), ("list", "[]"), ("tuple", "()"), ("dict", "{}"), ("set", "set()")],
)
async def test_liar_subclasses_of_data_types(executor: Executor, base: str, value: str) -> None:
    """A subclass of a data type with a lying __eq__ is sent as its base value: the lie never crosses over."""
    await assert_refused(
        executor,
        f"""
        class Liar({base}):
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            def __hash__(self): return 0
            def __repr__(self): return "3"
            def __str__(self): return "3"
            def __format__(self, spec): return "3"
        def add(a, b):
            return Liar({value})
        """,
    )


async def test_spoofed_class_attribute(executor: Executor) -> None:
    """`__class__ = int` fools isinstance() in the candidate's own process; the value still is not an int."""
    await assert_refused(
        executor,
        """
        class Fake:
            __class__ = int
            def __eq__(self, other): return True
            __hash__ = object.__hash__
        def add(a, b):
            return Fake()
        """,
    )


async def test_gc_search_for_harness_objects(executor: Executor) -> None:
    """Walk every object the interpreter holds; call anything that looks like a pipe writer or reporter."""
    await assert_refused(
        executor,
        """
        import gc, os, json
        def add(a, b):
            for obj in gc.get_objects():
                if callable(obj) and getattr(obj, "__name__", "") in ("_report", "_send", "report", "_write_all"):
                    for args in ((4, b'{"status":"pass"}'), ({"status": "pass"},)):
                        try:
                            obj(*args)
                        except BaseException:
                            pass
            return a - b
        """,
        {"WA", "RE"},
    )


async def test_replacing_the_output_streams(executor: Executor) -> None:
    await assert_refused(
        executor,
        """
        import sys, os, io
        sys.stdout = io.StringIO()
        sys.stderr = io.StringIO()
        os.close(1)
        os.close(2)
        def add(a, b):
            return a - b
        """,
    )


# --- reaching the supervisor (PID 1) ---------------------------------------------------------------------------


async def test_the_supervisor_cannot_be_signalled_read_or_limited(executor: Executor) -> None:
    """Every way at PID 1 fails; the candidate reports what it saw, and the test code checks it got nowhere."""
    source = """
        import os, signal, resource, ctypes
        def add(a, b):
            seen = []
            for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSTOP, signal.SIGUSR1):
                try:
                    os.kill(1, sig)
                except OSError as exc:
                    seen.append(exc.errno)
            for path in ("/proc/1/mem", "/proc/1/fd/0", "/proc/1/fd/4", "/proc/1/environ", "/proc/1/maps"):
                try:
                    with open(path, "rb") as f:
                        seen.append(("read", path, len(f.read(64))))
                except OSError:
                    pass
            try:
                resource.prlimit(1, resource.RLIMIT_CPU, (0, 0))
                seen.append("prlimit")
            except OSError:
                pass
            try:
                os.setpriority(os.PRIO_PROCESS, 1, 19)
                seen.append("setpriority")
            except OSError:
                pass
            return [x for x in seen if not isinstance(x, int)]
        """
    got = await verdicts(executor, source, [TestCase(input=[1, 2], expected=[])])
    assert got == ["AC"], "the candidate reached PID 1"


async def test_hidden_test_code_is_not_readable_by_the_candidate(executor: Executor) -> None:
    """The only way to pass is to read the test's secret; every place it could be is searched."""
    token = secrets.token_hex(12)
    test = TestCase(code=f"def check(candidate):\n    assert candidate(1, 2) == '{token}'\n")
    source = """
        import os, re, gc, sys
        def grab():
            pattern = re.compile(rb"== '([0-9a-f]{24})'")
            for path in ("/proc/1/cmdline", "/proc/1/environ", "/proc/1/fd/0", "/proc/self/fd/0", "/dev/stdin"):
                try:
                    with open(path, "rb") as f:
                        hit = pattern.search(f.read())
                        if hit:
                            return hit.group(1).decode()
                except OSError:
                    pass
            for pid in ("self", "1"):
                try:
                    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
                        for line in maps:
                            start, end = (int(x, 16) for x in line.split()[0].split("-"))
                            try:
                                mem.seek(start)
                                hit = pattern.search(mem.read(min(end - start, 1 << 24)))
                                if hit:
                                    return hit.group(1).decode()
                            except (OSError, ValueError, OverflowError):
                                pass
                except OSError:
                    pass
            for obj in gc.get_objects():
                if isinstance(obj, (str, bytes)):
                    hit = pattern.search(obj.encode() if isinstance(obj, str) else obj)
                    if hit:
                        return hit.group(1).decode()
            return "not found"
        def add(a, b):
            return grab()
        """
    assert await verdicts(executor, source, [test]) == ["WA"]


async def test_forking_a_survivor_does_not_help(executor: Executor) -> None:
    """A grandchild that outlives the call and writes verdict-shaped frames to every fd it has cannot pass the
    test. (Anything the candidate's processes write on the reply pipe is only its answer, which it could have
    returned anyway; the secret expected value is what it cannot know.)"""
    token = secrets.token_hex(8)
    test = TestCase(code=f"def check(candidate):\n    assert candidate(1, 2) == '{token}'\n")
    source = """
        import os, json, struct, time
        def add(a, b):
            if os.fork() == 0:
                for fd in range(0, 32):
                    for message in ({"status": "pass"}, {"ready": True}, {"status": "value", "value": ["none"]}):
                        data = json.dumps(message).encode()
                        try:
                            os.write(fd, struct.pack(">I", len(data)) + data)
                            os.write(fd, data)
                        except OSError:
                            pass
                time.sleep(5)
                os._exit(0)
            time.sleep(0.2)
            return a - b
        """
    assert set(await verdicts(executor, source, [test])) <= {"WA", "RE"}


# --- ending the process --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where, how",
    [
        ("import", "import os; os._exit(0)"),
        ("import", "import sys; sys.exit(0)"),
        ("import", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"),
        ("call", "import os; os._exit(0)"),
        ("call", "raise SystemExit(0)"),
        ("call", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"),
    ],
)
async def test_exiting_before_or_during_a_test_is_a_runtime_error(executor: Executor, where: str, how: str) -> None:
    if where == "import":
        source = f"{how}\ndef add(a, b):\n    return a + b\n"
    else:
        source = "def add(a, b):\n" + textwrap.indent(how.replace("; ", "\n"), "    ") + "\n"
    assert await verdicts(executor, source, [CODE_TEST, ARG_TEST]) == ["RE", "RE"]


async def test_exceptions_the_candidate_raises_are_its_own(executor: Executor) -> None:
    """An AssertionError from the candidate is RE (it raised), not a test failure it could steer, and never AC."""
    source = "def add(a, b):\n    raise AssertionError('pass')\n"
    assert await verdicts(executor, source, [CODE_TEST, ARG_TEST]) == ["RE", "RE"]


async def test_unreadable_replies_are_a_runtime_error(executor: Executor) -> None:
    """Garbage and oversized frames on the reply pipe end the test as RE."""
    source = """
        import os, struct
        def add(a, b):
            for fd in range(3, 16):
                try:
                    os.write(fd, struct.pack(">I", 0xFFFFFFF0) + b"x" * 64)
                except OSError:
                    pass
            return a - b
        """
    got = await verdicts(executor, source, [CODE_TEST, ARG_TEST])
    assert set(got) <= {"RE", "WA"}, got


async def test_a_correct_program_still_passes_after_all_that(executor: Executor) -> None:
    """The controls: the same harness accepts right answers in both test forms, helpers included."""
    right = "import os\nos.write(2, b'noise')\ndef add(a, b):\n    print('working')\n    return a + b\n"
    assert await verdicts(executor, right, [CODE_TEST, ARG_TEST]) == ["AC", "AC"]


# --- output floods -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "language, source",
    [
        ("python", "import sys\nwhile True:\n    sys.stderr.write('x' * 4096)\n"),
        ("python", "import os\nwhile True:\n    os.write(2, b'y' * 65536)\n"),
        ("python", "import os\nwhile True:\n    os.write(1, b'z' * 65536)\n"),
        ("c", "#include <stdio.h>\nint main(void){for(;;)fputc('x',stderr);}\n"),
        ("c", "#include <unistd.h>\nint main(void){char b[4096]={'q'};for(;;)write(2,b,sizeof b);}\n"),
        ("cpp", '#include <iostream>\nint main(){for(;;)std::cerr<<"abcdefgh";}\n'),
    ],
)
async def test_floods_without_newlines_are_output_limit_exceeded(
    executor: Executor, language: str, source: str
) -> None:
    outcome = await run(
        executor, language, source, limits=Limits(cpu_time_s=5, wall_time_s=10, memory_mb=128, output_kb=64)
    )
    assert outcome.verdict == "OLE", [(t.status, t.message) for t in outcome.tests]


async def test_function_mode_floods_are_output_limit_exceeded(executor: Executor) -> None:
    source = "import os\ndef add(a, b):\n    while True:\n        os.write(2, b'x' * 65536)\n"
    assert await verdicts(executor, source, [CODE_TEST, ARG_TEST]) == ["OLE", "OLE"]


# --- found by a red-team review (each was AC, IE or a host-side blow-up before it was fixed) ---------------------

# Finds the candidate's own reply pipe, to write replies of any shape on it.
_RAW_REPLY = """
import sys, os, json, struct
def raw(obj):
    frame = sys._getframe()
    while frame and frame.f_code.co_name != "_candidate_main":
        frame = frame.f_back
    data = json.dumps(obj).encode()
    os.write(frame.f_locals["replies"], struct.pack(">I", len(data)) + data)
"""


@pytest.mark.parametrize(
    "reply",
    [
        {"missing": 5},
        {"raised": 5},
        {"raised": ["x"]},
        {"not_data": 5},
        {"raised": [1, 2]},
        [1],
        {"value": {"bogus": 3}},
        {"value": {"tuple": 3}},
        {"raised": ["ValueError", "x", 3]},
    ],
)
@pytest.mark.parametrize("when", ["import", "call"])
async def test_malformed_replies_are_the_candidates_fault(executor: Executor, reply: object, when: str) -> None:
    if when == "import":
        source = _RAW_REPLY + f"raw({reply!r})\nos._exit(0)\ndef add(a, b):\n    return a - b\n"
    else:
        source = _RAW_REPLY + f"def add(a, b):\n    raw({reply!r})\n    os._exit(0)\n"
    assert set(await verdicts(executor, source, [CODE_TEST, ARG_TEST])) <= {"RE", "WA"}


@pytest.mark.parametrize(
    "check",
    [
        "def check(candidate):\n    assert all(map(lambda p: candidate(*p) == p[0] + p[1], [(1, 2), (3, 4)]))\n",
        "def check(candidate):\n    for got, want in zip(map(candidate, [1, 3], [2, 4]), [3, 7]):\n"
        "        assert got == want\n",
        "import itertools\ndef check(candidate):\n"
        "    for got, want in zip(itertools.starmap(candidate, [(1, 2), (3, 4)]), [3, 7]):\n"
        "        assert got == want\n",
    ],
)
async def test_stop_iteration_does_not_end_the_tests_loops(executor: Executor, check: str) -> None:
    for source in (
        "def add(a, b):\n    raise StopIteration\n",
        "class StopIteration(Exception):\n    pass\ndef add(a, b):\n    raise StopIteration\n",
    ):
        assert await verdicts(executor, source, [TestCase(code=check)]) == ["RE"]


async def test_a_swallowed_exit_is_still_a_runtime_error(executor: Executor) -> None:
    check = "def check(candidate):\n    try:\n        candidate(None, None)\n    except:\n        pass\n"
    source = "import os\ndef add(a, b):\n    if a is None:\n        os._exit(0)\n    return a + b\n"
    assert await verdicts(executor, source, [TestCase(code=check)]) == ["RE"]


async def test_errors_in_the_test_that_depend_on_the_answer_blame_the_answer(executor: Executor) -> None:
    """UnboundLocalError (a NameError) because the candidate returned nothing to loop over is WA, not a broken
    test (IE); a test that really uses an undefined name is IE before the candidate even runs."""
    loop = "def check(candidate):\n    for v in candidate(1, 2):\n        last = v\n    assert last == 3\n"
    assert await verdicts(executor, "def add(a, b):\n    return []\n", [TestCase(code=loop)]) == ["WA"]
    undefined = "def check(candidate):\n    assert helper(candidate(1, 2)) == 3\n"
    outcome = await run(executor, "python", WRONG, [TestCase(code=undefined)], mode="function", entry_point="add")
    assert outcome.verdict == "IE" and "helper" in outcome.tests[0].message


@pytest.mark.parametrize(
    "returned, expected",
    [
        ("10 ** 5000", 3),
        ("10 ** 400", 2.5),
        ("range(10 ** 15)", [1]),
        ("[range(10 ** 7)] * 3", [1]),
        ("'a' * 16777190", "a"),
        ("(i for i in range(3))", [0, 1, 2, 3]),
    ],
)
async def test_huge_or_odd_return_values_cost_the_jail_not_the_executor(
    executor: Executor, returned: str, expected: object
) -> None:
    source = f"def add(a, b):\n    return {returned}\n"
    got = await verdicts(executor, source, [TestCase(input=[1, 2], expected=expected)])
    assert set(got) <= {"WA", "MLE", "TLE", "RE"}, got


async def test_values_handed_back_to_the_candidate_stay_data(executor: Executor) -> None:
    """A generator or a 100-deep list the candidate returned can be passed back to it by the test."""
    check = "def check(candidate):\n    x = candidate(1, 2)\n    assert candidate(x, 0) == 3\n"
    for body in ("    yield 1\n", "    v = 0\n    for _ in range(99):\n        v = [v]\n    return v\n"):
        assert await verdicts(executor, "def add(a, b):\n" + body, [TestCase(code=check)]) == ["WA"]


async def test_an_assertion_message_that_cannot_be_shown(executor: Executor) -> None:
    check = "def check(candidate):\n    r = candidate(1, 2)\n    assert r == 3, r\n"
    assert await verdicts(executor, "def add(a, b):\n    return 10 ** 5000\n", [TestCase(code=check)]) == ["WA"]


# --- found by a second red-team review --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, args, expected",
    [
        ("def add(n):\n    p = (1 + 5 ** 0.5) / 2\n    return p ** n / 5 ** 0.5\n", [80], 23416728348467685),  # Binet
        ("def add(a, b):\n    return float(a + b) + 100.0\n", [123456700, 89], 123456789),
    ],
)
async def test_an_integer_answer_is_exact(executor: Executor, source: str, args: list[int], expected: int) -> None:
    """A float within the tolerance of an integer answer is not that integer."""
    assert await verdicts(executor, source, [TestCase(input=args, expected=expected)]) == ["WA"]


async def test_an_unsorted_set_is_not_a_sorted_list(executor: Executor) -> None:
    source = "def add(values):\n    return set(values)\n"
    assert await verdicts(
        executor, source, [TestCase(input=[[5, 3, 5, 2, 3, 3, 9, 0, 123]], expected=[0, 2, 3, 5, 9, 123])]
    ) == ["WA"]


async def test_ordered_dicts_keep_their_order(executor: Executor) -> None:
    source = "from collections import OrderedDict\ndef add(a, b):\n    return OrderedDict([('b', 2), ('a', 1)])\n"
    check = (
        "from collections import OrderedDict\ndef check(candidate):\n"
        "    assert candidate(1, 2) == OrderedDict([('a', 1), ('b', 2)])\n"
    )
    assert await verdicts(executor, source, [TestCase(code=check)]) == ["WA"]


@pytest.mark.parametrize("raise_it", ["sys.exit(0)", "raise KeyboardInterrupt", "raise GeneratorExit"])
async def test_exits_are_not_exceptions_a_test_may_swallow(executor: Executor, raise_it: str) -> None:
    source = f"import sys\ndef add(a, b):\n    if a < 0:\n        {raise_it}\n    return a + b\n"
    check = (
        "def check(candidate):\n    assert candidate(1, 2) == 3\n"
        "    try:\n        candidate(-1, 0)\n    except Exception:\n        pass\n"
    )
    assert await verdicts(executor, source, [TestCase(code=check)]) == ["RE"]


async def test_deep_values_from_the_candidate_are_never_the_tests_fault(executor: Executor) -> None:
    """A 100-deep value handed back wrapped by the test, or a 101-deep raw reply, is never IE."""
    returned = "def add(a, b=0):\n    v = 0\n    for _ in range(100):\n        v = [v]\n    return v\n"
    wrap = "def check(candidate):\n    r = candidate(1)\n    assert candidate([[r]], 0) == 3\n"
    assert await verdicts(executor, returned, [TestCase(code=wrap)]) == ["WA"]
    raw = _RAW_REPLY + (
        "def add(a, b=0):\n    v = 0\n    for _ in range(101):\n        v = [v]\n"
        "    raw({'value': v})\n    import time\n    time.sleep(0.3)\n    return 0\n"
    )
    back = "def check(candidate):\n    r = candidate(1, 2)\n    assert candidate(r, 0) == 3\n"
    assert set(await verdicts(executor, raw, [TestCase(code=back)])) <= {"RE", "WA"}


# --- and the correct programs it must still accept ---------------------------------------------------------------


@pytest.mark.parametrize(
    "source, check",
    [
        # A large answer (664,579 primes) fits the message and result caps.
        (
            "def add(n, b=0):\n    s = bytearray([1]) * n\n    s[0] = s[1] = 0\n"
            "    for i in range(2, int(n ** 0.5) + 1):\n"
            "        if s[i]:\n            s[i * i :: i] = bytes(len(range(i * i, n, i)))\n"
            "    return [i for i in range(n) if s[i]]\n",
            "def check(candidate):\n    assert len(candidate(10 ** 7)) == 664579\n",
        ),
        # Exceptions derived from a built-in are caught by it (statistics.StatisticsError is a ValueError).
        (
            "import statistics\ndef add(xs, b=0):\n    return statistics.mean(xs)\n",
            "def check(candidate):\n    try:\n        candidate([])\n    except ValueError:\n        pass\n"
            "    else:\n        assert False\n",
        ),
        (
            "def add(a, b):\n    return b'\\xff'.decode()\n",
            "def check(candidate):\n    try:\n        candidate(1, 2)\n"
            "    except UnicodeDecodeError:\n        pass\n    else:\n        assert False\n",
        ),
        (
            "def add(a, b):\n    raise KeyError('k')\n",
            "def check(candidate):\n    try:\n        candidate(1, 2)\n"
            "    except KeyError as e:\n        assert e.args[0] == 'k'\n",
        ),
        # A generator that raises while it is consumed: the test sees the exception.
        (
            "def add(a, b):\n    yield 1\n    raise ZeroDivisionError\n",
            "def check(candidate):\n    try:\n"
            "        list(candidate(1, 2))\n    except ZeroDivisionError:\n        pass\n"
            "    else:\n        assert False\n",
        ),
        (
            "def add(a, b):\n    return {a: b}.keys()\n",
            "def check(candidate):\n    assert list(candidate(1, 2)) == [1]\n",
        ),
        (
            "from collections import deque\ndef add(a, b):\n    return deque([a, b])\n",
            "from collections import deque\ndef check(candidate):\n    assert candidate(1, 2) == deque([1, 2])\n",
        ),
        ("def add(a, b):\n    return {a, b}\n", "def check(candidate):\n    assert candidate(1, 2) == {1, 2}\n"),
        ("def add(a, b):\n    return (a, b)\n", "def check(candidate):\n    assert candidate(1, 2) == (1, 2)\n"),
        (
            "def add(a, b):\n    return float('nan')\n",
            "import math\ndef check(candidate):\n    assert math.isnan(candidate(1, 2))\n",
        ),
        (
            "def add(a, b):\n    return 10 ** 5000\n",
            "def check(candidate):\n    assert candidate(1, 2) == 10 ** 5000\n",
        ),
        (
            "def add(a, b):\n    return {1.5: 'x', None: 2}\n",
            "def check(candidate):\n    assert candidate(1, 2) == {1.5: 'x', None: 2}\n",
        ),
    ],
)
async def test_correct_programs_still_pass(executor: Executor, source: str, check: str) -> None:
    limits = Limits(cpu_time_s=5, wall_time_s=20, memory_mb=512, output_kb=64, processes=16)
    assert await verdicts(executor, source, [TestCase(code=check)], limits) == ["AC"]


async def test_the_candidates_prints_reach_stdout(executor: Executor) -> None:
    outcome = await run(
        executor,
        "python",
        "def add(a, b):\n    print('hello from the candidate')\n    return a + b\n",
        [TestCase(input=[1, 2], expected=3)],
        mode="function",
        entry_point="add",
    )
    assert outcome.verdict == "AC" and "hello from the candidate" in outcome.tests[0].stdout


async def test_a_recursion_error_the_function_raises_is_a_runtime_error(executor: Executor) -> None:
    source = "def add(a, b):\n    raise RecursionError('deep')\n"
    assert await verdicts(executor, source, [CODE_TEST, ARG_TEST]) == ["RE", "RE"]
