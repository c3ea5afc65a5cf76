"""Code similarity of a candidate program to a reference program: pure functions returning raw values.

No database, queue or network: the functions take (reference, candidate, language), the language one of the
project's ids (python, c, cpp, java; services/kernel/languages.py), and return the metric's own value. Tribunal's
offline judges (judge/offline.py) map these values to their 0..5 scores.

- `chrf_pp`: chrF++ (sacrebleu, word_order=2) on Pygments token streams, 0..100.
- `codebleu` / `codebleu_score`: CodeBLEU in [0, 1] by recipe ("package": the codebleu package's own;
  "pygments": the judge's), deterministic across processes (see `services/codesim/code_bleu.py`).
- `edit_similarity`, `normalized_edit_distance`, `token_edit`: token-level Levenshtein over Pygments tokens.
- `code_tokens`, `blank_comments`: the Pygments token stream (no whitespace, no comments) and comment blanking.
"""

from services.codesim.code_bleu import CodeBleuRecipe, CodeBleuScore, GrammarUnavailable, codebleu, codebleu_score
from services.codesim.edit import TokenEdit, chrf_pp, edit_similarity, normalized_edit_distance, token_edit
from services.codesim.tokens import UnsupportedLanguage, blank_comments, check_language, code_tokens

__all__ = [
    "CodeBleuRecipe",
    "CodeBleuScore",
    "GrammarUnavailable",
    "TokenEdit",
    "UnsupportedLanguage",
    "blank_comments",
    "check_language",
    "chrf_pp",
    "code_tokens",
    "codebleu",
    "codebleu_score",
    "edit_similarity",
    "normalized_edit_distance",
    "token_edit",
]
