"""Offline judges: score an attempt without any LLM or network, from its public tests, a reference, or a linter.

Five methods, each a plain function returning an `OfflineScore`, or raising with the reason it has no score, never
giving a low score instead: `OfflineNotApplicable` when the method does not apply to the attempt (no reference
solution, no public tests, no linter for its language, empty source), which the caller records as a
`not_applicable` judgment, or `OfflineUnavailable` when it could not score it here (a tool or package missing, no
sandbox, the tool failed), recorded as a `failed` one:

- `sample_tests`: the attempt's own results on the problem's *public* tests (hidden tests are the ground truth the
  judges are measured against, so they never reach a judge). Fills the co-creation rubric (p_ac, s_algo, s_robust).
- `chrf`, `codebleu`, `edit_similarity`: the rule-based reference metrics of AXIOM IV-D1 (ChrF++, CodeBLEU and
  token edit similarity), computed on Pygments token streams with whitespace and comments discarded. The metrics
  themselves are the code-similarity library's (`services/lib/codesim/`); these judges only map its raw values.
- `lint`: static analysis only (pylint for Python, cppcheck for C and C++), each tool in nsjail
  (`judge/tooljail.py`); the program is never run, and nothing the tool prints is kept as text. pylint runs warm:
  concurrent requests share a jail in which pylint is imported once and each file is linted by a forked child
  (`PylintBatcher`, `judge/pylint_warm.py`), with exactly the result of a cold run (`lint(..., warm=False)`).

The 0..5 score of a reference or lint method is `round(5 * raw)` with raw clamped into [0, 1]: IV-D1's min-max
normalisation taken over the metric's theoretical range [0, 1]. IV-D1's *data-set* min-max (over the observed
minimum and maximum raw scores of one metric) needs every row at once, so reports apply it later to the stored
`raw`. Rounding is half up everywhere (2.5 -> 3), not Python's round-half-to-even.

One module per concept: `scores` (the score, the unavailable reason, the grade), `public_tests` (`sample_tests`),
`reference` (the reference metrics), `tools` (the jailed run every linter shares, and its limits),
`pylint_driver` (the pylint driver, the cold run, the report), `pylint_batch` (warm batches; the supervisor that
runs in the jail is judge/harness/pylint_warm.py), `cppcheck`, and `dispatch` (`lint` and `score_offline`). This
module is the public surface; a limit is changed on the module that reads it (`tools`, `pylint_batch`, `cppcheck`).
"""

from judge.offline.cppcheck import CPPCHECK_ERROR_WEIGHT, CPPCHECK_FINDINGS_FOR_ZERO
from judge.offline.dispatch import lint, lint_async, score_offline, score_offline_async
from judge.offline.public_tests import sample_tests
from judge.offline.pylint_batch import (
    LINT_BATCH_BYTES,
    LINT_BATCH_FILES,
    LINT_BATCH_LINGER_S,
    LINT_BATCH_OUTPUT_LIMIT,
    PylintBatcher,
    pylint_batcher,
)
from judge.offline.reference import chrf, code_tokens, codebleu, edit_similarity
from judge.offline.scores import OfflineNotApplicable, OfflineScore, OfflineUnavailable
from judge.offline.tools import (
    LINT_CPPCHECK,
    LINT_CPU_S,
    LINT_MAX_SOURCE_BYTES,
    LINT_MEMORY_MB,
    LINT_OUTPUT_LIMIT,
    LINT_PYTHON,
    LINT_WALL_S,
)

__all__ = [
    "CPPCHECK_ERROR_WEIGHT",
    "CPPCHECK_FINDINGS_FOR_ZERO",
    "LINT_BATCH_BYTES",
    "LINT_BATCH_FILES",
    "LINT_BATCH_LINGER_S",
    "LINT_BATCH_OUTPUT_LIMIT",
    "LINT_CPPCHECK",
    "LINT_CPU_S",
    "LINT_MAX_SOURCE_BYTES",
    "LINT_MEMORY_MB",
    "LINT_OUTPUT_LIMIT",
    "LINT_PYTHON",
    "LINT_WALL_S",
    "OfflineNotApplicable",
    "OfflineScore",
    "OfflineUnavailable",
    "PylintBatcher",
    "chrf",
    "code_tokens",
    "codebleu",
    "edit_similarity",
    "lint",
    "lint_async",
    "pylint_batcher",
    "sample_tests",
    "score_offline",
    "score_offline_async",
]
