"""The reference-based methods of AXIOM IV-D1 (`chrf`, `codebleu`, `edit_similarity`): the code-similarity
library's metrics (services/lib/codesim: Pygments tokens, whitespace and comments discarded) mapped to 0..5."""

from __future__ import annotations

from typing import Any

from judge.offline.scores import OfflineScore, OfflineUnavailable, check_language, grade
from services.lib import codesim
from services.lib.codesim import CodeBleuRecipe, GrammarUnavailable


def code_tokens(source: str, language: str) -> list[str]:
    """The program's Pygments tokens without whitespace and comments (`services.lib.codesim.code_tokens`).

    Raises:
        OfflineUnavailable: the language is not python, c, cpp or java.
    """
    check_language(language)
    return codesim.code_tokens(source, language)


def _reference_result(method: str, raw: float, rationale_detail: str, detail: dict[str, Any]) -> OfflineScore:
    raw = min(1.0, max(0.0, raw))
    score = grade(raw)
    rationale = f"{method} = {raw:.3f} against the reference ({rationale_detail}); score = round(5 * raw) = {score}."
    fields = {"raw": raw, "score": score, "rationale": rationale, **detail}
    return OfflineScore(p_ac=raw, score=float(score), fields=fields, rationale=rationale)


def chrf(candidate: str, reference: str, language: str) -> OfflineScore:
    """ChrF++ (`services.lib.codesim.chrf_pp`: sacrebleu `CHRF(word_order=2)`, sentence level, on the Pygments token
    streams joined by single spaces; two empty streams score 100). raw = chrF / 100.
    """
    check_language(language)
    try:
        value = codesim.chrf_pp(reference, candidate, language)
    except ImportError as exc:
        raise OfflineUnavailable("chrf: sacrebleu is not installed") from exc
    cand_tokens, ref_tokens = len(code_tokens(candidate, language)), len(code_tokens(reference, language))
    detail = {"chrf": value, "candidate_tokens": cand_tokens, "reference_tokens": ref_tokens}
    return _reference_result("chrF++", value / 100, f"{cand_tokens} vs {ref_tokens} tokens", detail)


def codebleu(candidate: str, reference: str, language: str) -> OfflineScore:
    """CodeBLEU by the library's `pygments` recipe (`services.lib.codesim.codebleu_score`), deterministic.

    The n-gram components see the Pygments tokens (whitespace and comments discarded); the syntax and data-flow
    components need parseable code and see the source with its comments blanked.

    The package scores the data-flow component as 1 whenever it is 0 (`dataflow or 1`), which hands a program that
    shares no data flow with the reference a quarter of the score for free. Here the component keeps its value
    0 when the reference has data flows; when the reference has none (the package warns the component
    "degenerates"), the component is left out and raw is the mean of the other three. `codebleu_package` in the
    fields is the package's combination of the same components.
    """
    check_language(language)
    try:
        result = codesim.codebleu_score(reference, candidate, language, recipe=CodeBleuRecipe.PYGMENTS)
    except ImportError as exc:
        raise OfflineUnavailable("codebleu: the codebleu package is not installed") from exc
    except GrammarUnavailable as exc:  # the grammar wheel is missing or built for another tree-sitter ABI
        raise OfflineUnavailable(f"codebleu: {exc}") from exc
    dataflow = result.dataflow_match
    detail = {
        "codebleu_package": result.package_value,
        "ngram_match": result.ngram_match,
        "weighted_ngram_match": result.weighted_ngram_match,
        "syntax_match": result.syntax_match,
        "dataflow_match": dataflow,
    }
    summary = (
        f"n-gram {result.ngram_match:.2f}, weighted {result.weighted_ngram_match:.2f}, "
        f"syntax {result.syntax_match:.2f}, data flow "
    ) + ("n/a: the reference has none" if dataflow is None else f"{dataflow:.2f}")
    return _reference_result("CodeBLEU", result.value, summary, detail)


def edit_similarity(candidate: str, reference: str, language: str) -> OfflineScore:
    """Token edit similarity (IV-D1, `services.lib.codesim.token_edit`): raw = 1 - d / max(|p|, |p_ref|), d the
    token-level Levenshtein distance over Pygments tokens; two empty token lists are identical (raw 1.0).
    """
    check_language(language)
    edit = codesim.token_edit(reference, candidate, language)
    detail = {
        "distance": edit.distance,
        "candidate_tokens": edit.candidate_tokens,
        "reference_tokens": edit.reference_tokens,
    }
    rationale_detail = f"{edit.distance} token edits, longer program {edit.longest} tokens"
    return _reference_result("edit similarity", edit.similarity, rationale_detail, detail)
