"""cppcheck, the linter of C and C++: one file per run, in a reusable jail or a cold one, its XML report read
strictly (ids, severities and lines only)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from judge.offline import tools
from judge.offline.scores import OfflineScore, OfflineUnavailable, grade
from judge.offline.tools import encode_source, line_number, message_id, run_tool
from judge.tooljail import TOOL_FILES_DIR, ToolJail

# cppcheck lint quality: raw = max(0, 1 - 0.1 * (5 * errors + other findings)). Errors (out-of-bounds access,
# undefined behaviour, leaks) weigh five times the rest, as in pylint's default evaluation.
CPPCHECK_FINDINGS_FOR_ZERO = 10
CPPCHECK_ERROR_WEIGHT = 5
# Tool failures of cppcheck itself, not findings about the program.
_CPPCHECK_INTERNAL = frozenset({"internalAstError", "internalError", "cppcheckError", "syntaxErrorInternal"})
_CPPCHECK_IGNORED_SEVERITIES = frozenset({"information", "debug", "none"})
_CPPCHECK_SEVERITIES = frozenset({"error", "warning", "style", "performance", "portability"})
# Characters XML 1.0 forbids: cppcheck copies `#line 1 "\x01"` file names into its report verbatim.
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def lint_cppcheck(source: str, language: str, jail: ToolJail, *, reusable: bool) -> OfflineScore:
    """cppcheck on one file, in a reusable jail (a long-lived zygote execs it per file in fresh namespaces; the
    cold jail, `reusable=False`, is the reference the tests compare with). cppcheck has no library or server mode
    to keep warm, and one cppcheck over several attempts' files would let one `#include` another's."""
    if not Path(tools.LINT_CPPCHECK).is_file():
        raise OfflineUnavailable("lint: cppcheck is not installed")
    file_name = "solution.c" if language == "c" else "solution.cpp"
    argv = [
        tools.LINT_CPPCHECK,
        "--enable=warning,style,performance,portability",
        f"--language={'c' if language == 'c' else 'c++'}",
        "--xml",
        "--xml-version=2",
        "--quiet",
        f"{TOOL_FILES_DIR}/{file_name}",
    ]
    result = run_tool(jail, "cppcheck", argv, {file_name: encode_source(source)}, reusable=reusable)
    if result.exit_code != 0:
        raise OfflineUnavailable(f"lint: cppcheck failed (exit {result.exit_code})")
    reported = cppcheck_report(result.stderr)
    internal = sorted({ident for ident, _, _ in reported if ident in _CPPCHECK_INTERNAL})
    if internal:
        raise OfflineUnavailable(f"lint: cppcheck failed on this file ({', '.join(internal)})")
    findings = [r for r in reported if r[1] not in _CPPCHECK_IGNORED_SEVERITIES]
    errors = sum(severity == "error" for _, severity, _ in findings)
    weighted = CPPCHECK_ERROR_WEIGHT * errors + (len(findings) - errors)
    raw = max(0, CPPCHECK_FINDINGS_FOR_ZERO - weighted) / CPPCHECK_FINDINGS_FOR_ZERO
    score = grade(raw)
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


def cppcheck_report(stderr: bytes) -> list[tuple[str, str, int | None]]:
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
        ident, severity = message_id(error.get("id")), error.get("severity")
        if ident is None or severity is None or severity not in _CPPCHECK_SEVERITIES | _CPPCHECK_IGNORED_SEVERITIES:
            continue
        location = error.find("location")
        reported.append((ident, severity, line_number(location.get("line") if location is not None else None)))
    return reported
