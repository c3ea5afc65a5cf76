"""The entry points: `lint` (pylint warm or cold, cppcheck) and `score_offline`, which runs one method on an
attempt; each with its event-loop twin."""

from __future__ import annotations

import asyncio
from typing import Any

from judge.offline import tools
from judge.offline.cppcheck import lint_cppcheck
from judge.offline.public_tests import sample_tests
from judge.offline.pylint_batch import pylint_batcher
from judge.offline.pylint_driver import pylint_cold
from judge.offline.reference import chrf, codebleu, edit_similarity
from judge.offline.scores import OfflineNotApplicable, OfflineScore, OfflineUnavailable, check_language
from judge.offline.tools import encode_source
from judge.tooljail import ToolJail
from services.kernel.contracts import Language, OfflineMethod


def lint(source: str, language: str, *, jail: ToolJail | None = None, warm: bool = True) -> OfflineScore:
    """Static lint quality in [0, 1]; the program is only read, never built or run.

    - python: pylint with its default checks; raw = pylint's 0..10 score / 10 (a syntax error scores 0).
      `pylint:` pragmas in the attempt's comments are neutralised first (same length, so line numbers and
      line-length checks are unchanged).
    - c, cpp: cppcheck --enable=warning,style,performance,portability; raw = max(0, 1 - 0.1 * weighted findings),
      a finding of severity error weighing 5 and one of severity warning, style, performance or portability 1
      (pylint's 5:1 ratio); so one out-of-bounds write scores 0.5 and ten style findings score 0.
    - java: no linter.

    The tool runs in nsjail (`jail`): it sees the toolchain (/usr) and the source, nothing else of the host;
    LINT_CPU_S of CPU, LINT_WALL_S of wall clock, LINT_MEMORY_MB, LINT_OUTPUT_LIMIT per stream. With `warm` (the
    default) pylint runs warm: the request joins a batch (`PylintBatcher`), linted by a forked child of a pylint
    already imported, with the same limits and the same result as the cold run (`warm=False`: one jail and one
    fresh interpreter for this file alone). cppcheck runs in a reusable jail when `warm`, in a jail of its own
    otherwise, with the same result. Blocking: call from a worker thread (or use `lint_async`).
    Nothing the tool printed is copied as text: the result keeps message ids, types and line numbers, and a failure
    is one of a few fixed reasons ("lint: cppcheck gave no readable report", "lint: pylint timed out", ...).

    Raises:
        OfflineNotApplicable: java or another unsupported language, empty or oversized source.
        OfflineUnavailable: no jail, the tool is missing, times out, runs out of memory, crashes or reports a
            failure of its own.
    """
    jail = _lint_jail(source, language, jail)
    if language == Language.PYTHON:
        if warm:
            return pylint_batcher(jail).submit(source).result()
        return pylint_cold(source, jail)
    return lint_cppcheck(source, language, jail, reusable=warm)


async def lint_async(source: str, language: str, *, jail: ToolJail | None = None) -> OfflineScore:
    """`lint` for an event loop: a Python attempt waits for its warm batch without holding a thread (so as many
    attempts as the worker judges at once can share one batch); cppcheck runs in a worker thread."""
    if language == Language.PYTHON:
        checked = _lint_jail(source, language, jail)
        return await asyncio.wrap_future(pylint_batcher(checked).submit(source))
    return await asyncio.to_thread(lint, source, language, jail=jail)


def _lint_jail(source: str, language: str, jail: ToolJail | None) -> ToolJail:
    """The checks every lint request passes before any tool runs; returns the jail."""
    check_language(language)
    if language == "java":
        raise OfflineNotApplicable("lint: no linter for java")
    if not source.strip():
        raise OfflineNotApplicable("lint: empty source")
    if len(encode_source(source)) > tools.LINT_MAX_SOURCE_BYTES:
        raise OfflineNotApplicable(f"lint: source larger than {tools.LINT_MAX_SOURCE_BYTES >> 10} KiB")
    if jail is None:
        # Never run a linter outside the jail: it reads untrusted source as whoever runs it.
        raise OfflineUnavailable("lint: no sandbox for the linter on this worker")
    return jail


def score_offline(
    method: str,
    *,
    source: str,
    language: str,
    references: list[dict[str, str]],
    execution_tests: list[dict[str, Any]],
    compile_error: bool = False,
    public_total: int | None = None,
    lint_jail: ToolJail | None = None,
) -> OfflineScore:
    """Run one offline method on an attempt.

    Reference-based methods (chrf, codebleu, edit_similarity) use the first reference whose "language" equals the
    attempt's; references are dicts with "language" and "source_code", as stored with the problem. `lint` runs its
    tool in `lint_jail` (without one it is unavailable).

    Raises:
        OfflineNotApplicable: the method does not apply to this attempt: no reference solution in its language, no
            public tests, no linter for it, ... (the reason is the message).
        OfflineUnavailable: the method could not score this attempt here (the reason is the message).
        ValueError: the method is unknown.
    """
    if method == OfflineMethod.SAMPLE_TESTS:
        return sample_tests(execution_tests, compile_error=compile_error, public_total=public_total)
    if method == OfflineMethod.LINT:
        return lint(source, language, jail=lint_jail)
    by_reference = {
        OfflineMethod.CHRF: chrf,
        OfflineMethod.CODEBLEU: codebleu,
        OfflineMethod.EDIT_SIMILARITY: edit_similarity,
    }
    if method not in by_reference:
        raise ValueError(f"unknown offline method {method!r}; expected one of {', '.join(OfflineMethod)}")
    check_language(language)
    reference = next((ref for ref in references if ref.get("language") == language), None)
    if reference is None:
        raise OfflineNotApplicable(f"no reference solution in {language}")
    reference_source = reference.get("source_code")
    if not isinstance(reference_source, str):
        raise OfflineNotApplicable(f"the {language} reference solution has no source_code")
    return by_reference[OfflineMethod(method)](source, reference_source, language)


async def score_offline_async(
    method: str,
    *,
    source: str,
    language: str,
    references: list[dict[str, str]],
    execution_tests: list[dict[str, Any]],
    compile_error: bool = False,
    public_total: int | None = None,
    lint_jail: ToolJail | None = None,
) -> OfflineScore:
    """`score_offline` for an event loop: `lint` waits for its warm batch (`lint_async`) without holding a
    thread; the other methods run in a worker thread. Same results, same exceptions."""
    if method == OfflineMethod.LINT:
        return await lint_async(source, language, jail=lint_jail)
    return await asyncio.to_thread(
        score_offline,
        method,
        source=source,
        language=language,
        references=references,
        execution_tests=execution_tests,
        compile_error=compile_error,
        public_total=public_total,
        lint_jail=lint_jail,
    )
