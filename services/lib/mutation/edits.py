"""Text splices at parse-tree spans: what every operator produces, and how it becomes a program and a diff.

An operator never rewrites text by pattern: it finds a node in a parse tree and proposes an `Edit`, a
replacement of the exact character span of that node (or of one of its tokens). Everything outside the spans,
comments and formatting included, is kept byte for byte, so the diff is the edit and nothing else.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Sequence
from dataclasses import dataclass


class UnparsableSource(ValueError):
    """The parent program does not parse (tree-sitter ERROR/MISSING nodes, or a Python SyntaxError)."""


@dataclass(frozen=True, order=True)
class Edit:
    """Replace source[start:end] (character offsets) with `text`; start == end inserts."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Site:
    """One place an operator can act: its edits (sorted, non-overlapping) and whether it sits in a guard."""

    operator: str
    edits: tuple[Edit, ...]
    guard_context: bool

    @property
    def key(self) -> tuple[tuple[int, int, str], ...]:
        """The sort key that orders an operator's sites reproducibly (by position, then by replacement)."""
        return tuple((edit.start, edit.end, edit.text) for edit in self.edits)


def apply(source: str, edits: Sequence[Edit]) -> str:
    """The source with every edit applied (edits must not overlap)."""
    ordered = sorted(edits)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.start < before.end:
            raise ValueError(f"overlapping edits {before} and {after}")
    parts: list[str] = []
    cursor = 0
    for edit in ordered:
        parts.append(source[cursor : edit.start])
        parts.append(edit.text)
        cursor = edit.end
    parts.append(source[cursor:])
    return "".join(parts)


def line_starts(source: str) -> list[int]:
    """Offsets where each line starts; a line ends at \\n, \\r\\n or \\r (as Python's and C's tokenizers see it)."""
    starts = [0]
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch == "\r" and i + 1 < n and source[i + 1] == "\n":
            i += 2
            starts.append(i)
            continue
        i += 1
        if ch in "\r\n":
            starts.append(i)
    return starts


def position(starts: Sequence[int], offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset; the column counts characters."""
    index = bisect.bisect_right(starts, offset) - 1
    return index + 1, offset - starts[index] + 1


def split_lines(source: str) -> list[str]:
    """The lines of `source` with their endings (\n, \r\n or \r only, unlike str.splitlines)."""
    starts = line_starts(source)
    lines = [source[a:b] for a, b in zip(starts, [*starts[1:], len(source)], strict=True)]
    return [line for line in lines if line]


def unified_diff(parent: str, mutant: str, filename: str) -> str:
    """A unified diff parent -> mutant with file names a/<filename> and b/<filename>, as `diff -u` writes it
    (a last line without a newline is marked `\\ No newline at end of file`)."""
    lines: list[str] = []
    for line in difflib.unified_diff(
        split_lines(parent),
        split_lines(mutant),
        fromfile=f"a/{filename}",
        tofile=f"b/{filename}",
    ):
        if line.endswith("\n"):
            lines.append(line)
        else:
            lines.append(line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def indentation_before(source: str, starts: Sequence[int], offset: int) -> str | None:
    """The whitespace between the start of offset's line and offset, or None if anything else stands there (the
    node at offset does not begin its line)."""
    line, _ = position(starts, offset)
    prefix = source[starts[line - 1] : offset]
    return prefix if prefix.strip(" \t\f") == "" else None
