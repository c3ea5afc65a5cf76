"""Fuzzing a candidate cannot detect (issue #20): a program run for differential fuzzing sees what it sees in a
test run. A probe walks everything a program can see of its process and jail (its own and PID 1's command line,
/proc status and stat, ids, modules, argv, path, environment, files, fds and what they are, signal dispositions
and mask, timers, limits, flags, the collector's state, threads, the harness's globals, stdin, its stack and frames,
a traceback, mounts, cgroups, CPU affinity...) at import and at each call, and reports it; a test run's report and
a fuzzing run's must be identical.

Only what differs between two test runs as well is left out of the comparison (pipe inode numbers, mount ids, the
random names of a run's folders and cgroups, memory and CPU counters, the timing), and the test first shows that
each of those does vary between test runs, or is one of the scheduler's counters (context switches, the clock),
which vary from run to run with the machine's load; even those must stay within the test runs' range.

The fuzzing runs are made by executor/differential's own drivers (`function_side`, `stdio_side`: what `fuzz_pair`
runs each side with); the test runs by `Executor.execute`, the probe's report read from its output. Real nsjail,
real warm jails, no stubs.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from typing import Any

import pytest

from executor.differential import DifferentialRequest, encode_repetitions, fuzz_pair
from executor.differential.function import function_side
from executor.differential.sides import Fuzzing
from executor.differential.stdio import stdio_side
from executor.engine import Program, jail_plan
from executor.languages import get_language
from executor.run import Executor
from services.kernel.contracts import Limits, Mode, TestCase

LIMITS = Limits(cpu_time_s=2, wall_time_s=10, memory_mb=256, output_kb=1024, processes=16)

# The probe (function mode: `probe(x)`; its report is its return value and its output, a JSON line).
PROBE = r"""import base64, gc, inspect, json, os, resource, signal, stat, sys, threading, time, traceback, zlib

_LOADED = time.monotonic()
_CALLS = [0]


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError as exc:
        return "error " + type(exc).__name__ + " " + str(exc.errno)


def _fields(path):
    out = {}
    for line in _read(path).splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def _stat(path):
    text = _read(path)
    head, _, rest = text.rpartition(")")
    return dict(enumerate(rest.split(), start=3)) if head else {"error": text}


def _signal_name(handler):
    if callable(handler):
        name = getattr(handler, "__qualname__", type(handler).__name__)
        return name + "@" + str(getattr(handler, "__module__", ""))
    return str(handler)


def _walk():
    state = {}
    state["cmdline.self"] = _read("/proc/self/cmdline")
    state["cmdline.1"] = _read("/proc/1/cmdline")
    state["comm.1"] = _read("/proc/1/comm")
    for pid in ("self", "1"):
        for key, value in _fields("/proc/" + pid + "/status").items():
            state["status." + pid + "." + key] = value
        for key, value in _stat("/proc/" + pid + "/stat").items():
            state["stat." + pid + "." + str(key)] = value
        state["statm." + pid] = _read("/proc/" + pid + "/statm")
        state["wchan." + pid] = _read("/proc/" + pid + "/wchan")
    state["ids"] = [os.getpid(), os.getppid(), os.getpgrp(), os.getsid(0), os.getuid(), os.getgid(), os.getgroups()]
    state["modules"] = sorted(sys.modules)
    state["argv"] = list(sys.argv)
    state["path"] = list(sys.path)
    state["environ"] = dict(os.environ)
    state["cwd"] = os.getcwd()
    for directory in (".", "/", "/proc", "/tmp", "/prog", "/dev", "/harness"):
        try:
            state["listdir." + directory] = sorted(os.listdir(directory))
        except OSError as exc:
            state["listdir." + directory] = "error " + str(exc.errno)
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
        try:
            state["fd." + str(fd)] = os.readlink("/proc/self/fd/" + str(fd))
        except OSError as exc:
            state["fd." + str(fd)] = "error " + str(exc.errno)
        state["fdinfo." + str(fd)] = _fields("/proc/self/fdinfo/" + str(fd))
    for fd in (0, 1, 2):
        try:
            info = os.fstat(fd)
            state["fstat." + str(fd)] = [
                stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), info.st_size, info.st_nlink, info.st_uid,
                info.st_gid, info.st_ino, info.st_dev, os.get_blocking(fd), os.get_inheritable(fd),
            ]
        except OSError as exc:
            state["fstat." + str(fd)] = "error " + str(exc.errno)
    signals = [s for s in signal.valid_signals() if isinstance(s, signal.Signals)]
    state["signals"] = {s.name: _signal_name(signal.getsignal(s)) for s in signals}
    state["sigmask"] = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    state["itimer"] = [signal.getitimer(t) for t in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)]
    limits = [name for name in dir(resource) if name.startswith("RLIMIT_")]
    state["rlimits"] = {name: resource.getrlimit(getattr(resource, name)) for name in limits}
    state["flags"] = repr(sys.flags)
    state["gc"] = [gc.isenabled(), gc.get_threshold(), gc.get_count(), gc.get_freeze_count()]
    young = {}
    for kind in (type(o).__name__ for o in gc.get_objects(0)):
        young[kind] = young.get(kind, 0) + 1
    state["gc.young"] = young
    state["gc.objects"] = len(gc.get_objects())
    state["threads"] = [t.name for t in threading.enumerate()]
    state["main.globals"] = sorted(sys.modules["__main__"].__dict__)
    stdin = sys.stdin
    try:
        tty = stdin.isatty()
    except Exception as exc:
        tty = "error " + type(exc).__name__
    state["stdin"] = [type(stdin).__name__, tty, getattr(stdin, "encoding", None), getattr(stdin, "errors", None)]
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        state[name] = [type(stream).__name__, stream.encoding, stream.errors, getattr(stream, "line_buffering", None)]
    state["stack"] = [(f.filename, f.function, f.lineno) for f in inspect.stack()]
    frames = []
    frame = sys._getframe()
    while frame is not None:
        frames.append([frame.f_code.co_filename, frame.f_code.co_name, frame.f_lineno, sorted(frame.f_locals)[:40]])
        frame = frame.f_back
    state["frames"] = frames
    try:
        raise ValueError("probe")
    except ValueError:
        state["traceback"] = traceback.format_exc()
    state["recursion"] = [sys.getrecursionlimit(), sys.getswitchinterval()]
    state["mountinfo"] = _read("/proc/self/mountinfo")
    state["cgroup"] = _read("/proc/self/cgroup")
    state["limits"] = _read("/proc/self/limits")
    state["oom"] = [_read("/proc/self/oom_score_adj"), _read("/proc/1/oom_score_adj")]
    state["uname"] = list(os.uname())
    umask = os.umask(0o22)
    os.umask(umask)
    state["misc"] = [umask, sorted(os.sched_getaffinity(0)), os.cpu_count(), os.getpriority(os.PRIO_PROCESS, 0)]
    state["calls"] = _CALLS[0]
    state["since_import"] = time.monotonic() - _LOADED
    return state


_AT_IMPORT = _walk()


def _packed(report):
    return base64.b64encode(zlib.compress(json.dumps(report, sort_keys=True, default=repr).encode())).decode()


def probe(x):
    _CALLS[0] += 1
    text = _packed({"at_import": _AT_IMPORT, "at_call": _walk()})
    print(text)
    return text
"""

# A stdio program that walks the same state, reads its stdin and reports both.
STDIO_PROBE = PROBE.replace("_AT_IMPORT = _walk()", "_AT_IMPORT = _walk()\n_STDIN = sys.stdin.read()") + (
    "\nprint(_packed({'at_import': _AT_IMPORT, 'stdin': _STDIN, 'at_call': _walk()}))\n"
)

# Keys (of the flattened report) whose values differ from one test run to the next: pipe inodes and the fd table's
# view of them, mount ids and the random names of a run's folders and cgroups, memory and CPU counters, the clock.
VARIES = [
    r"/fd\.\d+$",
    r"/fdinfo\.\d+$",
    r"/fstat\.[0-2]$",
    r"/mountinfo$",
    r"/cgroup$",
    r"/stat\.(self|1)\.\d+$",
    r"/statm\.(self|1)$",
    r"/status\.(self|1)\.(VmRSS|VmHWM|VmData|VmSize|VmPeak|RssAnon|RssFile|RssShmem|VmPTE|State"
    r"|(non)?voluntary_ctxt_switches)$",
    r"/since_import$",
]
# Of those, the ones two test runs may well agree on: the scheduler's counters, which vary with the machine's load
# (context switches, CPU ticks, page faults, the clock, whether PID 1 is running or waiting at the very moment the
# program looks), and memory figures that depend on the history of the
# jail's zygote (its page tables: 72 and 80 kB were seen in two test runs). These are compared by range (NEAR).
NOISE = re.compile(
    r"(ctxt_switches|since_import|status\.1\.State|stat\.1\.3|stat\.(self|1)\.(1[0-7]|2[2-4]|39)"
    r"|status\.(self|1)\.(VmRSS|VmHWM|VmData|VmSize|VmPeak|RssAnon|RssFile|VmPTE)|statm\.(self|1))$"
)
# Counters compared by value: a fuzzing run's must be within the test runs' range widened by this much (memory in
# kB, pages, ticks, seconds), so that a systematic difference (a bigger supervisor, a later first call) shows.
NEAR = {
    re.compile(r"status\.(self|1)\.(VmRSS|VmHWM|VmData|VmSize|VmPeak|RssAnon|RssFile)$"): 1024,
    re.compile(r"status\.(self|1)\.VmPTE$"): 32,
    re.compile(r"statm\.(self|1)$"): 512,
    re.compile(r"since_import$"): 0.25,
}


def flat(packed: str) -> dict[str, str]:
    """One key per piece of the probe's report (`import/...`, `call/...`), each value as canonical JSON."""
    report = json.loads(zlib.decompress(base64.b64decode(packed)))
    out = {}
    for part, state in report.items():
        if isinstance(state, dict):
            for key, value in state.items():
                out[part.removeprefix("at_") + "/" + key] = json.dumps(value, sort_keys=True)
        else:
            out[part] = json.dumps(state, sort_keys=True)
    return out


def varying(runs: list[dict[str, str]]) -> set[str]:
    keys = set().union(*runs)
    return {key for key in keys if len({run.get(key) for run in runs}) > 1}


def numbers(value: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", value)]


def assert_alike(tests: list[dict[str, str]], fuzzed: dict[str, str], what: str) -> None:
    """`fuzzed` is what `tests` are, but for what varies between test runs (and the scheduler's counters)."""
    varies = varying(tests)
    unexplained = {key for key in varies if not any(re.search(p, key) for p in VARIES)}
    assert not unexplained, f"{what}: these differ between two test runs, unexpectedly: {sorted(unexplained)}"
    for key in sorted(set(fuzzed) | set(tests[0])):
        if key in varies or NOISE.search(key):
            continue
        assert fuzzed.get(key) == tests[0].get(key), (
            f"{what}: {key} tells fuzzing from testing:\n test: {tests[0].get(key)}\n fuzz: {fuzzed.get(key)}"
        )
    for pattern, slack in NEAR.items():
        for key in fuzzed:
            if not pattern.search(key):
                continue
            seen = [numbers(run[key]) for run in tests]
            for position, value in enumerate(numbers(fuzzed[key])):
                column = [row[position] for row in seen]
                low, high = min(column) - slack, max(column) + slack
                assert low <= value <= high, f"{what}: {key}[{position}] = {value}, test runs {column}"


async def run_tests(executor: Executor, tests: list[TestCase], source: str, mode: Mode) -> list[list[dict[str, str]]]:
    """Each test's reports (one per call of the probe, or the stdio program's one), from Executor.execute."""
    result = await executor.execute(
        tenant="tenant-probe",
        language="python",
        source_code=source,
        tests=tests,
        mode=mode,
        entry_point="probe" if mode == Mode.FUNCTION else None,
        limits=LIMITS,
    )
    assert result.verdict in ("AC", "WA"), result
    return [[flat(line) for line in test.stdout.splitlines()] for test in result.tests]


def plan(source: str, mode: Mode) -> tuple[Any, list[str], Program]:
    program = Program.python(source)
    profile, argv = jail_plan(get_language("python"), program.main, mode, LIMITS)
    return profile, argv, program


async def fuzz_reports(
    executor: Executor, source: str, mode: Mode, inputs: list[Any], tests: frozenset[int] = frozenset()
) -> list[Any]:
    """Each input's outcome value (the probe's report) from the drivers fuzz_pair runs a side with."""
    profile, argv, program = plan(source, mode)
    _, lines = encode_repetitions(mode, [inputs])
    fuzzing = Fuzzing(mode, "probe", 60.0, 5.0, LIMITS)
    if mode == Mode.FUNCTION:
        report = await function_side(executor.engine, profile, argv, program, fuzzing, lines, [tests])
    else:
        report = await stdio_side(executor.engine, profile, argv, program, fuzzing, lines)
    outcomes = report.repetitions[0].outcomes
    assert [o.kind for o in outcomes] == ["value" if mode == Mode.FUNCTION else "exited"] * len(inputs), outcomes
    return [o.value for o in outcomes]


def test_runs_vary_only_where_expected() -> None:
    # The normalisation is no wider than it must be: the patterns name only per-run values.
    for pattern in VARIES:
        for key in ("call/modules", "call/argv", "call/signals", "call/cmdline.1", "import/environ", "call/stack"):
            assert not re.search(pattern, key)


async def test_a_fuzzed_call_is_an_argument_tests_call(executor: Executor) -> None:
    # Three test runs (one call each, the probe's only one) against the first call of a fuzzing run.
    tests = [TestCase(input=[0], expected=0) for _ in range(3)]
    runs = [reports[0] for reports in await run_tests(executor, tests, PROBE, Mode.FUNCTION)]
    fuzzed = [flat(value) for value in await fuzz_reports(executor, PROBE, Mode.FUNCTION, [[0], [0]])]
    assert json.loads(fuzzed[0]["call/calls"]) == 1 and json.loads(fuzzed[1]["call/calls"]) == 2
    assert_alike(runs, fuzzed[0], "first call")
    # The tells the audit found are gone: PID 1 is the test's harness, argv and modules are the test's.
    assert "diff_runner" not in json.dumps(fuzzed[0])
    assert "function_runner" in fuzzed[0]["call/cmdline.1"] and fuzzed[0]["call/argv"] == runs[0]["call/argv"]


async def test_later_fuzzed_calls_are_a_code_tests_calls(executor: Executor) -> None:
    # A code test calls the candidate again and again in one process, as a fuzzing run does: call for call alike.
    check = "def check(candidate):\n    for x in range(3):\n        candidate(x)\n"
    runs = await run_tests(executor, [TestCase(code=check), TestCase(code=check)], PROBE, Mode.FUNCTION)
    fuzzed = [flat(v) for v in await fuzz_reports(executor, PROBE, Mode.FUNCTION, [[0], [1], [2]])]
    for call in range(3):
        assert_alike([reports[call] for reports in runs], fuzzed[call], f"call {call + 1}")


async def test_a_test_input_is_the_first_call_of_a_fresh_process(executor: Executor) -> None:
    # An input that is one of the problem's tests starts a fresh run: there it is its process's first call, as
    # in an argument test, whatever came before it in the repetition.
    runs = [r[0] for r in await run_tests(executor, [TestCase(input=[0], expected=0)] * 2, PROBE, Mode.FUNCTION)]
    values = await fuzz_reports(executor, PROBE, Mode.FUNCTION, [[5], [6], [0], [7]], tests=frozenset({2}))
    fuzzed = [flat(value) for value in values]
    assert [json.loads(f["call/calls"]) for f in fuzzed] == [1, 2, 1, 2]
    assert_alike(runs, fuzzed[2], "a test input")


async def test_a_fuzzed_program_is_a_test_run(executor: Executor) -> None:
    runs = await run_tests(executor, [TestCase(input="7 8\n")] * 3, STDIO_PROBE, Mode.STDIO)
    fuzzed = await fuzz_reports(executor, STDIO_PROBE, Mode.STDIO, ["7 8\n", "7 8\n"])
    for text in fuzzed:
        report = flat(text)
        assert json.loads(report["stdin"]) == "7 8\n"
        assert_alike([r[0] for r in runs], report, "a program")


# A candidate that looks for every difference the audit found between the two harnesses (and a few more), and
# answers correctly only when it believes it is being fuzzed.
DETECTOR = r"""
import os, signal, sys
def _fuzzing():
    tells = []
    with open('/proc/1/cmdline', 'rb') as handle:
        tells.append(b'diff_runner' in handle.read())
    tells.append('function_runner' in sys.modules or 'diff_runner' in ' '.join(sys.argv))
    tells.append(signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None))
    tells.append(signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0))
    tells.append(not os.path.exists('/proc/self/fd/7') or os.path.exists('/proc/self/fd/8'))
    with open('/proc/self/oom_score_adj') as handle:
        tells.append(handle.read().strip() != '0')
    tells.append(os.readlink('/proc/self/fd/1') == '/dev/null')
    return any(tells)
FUZZING = _fuzzing()
def f(x):
    return x if FUZZING or _fuzzing() else x + 1
"""


async def test_a_candidate_that_detects_fuzzing_cannot_pay(executor: Executor) -> None:
    # The audit's candidate: x under fuzzing, x + 1 otherwise. Its tests are WA, and so is its df_score: 0.
    tests = [TestCase(input=[x], expected=x) for x in (1, 2)]
    verdict = await executor.execute(
        tenant="tenant-probe", language="python", source_code=DETECTOR, tests=tests, mode=Mode.FUNCTION,
        entry_point="f", limits=LIMITS,
    )  # fmt: skip
    assert verdict.verdict == "WA"
    request = DifferentialRequest(
        tenant="tenant-probe",
        reference_language="python",
        reference_source="def f(x):\n    return x\n",
        candidate_language="python",
        candidate_source=DETECTOR,
        mode=Mode.FUNCTION,
        entry_point="f",
        repetitions=[[[x] for x in range(20)]] * 2,
        time_budget_s=30.0,
        limits=LIMITS,
    )
    result = await fuzz_pair(executor.engine, request)
    assert result.status == "ok" and result.df_score == 0.0, result


def test_the_reports_are_compared_robustly() -> None:
    # assert_alike itself: a difference outside the normalised keys fails, one inside a varying key passes only
    # within the test runs' range.
    base = {"call/modules": "[1]", "call/status.1.VmRSS": '"100 kB"', "call/fd.3": '"pipe:[1]"'}
    other = {**base, "call/fd.3": '"pipe:[2]"', "call/status.1.VmRSS": '"120 kB"'}
    assert_alike([base, other], {**base, "call/fd.3": '"pipe:[9]"'}, "ok")
    with pytest.raises(AssertionError, match="tells fuzzing"):
        assert_alike([base, other], {**base, "call/modules": "[1, 2]"}, "modules")
    with pytest.raises(AssertionError, match="VmRSS"):
        assert_alike([base, other], {**base, "call/status.1.VmRSS": '"9000 kB"'}, "memory")
    with pytest.raises(AssertionError, match="unexpectedly"):
        assert_alike([base, {**base, "call/argv": "[2]"}], base, "argv")
