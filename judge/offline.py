"""Offline judges: score an attempt without any LLM or network, from its public tests, a reference, or a linter.

Five methods, each a plain function returning an `OfflineScore` (or raising `OfflineUnavailable` with the reason
the attempt cannot be scored by it, which the caller records as a failed judgment, never as a low score):

- `sample_tests`: the attempt's own results on the problem's *public* tests (hidden tests are the ground truth the
  judges are measured against, so they never reach a judge). Fills the co-creation rubric (p_ac, s_algo, s_robust).
- `chrf`, `codebleu`, `edit_similarity`: the rule-based reference metrics of AXIOM IV-D1 (ChrF++, CodeBLEU and
  token edit similarity), computed on Pygments token streams with whitespace and comments discarded. The metrics
  themselves are the code-similarity library's (`services/codesim/`); these judges only map its raw values.
- `lint`: static analysis only (pylint for Python, cppcheck for C and C++), each tool in nsjail
  (`judge/tooljail.py`); the program is never run, and nothing the tool prints is kept as text. pylint runs warm:
  concurrent requests share a jail in which pylint is imported once and each file is linted by a forked child
  (`PylintBatcher`, `judge/pylint_warm.py`), with exactly the result of a cold run (`lint(..., warm=False)`).

The 0..5 score of a reference or lint method is `round(5 * raw)` with raw clamped into [0, 1]: IV-D1's min-max
normalisation taken over the metric's theoretical range [0, 1]. IV-D1's *data-set* min-max (over the observed
minimum and maximum raw scores of one metric) needs every row at once, so reports apply it later to the stored
`raw`. Rounding is half up everywhere (2.5 -> 3), not Python's round-half-to-even.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import os
import re
import threading
import time
import weakref
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.pylint_warm import warm_modules
from judge.tooljail import TOOL_FILES_DIR, ToolJail
from services import codesim
from services.codesim import CodeBleuRecipe, GrammarUnavailable, UnsupportedLanguage
from services.kernel.contracts import Language, OfflineMethod, Verdict
from services.sandbox.jail import RunResult, classify, signal_name

log = logging.getLogger(__name__)

# Limits of one linter run (in its own nsjail jail, judge/tooljail.py).
LINT_CPU_S = 20.0
LINT_WALL_S = 15.0
LINT_MEMORY_MB = 1024
# Each of stdout and stderr (cppcheck's XML report is on stderr); past it the run is stopped.
LINT_OUTPUT_LIMIT = 4 << 20
# Far above the gateway's source limit; a bigger program is not linted at all.
LINT_MAX_SOURCE_BYTES = 1 << 20
# The jail has only /usr: Debian's pylint (package `pylint`) for the system interpreter, and Debian's cppcheck.
LINT_PYTHON = "/usr/bin/python3"
LINT_CPPCHECK = "/usr/bin/cppcheck"
# Warm pylint (judge/pylint_warm.py): concurrent requests are linted in batches, one jail per batch, pylint imported
# once per batch and one forked child per file. A batch closes at LINT_BATCH_FILES files or LINT_BATCH_BYTES of
# source, or LINT_BATCH_LINGER_S after it could start (a runner free, a file waiting); its jail's stdout
# (every file's report) may reach LINT_BATCH_OUTPUT_LIMIT, past which the files not yet reported are linted again.
LINT_BATCH_FILES = 16
LINT_BATCH_BYTES = 4 << 20
LINT_BATCH_LINGER_S = 0.05
LINT_BATCH_OUTPUT_LIMIT = 16 << 20
# cppcheck lint quality: raw = max(0, 1 - 0.1 * (5 * errors + other findings)). Errors (out-of-bounds access,
# undefined behaviour, leaks) weigh five times the rest, as in pylint's default evaluation.
CPPCHECK_FINDINGS_FOR_ZERO = 10
CPPCHECK_ERROR_WEIGHT = 5

# Logic failures lower s_algo; resource failures lower s_robust; IE is the platform's fault, not the program's.
_LOGIC_FAILURES = frozenset({Verdict.WA, Verdict.RE})
_RESOURCE_FAILURES = frozenset({Verdict.TLE, Verdict.MLE, Verdict.OLE})
_TEST_STATUSES = frozenset({Verdict.AC, Verdict.IE}) | _LOGIC_FAILURES | _RESOURCE_FAILURES


class OfflineUnavailable(Exception):
    """This judge cannot score this attempt (no reference in a usable language, no public tests, unsupported
    language, tool missing); str(exc) is the recorded reason."""


@dataclass(frozen=True)
class OfflineScore:
    """One offline judgment.

    Attributes:
        p_ac: In [0, 1]: the estimate that the attempt is accepted (sample_tests), the raw similarity
            (reference-based methods) or the lint quality (lint).
        score: The 0..5 scale, an integer-valued float.
        fields: The rubric fields stored with the row (JSON-serialisable). sample_tests: exactly
            {"p_ac", "s_algo", "s_robust", "rationale"}; the others: {"raw", "score", "rationale", ...detail}.
        rationale: A short human-readable justification (also in `fields`).
    """

    p_ac: float | None
    score: float
    fields: dict[str, Any]
    rationale: str


def _round_half_up(value: float) -> int:
    # The tolerance keeps float noise (e.g. 2.4999999999999996 for an exact half) from deciding a grade.
    return math.floor(value + 0.5 + 1e-9)


def _grade(raw: float) -> int:
    """IV-D1's normalisation over the theoretical range [0, 1]: round(5 * raw), raw clamped."""
    return _round_half_up(5 * min(1.0, max(0.0, raw)))


def _check_language(language: str) -> None:
    try:
        codesim.check_language(language)
    except UnsupportedLanguage as exc:
        raise OfflineUnavailable(str(exc)) from None


# --- sample_tests ----------------------------------------------------------------------------------------------


def sample_tests(
    execution_tests: list[dict[str, Any]], *, compile_error: bool = False, public_total: int | None = None
) -> OfflineScore:
    """Judge an attempt by its results on the public tests only.

    Mapping, over the public tests with a verdict (tests that ended in IE, an internal error of the platform,
    are left out: they say nothing about the program):

    - p_ac = (passed + 1) / (public + 2): Laplace's rule of succession, so never exactly 0 or 1 (passing every
      public test is evidence, not proof, that the hidden tests pass). E.g. 3 of 4 passed -> 4/6.
    - s_algo = 1 + round(4 * (1 - logic_failures / public)), logic failures being WA and RE.
    - s_robust = 1 + round(4 * (1 - resource_failures / public)), resource failures being TLE, MLE and OLE.
    - score (0..5) = round(5 * p_ac).

    A compile error (`compile_error=True`; the caller passes `public_total`, the problem's number of public tests,
    because a CE attempt has no per-test results) means no test can pass: p_ac = 1 / (public_total + 2), and
    s_algo = s_robust = 1 (a program that does not build fails even the basic cases). Outside a compile error,
    `public_total` only words the reason when there are no public results to judge.

    Args:
        execution_tests: The stored per-test results: dicts with "index", "status" (AC/WA/TLE/MLE/OLE/RE/IE),
            "public" (bool), "time_ms", "memory_kb".
        compile_error: The attempt did not compile.
        public_total: The number of public tests of the problem.

    Raises:
        OfflineUnavailable: no public tests (or no results for them), or every public test ended in an internal
            error.
        ValueError: a test has a status outside AC/WA/TLE/MLE/OLE/RE/IE.
    """
    if compile_error:
        if not public_total or public_total <= 0:
            raise OfflineUnavailable("no public tests")
        p_ac = 1 / (public_total + 2)
        rationale = (
            f"Compile error: none of the {public_total} public tests can pass; "
            f"p_ac = 1/{public_total + 2} = {p_ac:.2f} (Laplace)."
        )
        return _sample_score(p_ac, 1, 1, rationale)

    public = [test for test in execution_tests if test.get("public") is True]
    for test in public:
        if test.get("status") not in _TEST_STATUSES:
            raise ValueError(f"public test {test.get('index')} has unknown status {test.get('status')!r}")
    if not public:
        if public_total:  # the problem has public tests but the execution left no results (e.g. a build IE)
            raise OfflineUnavailable(f"no results for the problem's {public_total} public tests")
        raise OfflineUnavailable("no public tests")
    judged = [test for test in public if test["status"] != Verdict.IE]
    internal = len(public) - len(judged)
    if not judged:
        raise OfflineUnavailable(f"every public test ({internal}) ended in an internal error")

    total = len(judged)
    passed = sum(test["status"] == Verdict.AC for test in judged)
    logic = sum(test["status"] in _LOGIC_FAILURES for test in judged)
    resource_failures = sum(test["status"] in _RESOURCE_FAILURES for test in judged)
    p_ac = (passed + 1) / (total + 2)
    s_algo = 1 + _round_half_up(4 * (1 - logic / total))
    s_robust = 1 + _round_half_up(4 * (1 - resource_failures / total))

    failed = [f"#{test.get('index')} {test['status']}" for test in judged if test["status"] != Verdict.AC]
    rationale = f"{passed} of {total} public tests passed"
    rationale += f"; failed: {', '.join(failed)}" if failed else ""
    rationale += f"; {internal} ended in an internal error and were not counted" if internal else ""
    rationale += f". p_ac = {passed + 1}/{total + 2} = {p_ac:.2f} (Laplace)."
    return _sample_score(p_ac, s_algo, s_robust, rationale)


def _sample_score(p_ac: float, s_algo: int, s_robust: int, rationale: str) -> OfflineScore:
    fields = {"p_ac": p_ac, "s_algo": s_algo, "s_robust": s_robust, "rationale": rationale}
    return OfflineScore(p_ac=p_ac, score=float(_grade(p_ac)), fields=fields, rationale=rationale)


# --- reference metrics (services/codesim: Pygments tokens, whitespace and comments discarded) ------------------


def code_tokens(source: str, language: str) -> list[str]:
    """The program's Pygments tokens without whitespace and comments (`services.codesim.code_tokens`).

    Raises:
        OfflineUnavailable: the language is not python, c, cpp or java.
    """
    _check_language(language)
    return codesim.code_tokens(source, language)


def _reference_result(method: str, raw: float, rationale_detail: str, detail: dict[str, Any]) -> OfflineScore:
    raw = min(1.0, max(0.0, raw))
    score = _grade(raw)
    rationale = f"{method} = {raw:.3f} against the reference ({rationale_detail}); score = round(5 * raw) = {score}."
    fields = {"raw": raw, "score": score, "rationale": rationale, **detail}
    return OfflineScore(p_ac=raw, score=float(score), fields=fields, rationale=rationale)


def chrf(candidate: str, reference: str, language: str) -> OfflineScore:
    """ChrF++ (`services.codesim.chrf_pp`: sacrebleu `CHRF(word_order=2)`, sentence level, on the Pygments token
    streams joined by single spaces; two empty streams score 100). raw = chrF / 100.
    """
    _check_language(language)
    try:
        value = codesim.chrf_pp(reference, candidate, language)
    except ImportError as exc:
        raise OfflineUnavailable("chrf: sacrebleu is not installed") from exc
    cand_tokens, ref_tokens = len(code_tokens(candidate, language)), len(code_tokens(reference, language))
    detail = {"chrf": value, "candidate_tokens": cand_tokens, "reference_tokens": ref_tokens}
    return _reference_result("chrF++", value / 100, f"{cand_tokens} vs {ref_tokens} tokens", detail)


def codebleu(candidate: str, reference: str, language: str) -> OfflineScore:
    """CodeBLEU by the library's `pygments` recipe (`services.codesim.codebleu_score`), deterministic.

    The n-gram components see the Pygments tokens (whitespace and comments discarded); the syntax and data-flow
    components need parseable code and see the source with its comments blanked.

    The package scores the data-flow component as 1 whenever it is 0 (`dataflow or 1`), which hands a program that
    shares no data flow with the reference a quarter of the score for free. Here the component keeps its value
    0 when the reference has data flows; when the reference has none (the package warns the component
    "degenerates"), the component is left out and raw is the mean of the other three. `codebleu_package` in the
    fields is the package's combination of the same components.
    """
    _check_language(language)
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
    """Token edit similarity (IV-D1, `services.codesim.token_edit`): raw = 1 - d / max(|p|, |p_ref|), d the
    token-level Levenshtein distance over Pygments tokens; two empty token lists are identical (raw 1.0).
    """
    _check_language(language)
    edit = codesim.token_edit(reference, candidate, language)
    detail = {
        "distance": edit.distance,
        "candidate_tokens": edit.candidate_tokens,
        "reference_tokens": edit.reference_tokens,
    }
    rationale_detail = f"{edit.distance} token edits, longer program {edit.longest} tokens"
    return _reference_result("edit similarity", edit.similarity, rationale_detail, detail)


# --- lint ----------------------------------------------------------------------------------------------------------

# pylint honours `# pylint: disable=...` in the linted file; an attempt must not switch its own judge off.
_PYLINT_PRAGMA = re.compile(r"\bpylint(\s*:)", re.IGNORECASE)
# Tool failures of cppcheck itself, not findings about the program.
_CPPCHECK_INTERNAL = frozenset({"internalAstError", "internalError", "cppcheckError", "syntaxErrorInternal"})
_CPPCHECK_IGNORED_SEVERITIES = frozenset({"information", "debug", "none"})
_CPPCHECK_SEVERITIES = frozenset({"error", "warning", "style", "performance", "portability"})
_PYLINT_TYPES = frozenset({"fatal", "error", "warning", "refactor", "convention", "info"})
# pylint's fatal messages (a failure of pylint on the file); any other fatal symbol is named "other".
_PYLINT_FATAL = frozenset({"fatal", "astroid-error", "parse-error", "config-parse-error", "method-check-failed"})
# Nothing a tool printed is stored or shown as text: only message ids matching this, known types and line numbers.
_MESSAGE_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_MAX_LINE = 10**9
# Characters XML 1.0 forbids: cppcheck copies `#line 1 "\x01"` file names into its report verbatim.
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

# Runs inside the jail as `python3 -I -c`: pylint's API with a collecting reporter, printing one JSON object of
# exit status, score and (symbol, type, line) per message. Message texts never leave the jail. Exit 4: no pylint
# importable; exit 3: MemoryError. Debian 12's pylint 2.16 has no json2 format, so the score is computed as json2
# computes it: pylint's `evaluation` expression (its default: the rcfile is empty) with at least one statement, so
# a file without statements scores 10 and one with a syntax error 0.
_PYLINT_DRIVER = """\
import json, os, sys
try:
    from pylint.lint import Run
    from pylint.reporters import CollectingReporter
except ImportError:
    os._exit(4)
try:
    reporter = CollectingReporter()
    try:
        linter = Run(sys.argv[1:], reporter=reporter, exit=False).linter
        stats = linter.stats
        kinds = ("fatal", "error", "warning", "refactor", "convention", "info")
        counts = {kind: getattr(stats, kind) for kind in kinds}
        status = linter.msg_status
        score = eval(linter.config.evaluation, {}, {**counts, "statement": stats.statement or 1})
    except SystemExit as stop:
        status, score = (stop.code if isinstance(stop.code, int) else 32), None
    messages = [[m.symbol, m.category, m.line] for m in reporter.messages]
    report = json.dumps({"status": status, "score": score, "messages": messages})
except MemoryError:
    os._exit(3)
sys.stdout.write("\\n" + report + "\\n")
"""
_DRIVER_NO_PYLINT = 4
_DRIVER_NO_MEMORY = 3
_PYLINT_ARGS = (f"--rcfile={TOOL_FILES_DIR}/pylintrc", "--persistent=n", "--score=y")


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
        OfflineUnavailable: java or another unsupported language, empty or oversized source, no jail, the tool is
            missing, times out, runs out of memory, crashes or reports a failure of its own.
    """
    jail = _lint_jail(source, language, jail)
    if language == Language.PYTHON:
        if warm:
            return pylint_batcher(jail).submit(source).result()
        return _pylint(source, jail)
    return _cppcheck(source, language, jail, reusable=warm)


async def lint_async(source: str, language: str, *, jail: ToolJail | None = None) -> OfflineScore:
    """`lint` for an event loop: a Python attempt waits for its warm batch without holding a thread (so as many
    attempts as the worker judges at once can share one batch); cppcheck runs in a worker thread."""
    if language == Language.PYTHON:
        checked = _lint_jail(source, language, jail)
        return await asyncio.wrap_future(pylint_batcher(checked).submit(source))
    return await asyncio.to_thread(lint, source, language, jail=jail)


def _lint_jail(source: str, language: str, jail: ToolJail | None) -> ToolJail:
    """The checks every lint request passes before any tool runs; returns the jail."""
    _check_language(language)
    if language == "java":
        raise OfflineUnavailable("lint: no linter for java")
    if not source.strip():
        raise OfflineUnavailable("lint: empty source")
    if len(_encode_source(source)) > LINT_MAX_SOURCE_BYTES:
        raise OfflineUnavailable(f"lint: source larger than {LINT_MAX_SOURCE_BYTES >> 10} KiB")
    if jail is None:
        # Never run a linter outside the jail: it reads untrusted source as whoever runs it.
        raise OfflineUnavailable("lint: no sandbox for the linter on this worker")
    return jail


def _encode_source(source: str) -> bytes:
    return source.encode("utf-8", "surrogatepass")


def _run_tool(
    jail: ToolJail, tool: str, argv: list[str], files: dict[str, bytes], *, reusable: bool = False
) -> RunResult:
    """Run a linter in the jail (`reusable`: in a reusable one); a run stopped by a limit or a failing sandbox is
    a fixed-vocabulary failure."""
    result = jail.run(
        argv,
        files,
        cpu_time_s=LINT_CPU_S,
        wall_time_s=LINT_WALL_S,
        memory_mb=LINT_MEMORY_MB,
        output_limit=LINT_OUTPUT_LIMIT,
        reusable=reusable,
    )
    # runtime_messages=False: the tools' output quotes the program (`std::bad_alloc`), it proves nothing.
    status, reason = classify(
        result,
        cpu_time_s=LINT_CPU_S,
        memory_mb=LINT_MEMORY_MB,
        output_limit=LINT_OUTPUT_LIMIT,
        runtime_messages=False,
    )
    if status == "IE":
        log.error("lint: the sandbox could not run %s: %s\n%s", tool, reason, result.nsjail_log)
        raise OfflineUnavailable(_tool_failure(tool, "sandbox"))
    if status == "OLE":
        raise OfflineUnavailable(_tool_failure(tool, "output"))
    if status == "TLE":
        raise OfflineUnavailable(_tool_failure(tool, "timeout"))
    if status == "MLE":
        raise OfflineUnavailable(_tool_failure(tool, "memory"))
    if result.signal is not None:
        raise OfflineUnavailable(_tool_failure(tool, "signal", result.signal))
    return result


def _tool_failure(tool: str, kind: str, signum: int | None = None) -> str:
    """The fixed reason for a tool run stopped by a limit (cold and warm runs word it alike)."""
    if kind == "sandbox":
        return f"lint: the sandbox could not run {tool}"
    if kind == "output":
        return f"lint: {tool} output passed the limit ({LINT_OUTPUT_LIMIT >> 20} MiB)"
    if kind == "timeout":
        return f"lint: {tool} timed out ({LINT_CPU_S:g} s CPU, {LINT_WALL_S:g} s wall)"
    if kind == "memory":
        return f"lint: {tool} ran out of memory ({LINT_MEMORY_MB} MiB)"
    if kind == "signal" and signum is not None:
        return f"lint: {tool} was killed by {signal_name(signum)}"
    raise ValueError(f"unknown tool failure {kind!r}")


def _message_id(value: object) -> str | None:
    return value if isinstance(value, str) and _MESSAGE_ID.fullmatch(value) else None


def _line_number(value: object) -> int | None:
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_LINE:
        return value
    return None


def _neutralise_pylint_pragmas(source: str) -> tuple[str, int]:
    """Rewrite every `pylint:` in the text to `pyl1nt:` (same length: line numbers and line-length checks are
    unchanged); returns the new source and how many were rewritten.

    The whole text, not only what our tokenizer calls comments: pylint's reading of the file (universal newlines,
    a lone CR ends a line) may differ from any tokenization done here, and a pragma in a string is inert anyway.
    """
    return _PYLINT_PRAGMA.subn(r"pyl1nt\1", source)


def _pylint(source: str, jail: ToolJail) -> OfflineScore:
    """The cold path: one jail, one fresh interpreter importing pylint, this file alone."""
    if not Path(LINT_PYTHON).is_file():
        raise OfflineUnavailable("lint: pylint is not installed")
    linted, pragmas = _neutralise_pylint_pragmas(source)
    return _pylint_result(*_pylint_cold_run(_encode_source(linted), jail), pragmas)


def _pylint_cold_run(linted: bytes, jail: ToolJail) -> tuple[int | None, bytes]:
    """(exit status, stdout) of the cold driver on one (neutralised) file; a run stopped by a limit raises."""
    files = {
        "solution.py": linted,
        # An explicit empty rcfile: no pylintrc (a PYLINTRC variable, ~/.pylintrc, pyproject.toml) applies.
        "pylintrc": b"",
    }
    argv = [
        LINT_PYTHON,
        "-I",  # isolated: no PYTHON* variables, no user site, the working directory not on sys.path
        "-B",
        "-c",
        _PYLINT_DRIVER,
        *_PYLINT_ARGS,
        f"{TOOL_FILES_DIR}/solution.py",
    ]
    result = _run_tool(jail, "pylint", argv, files)
    return result.exit_code, result.stdout


def _pylint_result(exit_code: int | None, stdout: bytes, pragmas: int) -> OfflineScore:
    """The score from the driver's exit status and stdout (a cold run's or a warm child's, read alike)."""
    if exit_code == _DRIVER_NO_PYLINT:
        raise OfflineUnavailable("lint: pylint is not installed")
    if exit_code == _DRIVER_NO_MEMORY:
        raise OfflineUnavailable(f"lint: pylint ran out of memory ({LINT_MEMORY_MB} MiB)")
    if exit_code != 0:
        raise OfflineUnavailable(f"lint: pylint failed (exit {exit_code})")
    status, value, messages = _pylint_report(stdout)
    # Exit status bits: 1 fatal, 2 error, 4 warning, 8 refactor, 16 convention, 32 usage error. Messages of
    # classes 2..16 are findings (the score accounts for them); 1 and 32 mean pylint itself did not do its job.
    if status & 32:
        raise OfflineUnavailable("lint: pylint usage error")
    if status & 1:
        fatal = sorted({s if s in _PYLINT_FATAL else "other" for s, kind, _ in messages if kind == "fatal"})
        raise OfflineUnavailable(f"lint: pylint failed on this file ({', '.join(fatal or ['no message'])})")
    if value is None:
        raise OfflineUnavailable("lint: pylint gave no score")
    counts = Counter(kind for _, kind, _ in messages)
    symbols = Counter(symbol for symbol, _, _ in messages)
    raw = min(1.0, max(0.0, float(value) / 10))
    score = _grade(raw)
    found = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no messages"
    top = ", ".join(f"{symbol} x{n}" for symbol, n in symbols.most_common(5))
    rationale = f"pylint {float(value):.2f}/10 ({found}{': ' + top if top else ''}); score = round(5 * raw) = {score}."
    fields = {
        "raw": raw,
        "score": score,
        "rationale": rationale,
        "tool": "pylint",
        "pylint_score": float(value),
        "message_counts": dict(counts),
        "messages": [{"symbol": symbol, "type": kind, "line": line} for symbol, kind, line in messages[:50]],
        "pragmas_neutralised": pragmas,
    }
    return OfflineScore(p_ac=raw, score=float(score), fields=fields, rationale=rationale)


def _pylint_report(stdout: bytes) -> tuple[int, float | None, list[tuple[str, str, int | None]]]:
    """(exit status, score, [(symbol, type, line)]) from the driver's JSON line, every value checked: a message
    whose symbol does not look like a pylint symbol or whose type is unknown is dropped."""
    try:
        report = json.loads(stdout.decode("utf-8").strip().splitlines()[-1])
        status, value, listed = report["status"], report["score"], report["messages"]
    except (ValueError, KeyError, TypeError, IndexError):
        raise OfflineUnavailable("lint: pylint gave no readable report") from None
    if not isinstance(status, int) or isinstance(status, bool) or not 0 <= status < 64 or not isinstance(listed, list):
        raise OfflineUnavailable("lint: pylint gave no readable report")
    score: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        score = float(value)
    messages = []
    for item in listed:
        if not isinstance(item, list) or len(item) != 3:
            continue
        symbol, kind = _message_id(item[0]), item[1]
        if symbol is not None and isinstance(kind, str) and kind in _PYLINT_TYPES:
            messages.append((symbol, kind, _line_number(item[2])))
    return status, score, messages


# --- lint: warm pylint batches -----------------------------------------------------------------------------------

_WARM_OUTCOMES = frozenset({"exit", "signal", "timeout", "memory", "output"})


@dataclass(frozen=True)
class _WarmRecord:
    """What the warm supervisor reported for one file: how its child ended and, for "exit", its whole stdout."""

    outcome: str
    code: int | None
    signum: int | None
    stdout: bytes


@functools.cache
def _pylint_warm_script() -> str:
    return (Path(__file__).parent / "pylint_warm.py").read_text(encoding="utf-8")


def _pylint_warm_run(
    jail: ToolJail, sources: list[bytes], *, driver: str | None = None
) -> tuple[bool, list[_WarmRecord]]:
    """Lint `sources` (neutralised, encoded) in one jail with judge/pylint_warm.py; returns whether its supervisor
    got ready (pylint imported and warm) and the records of the files it finished, in order: a prefix of
    `sources`, all of them unless the jail was stopped (a limit of the whole batch, or the sandbox failed).

    The jail is the cold run's (LINT_MEMORY_MB, the same mounts) with room for every file's own limits: CPU and
    wall clock of LINT_CPU_S and LINT_WALL_S per file plus one more for the supervisor's start."""
    count = len(sources)
    manifest = {
        # The cold run's driver, run by each child as the cold run's interpreter runs it.
        "driver": _PYLINT_DRIVER if driver is None else driver,
        "args": list(_PYLINT_ARGS),
        "files": [{"key": index, "size": len(source)} for index, source in enumerate(sources)],
        "cpu_s": LINT_CPU_S,
        "wall_s": LINT_WALL_S,
        "memory_mb": LINT_MEMORY_MB,
        "output_limit": LINT_OUTPUT_LIMIT,
        # Chosen here, where the whole batch is: the supervisor never holds more than one file.
        "warm": warm_modules(sources),
    }
    # The sources travel on stdin, after the manifest (its length first): the supervisor reads each only when its
    # turn comes, so neither it nor a child it forks holds another file's source (the child sees its own file
    # alone in /box, and the empty pylintrc; its stdin is /dev/null).
    header = json.dumps(manifest).encode()
    stdin = b"%d\n" % len(header) + header + b"".join(sources)
    argv = [LINT_PYTHON, "-I", "-B", "-c", _pylint_warm_script()]
    result = jail.run(
        argv,
        {"pylintrc": b""},
        cpu_time_s=LINT_CPU_S * (count + 1),
        wall_time_s=LINT_WALL_S * (count + 1),
        memory_mb=LINT_MEMORY_MB,
        output_limit=LINT_BATCH_OUTPUT_LIMIT,
        stdin=stdin,
    )
    if result.jail_error:
        log.error("lint: the sandbox could not run a pylint batch: %s\n%s", result.jail_error, result.nsjail_log)
    return _warm_records(result.stdout, count)


def _warm_records(stdout: bytes, count: int) -> tuple[bool, list[_WarmRecord]]:
    """Parse the supervisor's stdout (judge/pylint_warm.py): `ready`, then per file a JSON header line and the
    child's stdout. Every field is checked; reading stops at the first record that is not exactly as expected
    (e.g. cut short when the jail was stopped), and the files from there on have no record."""
    if not stdout.startswith(b"ready\n"):
        return False, []
    records: list[_WarmRecord] = []
    position = len(b"ready\n")
    while len(records) < count:
        end = stdout.find(b"\n", position, position + 4096)
        if end < 0:
            break
        try:
            header = json.loads(stdout[position:end])
        except ValueError:
            break
        if not isinstance(header, dict) or header.get("key") != len(records):
            break
        outcome, code, signum, length = (header.get(k) for k in ("outcome", "code", "signal", "stdout"))
        if outcome not in _WARM_OUTCOMES or not all(_small_int(v) for v in (code, signum, length)):
            break
        if outcome == "exit" and code is None or outcome == "signal" and signum is None:
            break
        if length is None or length > LINT_OUTPUT_LIMIT or end + 1 + length > len(stdout):
            break
        records.append(_WarmRecord(outcome, code, signum, stdout[end + 1 : end + 1 + length]))
        position = end + 1 + length
    return True, records


def _small_int(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 31)


def _pylint_from_record(record: _WarmRecord, pragmas: int) -> OfflineScore:
    if record.outcome == "exit":
        return _pylint_result(record.code, record.stdout, pragmas)
    raise OfflineUnavailable(_tool_failure("pylint", record.outcome, record.signum))


@dataclass(eq=False)
class _LintRequest:
    linted: bytes
    pragmas: int
    future: Future[OfflineScore]
    queued: float

    def settle(self, compute: Callable[[], OfflineScore]) -> None:
        """Resolve the caller's future with compute()'s score or exception (once; later calls are ignored)."""
        if self.future.done():
            return
        try:
            score = compute()
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who records it
            self.future.set_exception(exc)
        else:
            self.future.set_result(score)


def _lint_warm_batch(jail: ToolJail, requests: list[_LintRequest]) -> None:
    """Settle every request of a batch, each with exactly the result its file gets alone.

    A file the warm supervisor finished gets its child's result. If the jail stopped mid-batch, the file it was on
    is linted again cold (its own run: a file that brings a batch down gets the cold run's failure, and only it
    pays for the cold run) and the rest form a new warm batch. If the supervisor never got ready (pylint missing,
    too little memory or time to import it, the sandbox failing), every file is linted cold: each then gets
    exactly the cold run's failure."""
    remaining = requests
    try:
        while remaining:
            ready, records = _pylint_warm_run(jail, [request.linted for request in remaining])
            for request, record in zip(remaining, records, strict=False):
                request.settle(functools.partial(_pylint_from_record, record, request.pragmas))
            unfinished = remaining[len(records) :]
            if not unfinished:
                return
            if not ready:
                log.warning("lint: the warm pylint supervisor did not start; %d files linted cold", len(unfinished))
                for request in unfinished:
                    request.settle(functools.partial(_pylint_cold, request, jail))
                return
            unfinished[0].settle(functools.partial(_pylint_cold, unfinished[0], jail))
            remaining = unfinished[1:]
    except BaseException as exc:
        for request in remaining:
            if not request.future.done():
                request.future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("lint batch stopped"))
        if not isinstance(exc, Exception):
            raise
        log.exception("lint: a pylint batch failed")


def _pylint_cold(request: _LintRequest, jail: ToolJail) -> OfflineScore:
    return _pylint_result(*_pylint_cold_run(request.linted, jail), request.pragmas)


class PylintBatcher:
    """Coalesces concurrent pylint requests on one ToolJail into warm batches. Thread-safe.

    `submit` queues a file and returns a future; a dispatcher thread waits for one of `runners` to be free (all
    the while more requests queue), then closes a batch when `max_files` files or `max_bytes` of source wait, or
    `linger_s` after it could start, and starts it. Each future gets its own file's result.
    The dispatcher ends after a few idle seconds and starts again with the next request.
    """

    IDLE_S = 10.0

    def __init__(
        self,
        jail: ToolJail,
        *,
        max_files: int = LINT_BATCH_FILES,
        max_bytes: int = LINT_BATCH_BYTES,
        linger_s: float = LINT_BATCH_LINGER_S,
        runners: int | None = None,
    ) -> None:
        self.jail = jail
        self.max_files = max(1, max_files)
        self.max_bytes = max_bytes
        self.linger_s = linger_s
        # One batch per core keeps batches large (the supervisor's start is the cost a batch shares).
        self.runners = max(1, runners or min(jail.slots, os.cpu_count() or 1))
        self._free = threading.Semaphore(self.runners)
        self._cond = threading.Condition()
        self._pending: list[_LintRequest] = []
        self._pending_bytes = 0
        self._dispatcher: threading.Thread | None = None
        self.batches = 0  # batches started (for tests and benchmarks)

    def submit(self, source: str) -> Future[OfflineScore]:
        """Queue a Python source (checked by the caller: not empty, not too large) for pylint."""
        future: Future[OfflineScore] = Future()
        if not Path(LINT_PYTHON).is_file():
            future.set_exception(OfflineUnavailable("lint: pylint is not installed"))
            return future
        linted, pragmas = _neutralise_pylint_pragmas(source)
        request = _LintRequest(_encode_source(linted), pragmas, future, time.monotonic())
        with self._cond:
            if self._dispatcher is None:
                dispatcher = threading.Thread(target=self._dispatch, name="pylint-batcher", daemon=True)
                dispatcher.start()  # it waits for this lock; if it cannot start, nothing was queued
                self._dispatcher = dispatcher
            self._pending.append(request)
            self._pending_bytes += len(request.linted)
            self._cond.notify()
        return future

    def _full(self) -> bool:
        return len(self._pending) >= self.max_files or self._pending_bytes >= self.max_bytes

    def _dispatch(self) -> None:
        try:
            while self._dispatch_one():
                pass
        except BaseException as exc:  # never leave a caller waiting on a dispatcher that is gone
            log.exception("lint: the pylint batcher stopped")
            with self._cond:
                failed, self._pending, self._pending_bytes = self._pending, [], 0
                self._dispatcher = None
            for request in failed:
                if request.future.set_running_or_notify_cancel():
                    request.future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("stopped"))
            if not isinstance(exc, Exception):
                raise

    def _dispatch_one(self) -> bool:
        """Start one batch; False once idle for IDLE_S (the dispatcher then ends)."""
        with self._cond:
            idle_until = time.monotonic() + self.IDLE_S
            while not self._pending:
                left = idle_until - time.monotonic()
                if left <= 0:
                    self._dispatcher = None
                    return False
                self._cond.wait(left)
        self._free.acquire()  # requests arriving meanwhile join this batch
        batch: list[_LintRequest] = []
        try:
            # Linger from when the batch could start: callers whose files a batch just finished come back with
            # their next files within milliseconds, and join this batch rather than wait for the next.
            free_at = time.monotonic()
            with self._cond:
                close_at = max(free_at, self._pending[0].queued if self._pending else free_at) + self.linger_s
                while not self._full() and (left := close_at - time.monotonic()) > 0:
                    self._cond.wait(left)
                batch = self._take()
            if not batch:
                self._free.release()
                return True
            threading.Thread(target=self._run, args=(batch,), name="pylint-batch", daemon=True).start()
        except BaseException as exc:
            self._free.release()
            for request in batch:
                request.future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("stopped"))
            raise
        self.batches += 1
        return True

    def _take(self) -> list[_LintRequest]:
        batch: list[_LintRequest] = []
        size = 0
        while self._pending and len(batch) < self.max_files:
            request = self._pending[0]
            if batch and size + len(request.linted) > self.max_bytes:
                break
            self._pending.pop(0)
            self._pending_bytes -= len(request.linted)
            # A caller that gave up (a cancelled task) is not linted.
            if request.future.set_running_or_notify_cancel():
                batch.append(request)
                size += len(request.linted)
        return batch

    def _run(self, batch: list[_LintRequest]) -> None:
        try:
            _lint_warm_batch(self.jail, batch)
        finally:
            self._free.release()


_BATCHERS: weakref.WeakKeyDictionary[ToolJail, PylintBatcher] = weakref.WeakKeyDictionary()
_BATCHERS_LOCK = threading.Lock()


def pylint_batcher(jail: ToolJail) -> PylintBatcher:
    """The batcher of this jail (one per jail, made on first use), shared by every caller of `lint`."""
    with _BATCHERS_LOCK:
        batcher = _BATCHERS.get(jail)
        if batcher is None:
            batcher = _BATCHERS[jail] = PylintBatcher(jail)
        return batcher


def _cppcheck(source: str, language: str, jail: ToolJail, *, reusable: bool) -> OfflineScore:
    """cppcheck on one file, in a reusable jail (a long-lived zygote execs it per file in fresh namespaces; the
    cold jail, `reusable=False`, is the reference the tests compare with). cppcheck has no library or server mode
    to keep warm, and one cppcheck over several attempts' files would let one `#include` another's."""
    if not Path(LINT_CPPCHECK).is_file():
        raise OfflineUnavailable("lint: cppcheck is not installed")
    file_name = "solution.c" if language == "c" else "solution.cpp"
    argv = [
        LINT_CPPCHECK,
        "--enable=warning,style,performance,portability",
        f"--language={'c' if language == 'c' else 'c++'}",
        "--xml",
        "--xml-version=2",
        "--quiet",
        f"{TOOL_FILES_DIR}/{file_name}",
    ]
    result = _run_tool(jail, "cppcheck", argv, {file_name: _encode_source(source)}, reusable=reusable)
    if result.exit_code != 0:
        raise OfflineUnavailable(f"lint: cppcheck failed (exit {result.exit_code})")
    reported = _cppcheck_report(result.stderr)
    internal = sorted({ident for ident, _, _ in reported if ident in _CPPCHECK_INTERNAL})
    if internal:
        raise OfflineUnavailable(f"lint: cppcheck failed on this file ({', '.join(internal)})")
    findings = [r for r in reported if r[1] not in _CPPCHECK_IGNORED_SEVERITIES]
    errors = sum(severity == "error" for _, severity, _ in findings)
    weighted = CPPCHECK_ERROR_WEIGHT * errors + (len(findings) - errors)
    raw = max(0, CPPCHECK_FINDINGS_FOR_ZERO - weighted) / CPPCHECK_FINDINGS_FOR_ZERO
    score = _grade(raw)
    listed = "; ".join(f"{ident} ({severity}) line {line}" for ident, severity, line in findings[:5])
    rationale = (
        f"cppcheck: {len(findings)} finding{'s' if len(findings) != 1 else ''}{': ' + listed if listed else ''}; "
        f"raw = max(0, 1 - 0.1 * (5 * {errors} errors + {len(findings) - errors} others)) = {raw:.1f}, "
        f"score = {score}."
    )
    fields = {
        "raw": raw,
        "score": score,
        "rationale": rationale,
        "tool": "cppcheck",
        # Messages are never kept: they quote the program (and whatever it managed to include).
        "findings": [{"id": ident, "severity": severity, "line": line} for ident, severity, line in findings[:50]],
        "finding_count": len(findings),
        "error_count": errors,
    }
    return OfflineScore(p_ac=raw, score=float(score), fields=fields, rationale=rationale)


def _cppcheck_report(stderr: bytes) -> list[tuple[str, str, int | None]]:
    """[(id, severity, line)] from cppcheck's XML report; an error whose id does not look like a cppcheck id or
    whose severity is unknown is dropped. Characters XML forbids (which cppcheck copies from `#line` names into
    file attributes) are replaced first, so such a name cannot make the program unscoreable."""
    text = _XML_INVALID.sub("?", stderr.decode("utf-8", "replace"))
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        raise OfflineUnavailable("lint: cppcheck gave no readable report") from None
    if root.tag != "results":
        raise OfflineUnavailable("lint: cppcheck gave no readable report")
    reported = []
    for error in root.iter("error"):
        ident, severity = _message_id(error.get("id")), error.get("severity")
        if ident is None or severity is None or severity not in _CPPCHECK_SEVERITIES | _CPPCHECK_IGNORED_SEVERITIES:
            continue
        location = error.find("location")
        reported.append((ident, severity, _line_number(location.get("line") if location is not None else None)))
    return reported


# --- dispatch ------------------------------------------------------------------------------------------------------


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
        OfflineUnavailable: the method cannot score this attempt (the reason is the message).
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
    _check_language(language)
    reference = next((ref for ref in references if ref.get("language") == language), None)
    if reference is None:
        raise OfflineUnavailable(f"no reference solution in {language}")
    reference_source = reference.get("source_code")
    if not isinstance(reference_source, str):
        raise OfflineUnavailable(f"the {language} reference solution has no source_code")
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
