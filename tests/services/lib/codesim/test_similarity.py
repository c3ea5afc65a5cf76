"""Tokens, chrF++ and token edit distance of the code-similarity library, against worked examples and references."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu import corpus_chrf, sentence_chrf

from services.kernel.contracts import Language
from services.lib.codesim import (
    TokenEdit,
    UnsupportedLanguage,
    blank_comments,
    check_language,
    chrf_pp,
    code_tokens,
    edit_similarity,
    normalized_edit_distance,
    token_edit,
)

PY_ADD = "def add(a, b):\n    return a+b  # sum\n"
PY_ADD_NAMES = "def add(x, y):\n    total = x + y\n    return total\n"

C_SUM = '#include <stdio.h>\nint main(void) {\n    int a, b;\n    scanf("%d %d", &a, &b);\n    return a + b;\n}\n'
C_SUM_COMMENTED = (
    "#include <stdio.h>   // I/O\n/* Read two numbers\n   and add them. */\nint main(void)\n{\n"
    "    int a, b;  /* ops */\n"
    '    scanf("%d %d", &a, &b);   // no check\n    return a  +  b;\n}\n'
)

# --- tokens --------------------------------------------------------------------------------------------------------


def test_tokens_drop_whitespace_and_comments_but_keep_preprocessor_directives() -> None:
    assert code_tokens(PY_ADD, "python") == "def add ( a , b ) : return a + b".split()
    assert code_tokens(C_SUM_COMMENTED, "c") == code_tokens(C_SUM, "c")
    assert code_tokens("#include <stdio.h>\n", "cpp") == ["#", "include", "<stdio.h>"]
    # A string's inside is one token (its spaces kept), its quotes are tokens of their own.
    java = 'class A { String s = "a b"; } // x\n'
    assert code_tokens(java, "java") == ["class", "A", "{", "String", "s", "=", '"', "a b", '"', ";", "}"]


def test_blank_comments_keeps_the_lines_and_the_code() -> None:
    blanked = blank_comments(C_SUM_COMMENTED, "c")
    assert blanked.count("\n") == C_SUM_COMMENTED.count("\n")
    assert "/*" not in blanked and "//" not in blanked and "#include <stdio.h>" in blanked
    assert blank_comments("x = 1  # one\n", "python") == "x = 1   \n"


def test_language_ids_are_the_projects() -> None:
    assert [check_language(language) for language in ("python", "c", "cpp", "java")] == list(Language)
    assert code_tokens("x = 1\n", Language.PYTHON) == ["x", "=", "1"]
    for bad in ("ruby", "Python", "c++", ""):
        with pytest.raises(UnsupportedLanguage, match="^unsupported language"):
            code_tokens("x", bad)
        with pytest.raises(ValueError):
            edit_similarity("x", "x", bad)
    with pytest.raises(UnsupportedLanguage):
        chrf_pp("x", "x", "go")


# --- chrF++ --------------------------------------------------------------------------------------------------------


def test_chrf_pp_is_sacrebleus_chrf_plus_plus_on_the_token_strings() -> None:
    reference, candidate = "def add ( x , y ) : total = x + y return total", "def add ( a , b ) : return a + b"
    expected = sentence_chrf(candidate, [reference], word_order=2).score
    assert 0 < expected < 100
    assert chrf_pp(PY_ADD_NAMES, PY_ADD, "python") == expected
    # One sentence: the corpus score is the sentence score.
    assert chrf_pp(PY_ADD_NAMES, PY_ADD, "python") == pytest.approx(
        corpus_chrf([candidate], [[reference]], word_order=2).score
    )
    # Not symmetric: chrF weighs recall (of the reference's n-grams) twice as much as precision.
    assert chrf_pp(PY_ADD, PY_ADD_NAMES, "python") == sentence_chrf(reference, [candidate], word_order=2).score


def test_chrf_pp_of_identical_code_is_100_whatever_the_comments_and_layout() -> None:
    assert chrf_pp(C_SUM, C_SUM, "c") == 100.0
    assert chrf_pp(C_SUM, C_SUM_COMMENTED, "c") == 100.0
    assert chrf_pp("", "# only a comment\n", "python") == 100.0  # two empty token streams
    assert chrf_pp("x = 1\n", "", "python") == 0.0
    assert chrf_pp(C_SUM, C_SUM.replace("a + b", "a - b"), "c") < 100.0


# --- token edit distance -------------------------------------------------------------------------------------------


def test_edit_distance_worked_examples() -> None:
    # [x = a + 1] vs [x = b + 1]: one substitution over 5 tokens.
    assert token_edit("x = a + 1\n", "x = b + 1\n", "python") == TokenEdit(1, 5, 5)
    assert normalized_edit_distance("x = a + 1\n", "x = b + 1\n", "python") == pytest.approx(1 / 5)
    assert edit_similarity("x = a + 1\n", "x = b + 1\n", "python") == pytest.approx(4 / 5)
    # [x = a + 1] vs [y = a]: substitute x -> y, delete + and 1: d = 3 over max(5, 3) tokens.
    three = token_edit("x = a + 1\n", "y = a\n", "python")
    assert (three.distance, three.reference_tokens, three.candidate_tokens, three.longest) == (3, 5, 3, 5)
    assert three.normalized == pytest.approx(3 / 5) and three.similarity == pytest.approx(2 / 5)
    # kitten -> sitting, one name token per letter: k->s, e->i, insert g: d = 3 over 7 tokens.
    kitten, sitting = "\n".join("kitten") + "\n", "\n".join("sitting") + "\n"
    assert token_edit(kitten, sitting, "python") == TokenEdit(3, 6, 7)
    assert normalized_edit_distance(kitten, sitting, "python") == pytest.approx(3 / 7)
    # [f ( )] vs [f]: two deletions over 3 tokens.
    assert normalized_edit_distance("f()\n", "f\n", "python") == pytest.approx(2 / 3)
    # Tokens are compared whole: `total` vs `totals` is one substitution, not one character.
    assert token_edit("total = 1\n", "totals = 1\n", "python").distance == 1


def test_identical_programs_are_at_distance_0() -> None:
    for source, language in ((C_SUM, "c"), (C_SUM, "cpp"), (PY_ADD, "python")):
        assert token_edit(source, source, language).distance == 0
        assert normalized_edit_distance(source, source, language) == 0.0
        assert edit_similarity(source, source, language) == 1.0
    assert normalized_edit_distance(C_SUM_COMMENTED, C_SUM, "c") == 0.0  # comments and layout are not code
    assert token_edit("# a comment\n", "", "python") == TokenEdit(0, 0, 0)  # two empty streams
    assert (normalized_edit_distance("", "", "java"), edit_similarity("", "", "java")) == (0.0, 1.0)
    assert normalized_edit_distance("", "x\n", "python") == 1.0


# --- properties ----------------------------------------------------------------------------------------------------

PYTHON_LINES = [
    "x = a + 1",
    "y = x * 2",
    "print(y)",
    "for i in range(3):\n    x += i",
    "if x > 1:\n    y = x - y",
    "z = [a, b]",
    "# a comment",
    "def f(a):\n    return a",
    "while x:\n    x = x - 1",
    "s = 'two words'",
    "",
]
python_programs = st.lists(st.sampled_from(PYTHON_LINES), max_size=8).map(lambda lines: "\n".join(lines) + "\n")


def levenshtein(first: list[str], second: list[str]) -> int:
    """Wagner-Fischer, the textbook dynamic programme."""
    previous = list(range(len(second) + 1))
    for i, a in enumerate(first, start=1):
        current = [i]
        for j, b in enumerate(second, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(python_programs, python_programs, python_programs)
def test_edit_distance_is_a_normalised_metric_over_tokens(first: str, second: str, third: str) -> None:
    tokens = [code_tokens(program, "python") for program in (first, second)]
    edit = token_edit(first, second, "python")
    assert edit == TokenEdit(levenshtein(*tokens), len(tokens[0]), len(tokens[1]))
    assert token_edit(second, first, "python").distance == edit.distance  # symmetric
    assert normalized_edit_distance(second, first, "python") == normalized_edit_distance(first, second, "python")
    assert 0.0 <= edit.normalized <= 1.0 and 0.0 <= edit.similarity <= 1.0
    assert edit.normalized + edit.similarity == pytest.approx(1.0)
    assert edit_similarity(first, second, "python") == edit.similarity
    assert (edit.distance == 0) == (tokens[0] == tokens[1])
    # The triangle inequality of the raw distance.
    assert edit.distance <= token_edit(first, third, "python").distance + token_edit(third, second, "python").distance


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(python_programs, python_programs)
def test_chrf_pp_stays_in_0_100_and_is_100_on_identical_code(reference: str, candidate: str) -> None:
    value = chrf_pp(reference, candidate, "python")
    assert 0.0 <= value <= 100.0
    assert chrf_pp(candidate, candidate, "python") == 100.0
    if code_tokens(reference, "python") == code_tokens(candidate, "python"):
        assert value == 100.0
