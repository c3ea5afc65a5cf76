"""The reference-based code evaluation metrics (CEMs) a similarity job reports for one (reference, candidate) pair.

`reference_metrics(reference, candidate, language, crystal_ignore=...)` returns a `ReferenceMetrics`, whose
`values` are, each in [0, 1]:

- `codebleu`: CodeBLEU by the codebleu package's own recipe (`codebleu(..., recipe="package")`: equal weights 0.25,
  whitespace tokens, equal to `codebleu.calc_codebleu([reference], [candidate], language)["codebleu"]` and the
  same in every process; see `services/lib/codesim/code_bleu.py`). All four project languages have a codebleu
  grammar and keyword list (C included, through `tree_sitter_c`).
- `crystalbleu`: CrystalBLEU with the given trivially shared n-grams ignored (`services/lib/codesim/crystal.py`).
- `chrf`: chrF++ on Pygments token streams (`chrf_pp`), divided by 100: sacrebleu's 0..100 scale brought to [0, 1].
- `edit_similarity`: token edit similarity (AXIOM IV-D1, `edit_similarity`): 1 - d / max(|p|, |p_ref|) over
  Pygments tokens.

A metric that cannot be computed for the pair is None in `values`, and `errors` says why: CodeBLEU when the language's
tree-sitter grammar cannot be loaded or the package fails on the input; CrystalBLEU when no n-gram set is given
(`crystal_ignore=None`). An unsupported language is a caller's mistake and raises.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from services.lib.codesim.code_bleu import CodeBleuRecipe, GrammarUnavailable, codebleu
from services.lib.codesim.crystal import Ngram, crystal_bleu
from services.lib.codesim.edit import chrf_pp, edit_similarity
from services.lib.codesim.tokens import check_language

REFERENCE_METRICS: tuple[str, ...] = ("codebleu", "crystalbleu", "chrf", "edit_similarity")


@dataclass(frozen=True)
class ReferenceMetrics:
    """The per-pair metrics with the reasons for those that could not be computed.

    Attributes:
        values: every name of `REFERENCE_METRICS`, in that order -> its value in [0, 1], or None.
        errors: name -> why it is None, for the metrics that are None only.
    """

    values: dict[str, float | None]
    errors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """`{"codebleu", "crystalbleu", "chrf", "edit_similarity", "errors": {name: reason}}`, JSON-ready."""
        return {**self.values, "errors": dict(self.errors)}


def reference_metrics(
    reference: str, candidate: str, language: str, *, crystal_ignore: Collection[Ngram] | None
) -> ReferenceMetrics:
    """CodeBLEU, CrystalBLEU, chrF++ / 100 and token edit similarity of the candidate against the reference.

    Args:
        reference, candidate: the two programs (never run).
        language: python, c, cpp or java.
        crystal_ignore: CrystalBLEU's trivially shared n-grams (`trivially_shared_ngrams` over the job's corpus);
            None: CrystalBLEU is not computed (None, with a reason).

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    language = check_language(language).value
    values: dict[str, float | None] = dict.fromkeys(REFERENCE_METRICS)
    errors: dict[str, str] = {}
    try:
        values["codebleu"] = codebleu(reference, candidate, language, recipe=CodeBleuRecipe.PACKAGE)
    except GrammarUnavailable as exc:
        errors["codebleu"] = str(exc)
    except (ImportError, RecursionError, ZeroDivisionError, ValueError) as exc:  # the package on odd input
        errors["codebleu"] = f"codebleu failed: {type(exc).__name__}: {exc}"
    if crystal_ignore is None:
        errors["crystalbleu"] = "no trivially shared n-grams given (crystal_ignore=None)"
    else:
        try:
            values["crystalbleu"] = crystal_bleu(reference, candidate, language, crystal_ignore)
        except ImportError as exc:
            errors["crystalbleu"] = f"crystalbleu is not installed: {exc}"
    values["chrf"] = chrf_pp(reference, candidate, language) / 100.0
    values["edit_similarity"] = edit_similarity(reference, candidate, language)
    return ReferenceMetrics(values=values, errors=errors)
