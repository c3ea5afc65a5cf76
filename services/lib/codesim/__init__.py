"""Code similarity of a candidate program to a reference program: pure functions returning raw values.

No database, queue or network: the functions take (reference, candidate, language), the language one of the
project's ids (python, c, cpp, java; services/kernel/languages.py), and return the metric's own value. Tribunal's
offline judges (judge/offline/reference.py) map these values to their 0..5 scores.

- `chrf_pp`: chrF++ (sacrebleu, word_order=2) on Pygments token streams, 0..100.
- `codebleu` / `codebleu_score`: CodeBLEU in [0, 1] by recipe ("package": the codebleu package's own;
  "pygments": the judge's), deterministic across processes (see `services/lib/codesim/code_bleu.py`).
- `edit_similarity`, `normalized_edit_distance`, `token_edit`: token-level Levenshtein over Pygments tokens.
- `code_tokens`, `code_token_types`, `blank_comments`: the Pygments token stream (no whitespace, no comments), its
  token types, and comment blanking.
- `surface_similarity`: LoCaL's SurfaceSim (Eq. 1), the mean of an edit similarity and an AST similarity, by
  recipe (`SurfaceRecipe`: "local", the scoring of LoCaL's released data, the default; "sequence", Tribunal's),
  `services/lib/codesim/surface.py`.
- `trivially_shared_ngrams`, `crystal_bleu`: CrystalBLEU through the authors' `crystalbleu` package
  (`services/lib/codesim/crystal.py`).
- `reference_metrics`: the per-pair metrics a similarity job reports (codebleu, crystalbleu, chrf, edit_similarity),
  `services/lib/codesim/reference.py`.

This `__init__` is the library's public surface: callers outside it import from `services.lib.codesim`; the modules
inside import one another directly (the lexer and comment test of `tokens.py` among them), never the package.
"""

from services.lib.codesim.code_bleu import CodeBleuRecipe, CodeBleuScore, GrammarUnavailable, codebleu, codebleu_score
from services.lib.codesim.crystal import DEFAULT_K, Ngram, crystal_bleu, trivially_shared_ngrams
from services.lib.codesim.edit import TokenEdit, chrf_pp, edit_similarity, normalized_edit_distance, token_edit
from services.lib.codesim.reference import REFERENCE_METRICS, ReferenceMetrics, reference_metrics
from services.lib.codesim.surface import (
    SurfaceRecipe,
    SurfaceSimilarity,
    ast_node_types,
    edit_similarity_chars,
    local_edit_similarity,
    local_normalized,
    surface_similarity,
)
from services.lib.codesim.tokens import (
    UnsupportedLanguage,
    blank_comments,
    check_language,
    code_token_types,
    code_tokens,
)

__all__ = [
    "DEFAULT_K",
    "REFERENCE_METRICS",
    "CodeBleuRecipe",
    "CodeBleuScore",
    "GrammarUnavailable",
    "Ngram",
    "ReferenceMetrics",
    "SurfaceRecipe",
    "SurfaceSimilarity",
    "TokenEdit",
    "UnsupportedLanguage",
    "ast_node_types",
    "blank_comments",
    "check_language",
    "chrf_pp",
    "code_token_types",
    "code_tokens",
    "codebleu",
    "codebleu_score",
    "crystal_bleu",
    "edit_similarity",
    "edit_similarity_chars",
    "local_edit_similarity",
    "local_normalized",
    "normalized_edit_distance",
    "reference_metrics",
    "surface_similarity",
    "token_edit",
    "trivially_shared_ngrams",
]
