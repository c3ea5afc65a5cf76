"""chrF++ and token edit distance / similarity on Pygments token streams (whitespace and comments discarded)."""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz.distance import Levenshtein

from services.lib.codesim.tokens import check_language, code_tokens

# sacrebleu's chrF++: character n-grams up to 6 plus word n-grams up to word_order, beta 2.
CHRF_WORD_ORDER = 2


def chrf_pp(reference: str, candidate: str, language: str) -> float:
    """chrF++ of the candidate against the reference, on sacrebleu's scale 0..100.

    Both programs become their Pygments token streams (`code_tokens`) joined by single spaces, scored with
    sacrebleu's `CHRF(word_order=2).sentence_score(candidate, [reference])`: chrF ignores whitespace inside its
    character n-grams, and its "words" are then Pygments tokens. Two empty token streams are identical: 100.0
    (sacrebleu alone would say 0). Not symmetric (chrF weighs recall twice as much as precision).

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    check_language(language)
    from sacrebleu.metrics import CHRF

    ref_tokens, cand_tokens = code_tokens(reference, language), code_tokens(candidate, language)
    if not cand_tokens and not ref_tokens:
        return 100.0
    return float(CHRF(word_order=CHRF_WORD_ORDER).sentence_score(" ".join(cand_tokens), [" ".join(ref_tokens)]).score)


@dataclass(frozen=True)
class TokenEdit:
    """The token-level Levenshtein distance between two programs and their token counts.

    Attributes:
        distance: Insertions, deletions and substitutions of whole tokens turning one stream into the other.
        reference_tokens: The reference's number of tokens.
        candidate_tokens: The candidate's number of tokens.
    """

    distance: int
    reference_tokens: int
    candidate_tokens: int

    @property
    def longest(self) -> int:
        """The longer stream's number of tokens."""
        return max(self.reference_tokens, self.candidate_tokens)

    @property
    def normalized(self) -> float:
        """distance / longest, in [0, 1]; 0.0 when both streams are empty."""
        return 0.0 if self.longest == 0 else self.distance / self.longest

    @property
    def similarity(self) -> float:
        """1 - distance / longest, in [0, 1]; 1.0 when both streams are empty."""
        return 1.0 if self.longest == 0 else 1 - self.distance / self.longest


def token_edit(reference: str, candidate: str, language: str) -> TokenEdit:
    """The Levenshtein distance between the programs' Pygments token streams (`code_tokens`), with their lengths.

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    ref_tokens, cand_tokens = code_tokens(reference, language), code_tokens(candidate, language)
    distance = Levenshtein.distance(ref_tokens, cand_tokens)
    return TokenEdit(distance=distance, reference_tokens=len(ref_tokens), candidate_tokens=len(cand_tokens))


def normalized_edit_distance(reference: str, candidate: str, language: str) -> float:
    """Token edit distance normalised by the longer stream: d / max(|ref|, |cand|) in [0, 1], symmetric; 0.0
    for two empty streams.

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    return token_edit(reference, candidate, language).normalized


def edit_similarity(reference: str, candidate: str, language: str) -> float:
    """Token edit similarity (AXIOM IV-D1): 1 - d / max(|ref|, |cand|) in [0, 1], symmetric; 1.0 for two empty
    streams.

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    return token_edit(reference, candidate, language).similarity
