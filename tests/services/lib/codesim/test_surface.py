"""SurfaceSim (LoCaL Eq. 1), both recipes: worked examples by hand, unparsable programs, symmetry, no execution."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from services.lib.codesim import (
    SurfaceRecipe,
    SurfaceSimilarity,
    UnsupportedLanguage,
    ast_node_types,
    code_token_types,
    edit_similarity_chars,
    local_edit_similarity,
    local_normalized,
    surface_similarity,
)

SEQUENCE, LOCAL = SurfaceRecipe.SEQUENCE, SurfaceRecipe.LOCAL

IDENTICAL = {
    "python": "def add(a, b):\n    # sum\n    return a + b\n",
    "c": '#include <stdio.h>\nint main(void) { int a, b; scanf("%d %d", &a, &b); printf("%d", a + b); }\n',
    "cpp": "#include <vector>\nlong f(std::vector<int> v) { long s = 0; for (int x : v) s += x; return s; }\n",
    "java": "class Main {\n  static int f(int n) { int t = 0; for (int i = 0; i < n; i++) t += i; return t; }\n}\n",
}


@pytest.mark.parametrize("recipe", list(SurfaceRecipe))
@pytest.mark.parametrize("language", list(IDENTICAL))
def test_identical_code_is_1(language: str, recipe: SurfaceRecipe) -> None:
    program = IDENTICAL[language]
    expected = SurfaceSimilarity(1.0, 1.0, 1.0, "ast", (), recipe)
    assert surface_similarity(program, program, language, recipe=recipe) == expected


def test_the_default_recipe_is_local() -> None:
    assert surface_similarity("x = 1\n", "x = 2\n", "python").recipe is LOCAL
    assert surface_similarity("x = 1\n", "x = 2\n", "python", recipe="sequence").recipe is SEQUENCE
    with pytest.raises(ValueError):
        surface_similarity("x", "x", "python", recipe="paper")


def test_edit_component_is_the_character_levenshtein_by_hand() -> None:
    # "kitten" -> "sitting": k->s, e->i, +g = 3 edits; max length 7.
    assert edit_similarity_chars("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    assert edit_similarity_chars("", "") == 1.0
    assert edit_similarity_chars("", "abc") == 0.0
    # Characters exactly as given: layout counts (two spaces inserted, length 7 vs 5).
    assert edit_similarity_chars("x=1\n\n", "x = 1\n\n") == pytest.approx(1 - 2 / 7)


def test_python_worked_example() -> None:
    # "x = 1\n" (6 characters) -> "x = 1 + 2\n" (10): insert " + 2", 4 edits: Sim_Edit = 1 - 4/10.
    # Pre-order node types: [Module, Assign, Name, Store, Constant] and
    # [Module, Assign, Name, Store, BinOp, Constant, Add, Constant]: 3 insertions over 8: Sim_AST = 1 - 3/8.
    assert ast_node_types("x = 1\n", "python") == ["Module", "Assign", "Name", "Store", "Constant"]
    assert ast_node_types("x = 1 + 2\n", "python") == [
        "Module", "Assign", "Name", "Store", "BinOp", "Constant", "Add", "Constant",
    ]  # fmt: skip
    result = surface_similarity("x = 1\n", "x = 1 + 2\n", "python", recipe=SEQUENCE)
    assert result.edit == pytest.approx(0.6)
    assert result.ast == pytest.approx(0.625)
    assert result.mean == pytest.approx(0.6125)
    assert result.ast_basis == "ast" and result.unparsable == ()


@pytest.mark.parametrize("recipe", list(SurfaceRecipe))
def test_renaming_and_comments_change_the_text_not_the_tree(recipe: SurfaceRecipe) -> None:
    reference = "def f(a):\n    return a * 2\n"
    candidate = "def g(b):  # doubled\n    return b * 2\n"
    result = surface_similarity(reference, candidate, "python", recipe=recipe)
    assert result.ast == 1.0
    assert result.edit < 1.0
    assert result.mean == pytest.approx((result.edit + 1.0) / 2)


def test_tree_sitter_worked_example_uses_named_nodes_without_comments() -> None:
    # Named nodes only: [translation_unit, declaration, primitive_type, init_declarator, identifier,
    # number_literal] vs the same five then [binary_expression, number_literal, number_literal]: insert
    # binary_expression, keep number_literal, insert number_literal: 2 edits over 8, Sim_AST = 1 - 2/8.
    short, longer = "int x = 1;", "int x = 1 + 2; /* two */"
    assert ast_node_types(short, "c") == [
        "translation_unit", "declaration", "primitive_type", "init_declarator", "identifier", "number_literal",
    ]  # fmt: skip
    longer_types = ast_node_types(longer, "c")
    assert longer_types is not None
    assert longer_types[-3:] == ["binary_expression", "number_literal", "number_literal"]
    assert "comment" not in longer_types
    assert surface_similarity(short, longer, "c", recipe=SEQUENCE).ast == pytest.approx(0.75)
    assert surface_similarity(short, longer, "cpp", recipe=SEQUENCE).ast == pytest.approx(0.75)
    java = "class A { int f() { return 1; } }"
    assert (ast_node_types(java, "java") or [])[:2] == ["program", "class_declaration"]


@pytest.mark.parametrize(
    ("language", "broken"),
    [
        ("python", "def f(:\n    return\n"),
        ("c", "int f( { return"),
        ("cpp", "int f() { return 1 }"),
        ("java", "class {"),
    ],
)
def test_unparsable_code_falls_back_to_token_types_and_says_so(language: str, broken: str) -> None:
    reference = IDENTICAL[language]
    assert ast_node_types(broken, language) is None
    result = surface_similarity(reference, broken, language, recipe=SEQUENCE)
    assert result.ast_basis == "tokens"
    assert result.unparsable == ("candidate",)
    expected = Levenshtein.normalized_similarity(
        code_token_types(reference, language), code_token_types(broken, language)
    )
    assert result.ast == pytest.approx(expected)
    assert result.edit == pytest.approx(edit_similarity_chars(reference, broken))
    assert 0.0 <= result.mean <= 1.0
    both = surface_similarity(broken, broken, language, recipe=SEQUENCE)
    assert both.unparsable == ("reference", "candidate") and both.mean == 1.0
    # The local recipe has no fallback: Sim_AST is 0 as soon as one side does not parse, even for identical code.
    local = surface_similarity(reference, broken, language, recipe=LOCAL)
    assert (local.ast, local.ast_basis, local.unparsable) == (0.0, "ast", ("candidate",))
    assert local.edit == pytest.approx(local_edit_similarity(reference, broken, language))
    assert local.mean == pytest.approx(local.edit / 2)
    both_local = surface_similarity(broken, broken, language, recipe=LOCAL)
    assert (both_local.edit, both_local.ast, both_local.mean) == (1.0, 0.0, 0.5)
    assert both_local.unparsable == ("reference", "candidate")


def test_python_fallback_worked_example() -> None:
    # "def f(:" lexes to Keyword, Name.Function, Punctuation, Punctuation; "def f():" adds one more
    # Punctuation (")"): 1 insertion over 5.
    assert code_token_types("def f(:\n", "python") == [
        "Token.Keyword", "Token.Name.Function", "Token.Punctuation", "Token.Punctuation",
    ]  # fmt: skip
    result = surface_similarity("def f():\n", "def f(:\n", "python", recipe=SEQUENCE)
    assert result.ast == pytest.approx(1 - 1 / 5)


@pytest.mark.parametrize("recipe", list(SurfaceRecipe))
def test_code_is_parsed_never_run(tmp_path: Path, recipe: SurfaceRecipe) -> None:
    # If any of this ran, the test process would exit or a file would appear.
    marker = tmp_path / "ran"
    python = f"import os\nopen({str(marker)!r}, 'w').write('x')\nos._exit(3)\n"
    result = surface_similarity(python, python + "print(1)\n", "python", recipe=recipe)
    assert result.ast_basis == "ast" and not marker.exists()
    # Hostile inputs still give a number: NUL bytes, deep nesting, a lone surrogate.
    assert surface_similarity("x = 1\n", "x = '\0'\0\n", "python", recipe=recipe).unparsable == ("candidate",)
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    assert 0.0 <= surface_similarity("x = 1\n", deep, "python", recipe=recipe).mean <= 1.0
    assert 0.0 <= surface_similarity("int x;", "int x = ((((1));", "c", recipe=recipe).mean <= 1.0
    assert surface_similarity('char *s = "\ud800";', "char *s;", "c", recipe=recipe).edit < 1.0


@pytest.mark.parametrize("recipe", list(SurfaceRecipe))
@pytest.mark.parametrize(
    "hostile",
    [
        "x = " + "-" * 10_000 + "1\n",  # ast.parse: MemoryError (the parser's stack)
        "+".join(["1"] * 20_000) + "\n",  # ast.parse: RecursionError
    ],
)
def test_a_program_too_deep_for_the_parser_is_unparsable_not_a_crash(hostile: str, recipe: SurfaceRecipe) -> None:
    assert ast_node_types(hostile, "python") is None
    result = surface_similarity(hostile, "x = 1\n", "python", recipe=recipe)
    assert result.unparsable == ("reference",)
    assert 0.0 <= result.mean <= 1.0


@pytest.mark.timeout(10)
def test_an_unclosed_triple_quote_does_not_make_normalisation_backtrack() -> None:
    # Tokenizing fails, so LOCAL falls back to its regular expressions: a pattern that backtracked exponentially
    # over the line breaks after an unclosed triple quote took hours here (0.3 s at 22 lines, doubling per line).
    hostile = 'x = 1\n"""' + "a\n" * 5_000
    result = surface_similarity("x = 1\n", hostile, "python")
    assert result.unparsable == ("candidate",) and 0.0 <= result.mean <= 1.0


def test_deeply_nested_python_that_parses_does_not_hit_the_recursion_limit() -> None:
    nested = "x = " + "[" * 150 + "]" * 150 + "\n"
    ast.parse(nested)  # parses
    assert surface_similarity(nested, nested, "python") == SurfaceSimilarity(1.0, 1.0, 1.0)
    assert surface_similarity(nested, nested, "python", recipe=SEQUENCE) == SurfaceSimilarity(
        1.0, 1.0, 1.0, recipe=SEQUENCE
    )


def test_to_json_and_languages() -> None:
    result = surface_similarity("x = 1\n", "x = 2\n", "python")
    payload = result.to_json()
    assert json.loads(json.dumps(payload)) == {
        "edit": result.edit,
        "ast": 1.0,
        "mean": result.mean,
        "ast_basis": "ast",
        "unparsable": [],
        "recipe": "local",
    }
    assert surface_similarity("x = 1\n", "x = 2\n", "python", recipe=SEQUENCE).to_json()["recipe"] == "sequence"
    for recipe in SurfaceRecipe:
        with pytest.raises(UnsupportedLanguage):
            surface_similarity("x", "x", "ruby", recipe=recipe)


LINES = ["x = a + 1", "y = x * 2", "print(y)", "for i in range(3):\n    x += i", "if x:\n    y = 1", "def f(:"]
programs = st.lists(st.sampled_from(LINES), max_size=5).map(lambda lines: "\n".join(lines) + "\n")


@pytest.mark.parametrize("recipe", list(SurfaceRecipe))
@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(programs, programs)
def test_symmetric_bounded_and_the_mean_of_its_parts(recipe: SurfaceRecipe, reference: str, candidate: str) -> None:
    forward = surface_similarity(reference, candidate, "python", recipe=recipe)
    backward = surface_similarity(candidate, reference, "python", recipe=recipe)
    assert (forward.edit, forward.ast, forward.mean, forward.ast_basis) == (
        backward.edit,
        backward.ast,
        backward.mean,
        backward.ast_basis,
    )
    assert 0.0 <= forward.edit <= 1.0 and 0.0 <= forward.ast <= 1.0
    assert forward.mean == (forward.edit + forward.ast) / 2


# ---- The local recipe (the scoring of LoCaL's released data): worked examples by hand ----

# Our rendering of the paper's Figure 1 pair (a, b): the mutant flips `!=` to `==` (the paper prints the code as an
# image, so the layout here is ours). Raw lengths per line, newline included: 25 + 36 + 47 + 25 + 16 = 149.
PALINDROME = """def is_palindrome(text):
    for i in range(len(text) // 2):
        if text[i] != text[len(text) - 1 - i]:
            return False
    return True
"""
PALINDROME_MUTANT = PALINDROME.replace("!=", "==")


def test_local_normalisation_joins_tokens_with_no_separator_by_hand() -> None:
    # Comments, INDENT/DEDENT and the spaces between tokens go; NEWLINE/NL become one "\n" per line; stripped.
    assert local_normalized("def f(x):  # doubled\n\n\n    return x * 2\n", "python") == "deff(x):\nreturnx*2"
    # Spaces survive only inside string tokens, collapsed to one; a docstring stays (it is a token).
    assert local_normalized('def f():\n    """a   b"""\n', "python") == 'deff():\n"""a b"""'
    # Tokenizing fails (unclosed bracket at the end): the regex fallback on the raw text keeps one space between
    # words, drops triple-quoted strings and # comments; a line left with spaces only stays as " ".
    assert local_normalized('def f(:\n    """doc"""  # c\n\n\n    return  1\n', "python") == "def f(:\n \n return 1"
    # C: Pygments tokens without comments, a "\n" per line (a // comment carries the newline that ends it).
    program = "#include <stdio.h>\n// hi\nint main(void) {\n  /* c */ return 0; // x\n}\n"
    assert local_normalized(program, "c") == "#include<stdio.h>\nintmain(void){\nreturn0;\n}"
    assert local_normalized('class A {\n  // c\n  String s = "a  b";\n}\n', "java") == 'classA{\nStrings="a b";\n}'


def test_local_palindrome_pair_of_figure_1_by_hand() -> None:
    assert len(PALINDROME) == len(PALINDROME_MUTANT) == 25 + 36 + 47 + 25 + 16 == 149
    assert local_normalized(PALINDROME, "python") == (
        "defis_palindrome(text):\nforiinrange(len(text)//2):\niftext[i]!=text[len(text)-1-i]:\nreturnFalse\nreturnTrue"
    )
    # Sim_Edit: the normalised texts differ in one character ("!" -> "="): 1 - 1/149.
    # Sim_AST: 18 node types in the original; the mutant has Eq where it has NotEq: 17 shared of 19 in all.
    original_types = {
        "Module", "FunctionDef", "arguments", "arg", "For", "Name", "Store", "Load", "Call", "BinOp", "FloorDiv",
        "Constant", "If", "Compare", "Subscript", "NotEq", "Sub", "Return",
    }  # fmt: skip
    assert set(ast_node_types(PALINDROME, "python") or []) == original_types
    assert set(ast_node_types(PALINDROME_MUTANT, "python") or []) == original_types - {"NotEq"} | {"Eq"}
    result = surface_similarity(PALINDROME, PALINDROME_MUTANT, "python")
    assert result.edit == pytest.approx(148 / 149)  # 0.99329
    assert result.ast == pytest.approx(17 / 19)  # 0.89474
    assert result.mean == pytest.approx((148 / 149 + 17 / 19) / 2)  # 0.94401
    assert (result.ast_basis, result.unparsable, result.recipe) == ("ast", (), LOCAL)
    # The sequence recipe relabels one node of the flattened tree instead, so its Sim_AST moves less.
    assert surface_similarity(PALINDROME, PALINDROME_MUTANT, "python", recipe=SEQUENCE).ast > result.ast


def test_local_python_worked_example() -> None:
    # Normalised "x=1" -> "x=1+2": 2 insertions; raw lengths 6 and 10: Sim_Edit = 1 - 2/10.
    # Sets {Module, Assign, Name, Store, Constant} and the same plus {BinOp, Add}: Sim_AST = 5/7.
    result = surface_similarity("x = 1\n", "x = 1 + 2\n", "python")
    assert result.edit == pytest.approx(0.8)
    assert result.ast == pytest.approx(5 / 7)
    assert result.mean == pytest.approx((0.8 + 5 / 7) / 2)


def test_local_edit_divides_the_normalised_distance_by_the_raw_length() -> None:
    # "x=1" vs "x=2" after normalising: 1 edit; the denominator is the raw 13 characters of "x = 1  # one\n",
    # not 3: Sim_Edit = 1 - 1/13. The sequence recipe's raw characters: "1" -> "2" and delete "  # one" (7): 1 - 8/13.
    reference, candidate = "x = 1  # one\n", "x = 2\n"
    assert local_edit_similarity(reference, candidate, "python") == pytest.approx(1 - 1 / 13)
    assert edit_similarity_chars(reference, candidate) == pytest.approx(1 - 8 / 13)
    # A longer comment raises the similarity of the same one-character difference.
    assert local_edit_similarity("x = 1  # a much longer comment\n", candidate, "python") > 1 - 1 / 13
    # Both empty: 1; one empty: the other's normalised length over its raw length.
    assert local_edit_similarity("", "", "python") == 1.0
    assert local_edit_similarity("", "x = 1\n", "python") == pytest.approx(1 - 3 / 6)
    assert local_edit_similarity("", "# only a comment\n", "python") == 1.0


def test_local_edit_numerator_ignores_comments_and_layout() -> None:
    reference = "def add(a, b):\n    return a + b\n"
    candidate = "def add(a,b):   # the sum\n\n\n    return a+b  # done\n"
    assert local_normalized(reference, "python") == local_normalized(candidate, "python") == "defadd(a,b):\nreturna+b"
    assert surface_similarity(reference, candidate, "python").mean == 1.0
    assert surface_similarity(reference, candidate, "python", recipe=SEQUENCE).edit < 1.0
    c_reference = "int f(int a) { return a + 1; }"
    c_candidate = "int f(int a)\n{\n    /* add one */\n    return a+1;   // done\n}\n"
    # Line structure is kept: one "\n" per non-empty line, so only the four line breaks differ.
    assert local_normalized(c_candidate, "c") == "intf(inta)\n{\nreturna+1;\n}"
    assert local_edit_similarity(c_reference, c_candidate, "c") == pytest.approx(1 - 3 / len(c_candidate))


def test_local_syntax_error_gives_ast_0_by_hand() -> None:
    # "def f(: pass" does not tokenize (a bracket left open): the fallback keeps it as "def f(: pass". Against
    # "deff():pass": insert " ", delete ")", insert " ": 3 edits over the raw 14 characters of "def f(): pass\n".
    result = surface_similarity("def f(): pass\n", "def f(: pass\n", "python")
    assert result.edit == pytest.approx(1 - 3 / 14)
    assert result.ast == 0.0
    assert result.mean == pytest.approx((1 - 3 / 14) / 2)
    assert (result.ast_basis, result.unparsable) == ("ast", ("candidate",))


def test_local_c_and_java_worked_examples() -> None:
    # C: "intx=1;" vs "intx=1+2;": 2 insertions over the raw 14 characters; node-type sets
    # {translation_unit, declaration, primitive_type, init_declarator, identifier, number_literal} and the same plus
    # binary_expression: 6/7. C++ reads these the same way.
    for language in ("c", "cpp"):
        result = surface_similarity("int x = 1;", "int x = 1 + 2; /* two */", language)
        assert result.edit == pytest.approx(1 - 2 / 24)
        assert result.ast == pytest.approx(6 / 7)
    # The same tree with a comment: Sim_AST 1, and one substitution over the raw 18 characters.
    same_tree = surface_similarity("int x = 1; // one\n", "int x = 2;", "c")
    assert (same_tree.edit, same_tree.ast) == (pytest.approx(1 - 1 / 18), 1.0)
    # Java: "return 1" -> "return -1": one insertion over 34 raw characters; the sets gain unary_expression:
    # {program, class_declaration, identifier, class_body, method_declaration, integral_type, formal_parameters,
    # block, return_statement, decimal_integer_literal} is 10 of the 11.
    java = surface_similarity("class A { int f() { return 1; } }", "class A { int f() { return -1; } }", "java")
    assert java.edit == pytest.approx(1 - 1 / 34)
    assert java.ast == pytest.approx(10 / 11)
    broken = surface_similarity("class A { int f() { return 1; } }", "class {", "java")
    assert (broken.ast, broken.unparsable) == (0.0, ("candidate",))
