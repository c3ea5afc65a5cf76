"""CodeBLEU of the code-similarity library: both recipes against the codebleu package, and the same value in every
process whatever PYTHONHASHSEED is."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from codebleu import calc_codebleu
from codebleu.dataflow_match import dfg_function, get_data_flow
from hypothesis import given, settings
from hypothesis import strategies as st

from services.kernel.contracts import Language
from services.lib.codesim import (
    CodeBleuRecipe,
    CodeBleuScore,
    GrammarUnavailable,
    UnsupportedLanguage,
    blank_comments,
    code_tokens,
    codebleu,
    codebleu_score,
)
from services.lib.codesim.code_bleu import deterministic_sets

ROOT = Path(__file__).resolve().parents[4]

# Pairs (reference, candidate) whose raw package value is the same under PYTHONHASHSEED 0..31 (checked by hand),
# with a data-flow match strictly between 0 and 1.
DETERMINISTIC = {
    "python": (
        "def solve(a, b):\n    total = a * a + b\n    if total > b:\n        total = total - b\n    return total\n",
        "def solve(x, y):\n    s = x + y\n    if s > x:\n        s = s * 2\n    print(s)\n    return s\n",
    ),
    "c": (
        "int solve(int n) {\n  int total = 0;\n  for (int i = 0; i < n; i++) total += i * i;\n  return total;\n}\n",
        "int solve(int m) {\n  int acc = 1;\n  int j = 0;\n  while (j < m) { acc = acc + j; j++; }\n  return acc;\n}\n",
    ),
    "cpp": (
        "#include <vector>\nlong solve(std::vector<int> v) {\n  long total = 0;\n"
        "  for (int x : v) total += x * x;\n  return total;\n}\n",
        "#include <vector>\nlong solve(const std::vector<int>& v) {\n  long s = 0;\n"
        "  for (size_t i = 0; i < v.size(); ++i) s += v[i];\n  return s;\n}\n",
    ),
    "java": (
        "class Main {\n  static int solve(int n) {\n    int total = 0;\n"
        "    for (int i = 0; i < n; i++) total += i * i;\n    return total;\n  }\n}\n",
        "class Main {\n  static int solve(int m) {\n    int acc = 0;\n    int j = 0;\n"
        "    while (j < m) { acc = acc + j * j; j = j + 1; }\n    return acc;\n  }\n}\n",
    ),
}

# Pairs whose raw package value moves with PYTHONHASHSEED: loops make the package merge data-flow edges, and the
# merged lists of variable names come out in set order. (language, reference, candidate)
SEED_SENSITIVE = {
    "python-while": (
        "python",
        "def f(n, m):\n    acc = 1\n    while n > 0:\n        acc = acc * m + n\n        n = n - 1\n    return acc\n",
        "def f(n, m):\n    r = 1\n    while n > 0:\n        r = m + r * n\n        n = n - 1\n    return r\n",
    ),
    "cpp-while": (
        "cpp",
        "int f(int a, int b) { int t = 0; while (a > 0) { t = t + a * b; b = b - t; a--; } return t; }",
        "int f(int x, int y) { int s = 0; while (x > 0) { s = y * x + s; y = s - y; x--; } return s; }",
    ),
}
# Seeds under which the raw package gives different values for each sensitive pair (CPython 3.12's string hash):
# python-while 0.6478 (seeds 0, 1) and 0.6285 (5, 11); cpp-while 0.4130 (0, 5), 0.4322 (1) and 0.4514 (11).
SEEDS = (0, 1, 5, 11)

PACKAGE_KEYS = ("ngram_match_score", "weighted_ngram_match_score", "syntax_match_score", "dataflow_match_score")


def components(score: CodeBleuScore) -> tuple[float, float, float, float]:
    """The components as calc_codebleu reports them (a reference without data flow scores 0 there)."""
    return (score.ngram_match, score.weighted_ngram_match, score.syntax_match, score.dataflow_match or 0)


@contextmanager
def sorted_name_sets(language: str) -> Iterator[None]:
    """The package's own data-flow code with the library's one change: sets of names iterate sorted."""
    with deterministic_sets([get_data_flow, dfg_function[language]]):
        yield


# --- the package recipe --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", list(DETERMINISTIC))
def test_package_recipe_is_calc_codebleu(language: str) -> None:
    reference, candidate = DETERMINISTIC[language]
    expected = calc_codebleu([reference], [candidate], lang=language)
    ours = codebleu_score(reference, candidate, language, recipe=CodeBleuRecipe.PACKAGE)
    assert 0 < ours.dataflow_match < 1  # type: ignore[operator]
    assert ours.value == expected["codebleu"]  # the same float operations: equal, not approximately equal
    assert components(ours) == tuple(expected[key] for key in PACKAGE_KEYS)
    assert ours.recipe == "package" and ours.package_value == ours.value
    assert ours.value == pytest.approx(0.25 * sum(components(ours)))  # equal weights
    # The default recipe is the package's.
    assert codebleu(reference, candidate, language) == expected["codebleu"]


@pytest.mark.parametrize("name", list(SEED_SENSITIVE))
def test_the_only_departure_from_the_package_is_the_order_of_names(name: str) -> None:
    # Where the package is not deterministic, the value is the package's for sorted sets of names.
    language, reference, candidate = SEED_SENSITIVE[name]
    with sorted_name_sets(language):
        expected = calc_codebleu([reference], [candidate], lang=language)
    ours = codebleu_score(reference, candidate, language)
    assert ours.value == expected["codebleu"]
    assert components(ours) == tuple(expected[key] for key in PACKAGE_KEYS)
    # The package's modules are left as they were found.
    assert "set" not in vars(sys.modules["codebleu.dataflow_match"])
    assert "set" not in dfg_function[language].__globals__


def test_package_recipe_counts_a_missing_data_flow_as_1_without_logging(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    reference = DETERMINISTIC["python"][0]
    unmatched = codebleu_score(reference, "print(7)\n", "python")  # the reference has data flow, none matched
    assert unmatched.dataflow_match == 0.0
    assert unmatched.value == pytest.approx(
        0.25 * (unmatched.ngram_match + unmatched.weighted_ngram_match) + 0.25 * (unmatched.syntax_match + 1)
    )
    assert unmatched.value == calc_codebleu([reference], ["print(7)\n"], lang="python")["codebleu"]
    caplog.clear()
    degenerate = codebleu_score("print(1)\n", "print(1)\n", "python")  # no data flow in the reference
    assert degenerate.dataflow_match is None
    assert not caplog.records
    assert degenerate.value == calc_codebleu(["print(1)\n"], ["print(1)\n"], lang="python")["codebleu"]
    assert any("data-flows" in record.getMessage() for record in caplog.records)  # where the package warns


# --- the judge's (Pygments) recipe ---------------------------------------------------------------------------------


def pygments_reference(reference: str, candidate: str, language: str, *, has_dataflow: bool = True) -> float:
    """The recipe computed through calc_codebleu, as judge/offline.py computed it before the library existed."""
    result = calc_codebleu(
        [blank_comments(reference, language)],
        [blank_comments(candidate, language)],
        lang=language,
        tokenizer=lambda text: code_tokens(text, language),
    )
    parts = [result[key] for key in PACKAGE_KEYS[:3]] + ([result["dataflow_match_score"]] if has_dataflow else [])
    return sum(parts) / len(parts)


@pytest.mark.parametrize("language", list(DETERMINISTIC))
def test_pygments_recipe_is_the_judges(language: str) -> None:
    reference, candidate = DETERMINISTIC[language]
    comment = "# note\n" if language == "python" else "/* note */\n"
    commented = comment + candidate
    ours = codebleu_score(reference, commented, language, recipe="pygments")
    assert ours.recipe is CodeBleuRecipe.PYGMENTS
    assert ours.value == pygments_reference(reference, commented, language)
    assert ours.value == sum(components(ours)) / 4  # a data-flow match is kept as it is, 0 included
    # The package's combination of the same components, as the judge stores it (`codebleu_package`).
    tokenizer_run = calc_codebleu(
        [blank_comments(reference, language)],
        [blank_comments(commented, language)],
        lang=language,
        tokenizer=lambda text: code_tokens(text, language),
    )
    assert ours.package_value == tokenizer_run["codebleu"]
    # Comments are not code: the commented candidate scores as the bare one (the package recipe sees them).
    assert ours.value == codebleu(reference, candidate, language, recipe="pygments")
    assert codebleu(reference, commented, language) != codebleu(reference, candidate, language)


def test_pygments_recipe_keeps_an_unmatched_data_flow_at_0_and_drops_a_missing_one() -> None:
    reference = DETERMINISTIC["python"][0]
    unmatched = codebleu_score(reference, "print(7)\n", "python", recipe="pygments")
    assert unmatched.dataflow_match == 0.0
    assert unmatched.value == pytest.approx(sum(components(unmatched)) / 4)
    assert unmatched.value < unmatched.package_value
    degenerate = codebleu_score("print(1)\n", "print(1)\n", "python", recipe="pygments")
    assert degenerate.dataflow_match is None
    assert degenerate.value == pygments_reference("print(1)\n", "print(1)\n", "python", has_dataflow=False)
    # Mean of n-gram, weighted n-gram and syntax; four tokens leave the BLEU components just under 1.
    assert degenerate.value == pytest.approx(1.0, abs=0.02) and degenerate.syntax_match == 1.0


# --- both ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", list(CodeBleuRecipe))
@pytest.mark.parametrize("language", list(DETERMINISTIC))
def test_identical_programs_score_1(language: str, recipe: CodeBleuRecipe) -> None:
    for program in DETERMINISTIC[language]:
        score = codebleu_score(program, program, language, recipe=recipe)
        assert components(score) == (1.0, 1.0, 1.0, 1.0)
        assert score.value == 1.0


def test_recipes_by_name_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [recipe.value for recipe in CodeBleuRecipe] == ["package", "pygments"]
    reference, candidate = DETERMINISTIC["c"]
    assert codebleu(reference, candidate, "c", recipe="package") == codebleu(reference, candidate, "c")
    assert codebleu(reference, candidate, Language.C, recipe=CodeBleuRecipe.PYGMENTS) == codebleu(
        reference, candidate, "c", recipe="pygments"
    )
    with pytest.raises(ValueError, match="codebleu"):
        codebleu(reference, candidate, "c", recipe="codebleu")
    with pytest.raises(UnsupportedLanguage):
        codebleu(reference, candidate, "javascript")  # a codebleu language, not one of the project's

    def no_grammar(language: str) -> None:
        raise ImportError(f"Tree-sitter language for {language} not available.")

    monkeypatch.setattr("codebleu.utils.get_tree_sitter_language", no_grammar)
    with pytest.raises(GrammarUnavailable, match="^no usable tree-sitter grammar for c: ImportError"):
        codebleu(reference, candidate, "c")


def test_threads_get_the_same_value() -> None:
    language, reference, candidate = SEED_SENSITIVE["cpp-while"]
    expected = codebleu(reference, candidate, language)
    with ThreadPoolExecutor(max_workers=8) as pool:
        values = list(pool.map(lambda _: codebleu(reference, candidate, language), range(32)))
    assert set(values) == {expected}


# --- the same value in every process -------------------------------------------------------------------------------

_SCORE_IN_A_FRESH_PROCESS = """
import json, logging, sys
from codebleu import calc_codebleu
from services.lib.codesim import codebleu
logging.disable(logging.WARNING)
out = {}
for name, (language, reference, candidate) in json.load(sys.stdin).items():
    out[name] = {
        "raw_package": calc_codebleu([reference], [candidate], lang=language)["codebleu"],
        "package": codebleu(reference, candidate, language, recipe="package"),
        "pygments": codebleu(reference, candidate, language, recipe="pygments"),
    }
print(json.dumps(out))
"""


def scores_under_seed(seed: int) -> dict[str, dict[str, float]]:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run(
        [sys.executable, "-c", _SCORE_IN_A_FRESH_PROCESS],
        input=json.dumps(SEED_SENSITIVE),
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    result: dict[str, dict[str, float]] = json.loads(done.stdout)
    return result


def test_codebleu_is_the_same_under_every_hash_seed() -> None:
    runs = {seed: scores_under_seed(seed) for seed in SEEDS}
    for name in SEED_SENSITIVE:
        raw = {run[name]["raw_package"] for run in runs.values()}
        # The raw package gives these pairs different values under these seeds: without the fix, this test fails.
        assert len(raw) > 1, f"{name}: the raw package no longer varies under seeds {SEEDS}; pick other seeds"
        for recipe in ("package", "pygments"):
            values = {run[name][recipe] for run in runs.values()}
            assert len(values) == 1, f"{name}, {recipe} recipe: {values}"
    # And the value is this process's too.
    for name, (language, reference, candidate) in SEED_SENSITIVE.items():
        assert runs[0][name]["package"] == codebleu(reference, candidate, language)


# --- properties ----------------------------------------------------------------------------------------------------

LINES = [
    "x = a + 1",
    "y = x * 2",
    "print(y)",
    "for i in range(3):\n    x += i * y",
    "while x > 0:\n    x = x - y\n    y = y + x",
    "if x > 1:\n    y = x - y",
    "z = [a, b]",
    "# a comment",
    "def f(a):\n    return a",
]
programs = st.lists(st.sampled_from(LINES), max_size=6).map(lambda lines: "\n".join(lines) + "\n")


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(programs, programs)
def test_codebleu_stays_in_0_1(reference: str, candidate: str) -> None:
    for recipe in CodeBleuRecipe:
        score = codebleu_score(reference, candidate, "python", recipe=recipe)
        for value in (score.value, *components(score), score.package_value):
            assert 0.0 <= value <= 1.0
        assert codebleu(reference, candidate, "python", recipe=recipe) == score.value
