"""SurfaceSim (LoCaL, paper 002, section 3.2.1, Eq. 1): how alike two programs look, textually and structurally.

    SurfaceSim(c1, c2) = 1/2 * (Sim_Edit(c1, c2) + Sim_AST(c1, c2))

The paper names the two components (an inverse edit distance and an AST comparison citing Baxter et al. 1998) but
not how either is normalised, so Tribunal offers two recipes (`SurfaceRecipe`). Both lie in [0, 1], are symmetric
and give 1 for identical parsable programs. The code is parsed or lexed, never run.

Recipe "local" (the default): the scoring script that accompanies LoCaL's released data
------------------------------------------------------------------------------------------
A public script that appears to be LoCaL's own scoring (it scores the paper's Figure 1 palindrome example and writes
the fields `InverseEdit`, `AST` and `SurfaceSim`; we could not confirm its provenance beyond that) defines the
components as below. Tribunal reimplements that definition (not its code) so that our SurfaceSim can be compared
with the SurfaceSim column LoCaL published. LoCaL is Python only; the C, C++ and Java variant is Tribunal's.

    Sim_Edit = 1 - Levenshtein(normalize(c1), normalize(c2)) / max(len(c1), len(c2))     (both c empty: 1)

Quirk, kept on purpose: the distance is between the NORMALISED texts, the denominator is the larger length of the
RAW texts (Python `str` code points, comments and layout included). Normalising never lengthens a text (it drops
comments and whitespace; the one textless token, the NEWLINE the Python tokenizer adds after a last line without a
line break, becomes a trailing "\n" that the strip removes), so the ratio is at most 1; it is clamped to [0, 1]
anyway. The consequence:
comments and layout do not change the numerator but do inflate the denominator, so a heavily commented pair looks
more alike than the same pair without comments. Levenshtein: unit-cost character insertions, deletions and
substitutions (rapidfuzz `Levenshtein.distance`).

normalize(code), Python: the stdlib tokenizer (`tokenize.generate_tokens`, the running interpreter's, 3.12 here):
COMMENT tokens are dropped; NL and NEWLINE tokens become "\n"; ENCODING, INDENT and DEDENT tokens are dropped;
every other token contributes its text; the parts are joined with NO separator (`def f(x):` becomes `deff(x):`,
`return a + b` becomes `returna+b`); then runs of spaces and tabs (only left inside string tokens) become one space,
runs of two or more "\n" become one, and the result is stripped. When tokenizing raises (unbalanced brackets at
the end, bad dedent, a NUL byte, too deep nesting, ...), the fallback works on the raw text: triple-quoted strings
are removed (`_TRIPLE_QUOTED`: three double or three single quotes, the shortest run of any characters, line breaks
included, and the same three quotes; the script's regex), then `#` to the end of each line (even inside a string),
then spaces, tabs and newline runs are collapsed the same way and the text is stripped (so the fallback keeps one
space between words, and removes docstrings, which the tokenizer path keeps). Since Python 3.12 an f-string is
tokenized into pieces, so whitespace inside its `{...}` fields is dropped and `{{` reads `{`; older interpreters
keep the f-string whole.

normalize(code), C, C++, Java: the Pygments token stream (`services.lib.codesim.tokens`, the lexer named like the
language). Comment tokens (not preprocessor directives, which Pygments files under Comment.Preproc) contribute
"\n" if they contain a line break (Pygments' `// ...` token swallows the newline that ends it) and nothing
otherwise; whitespace-only tokens contribute "\n" if they contain a line break and nothing otherwise; every other
token contributes its text; then the same join with no separator, collapse and strip as for Python. So the text
keeps one "\n" per non-empty line, like the Python tokenizer's NEWLINE/NL tokens.

    Sim_AST = |A1 & A2| / |A1 | A2|      (Jaccard of node-type SETS; 0 for an empty union)

A = {type(node).__name__ for node in ast.walk(ast.parse(code))} in Python (the same nodes as below, as a set), and the
set of tree-sitter named node types (comments excluded) in C, C++ and Java. A program that does not parse (either
side, or both, even two identical programs) gives Sim_AST = 0, as LoCaL's script does for a SyntaxError (Tribunal
also counts a ValueError, RecursionError or MemoryError from the parser as not parsing); `unparsable` names the
side(s) and `ast_basis` stays "ast" (no token fallback in this recipe). Being a set comparison, Sim_AST ignores how
often and where node types occur, and barely moves, or not at all, under a one-operator mutation: in the paper's
Figure 1 palindrome pair `!=` to `==` swaps NotEq for Eq in a set of 18 types, 17/19 (and nothing at all if both
operators occur elsewhere in the program).

Recipe "sequence": Tribunal's own normalisation (the earlier definition, kept for its sensitivity)
---------------------------------------------------------------------------------------------------
Sim_Edit (inverse edit distance) treats the programs as strings of characters, exactly as given (no stripping, no
comment removal, no whitespace normalisation):

    Sim_Edit = 1 - Levenshtein(c1, c2) / max(len(c1), len(c2))      (two empty strings: 1)

with unit-cost insertions, deletions and substitutions of single characters (Python `str` code points), computed
by rapidfuzz (`Levenshtein.normalized_similarity`).

Sim_AST (structural similarity of the abstract syntax trees):

    Sim_AST = 1 - Levenshtein(T1, T2) / max(len(T1), len(T2))

where T is the sequence of the tree's node types in pre-order (a node, then its children left to right), each node
type one symbol, so the edit distance counts inserted, deleted and relabelled nodes of the flattened tree.

Programs that do not parse (a Python `SyntaxError`, or a tree-sitter tree containing an ERROR or MISSING node) are
not an error: Sim_AST then falls back, for that pair, to the same normalised Levenshtein similarity on both
programs' Pygments token-type sequences (`code_token_types`: e.g. `Token.Keyword`, `Token.Name.Function`,
`Token.Punctuation`, whitespace and comments left out), and the result says so (`ast_basis == "tokens"`, and
`unparsable` names the side or sides that did not parse). Both programs use the same basis, so the two sequences
are comparable.

Node types (both recipes)
-------------------------
- Python: the stdlib `ast` module (`ast.parse`, the running interpreter's grammar, 3.12 here). Every node that
  `ast.iter_child_nodes` reaches counts (the nodes `ast.walk` yields), named by its class: `Module`,
  `FunctionDef`, `arguments`, `arg`, `Return`, `BinOp`, `Name`, `Load`, `Add`, ... (expression contexts
  `Load`/`Store`/`Del` and operators included). Identifiers, literals' values and comments are not nodes' types,
  so renaming a variable does not change them. A `SyntaxError`, a `ValueError` (NUL byte), a `RecursionError` or a
  `MemoryError` (absurdly deep nesting) from `ast.parse` makes the program unparsable; the walk is iterative.
- C, C++, Java: tree-sitter (the `tree_sitter_c`, `tree_sitter_cpp`, `tree_sitter_java` grammars) and its named
  nodes only (`node.is_named`: `function_definition`, `identifier`, `binary_expression`, ...). Anonymous nodes
  (punctuation and keywords such as `;`, `{`, `return`) are left out, which makes the tree abstract; comment nodes
  are named in these grammars and are left out too, as `ast` drops Python's comments. A tree with an ERROR or
  MISSING node is unparsable.

Cost: parsing and lexing plus Levenshtein computations (rapidfuzz's bit-parallel algorithm); about 1 ms for a
HumanEval-sized pair (see `docs/metrics.md`). One worst case of the `local` recipe: Python 3.12's tokenizer attaches
the whole physical line to every token, so a single line of n tokens costs O(n * line length) (a 100 000-character
one-line expression takes about 1 s, 400 000 characters about 25 s); ordinary multi-line programs stay linear.
"""

from __future__ import annotations

import ast as python_ast
import io
import re
import tokenize
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any, Literal

from rapidfuzz.distance import Levenshtein

from services.kernel.contracts import Language
from services.lib.codesim.tokens import check_language, code_token_types, is_comment_token, lexer

AstBasis = Literal["ast", "tokens"]


class SurfaceRecipe(StrEnum):
    """How SurfaceSim's two components are normalised (see the module docstring)."""

    LOCAL = "local"  # the definition of the scoring script accompanying LoCaL's data: comparable with its numbers
    SEQUENCE = "sequence"  # Tribunal's: raw character Levenshtein, Levenshtein of pre-order node-type sequences


# The tree-sitter grammar package of each language parsed with tree-sitter (Python uses the stdlib `ast`).
_GRAMMARS: dict[str, str] = {"c": "tree_sitter_c", "cpp": "tree_sitter_cpp", "java": "tree_sitter_java"}


@dataclass(frozen=True)
class SurfaceSimilarity:
    """SurfaceSim of one pair with its two components (LoCaL Eq. 1).

    Attributes:
        edit: Sim_Edit in [0, 1]. `local`: 1 - Levenshtein of the normalised texts / the larger RAW length;
            `sequence`: the inverse normalised character edit distance of the raw texts.
        ast: Sim_AST in [0, 1]. `local`: Jaccard of the node-type sets, 0 when a program does not parse;
            `sequence`: the normalised edit similarity of the pre-order node-type sequences (on token-type
            sequences when `ast_basis` is "tokens").
        mean: SurfaceSim = (edit + ast) / 2.
        ast_basis: "ast", or "tokens" when the `sequence` recipe's Sim_AST fell back to Pygments token types (the
            `local` recipe never falls back: it is always "ast").
        unparsable: Which programs did not parse: () or a subset of ("reference", "candidate"), in that order.
        recipe: The recipe that computed it.
    """

    edit: float
    ast: float
    mean: float
    ast_basis: AstBasis = "ast"
    unparsable: tuple[str, ...] = ()
    recipe: SurfaceRecipe = SurfaceRecipe.LOCAL

    def to_json(self) -> dict[str, Any]:
        """`{"edit", "ast", "mean", "ast_basis", "unparsable", "recipe"}`, JSON-ready."""
        return {
            "edit": self.edit,
            "ast": self.ast,
            "mean": self.mean,
            "ast_basis": self.ast_basis,
            "unparsable": list(self.unparsable),
            "recipe": self.recipe.value,
        }


def edit_similarity_chars(reference: str, candidate: str) -> float:
    """The `sequence` recipe's Sim_Edit: 1 - Levenshtein(reference, candidate) / max(len(reference),
    len(candidate)) over characters, in [0, 1]; 1.0 for two empty strings."""
    return float(Levenshtein.normalized_similarity(reference, candidate))


class _Unparsable(Exception):
    """The program does not parse in its language."""


def _python_node_types(source: str) -> list[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # e.g. invalid escape sequences: still a tree
            tree = python_ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # ValueError: a NUL byte in the source
        raise _Unparsable(str(exc)) from None
    types: list[str] = []
    stack: list[python_ast.AST] = [tree]
    while stack:  # iterative pre-order: deep nesting does not hit the recursion limit
        node = stack.pop()
        types.append(type(node).__name__)
        stack.extend(reversed(list(python_ast.iter_child_nodes(node))))
    return types


@cache
def _tree_sitter_parser(language: str) -> Any:
    import importlib

    from tree_sitter import Language as TreeSitterLanguage
    from tree_sitter import Parser

    grammar = importlib.import_module(_GRAMMARS[language])
    return Parser(TreeSitterLanguage(grammar.language()))


def _tree_sitter_node_types(source: str, language: str) -> list[str]:
    # A parser is not safe to share between threads: one per call (creating one costs microseconds).
    from tree_sitter import Parser

    parser = Parser(_tree_sitter_parser(language).language)
    tree = parser.parse(source.encode("utf-8", errors="surrogatepass"))
    root = tree.root_node
    if root.has_error:
        raise _Unparsable(f"tree-sitter found a syntax error in the {language} program")
    types: list[str] = []
    cursor = tree.walk()
    # Pre-order walk with a cursor (no recursion): visit, descend, else next sibling, else climb.
    while True:
        node = cursor.node
        assert node is not None  # a cursor always stands on a node of the tree
        if node.is_named and node.type != "comment":
            types.append(node.type)
        if node.type != "comment" and cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return types


def ast_node_types(source: str, language: str) -> list[str] | None:
    """The program's AST node types in pre-order (see the module docstring), or None when it does not parse.

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    language = check_language(language).value
    parse: Callable[[str], list[str]] = (
        _python_node_types if language == Language.PYTHON else lambda text: _tree_sitter_node_types(text, language)
    )
    try:
        return parse(source)
    except _Unparsable:
        return None


def _sequence_similarity(first: list[str], second: list[str]) -> float:
    return float(Levenshtein.normalized_similarity(first, second))


# The `local` recipe's text normalisation (module docstring).
_SPACES = re.compile(r"[ \t]+")
_NEWLINE_RUNS = re.compile(r"\n{2,}")
# `(?:.|\n)*?` (the script's spelling) is the same language under DOTALL but backtracks exponentially over an
# unclosed triple quote followed by line breaks (a hostile program stalled the worker): `.*?` matches the same.
_TRIPLE_QUOTED = re.compile(r'("""|\'\'\').*?\1', re.DOTALL)
_LINE_COMMENT = re.compile(r"#[^\n]*")
_PYTHON_DROPPED = frozenset({tokenize.COMMENT, tokenize.ENCODING, tokenize.INDENT, tokenize.DEDENT})
_PYTHON_LINE_ENDS = frozenset({tokenize.NL, tokenize.NEWLINE})


def _collapse(text: str) -> str:
    return _NEWLINE_RUNS.sub("\n", _SPACES.sub(" ", text)).strip()


def _python_normalized(source: str) -> str:
    parts: list[str] = []
    try:
        # Tokenizing only reads the text; errors may surface lazily, so the whole stream is consumed in here.
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in _PYTHON_LINE_ENDS:
                parts.append("\n")
            elif token.type not in _PYTHON_DROPPED:
                parts.append(token.string)
    except Exception:  # TokenError, IndentationError, SyntaxError, RecursionError, ...: the regex fallback
        without_strings = _TRIPLE_QUOTED.sub("", source)
        return _collapse(_LINE_COMMENT.sub("", without_strings))
    return _collapse("".join(parts))


def _pygments_normalized(source: str, language: str) -> str:
    parts: list[str] = []
    for token_type, value in lexer(language).get_tokens(source):
        if is_comment_token(token_type) or not value.strip():
            parts.append("\n" if "\n" in value else "")  # a comment or whitespace keeps only its line break
        else:
            parts.append(value)
    return _collapse("".join(parts))


def local_normalized(source: str, language: str) -> str:
    """The `local` recipe's normalised text of a program: its tokens without comments, joined with no separator,
    one "\n" per line (see the module docstring for the exact rules and the Python fallback).

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    language = check_language(language).value
    if language == Language.PYTHON:
        return _python_normalized(source)
    return _pygments_normalized(source, language)


def local_edit_similarity(reference: str, candidate: str, language: str) -> float:
    """The `local` recipe's Sim_Edit: 1 - Levenshtein(normalized texts) / max(len(reference), len(candidate)),
    the denominator on the RAW texts (LoCaL's script's quirk); 1.0 when both are empty, clamped to [0, 1].

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    longest = max(len(reference), len(candidate))
    if longest == 0:
        return 1.0
    distance = Levenshtein.distance(local_normalized(reference, language), local_normalized(candidate, language))
    # Normalising never lengthens a text, so distance <= longest already; the clamp is only a guard.
    return min(1.0, max(0.0, 1.0 - distance / longest))


def _jaccard(first: set[str], second: set[str]) -> float:
    union = first | second
    return len(first & second) / len(union) if union else 0.0


def _local(reference: str, candidate: str, language: str) -> SurfaceSimilarity:
    edit = local_edit_similarity(reference, candidate, language)
    ref_types, cand_types = ast_node_types(reference, language), ast_node_types(candidate, language)
    unparsable = tuple(side for side, types in (("reference", ref_types), ("candidate", cand_types)) if types is None)
    structural = 0.0 if ref_types is None or cand_types is None else _jaccard(set(ref_types), set(cand_types))
    return SurfaceSimilarity(
        edit=edit,
        ast=structural,
        mean=(edit + structural) / 2,
        ast_basis="ast",
        unparsable=unparsable,
        recipe=SurfaceRecipe.LOCAL,
    )


def surface_similarity(
    reference: str, candidate: str, language: str, recipe: SurfaceRecipe | str = SurfaceRecipe.LOCAL
) -> SurfaceSimilarity:
    """SurfaceSim of the candidate and the reference (LoCaL Eq. 1): the mean of Sim_Edit and Sim_AST.

    `recipe` "local" (the default) follows the scoring script that accompanies LoCaL's data, so the value can be
    compared with LoCaL's published SurfaceSim; "sequence" is Tribunal's more sensitive normalisation (module
    docstring). Never runs the code, and never raises for a program that does not parse: `local` then gives
    Sim_AST 0, `sequence` compares Pygments token-type sequences; the result names the side(s) (`unparsable`) and
    `sequence` reports its basis (`ast_basis`). Symmetric in its two programs (apart from which one `unparsable`
    names).

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
        ValueError: the recipe is not "local" or "sequence".
    """
    language = check_language(language).value
    recipe = SurfaceRecipe(recipe)
    if recipe is SurfaceRecipe.LOCAL:
        return _local(reference, candidate, language)
    edit = edit_similarity_chars(reference, candidate)
    ref_types, cand_types = ast_node_types(reference, language), ast_node_types(candidate, language)
    if ref_types is not None and cand_types is not None:
        basis: AstBasis = "ast"
        structural = _sequence_similarity(ref_types, cand_types)
        unparsable: tuple[str, ...] = ()
    else:
        basis = "tokens"
        unparsable = tuple(
            side for side, types in (("reference", ref_types), ("candidate", cand_types)) if types is None
        )
        structural = _sequence_similarity(code_token_types(reference, language), code_token_types(candidate, language))
    return SurfaceSimilarity(
        edit=edit,
        ast=structural,
        mean=(edit + structural) / 2,
        ast_basis=basis,
        unparsable=unparsable,
        recipe=SurfaceRecipe.SEQUENCE,
    )
