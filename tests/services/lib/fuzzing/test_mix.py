"""The problem's own tests among the fuzzing inputs (services/lib/fuzzing/mix.py)."""

from __future__ import annotations

from services.kernel.contracts import Mode, TestCase
from services.lib.fuzzing import MAX_TEST_INPUTS, generate_repetitions, inputs_of_tests, mix_tests, parse_spec

SPEC = parse_spec({"kind": "function", "args": [{"name": "x", "type": {"type": "int", "min": 0, "max": 9}}]})


def test_inputs_of_argument_code_and_stdio_tests() -> None:
    tests = [
        TestCase(input=[1, [2, 3]], expected=0),
        TestCase(input=[1, [2, 3]], expected=1),  # the same input twice: once
        TestCase(input=[True, [2, 3]], expected=1),  # True is not 1: another input
        TestCase(code="def check(candidate):\n    assert candidate(4, (5,)) == 1\n    assert f(6, {7}) == 2\n"),
        TestCase(code="assert candidate(*xs) == 1\nassert candidate(1, y=2)\nassert other(8, 9)\n"),  # not literal
        TestCase(code="def check(:\n"),  # does not parse: nothing, no error
    ]
    assert inputs_of_tests(Mode.FUNCTION, "f", tests) == [[1, [2, 3]], [True, [2, 3]], [4, (5,)], [6, {7}]]
    # Without an entry point, only `candidate(...)` calls count.
    assert inputs_of_tests(Mode.FUNCTION, None, tests[3:4]) == [[4, (5,)]]
    stdio = [TestCase(input="1 2\n"), TestCase(input="1 2\n"), TestCase(input="3\n"), TestCase(input=None)]
    assert inputs_of_tests(Mode.STDIO, None, stdio) == ["1 2\n", "3\n"]
    many = [TestCase(input=[i], expected=i) for i in range(MAX_TEST_INPUTS + 10)]
    assert len(inputs_of_tests(Mode.FUNCTION, "f", many)) == MAX_TEST_INPUTS


def test_every_repetition_holds_every_test_input_where_it_says() -> None:
    generated = generate_repetitions(SPEC, 50, 4, 7)
    tests = [[100], [200], [300]]
    mixed, positions = mix_tests(generated, tests, 7)
    assert len(mixed) == 4
    for rep, (inputs, places) in enumerate(zip(mixed, positions, strict=True)):
        assert len(inputs) == 53 and places == sorted(places) and len(set(places)) == 3
        assert sorted(inputs[p] for p in places) == tests
        # The generated inputs are all still there, in their order.
        assert [x for i, x in enumerate(inputs) if i not in places] == generated[rep]
    # Drawn from the seed: the same seed, the same places; another seed, other places (for one repetition or more).
    assert mix_tests(generated, tests, 7) == (mixed, positions)
    assert mix_tests(generated, tests, 8)[1] != positions
    # Not always at the same places in every repetition.
    assert len({tuple(places) for places in positions}) > 1


def test_no_tests_changes_nothing() -> None:
    generated = generate_repetitions(SPEC, 10, 2, 0)
    assert mix_tests(generated, [], 0) == (generated, [[], []])
