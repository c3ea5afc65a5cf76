"""CrystalBLEU: trivially shared n-grams by hand, the authors' package, plain BLEU when nothing is ignored."""

from __future__ import annotations

import warnings

import crystalbleu
import pytest
from nltk.translate.bleu_score import sentence_bleu

from services.lib.codesim import (
    DEFAULT_K,
    UnsupportedLanguage,
    code_tokens,
    crystal_bleu,
    trivially_shared_ngrams,
)

LOOPS = [
    "for i in range(n):\n    total += data[i]\n",
    "for i in range(n):\n    print(i)\n",
    "for i in range(n):\n    s = s + i\n",
    "for i in range(n):\n    if i % 2:\n        total += i\n",
]
REFERENCE = "for i in range(n):\n    total += data[i]\nprint(total)\n"
CANDIDATE = "for i in range(n):\n    total += i\nprint(total)\n"


def test_trivially_shared_ngrams_by_hand() -> None:
    # Tokens [a, =, 1] and [a, =, 2]. Counts: (a) 2, (=) 2, (a =) 2, every other n-gram 1. Ties at the k-th place
    # go to the lexicographically smaller n-gram: ("=",) < ("a",) < ("a", "=").
    corpus = ["a = 1\n", "a = 2\n"]
    assert trivially_shared_ngrams(corpus, "python", k=3) == {("a",), ("=",), ("a", "=")}
    assert trivially_shared_ngrams(corpus, "python", k=2) == {("=",), ("a",)}
    assert trivially_shared_ngrams(list(reversed(corpus)), "python", k=2) == {("=",), ("a",)}  # order-free
    # Every distinct n-gram (4 unigrams, 3 bigrams, 2 trigrams, no 4-gram), never across two programs.
    everything = trivially_shared_ngrams(corpus, "python", k=1000)
    assert ("1", "a") not in everything
    assert everything == {
        ("a",), ("=",), ("1",), ("2",), ("a", "="), ("=", "1"), ("=", "2"), ("a", "=", "1"), ("a", "=", "2"),
    }  # fmt: skip
    assert trivially_shared_ngrams(corpus, "python", k=0) == frozenset()
    assert DEFAULT_K == 50


def test_trivially_shared_ngrams_counts_up_to_4_grams_and_takes_k() -> None:
    shared = trivially_shared_ngrams(LOOPS, "python")
    assert len(shared) == 50
    assert ("for", "i", "in", "range") in shared  # a 4-gram of every program
    assert all(1 <= len(ngram) <= 4 for ngram in shared)


def test_nothing_ignored_is_plain_bleu() -> None:
    ref, cand = code_tokens(REFERENCE, "python"), code_tokens(CANDIDATE, "python")
    assert crystal_bleu(REFERENCE, CANDIDATE, "python", frozenset()) == sentence_bleu([ref], cand)
    assert crystal_bleu(REFERENCE, REFERENCE, "python", frozenset()) == 1.0


def test_ignoring_shared_ngrams_lowers_the_score() -> None:
    bleu = crystal_bleu(REFERENCE, CANDIDATE, "python", frozenset())
    shared = trivially_shared_ngrams(LOOPS, "python")
    crystal = crystal_bleu(REFERENCE, CANDIDATE, "python", shared)
    assert 0 < crystal < bleu
    # The authors' package, called directly, gives the same number.
    ref, cand = code_tokens(REFERENCE, "python"), code_tokens(CANDIDATE, "python")
    assert crystal == crystalbleu.sentence_bleu([ref], cand, ignoring=shared)
    # After a JSON round trip the n-grams are lists: the same value.
    assert crystal_bleu(REFERENCE, CANDIDATE, "python", [list(ngram) for ngram in sorted(shared)]) == crystal  # type: ignore[misc]


def test_no_match_at_some_order_is_exactly_0_and_silent() -> None:
    # Sharing only trivial n-grams: once they are ignored nothing matches.
    shared = trivially_shared_ngrams(LOOPS, "python")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the package would warn here; this module does not
        assert crystal_bleu(LOOPS[0], LOOPS[1], "python", shared) == 0.0
        # Three tokens: no 4-gram at all.
        assert crystal_bleu("x = 1", "x = 1", "python", frozenset()) == 0.0
        assert crystal_bleu("", "", "python", frozenset()) == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        package = crystalbleu.sentence_bleu(
            [code_tokens(LOOPS[0], "python")], code_tokens(LOOPS[1], "python"), ignoring=shared
        )
    assert package < 1e-70  # what the package returns, and calls 0


@pytest.mark.parametrize("language", ["c", "cpp", "java"])
def test_other_languages(language: str) -> None:
    programs = [
        "int f(int n) { int t = 0; for (int i = 0; i < n; i++) t += i; return t; }",
        "int g(int n) { int t = 1; for (int i = 0; i < n; i++) t *= 2; return t; }",
    ]
    shared = trivially_shared_ngrams(programs, language, k=5)
    value = crystal_bleu(programs[0], programs[1], language, shared)
    assert 0.0 <= value < crystal_bleu(programs[0], programs[1], language, frozenset()) <= 1.0


def test_errors() -> None:
    with pytest.raises(UnsupportedLanguage):
        trivially_shared_ngrams(["x"], "go")
    with pytest.raises(UnsupportedLanguage):
        crystal_bleu("x", "x", "go", frozenset())
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="k must be"):
            trivially_shared_ngrams(["x"], "python", k=bad)  # type: ignore[arg-type]
