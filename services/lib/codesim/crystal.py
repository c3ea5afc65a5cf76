"""CrystalBLEU (Eghbali & Pradel, ASE 2022): BLEU that ignores the n-grams trivially shared by any two programs of a
language, through the authors' `crystalbleu` package (0.2, their modified copy of NLTK's BLEU; it needs `nltk`).

Two steps, as the authors' README and scripts do them:

1. `trivially_shared_ngrams(corpus, language, k)`: the k most frequent n-grams (n = 1..4, counted together) of a
   corpus of programs in the language. Each program's n-grams are counted within the program (an n-gram never
   spans two programs) and the counts are summed over the corpus. k = 50 by default, the value LoCaL uses
   (following Naik 2024; the CrystalBLEU paper's examples use 500). Ties at the k-th place go to the
   lexicographically smaller n-gram (the authors' `Counter.most_common` breaks them by first appearance, which
   would make the set depend on the corpus's order).
2. `crystal_bleu(reference, candidate, language, ignore)`: `crystalbleu.sentence_bleu([reference_tokens],
   candidate_tokens, ignoring=ignore)`: sentence BLEU with uniform weights (0.25 for n = 1..4), NLTK's brevity
   penalty, and every n-gram in `ignore` removed from both programs' n-gram counts before the clipped
   precisions are computed. With an empty `ignore` it is plain BLEU (NLTK's `sentence_bleu`).

Tokens: the Pygments token stream of the language (`code_tokens`: whitespace and comments dropped), as the
authors' scripts tokenize code (Pygments lexers, whitespace and comment tokens removed); the package itself
prescribes no tokenizer.

No smoothing (the package's default, `SmoothingFunction.method0`). When some order n has no matching n-gram (often
the case once the shared n-grams are ignored; LoCaL notes that CrystalBLEU "often returns zero"), the package
returns a number below 1e-76 and warns that "the BLEU score evaluates to 0"; this module returns exactly 0.0 then,
and does not warn (warnings are process-global state, unsafe to silence from worker threads). Everywhere else the
value is the package's.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Collection, Iterable
from fractions import Fraction
from typing import Any

from services.lib.codesim.tokens import check_language, code_tokens

# LoCaL (paper 002, 4.3) uses k = 50, following Naik (2024).
DEFAULT_K = 50
MAX_ORDER = 4

Ngram = tuple[str, ...]


def _ngrams(tokens: list[str], n: int) -> Iterable[Ngram]:
    return (tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def trivially_shared_ngrams(corpus: Iterable[str], language: str, k: int = DEFAULT_K) -> frozenset[Ngram]:
    """The k most frequent token n-grams (n = 1..4) of the corpus: what CrystalBLEU ignores.

    Args:
        corpus: programs in the language (e.g. every reference and candidate of the evaluation, or a larger
            sample of the language); each is tokenized with `code_tokens`.
        language: python, c, cpp or java.
        k: how many n-grams to return (fewer if the corpus has fewer distinct n-grams).

    Returns:
        The n-grams as tuples of tokens, e.g. `("(",)`, `("def", )`, `(")", ":")`. Deterministic for a given
        multiset of programs (ties at the k-th place: lexicographically smaller n-gram first).

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
        ValueError: k is negative or not an integer.
    """
    check_language(language)
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
    counts: Counter[Ngram] = Counter()
    for program in corpus:
        tokens = code_tokens(program, language)
        for n in range(1, MAX_ORDER + 1):
            counts.update(_ngrams(tokens, n))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return frozenset(ngram for ngram, _ in ranked[:k])


class _QuietNoSmoothing:
    """The package's `method0` (no smoothing) without its warning, remembering whether an order had no match."""

    def __init__(self) -> None:
        self.zero_order = False

    def __call__(self, p_n: list[Fraction], *args: Any, **kwargs: Any) -> list[Fraction | float]:
        smoothed: list[Fraction | float] = []
        for p_i in p_n:
            if p_i.numerator != 0:
                smoothed.append(p_i)
            else:
                self.zero_order = True
                smoothed.append(sys.float_info.min)  # as method0: log() of it stands for a precision of 0
        return smoothed


def crystal_bleu(reference: str, candidate: str, language: str, ignore: Collection[Ngram]) -> float:
    """CrystalBLEU of the candidate against the reference, in [0, 1] (see the module docstring).

    Args:
        reference, candidate: the two programs.
        language: python, c, cpp or java.
        ignore: the trivially shared n-grams (`trivially_shared_ngrams`; any collection of token sequences, e.g.
            lists after a JSON round trip); empty: plain sentence BLEU.

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
        ImportError: the crystalbleu (or nltk) package is not installed.
    """
    check_language(language)
    from crystalbleu import sentence_bleu

    # A set, so that the package's `ngram not in ignoring` is a hash look-up (a JSON round trip gives lists).
    ignored = ignore if isinstance(ignore, set | frozenset) else frozenset(tuple(ngram) for ngram in ignore)
    ref_tokens, cand_tokens = code_tokens(reference, language), code_tokens(candidate, language)
    smoothing = _QuietNoSmoothing()
    value = float(sentence_bleu([ref_tokens], cand_tokens, smoothing_function=smoothing, ignoring=ignored))
    return 0.0 if smoothing.zero_order else value
