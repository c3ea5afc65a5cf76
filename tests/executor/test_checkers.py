"""Checkers: what counts as the same output under each checker kind, and the reasons given when it is not."""

from __future__ import annotations

import math

import pytest

from executor.checkers import check, mismatch, numbers_close, values_equal


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("3\n", "3\n", True),
        ("3\n", "3", False),
        ("3\n", "3 \n", False),
        ("a\r\nb", "a\nb", False),
        ("\u00e9\n", "\u00e9\n", True),
        # Invalid UTF-8 from a program arrives as surrogate escapes and never equals valid text.
        ("\u00e9", b"\xe9".decode("utf-8", "surrogateescape"), False),
    ],
)
def test_exact_is_byte_exact(expected: str, actual: str, ok: bool) -> None:
    assert check("exact", expected, actual) is ok


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("a\nb\n", "a  \nb\t\n\n\n", True),
        ("a\nb", "a\r\nb\r\n", True),
        ("a\nb", " a\nb", False),
        ("a\n\nb", "a\nb", False),
        ("a b", "a  b", False),
        ("", "\n\n", True),
    ],
)
def test_lines_ignores_trailing_whitespace_and_blank_lines_only(expected: str, actual: str, ok: bool) -> None:
    assert check("lines", expected, actual) is ok


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("1 2\n3\n", "1\n2   3", True),
        ("1 2 3", "1 2", False),
        ("1 2", "1 2 3", False),
        ("yes", "YES", False),
        ("1.0", "1", False),
    ],
)
def test_tokens_compares_whitespace_separated_tokens(expected: str, actual: str, ok: bool) -> None:
    assert check("tokens", expected, actual) is ok


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("0.333333333", "0.3333334", True),  # within abs_tol 1e-6
        ("0.333333333", "0.3334", False),
        ("1000000000", "1000000999", True),  # within rel_tol 1e-6 of the expected value
        ("1000000000", "1000002000", False),
        ("1e-3 done", "0.001 done", True),
        ("1.5 done", "1.5 DONE", False),  # non-numeric tokens stay exact
        ("1000", "1_000", False),  # Python's float() would accept this; a judge must not
        ("nan", "NaN", False),
        ("2", "2.0000001", True),
    ],
)
def test_float_tolerates_numeric_error_by_abs_or_rel(expected: str, actual: str, ok: bool) -> None:
    assert check("float", expected, actual, abs_tol=1e-6, rel_tol=1e-6) is ok


def test_float_tolerances_are_parameters() -> None:
    assert check("float", "1.0", "1.05", abs_tol=0.1, rel_tol=0)
    assert not check("float", "1.0", "1.05", abs_tol=0.01, rel_tol=0)
    assert check("float", "100", "104", abs_tol=0, rel_tol=0.05)


def test_mismatch_says_where() -> None:
    assert mismatch("tokens", "1 2 3", "1 5 3") == "token 2: expected '2', got '5'"
    assert mismatch("tokens", "1 2 3", "1 2") == "expected 3 tokens, got 2"
    assert mismatch("lines", "a\nb", "a\nc") == "line 2: expected 'b', got 'c'"
    assert "character 1" in (mismatch("exact", "ab", "ac") or "")
    assert mismatch("tokens", "1", "1") is None


def test_mismatch_excerpts_long_tokens() -> None:
    reason = mismatch("tokens", "x" * 10_000, "y" * 10_000) or ""
    assert len(reason) < 120


def test_unknown_checker_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown checker"):
        check("regex", "a", "a")


def test_numbers_close_edge_values() -> None:
    assert numbers_close(math.nan, math.nan, 0, 0)
    assert not numbers_close(math.nan, 1.0, 1, 1)
    assert numbers_close(math.inf, math.inf, 0, 0)
    assert not numbers_close(math.inf, -math.inf, 1, 1)


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (3, 3, True),
        # An integer answer is exact: 3.0 is 3, 3.0000001 is not (within rel_tol it would let 123456889.0 pass
        # for 123456789).
        (3, 3.0, True),
        (3, 3.0000001, False),
        (3.0, 3.0000001, True),
        (0.3, 0.1 + 0.2, True),
        (3, 4, False),
        (True, 1, False),  # JSON true is not 1
        (1, True, False),
        (None, None, True),
        (None, 0, False),
        ([1, [2.0, "a"]], [1, [2.0000001, "a"]], True),
        ([1, 2], [1, 2, 3], False),
        ({"a": [1.0]}, {"a": [1.0000001]}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ("1", 1, False),
        (10**30, 10**30 + 1, False),  # integers compare exactly, however large
    ],
)
def test_values_equal_is_json_equality_with_float_tolerance(expected: object, actual: object, ok: bool) -> None:
    assert values_equal(expected, actual, 1e-6, 1e-6) is ok
