"""Verdicts in every language, from real programs in the real sandbox: AC, WA, CE, RE, TLE, MLE, OLE."""

from __future__ import annotations

import signal

import pytest

from executor.run import Executor
from services.kernel.contracts import Checker, Limits, TestCase
from services.lib.sandbox import RunResult, classify
from tests.executor.conftest import FAST, SHORT_WALL, SUM_SOURCES, run

LANGUAGES = ["python", "c", "cpp", "java"]

WRONG_SUM = {
    "python": "a, b = map(int, input().split())\nprint(a - b)\n",
    "c": '#include <stdio.h>\nint main(void) { int a, b; scanf("%d %d", &a, &b); printf("%d\\n", a - b); }\n',
    "cpp": "#include <iostream>\nint main() { int a, b; std::cin >> a >> b; std::cout << a - b << '\\n'; }\n",
    "java": "import java.util.Scanner;\npublic class Main { public static void main(String[] args) {\n"
    "  Scanner in = new Scanner(System.in); System.out.println(in.nextInt() - in.nextInt()); } }\n",
}

COMPILE_ERROR = {
    "python": "def broken(:\n    pass\n",
    "c": "int main(void) { return undeclared_variable; }\n",
    "cpp": "#include <vector>\nint main() { std::vector<int> v = 42 }\n",
    "java": 'public class Main { public static void main(String[] args) { int x = "text"; } }\n',
}
COMPILE_ERROR_TEXT = {
    "python": "SyntaxError",
    "c": "undeclared_variable",
    "cpp": "error",
    "java": "incompatible types",
}

UNCAUGHT_ERROR = {
    "python": "raise ValueError('boom')\n",
    "c": "#include <stdlib.h>\nint main(void) { abort(); }\n",
    "cpp": '#include <stdexcept>\nint main() { throw std::runtime_error("boom"); }\n',
    "java": 'public class Main { public static void main(String[] a) { throw new IllegalStateException("boom"); } }\n',
}
UNCAUGHT_ERROR_TEXT = {
    "python": "ValueError: boom",
    "c": "signal",
    "cpp": "std::runtime_error",
    "java": "java.lang.IllegalStateException: boom",
}

EXIT_THREE = {
    "python": "import sys\nsys.exit(3)\n",
    "c": "int main(void) { return 3; }\n",
    "cpp": "int main() { return 3; }\n",
    "java": "public class Main { public static void main(String[] a) { System.exit(3); } }\n",
}

BUSY_LOOP = {
    "python": "while True:\n    pass\n",
    "c": "int main(void) { volatile unsigned long n = 0; for (;;) n++; }\n",
    "cpp": "int main() { volatile unsigned long n = 0; for (;;) n++; }\n",
    "java": "public class Main { static volatile long n; public static void main(String[] a) { for (;;) n++; } }\n",
}

SLEEP_PAST_WALL = {
    "python": "import time\ntime.sleep(30)\n",
    "c": "#include <unistd.h>\nint main(void) { sleep(30); return 0; }\n",
    "cpp": "#include <thread>\n#include <chrono>\n"
    "int main() { std::this_thread::sleep_for(std::chrono::seconds(30)); }\n",
    "java": "public class Main { public static void main(String[] a) throws Exception { Thread.sleep(30000); } }\n",
}

MEMORY_HOG = {
    "python": "blocks = []\nwhile True:\n    blocks.append(bytearray(b'x' * (1 << 20)))\n",
    "c": "#include <stdlib.h>\n#include <string.h>\n"
    "int main(void) { for (;;) { char *p = malloc(1 << 20); if (!p) return 1; memset(p, 7, 1 << 20); } }\n",
    "cpp": "#include <vector>\n"
    "int main() { std::vector<std::vector<char>> v; for (;;) v.emplace_back(1 << 20, 'x'); }\n",
    "java": "import java.util.*;\npublic class Main { public static void main(String[] a) {\n"
    "  List<long[]> l = new ArrayList<>(); while (true) l.add(new long[1 << 17]); } }\n",
}

OUTPUT_FLOOD = {
    "python": "line = 'x' * 1000\nwhile True:\n    print(line)\n",
    "c": '#include <stdio.h>\nint main(void) { for (;;) puts("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); }\n',
    "cpp": '#include <iostream>\nint main() { for (;;) std::cout << "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\\n"; }\n',
    "java": "public class Main { public static void main(String[] a) {\n"
    '  while (true) System.out.println("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); } }\n',
}

SEGFAULT = {
    "c": "int main(int argc, char **argv) { int *p = (int *)(long)(argc - 1); return *p; }\n",
    "cpp": "int main(int argc, char **argv) { int *p = (int *)(long)(argc - 1); return *p; }\n",
}


@pytest.mark.parametrize("language", LANGUAGES)
async def test_accepted(executor: Executor, language: str) -> None:
    outcome = await run(
        executor,
        language,
        SUM_SOURCES[language],
        [TestCase(input="1 2\n", expected="3\n", public=True), TestCase(input="-5 5\n", expected="0")],
    )
    assert outcome.verdict == "AC", outcome
    assert (outcome.passed, outcome.total) == (2, 2)
    assert [t.status for t in outcome.tests] == ["AC", "AC"]
    assert [t.public for t in outcome.tests] == [True, False]
    assert all(t.exit_code == 0 and t.memory_kb > 0 for t in outcome.tests)
    assert outcome.toolchain


@pytest.mark.parametrize("language", LANGUAGES)
async def test_wrong_answer(executor: Executor, language: str) -> None:
    outcome = await run(executor, language, WRONG_SUM[language], stdin="5 2\n", expected="7\n")
    assert outcome.verdict == "WA"
    assert outcome.tests[0].message == "token 1: expected '7', got '3'"
    assert outcome.tests[0].stdout == "3\n"


@pytest.mark.parametrize("language", LANGUAGES)
async def test_compile_error(executor: Executor, language: str) -> None:
    outcome = await run(executor, language, COMPILE_ERROR[language], stdin="1 2\n", expected="3\n")
    assert outcome.verdict == "CE"
    assert (outcome.passed, outcome.tests) == (0, [])
    assert outcome.total == 1
    assert COMPILE_ERROR_TEXT[language] in outcome.compile_output


@pytest.mark.parametrize("language", LANGUAGES)
async def test_runtime_error_uncaught(executor: Executor, language: str) -> None:
    outcome = await run(executor, language, UNCAUGHT_ERROR[language])
    assert outcome.verdict == "RE", outcome
    assert UNCAUGHT_ERROR_TEXT[language] in outcome.tests[0].message


@pytest.mark.parametrize("language", LANGUAGES)
async def test_runtime_error_nonzero_exit(executor: Executor, language: str) -> None:
    outcome = await run(executor, language, EXIT_THREE[language])
    assert outcome.verdict == "RE"
    assert outcome.tests[0].exit_code == 3
    assert "exit code 3" in outcome.tests[0].message


@pytest.mark.parametrize("language", ["c", "cpp"])
async def test_runtime_error_segfault(executor: Executor, language: str) -> None:
    outcome = await run(executor, language, SEGFAULT[language])
    assert outcome.verdict == "RE"
    assert outcome.tests[0].exit_code is None
    assert "SIGSEGV" in outcome.tests[0].message


@pytest.mark.parametrize("language", LANGUAGES)
async def test_time_limit_cpu(executor: Executor, language: str) -> None:
    outcome = await run(executor, language, BUSY_LOOP[language])
    assert outcome.verdict == "TLE"
    assert "CPU time" in outcome.tests[0].message


@pytest.mark.parametrize("language", LANGUAGES)
async def test_time_limit_wall(executor: Executor, language: str) -> None:
    outcome = await run(executor, language, SLEEP_PAST_WALL[language], limits=SHORT_WALL)
    assert outcome.verdict == "TLE"
    assert "wall time" in outcome.tests[0].message


@pytest.mark.parametrize("language", LANGUAGES)
async def test_memory_limit(executor: Executor, language: str) -> None:
    outcome = await run(executor, language, MEMORY_HOG[language])
    assert outcome.verdict == "MLE", outcome


@pytest.mark.parametrize("language", LANGUAGES)
async def test_output_limit(executor: Executor, language: str) -> None:
    outcome = await run(executor, language, OUTPUT_FLOOD[language])
    assert outcome.verdict == "OLE"
    assert len(outcome.tests[0].stdout) <= FAST.output_kb * 1024


async def test_memory_is_measured_per_program(executor: Executor) -> None:
    small = await run(executor, "python", "print(1)\n")
    large = await run(executor, "python", "x = b'x' * (70 << 20)\nprint(len(x))\n")
    assert small.verdict == large.verdict == "AC"
    assert small.tests[0].memory_kb < 30 * 1024
    assert large.tests[0].memory_kb > 60 * 1024


@pytest.mark.parametrize(
    ("kind", "printed", "expected", "verdict"),
    [
        ("exact", "3\n", "3\n", "AC"),
        ("exact", "3", "3\n", "WA"),
        ("exact", "3 \n", "3\n", "WA"),
        ("lines", "a  \nb\n\n\n", "a\nb\n", "AC"),
        ("lines", " a\nb\n", "a\nb\n", "WA"),
        ("tokens", "1   2\n3", "1 2 3\n", "AC"),
        ("tokens", "1 2", "1 2 3\n", "WA"),
        ("float", "0.3333334 x", "0.333333333 x\n", "AC"),
        ("float", "0.3334 x", "0.333333333 x\n", "WA"),
    ],
)
async def test_checker_kinds(executor: Executor, kind: str, printed: str, expected: str, verdict: str) -> None:
    source = f"import sys\nsys.stdout.write({printed!r})\n"
    outcome = await run(executor, "python", source, expected=expected, checker=Checker(kind=kind))  # type: ignore[arg-type]
    assert outcome.verdict == verdict


async def test_float_checker_tolerance_is_configurable(executor: Executor) -> None:
    source = "print(1.05)\n"
    loose = await run(executor, "python", source, expected="1.0", checker=Checker(kind="float", abs_tol=0.1))
    strict = await run(executor, "python", source, expected="1.0", checker=Checker(kind="float", abs_tol=0.01))
    assert (loose.verdict, strict.verdict) == ("AC", "WA")


@pytest.mark.parametrize(
    "source",
    [
        # Any public class name works: the file is named after it and it is the class that runs.
        "public class Solution { public static void main(String[] a) { System.out.println(42); } }\n",
        # No public class: the class with main() is found in the compiled classes.
        "class Helper { static int v() { return 42; } }\n"
        "class Program { public static void main(String[] a) { System.out.println(Helper.v()); } }\n",
        # Several classes with main(): the public one runs.
        "class Other { public static void main(String[] a) { System.out.println(0); } }\n"
        "/* public class Decoy {} */\n"
        'public final class Runner { static String s = "public class Fake {"; \n'
        "  public static class Inner {}\n"
        "  public static void main(String[] a) { System.out.println(42); } }\n",
        # A package: the class runs by its binary name.
        "package org.example.app;\n"
        "public class App { public static void main(String[] a) { System.out.println(42); } }\n",
    ],
)
async def test_java_main_class_is_found(executor: Executor, source: str) -> None:
    outcome = await run(executor, "java", source, expected="42")
    assert outcome.verdict == "AC", outcome.compile_output or outcome.tests


async def test_first_non_accepted_test_decides(executor: Executor) -> None:
    source = "n = int(input())\nif n == 1: print(1)\nelif n == 2: print('wrong')\nelse:\n    while True: pass\n"
    wa_first = await run(
        executor,
        "python",
        source,
        [
            TestCase(input="1", expected="1"),
            TestCase(input="2", expected="2"),
            TestCase(input="3", expected="3"),
            TestCase(input="1", expected="1"),
        ],
    )
    assert wa_first.verdict == "WA"
    assert [t.status for t in wa_first.tests] == ["AC", "WA", "TLE", "AC"]
    assert [t.index for t in wa_first.tests] == [0, 1, 2, 3]
    assert (wa_first.passed, wa_first.total) == (2, 4)
    tle_first = await run(
        executor,
        "python",
        source,
        [TestCase(input="1", expected="1"), TestCase(input="3", expected="3"), TestCase(input="2", expected="2")],
    )
    assert tle_first.verdict == "TLE"


async def test_no_expected_output_means_exit_status_decides(executor: Executor) -> None:
    ok = await run(executor, "python", "print(input()[::-1])\n", stdin="abc\n")
    failed = await run(executor, "python", "import sys\nprint('partial')\nsys.exit(2)\n")
    assert ok.verdict == "AC"
    assert ok.tests[0].stdout == "cba\n"
    assert failed.verdict == "RE"
    assert failed.tests[0].stdout == "partial\n"


async def test_stderr_is_kept_apart_from_stdout(executor: Executor) -> None:
    source = "import sys\nprint('out')\nprint('err', file=sys.stderr)\n"
    outcome = await run(executor, "python", source, expected="out")
    assert outcome.verdict == "AC"
    # Only the program's own lines: none of nsjail's log or the loader's warnings.
    assert outcome.tests[0].stderr == "err\n"


async def test_large_stdin_is_fed_completely(executor: Executor) -> None:
    numbers = list(range(200_000))
    outcome = await run(
        executor,
        "c",
        '#include <stdio.h>\nint main(void) { long x, s = 0; while (scanf("%ld", &x) == 1) s += x;\n'
        '  printf("%ld\\n", s); }\n',
        stdin=" ".join(map(str, numbers)),
        expected=str(sum(numbers)),
    )
    assert outcome.verdict == "AC"


async def test_program_that_ignores_stdin(executor: Executor) -> None:
    outcome = await run(executor, "python", "print('done')\n", stdin="x" * 5_000_000, expected="done")
    assert outcome.verdict == "AC"


async def test_invalid_requests_raise(executor: Executor) -> None:
    with pytest.raises(ValueError, match="unknown language"):
        await run(executor, "brainfuck", "+")
    with pytest.raises(ValueError, match="Python only"):
        await run(
            executor, "c", SUM_SOURCES["c"], [TestCase(input=[1, 2], expected=3)], mode="function", entry_point="f"
        )
    with pytest.raises(ValueError, match="stdio input must be text"):
        await run(executor, "python", "pass", [TestCase(input=[1, 2])])
    with pytest.raises(ValueError, match="cpu_time_s\n  Input should be greater than 0"):
        Limits(cpu_time_s=0)
    with pytest.raises(ValueError, match="kind\n  Input should be 'exact', 'lines', 'tokens' or 'float'"):
        Checker(kind="regex")  # type: ignore[arg-type]


# --- classify(): the order of the verdict rules, on the runs that are hard to provoke on an idle host ---------

_LIMIT_MB = 128


def _killed_run(
    *, signal_number: int | None, peak_kb: int, cpu_s: float = 0.3, wall_timeout: bool = False
) -> RunResult:
    return RunResult(
        exit_code=None,
        signal=signal_number,
        cpu_s=cpu_s,
        wall_s=2.0,
        memory_kb=peak_kb,
        stdout=b"",
        stderr=b"",
        wall_timeout=wall_timeout,
    )


@pytest.mark.parametrize(
    ("run_result", "verdict"),
    [
        # An OOM kill.
        (_killed_run(signal_number=signal.SIGKILL, peak_kb=_LIMIT_MB * 1024), "MLE"),
        # A program that stalled at its memory limit (reclaim, refaults) until a clock stopped it.
        (_killed_run(signal_number=signal.SIGKILL, peak_kb=_LIMIT_MB * 1024, cpu_s=1.0), "MLE"),
        (_killed_run(signal_number=signal.SIGXCPU, peak_kb=_LIMIT_MB * 1024, cpu_s=1.0), "MLE"),
        (_killed_run(signal_number=signal.SIGKILL, peak_kb=_LIMIT_MB * 1024, wall_timeout=True), "MLE"),
        # Clocks, with memory well under the limit.
        (_killed_run(signal_number=signal.SIGKILL, peak_kb=10_000, wall_timeout=True), "TLE"),
        (_killed_run(signal_number=signal.SIGKILL, peak_kb=10_000, cpu_s=1.0), "TLE"),
        (_killed_run(signal_number=signal.SIGXCPU, peak_kb=10_000, cpu_s=1.0), "TLE"),
        (_killed_run(signal_number=signal.SIGSEGV, peak_kb=10_000), "RE"),
    ],
)
def test_classify_puts_a_stall_at_the_memory_limit_down_to_memory(run_result: RunResult, verdict: str) -> None:
    status, _ = classify(run_result, cpu_time_s=1.0, memory_mb=_LIMIT_MB, output_limit=64 * 1024)
    assert status == verdict
