"""CodeBLEU (Ren et al. 2020) through the `codebleu` package (0.7.0), deterministic, in two named recipes.

CodeBLEU combines four components, each in [0, 1]: BLEU over tokens (`ngram_match`), BLEU with language keywords
weighing 5 times the other tokens (`weighted_ngram_match`), the share of the reference's tree-sitter subtrees
found in the candidate (`syntax_match`), and the share of the reference's normalised data-flow edges found in the
candidate (`dataflow_match`). The components are the package's own functions, called for one pair.

Recipes (`CodeBleuRecipe`):

- `package`: what `codebleu.calc_codebleu([reference], [candidate], lang)` computes with its defaults, the recipe
  of published scores (LoCaL among them): the n-gram components see whitespace-separated tokens (`str.split`),
  the syntax and data-flow components the source as given, and value = 0.25 * (ngram + weighted + syntax +
  (dataflow or 1)), so a data-flow match of 0 (none of the reference's edges found, or a reference without data
  flow) counts as 1.
- `pygments`: the recipe of Tribunal's `codebleu` judge (judge/offline/reference.py). Comments (as Pygments sees
  them) are blanked first (`blank_comments`); the n-gram components see Pygments tokens without whitespace and
  comments (`code_tokens`), the syntax and data-flow components the blanked source. value = the mean of the four
  components with a data-flow match of 0 kept as 0; when the reference has no data flow at all (the package
  warns that the component "degenerates") that component is left out and value is the mean of the other three.

Determinism: the package builds lists of variable names with `list(set(...))` when it merges data-flow edges
(codebleu/parser/DFG.py, and `get_data_flow` in codebleu/dataflow_match.py), and the data-flow match compares
those lists in order, so its value moves with PYTHONHASHSEED (string hashing). Here those sets iterate in
sorted order when they hold only strings (sets of token indices, whose order does not depend on the seed, are
left as they are), so the value is the same in every process. This departs from the raw package only where the
package itself is not deterministic: the value is then the one the package gives for the sorted order of names;
wherever the package's value does not depend on the seed, it is the package's value.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

from services.lib.codesim.tokens import blank_comments, check_language, code_tokens

# The package's default weights (alpha, beta, gamma, theta) of ngram, weighted ngram, syntax and data-flow match.
PACKAGE_WEIGHTS = (0.25, 0.25, 0.25, 0.25)


class CodeBleuRecipe(StrEnum):
    """How CodeBLEU is computed (see the module docstring)."""

    PACKAGE = "package"
    PYGMENTS = "pygments"


class GrammarUnavailable(RuntimeError):
    """No usable tree-sitter grammar for the language (the wheel is missing or built for another ABI)."""


@dataclass(frozen=True)
class CodeBleuScore:
    """CodeBLEU of one candidate against one reference, with its components.

    Attributes:
        value: CodeBLEU in [0, 1] as the recipe combines the components.
        ngram_match: BLEU over the recipe's tokens.
        weighted_ngram_match: BLEU with keywords weighing 1 and other tokens 0.2.
        syntax_match: The share of the reference's syntax subtrees found in the candidate.
        dataflow_match: The share of the reference's data-flow edges found in the candidate; None when the
            reference has no data flow (the package scores the component 0 then, and warns).
        recipe: The recipe that produced `value`.
    """

    value: float
    ngram_match: float
    weighted_ngram_match: float
    syntax_match: float
    dataflow_match: float | None
    recipe: CodeBleuRecipe

    @property
    def package_value(self) -> float:
        """The package's combination of these components: 0.25 each, a data-flow match of 0 or None counting 1.

        Equals `value` for the `package` recipe."""
        return _package_combination(self.ngram_match, self.weighted_ngram_match, self.syntax_match, self.dataflow_match)


def _package_combination(ngram: float, weighted: float, syntax: float, dataflow: float | None) -> float:
    # calc_codebleu's expression, term by term (the same float operations, so the same bits).
    alpha, beta, gamma, theta = PACKAGE_WEIGHTS
    return alpha * ngram + beta * weighted + gamma * syntax + theta * (dataflow or 1)


def codebleu(
    reference: str, candidate: str, language: str, *, recipe: CodeBleuRecipe | str = CodeBleuRecipe.PACKAGE
) -> float:
    """CodeBLEU of the candidate against the reference in [0, 1]: `codebleu_score(...).value`.

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
        GrammarUnavailable: the language's tree-sitter grammar cannot be loaded.
    """
    return codebleu_score(reference, candidate, language, recipe=recipe).value


def codebleu_score(
    reference: str, candidate: str, language: str, *, recipe: CodeBleuRecipe | str = CodeBleuRecipe.PACKAGE
) -> CodeBleuScore:
    """CodeBLEU of the candidate against the reference, with its four components, by the named recipe
    ("package" or "pygments", see the module docstring).

    Raises:
        ValueError: the recipe is not one of CodeBleuRecipe.
        UnsupportedLanguage: the language is not python, c, cpp or java.
        GrammarUnavailable: the language's tree-sitter grammar cannot be loaded.
        ImportError: the codebleu package is not installed.
    """
    language = check_language(language).value  # the package's language names are the project's ids
    recipe = CodeBleuRecipe(recipe)
    from codebleu import bleu, syntax_match, weighted_ngram_match
    from codebleu.utils import get_tree_sitter_language

    try:
        grammar = get_tree_sitter_language(language)
    except Exception as exc:  # the grammar wheel is missing or built for another tree-sitter ABI
        raise GrammarUnavailable(f"no usable tree-sitter grammar for {language}: {exc!r}") from exc

    tokenizer: Callable[[str], list[str]]
    if recipe is CodeBleuRecipe.PACKAGE:
        tokenizer = str.split
    else:
        reference, candidate = blank_comments(reference, language), blank_comments(candidate, language)

        def tokenizer(text: str) -> list[str]:
            return code_tokens(text, language)

    # As calc_codebleu prepares its inputs: stripped, then tokenized.
    reference, candidate = reference.strip(), candidate.strip()
    ref_tokens, cand_tokens = tokenizer(reference), tokenizer(candidate)
    ngram = float(bleu.corpus_bleu([[ref_tokens]], [cand_tokens]))
    keywords = _keywords(language)
    token_weights = {token: 1 if token in keywords else 0.2 for token in ref_tokens}
    weighted = float(weighted_ngram_match.corpus_bleu([[[ref_tokens, token_weights]]], [cand_tokens]))
    syntax = float(syntax_match.corpus_syntax_match([[reference]], [candidate], language, tree_sitter_language=grammar))
    dataflow = _dataflow_match(reference, candidate, language, grammar)

    if recipe is CodeBleuRecipe.PACKAGE:
        value = _package_combination(ngram, weighted, syntax, dataflow)
    else:
        parts = [ngram, weighted, syntax] + ([] if dataflow is None else [dataflow])
        value = sum(parts) / len(parts)
    return CodeBleuScore(value, ngram, weighted, syntax, dataflow, recipe)


@cache
def _keywords(language: str) -> frozenset[str]:
    # The file calc_codebleu reads (keywords_dir's default), one keyword a line.
    from codebleu.codebleu import PACKAGE_DIR

    with open(PACKAGE_DIR / "keywords" / f"{language}.txt", encoding="utf-8") as file:
        return frozenset(line.strip() for line in file.readlines())


# --- data-flow match, deterministic --------------------------------------------------------------------------------

_DATAFLOW_LOCK = threading.Lock()
_MISSING = object()


class _SortedNameSet(set[Any]):
    """A set that iterates in sorted order when it holds only strings (names), so `list(set(names))` does not
    depend on PYTHONHASHSEED; any other set iterates as a plain set would (its order does not depend on the seed)."""

    def __iter__(self) -> Iterator[Any]:
        if all(isinstance(item, str) for item in set.__iter__(self)):
            return iter(sorted(set.__iter__(self)))
        return set.__iter__(self)


@contextmanager
def deterministic_sets(functions: Iterable[Callable[..., Any]]) -> Iterator[None]:
    """While held, the name `set` in the modules defining `functions` is `_SortedNameSet` (module globals shadow
    the builtin); restored after. One holder at a time (a process-wide lock)."""
    namespaces = list({id(function.__globals__): function.__globals__ for function in functions}.values())
    with _DATAFLOW_LOCK:
        previous = [namespace.get("set", _MISSING) for namespace in namespaces]
        for namespace in namespaces:
            namespace["set"] = _SortedNameSet
        try:
            yield
        finally:
            for namespace, value in zip(namespaces, previous, strict=True):
                if value is _MISSING:
                    namespace.pop("set", None)
                else:
                    namespace["set"] = value


def _dataflow_match(reference: str, candidate: str, language: str, grammar: Any) -> float | None:
    """The package's data-flow match (`corpus_dataflow_match`) for one pair, deterministic, and None instead of 0
    (and no warning) when the reference has no data flow.

    As the package does: comments and docstrings are removed (codebleu's `remove_comments_and_docstrings`), each
    program's data-flow graph is extracted (`get_data_flow`) and normalised (`normalize_dataflow`: variables
    renamed var_0, var_1, ... in order of appearance), and each reference edge found among the candidate's edges
    counts once (matched candidate edges are used up).
    """
    from codebleu.dataflow_match import dfg_function, get_data_flow, normalize_dataflow
    from codebleu.parser import remove_comments_and_docstrings
    from tree_sitter import Parser

    parser = Parser()
    parser.language = grammar
    extractor = dfg_function[language]
    try:
        candidate = remove_comments_and_docstrings(candidate, language)
    except Exception:  # as the package: a program the helper cannot tokenize is used as it is
        pass
    try:
        reference = remove_comments_and_docstrings(reference, language)
    except Exception:
        pass
    with deterministic_sets([get_data_flow, extractor]):
        cand_dfg = get_data_flow(candidate, [parser, extractor])
        ref_dfg = get_data_flow(reference, [parser, extractor])
    normalized_cand = normalize_dataflow(cand_dfg)
    normalized_ref = normalize_dataflow(ref_dfg)
    if not normalized_ref:
        return None
    matched = 0
    for edge in normalized_ref:
        if edge in normalized_cand:
            matched += 1
            normalized_cand.remove(edge)
    return matched / len(normalized_ref)
