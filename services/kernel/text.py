"""Text fit to store and to answer with: the one definition of "clean" for every value that crossed from a jail or a
tool (program output, compiler and harness messages, exception texts, checker and lint messages, LLM answers).

Such text may hold anything a program can write: bytes that are not UTF-8 (invalid or overlong sequences,
UTF-8-encoded surrogates), lone UTF-16 surrogates (a `str` decoded with `surrogateescape`, or JSON's `"\\ud800"`
escapes, which Python's json reads into a `str` that no UTF-8 encoder accepts), and NUL, which PostgreSQL's `text`
(and `jsonb`) refuse. Clean text is valid UTF-8 and holds no NUL:

- bytes are decoded as UTF-8, each invalid sequence (maximal subpart, as Unicode recommends) becoming U+FFFD;
- a surrogate pair held as two code points is joined into its character; any other surrogate becomes U+FFFD;
- NUL becomes U+FFFD (unless `keep_nul`: JSON values, where `\\u0000` is valid data, see `clean_json`).

Everything else is kept as it is, controls and noncharacters (U+FFFE, U+FFFF) included: they are valid UTF-8, JSON
escapes what needs escaping, and the HTML pages escape every cell. Cleaning never makes text longer (in characters),
so every cap measured before it still holds after it.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def clean_text(value: str | bytes | bytearray | memoryview, *, keep_nul: bool = False) -> str:
    """`value` as valid UTF-8 text without NUL (see the module's docstring). Cheap for text that is clean already:
    one scan, no copy."""
    if isinstance(value, bytes | bytearray | memoryview):
        text = bytes(value).decode("utf-8", "replace")
    elif isinstance(value, str):
        text = value
    else:
        raise TypeError(f"clean_text takes text or bytes, not {type(value).__name__}")
    if not _unclean(text, keep_nul):
        return text
    if _SURROGATE.search(text) is not None:
        # UTF-16 round trip: pairs become their character, every unpaired half one U+FFFD.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text if keep_nul else text.replace("\x00", REPLACEMENT)


def is_clean(value: str, *, keep_nul: bool = False) -> bool:
    """Whether `clean_text(value, keep_nul=keep_nul)` would return `value` unchanged."""
    return not _unclean(value, keep_nul)


def _unclean(text: str, keep_nul: bool) -> bool:
    # ASCII text (a flag CPython keeps: no scan) holds no surrogate; NUL is found by memchr. Else one regex scan.
    if text.isascii():
        return not keep_nul and "\x00" in text
    return (_SURROGATE if keep_nul else _UNSAFE).search(text) is not None


def clean_json(value: Any, *, keep_nul: bool = True) -> Any:
    """A JSON value (dicts, lists, tuples, scalars, nested to any depth) with every string, dict keys included,
    cleaned by `clean_text`. A value that is clean already is returned as it is (one walk, no copy); otherwise a
    cleaned copy (tuples become lists; keys that become equal keep the last value). Iterative: depth costs no stack.

    NUL is kept by default: `\\u0000` is valid JSON, the database stores it (PostgreSQL's `json` keeps the text as
    written; only `jsonb` refuses it), and in a test's input or a job's stdin it is data a program must receive."""
    if _json_is_clean(value, keep_nul):
        return value
    holder: list[Any] = [None]
    work: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while work:
        item, parent, slot = work.pop()
        if isinstance(item, str):
            parent[slot] = clean_text(item, keep_nul=keep_nul)
        elif isinstance(item, dict):
            copy: dict[Any, Any] = {}
            parent[slot] = copy
            for key, member in item.items():
                key = clean_text(key, keep_nul=keep_nul) if isinstance(key, str) else key
                copy[key] = None
                work.append((member, copy, key))
        elif isinstance(item, list | tuple):
            items: list[Any] = [None] * len(item)
            parent[slot] = items
            work.extend((member, items, index) for index, member in enumerate(item))
        else:
            parent[slot] = item
    return holder[0]


def _json_is_clean(value: Any, keep_nul: bool) -> bool:
    work = [value]
    while work:
        item = work.pop()
        if isinstance(item, str):
            if _unclean(item, keep_nul):
                return False
        elif isinstance(item, dict):
            for key, member in item.items():
                if isinstance(key, str) and _unclean(key, keep_nul):
                    return False
                work.append(member)
        elif isinstance(item, list | tuple):
            work.extend(item)
    return True


def first_unclean(value: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Where a JSON value holds text that is not valid Unicode (a lone surrogate): the path to the first such
    string (a dict key's path ends with the key itself) and what is wrong, or None. For refusing request bodies."""
    work: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while work:
        item, path = work.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                return path, _surrogate_message(item, found)
        elif isinstance(item, dict):
            for key, member in reversed(list(item.items())):
                work.append((member, (*path, key)))
                if isinstance(key, str) and (found := _SURROGATE.search(key)) is not None:
                    work.append((key, (*path, clean_text(key))))
        elif isinstance(item, list | tuple):
            work.extend((member, (*path, index)) for index, member in reversed(list(enumerate(item))))
    return None


def _surrogate_message(text: str, found: re.Match[str]) -> str:
    return (
        f"not valid Unicode text: a lone surrogate U+{ord(found.group()):04X} at character {found.start()} "
        "(write the character itself, or its escaped surrogate pair)"
    )
