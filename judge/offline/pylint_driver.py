"""pylint: the driver program every pylint run executes in the jail, the cold run (one jail, one fresh interpreter,
one file), and the strict reading of the driver's report that the cold run and the warm batches share."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

from judge.offline import tools
from judge.offline.scores import OfflineScore, OfflineUnavailable, grade
from judge.offline.tools import encode_source, line_number, message_id, run_tool
from judge.tooljail import TOOL_FILES_DIR, ToolJail

# pylint honours `# pylint: disable=...` in the linted file; an attempt must not switch its own judge off.
_PYLINT_PRAGMA = re.compile(r"\bpylint(\s*:)", re.IGNORECASE)
_PYLINT_TYPES = frozenset({"fatal", "error", "warning", "refactor", "convention", "info"})
# pylint's fatal messages (a failure of pylint on the file); any other fatal symbol is named "other".
_PYLINT_FATAL = frozenset({"fatal", "astroid-error", "parse-error", "config-parse-error", "method-check-failed"})

# Runs inside the jail as `python3 -I -c`: pylint's API with a collecting reporter, printing one JSON object of
# exit status, score and (symbol, type, line) per message. Message texts never leave the jail. Exit 4: no pylint
# importable; exit 3: MemoryError. Debian 12's pylint 2.16 has no json2 format, so the score is computed as json2
# computes it: pylint's `evaluation` expression (its default: the rcfile is empty) with at least one statement, so
# a file without statements scores 10 and one with a syntax error 0.
PYLINT_DRIVER = """\
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
PYLINT_ARGS = (f"--rcfile={TOOL_FILES_DIR}/pylintrc", "--persistent=n", "--score=y")


def neutralise_pylint_pragmas(source: str) -> tuple[str, int]:
    """Rewrite every `pylint:` in the text to `pyl1nt:` (same length: line numbers and line-length checks are
    unchanged); returns the new source and how many were rewritten.

    The whole text, not only what our tokenizer calls comments: pylint's reading of the file (universal newlines,
    a lone CR ends a line) may differ from any tokenization done here, and a pragma in a string is inert anyway.
    """
    return _PYLINT_PRAGMA.subn(r"pyl1nt\1", source)


def pylint_cold(source: str, jail: ToolJail) -> OfflineScore:
    """The cold path: one jail, one fresh interpreter importing pylint, this file alone."""
    if not Path(tools.LINT_PYTHON).is_file():
        raise OfflineUnavailable("lint: pylint is not installed")
    linted, pragmas = neutralise_pylint_pragmas(source)
    return pylint_result(*pylint_cold_run(encode_source(linted), jail), pragmas)


def pylint_cold_run(linted: bytes, jail: ToolJail) -> tuple[int | None, bytes]:
    """(exit status, stdout) of the cold driver on one (neutralised) file; a run stopped by a limit raises."""
    files = {
        "solution.py": linted,
        # An explicit empty rcfile: no pylintrc (a PYLINTRC variable, ~/.pylintrc, pyproject.toml) applies.
        "pylintrc": b"",
    }
    argv = [
        tools.LINT_PYTHON,
        "-I",  # isolated: no PYTHON* variables, no user site, the working directory not on sys.path
        "-B",
        "-c",
        PYLINT_DRIVER,
        *PYLINT_ARGS,
        f"{TOOL_FILES_DIR}/solution.py",
    ]
    result = run_tool(jail, "pylint", argv, files)
    return result.exit_code, result.stdout


def pylint_result(exit_code: int | None, stdout: bytes, pragmas: int) -> OfflineScore:
    """The score from the driver's exit status and stdout (a cold run's or a warm child's, read alike)."""
    if exit_code == _DRIVER_NO_PYLINT:
        raise OfflineUnavailable("lint: pylint is not installed")
    if exit_code == _DRIVER_NO_MEMORY:
        raise OfflineUnavailable(f"lint: pylint ran out of memory ({tools.LINT_MEMORY_MB} MiB)")
    if exit_code != 0:
        raise OfflineUnavailable(f"lint: pylint failed (exit {exit_code})")
    status, value, messages = pylint_report(stdout)
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
    score = grade(raw)
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


def pylint_report(stdout: bytes) -> tuple[int, float | None, list[tuple[str, str, int | None]]]:
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
        symbol, kind = message_id(item[0]), item[1]
        if symbol is not None and isinstance(kind, str) and kind in _PYLINT_TYPES:
            messages.append((symbol, kind, line_number(item[2])))
    return status, score, messages
