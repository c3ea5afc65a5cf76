"""services/kernel/text.py: the one definition of clean text (valid UTF-8, no NUL) that every stored field uses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.kernel.text import REPLACEMENT, clean_json, clean_text, first_unclean, is_clean

R = REPLACEMENT


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("plain", "plain"),
        ("a\ud800b", f"a{R}b"),  # lone high surrogate
        ("a\udc80b", f"a{R}b"),  # lone low surrogate (what surrogateescape makes of a byte)
        ("\udc80\ud800", R + R),  # a pair in the wrong order is two lone halves
        ("\ud83d\ude00", "\U0001f600"),  # a pair in order is its character
        ("x\ud800\ud800y", f"x{R}{R}y"),
        ("a\x00b", f"a{R}b"),
        # Valid UTF-8 stays as it is: C1 controls, noncharacters, bidirectional overrides, escape sequences.
        ("\x85\x9b\uffff\ufffe\u202e\x1b[31m", "\x85\x9b\uffff\ufffe\u202e\x1b[31m"),
        (b"ok \xe2\x82\xac", "ok \u20ac"),
        (b"\xc0\x80", R + R),  # overlong NUL
        (b"\xe0\x80\xaf", R * 3),  # overlong '/'
        (b"\xed\xa0\x80", R * 3),  # a UTF-8-encoded surrogate
        (b"\xff\xfe\x80", R * 3),
        (b"\xe2\x82", R),  # truncated sequence: one maximal subpart
        (b"a\x00b", f"a{R}b"),
        (bytearray(b"\xff"), R),
        (memoryview(b"\xff"), R),
    ],
)
def test_clean_text(raw: str | bytes, clean: str) -> None:
    assert clean_text(raw) == clean
    clean.encode("utf-8")  # strict: valid UTF-8
    assert "\x00" not in clean and is_clean(clean)
    assert clean_text(clean) == clean  # idempotent


def test_cleaning_never_lengthens_text_so_caps_hold() -> None:
    hostile = "\ud800\udc80\x00" * 1000 + "\ud83d\ude00"
    assert len(clean_text(hostile)) <= len(hostile)
    raw = b"\xff\xc0\x80\xed\xa0\x80" * 1000
    assert len(clean_text(raw)) <= len(raw)


def test_keep_nul_keeps_nul_but_not_surrogates() -> None:
    assert clean_text("a\x00\ud800", keep_nul=True) == f"a\x00{R}"
    assert is_clean("a\x00", keep_nul=True) and not is_clean("a\x00")


def test_clean_text_refuses_what_is_not_text() -> None:
    with pytest.raises(TypeError):
        clean_text(1)  # type: ignore[arg-type]


def test_clean_json_cleans_keys_and_values_at_any_depth() -> None:
    value: Any = {"k\ud800": ["\udc80", ("t\ud800",), {"n": 1, "f": 1.5, "b": True, "z": None, "nul": "a\x00"}]}
    cleaned = clean_json(value)
    assert cleaned == {f"k{R}": [R, [f"t{R}"], {"n": 1, "f": 1.5, "b": True, "z": None, "nul": "a\x00"}]}
    json.dumps(cleaned, ensure_ascii=False).encode("utf-8")
    assert clean_json(value, keep_nul=False)[f"k{R}"][2]["nul"] == f"a{R}"
    # Deeper than Python's recursion limit: iterative, both the check and the copy.
    deep: Any = "\ud800"
    for _ in range(5000):
        deep = [deep]
    cleaned_deep = clean_json(deep)
    for _ in range(5000):
        cleaned_deep = cleaned_deep[0]
    assert cleaned_deep == R


def test_clean_json_returns_a_clean_value_itself() -> None:
    value = {"a": ["b", {"c": "d\x00"}]}
    assert clean_json(value) is value


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"title": "x\ud800"}, ("title",)),
        ({"tests": [{"input": "ok"}, {"input": "\udc80"}]}, ("tests", 1, "input")),
        ({"labels": {"k\ud800": 1}}, ("labels", f"k{R}")),  # the path names the key as it can be shown
        ("\ud800", ()),
    ],
)
def test_first_unclean_names_where(value: Any, path: tuple[Any, ...]) -> None:
    found = first_unclean(value)
    assert found is not None and found[0] == path and "lone surrogate" in found[1]
    json.dumps(list(found[0]), ensure_ascii=False).encode("utf-8")


def test_first_unclean_accepts_valid_text() -> None:
    assert first_unclean({"a": ["\U0001f600", "\x00", "\uffff\u202e"], "b": 1}) is None
