"""`violations(spec, value)`: what keeps a value from satisfying an input spec (empty when it does)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from services.lib.fuzzing.relations import Compare, LengthOf
from services.lib.fuzzing.spec import (
    Block,
    FloatToken,
    FunctionSpec,
    IntToken,
    Line,
    StdinSpec,
    float_grid,
    parse_spec,
    token_chars,
)
from services.lib.fuzzing.values import (
    BoolType,
    DictType,
    FloatType,
    IntType,
    ListType,
    NoneType,
    OneOfType,
    SetType,
    StrType,
    TupleType,
    alphabet_chars,
)

_MAX_MESSAGES = 20


def violations(spec: FunctionSpec | StdinSpec | Mapping[str, Any] | str, value: Any) -> list[str]:
    """Every way ``value`` fails ``spec`` (at most 20 messages), each naming where; empty when it satisfies it.
    Function specs take a list (or tuple) of positional arguments, stdin specs take the stdin text."""
    parsed = parse_spec(spec)
    out: list[str] = []
    if isinstance(parsed, FunctionSpec):
        _function(parsed, value, out)
    else:
        _stdin(parsed, value, out)
    return out[:_MAX_MESSAGES]


def value_violations(t: Any, value: Any, path: str = "value") -> list[str]:
    """Every way ``value`` fails the value type ``t``."""
    out: list[str] = []
    _value(t, value, path, out)
    return out


def _function(spec: FunctionSpec, value: Any, out: list[str]) -> None:
    if type(value) not in (list, tuple):
        out.append(f"input: a list of positional arguments expected, got {type(value).__name__}")
        return
    if len(value) != len(spec.args):
        out.append(f"input: {len(spec.args)} arguments expected, got {len(value)}")
        return
    named = {}
    for i, (arg, v) in enumerate(zip(spec.args, value, strict=True)):
        _value(arg.type, v, f"args[{i}] ({arg.name})", out)
        named[arg.name] = v
    for j, rel in enumerate(spec.relations):
        if isinstance(rel, LengthOf):
            n, of = named[rel.arg], named[rel.of]
            if not hasattr(of, "__len__") or n != len(of):
                out.append(f"relations[{j}]: {rel.arg} = {n!r} is not len({rel.of})")
        elif isinstance(rel, Compare):
            left, right = named[rel.left], named[rel.right]
            try:
                ok = left < right if rel.kind == "lt" else left <= right
            except TypeError:
                ok = False
            if not ok:
                op = "<" if rel.kind == "lt" else "<="
                out.append(f"relations[{j}]: {rel.left} {op} {rel.right} fails ({left!r}, {right!r})")


def _length(t: Any, value: Any, path: str, out: list[str]) -> None:
    if not t.min_len <= len(value) <= t.max_len:
        out.append(f"{path}: length {len(value)} is outside [{t.min_len}, {t.max_len}]")


def _value(t: Any, v: Any, path: str, out: list[str]) -> None:
    if len(out) >= _MAX_MESSAGES:
        return
    expected: dict[Any, Any] = {
        IntType: int, FloatType: float, StrType: str, BoolType: bool, NoneType: type(None), ListType: list,
        TupleType: tuple, DictType: dict, SetType: set,
    }  # fmt: skip
    if isinstance(t, OneOfType):
        if all(value_violations(o, v, path) for o in t.options):
            out.append(f"{path}: {_short(v)} matches none of the one_of options")
        return
    kind: Any = expected[type(t)]
    actual: Any = type(v)
    if actual is not kind:
        out.append(f"{path}: {t.type} expected, got {type(v).__name__} {_short(v)}")
        return
    if isinstance(t, IntType):
        if not t.min <= v <= t.max:
            out.append(f"{path}: {v} is outside [{t.min}, {t.max}]")
    elif isinstance(t, FloatType):
        if math.isnan(v):
            if not t.allow_nan:
                out.append(f"{path}: NaN is not allowed")
        elif math.isinf(v):
            if not t.allow_infinity and not t.min <= v <= t.max:
                out.append(f"{path}: {v} is not allowed")
        elif not t.min <= v <= t.max:
            out.append(f"{path}: {v!r} is outside [{t.min!r}, {t.max!r}]")
    elif isinstance(t, StrType):
        _length(t, v, path, out)
        chars = set(alphabet_chars(t.alphabet))
        bad = sorted({c for c in v if c not in chars})
        if bad:
            out.append(f"{path}: characters {''.join(bad)!r} are not in the alphabet")
    elif isinstance(t, ListType):
        _length(t, v, path, out)
        for i, x in enumerate(v):
            _value(t.elements, x, f"{path}[{i}]", out)
        if t.sorted and any(_lt(v[i + 1], v[i]) for i in range(len(v) - 1)):
            out.append(f"{path}: not sorted")
        if t.unique and len(_distinct(v)) != len(v):
            out.append(f"{path}: elements are not unique")
    elif isinstance(t, SetType):
        _length(t, v, path, out)
        for x in sorted(v, key=repr):
            _value(t.elements, x, f"{path}{{{_short(x)}}}", out)
    elif isinstance(t, DictType):
        _length(t, v, path, out)
        for k, x in v.items():
            _value(t.keys, k, f"{path} key {_short(k)}", out)
            _value(t.values, x, f"{path}[{_short(k)}]", out)
    elif isinstance(t, TupleType):
        if len(v) != len(t.items):
            out.append(f"{path}: {len(t.items)} items expected, got {len(v)}")
            return
        for i, (item, x) in enumerate(zip(t.items, v, strict=True)):
            _value(item, x, f"{path}[{i}]", out)


def _lt(a: Any, b: Any) -> bool:
    try:
        return bool(a < b)
    except TypeError:
        return True


def _distinct(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(v is w or v == w for w in out):
            out.append(v)
    return out


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


# ---- stdin --------------------------------------------------------------------------------------------------------

_INT = re.compile(r"-?[0-9]+")


class _Mismatch(Exception):
    pass


def _stdin(spec: StdinSpec, text: Any, out: list[str]) -> None:
    if not isinstance(text, str):
        out.append(f"input: stdin text expected, got {type(text).__name__}")
        return
    if not spec.lines:
        if text:
            out.append("input: empty stdin expected")
        return
    if not text.endswith("\n"):
        out.append("input: stdin must end with a newline")
        return
    lines = text[:-1].split("\n")
    cursor = [0]
    try:
        _items(spec.lines, lines, cursor, {}, "lines", out)
    except _Mismatch as err:
        out.append(str(err))
        return
    if cursor[0] != len(lines):
        out.append(f"line {cursor[0] + 1}: {len(lines) - cursor[0]} lines more than the template has")


def _items(
    items: list[Line | Block], lines: list[str], cursor: list[int], env: dict[str, int], path: str, out: list[str]
) -> None:
    for i, item in enumerate(items):
        ipath = f"{path}[{i}]"
        repeats = item.count if isinstance(item.count, int) else env[item.count]
        for _ in range(repeats):
            if isinstance(item, Block):
                _items(item.lines, lines, cursor, dict(env), f"{ipath}.lines", out)
                continue
            if cursor[0] >= len(lines):
                raise _Mismatch(f"{ipath}: line {cursor[0] + 1} expected, but the input has {len(lines)} lines")
            words = lines[cursor[0]].split(" ") if lines[cursor[0]] else []
            _tokens(item, words, f"line {cursor[0] + 1}", env if item.count == 1 else dict(env), out)
            cursor[0] += 1


def _tokens(line: Line, words: list[str], where: str, env: dict[str, int], out: list[str]) -> None:
    w = 0
    for j, tok in enumerate(line.tokens):
        repeats = tok.count if isinstance(tok.count, int) else env[tok.count]
        for _ in range(repeats):
            if w >= len(words):
                raise _Mismatch(f"{where}: token {w + 1} ({tok.type}, tokens[{j}]) missing")
            word = words[w]
            w += 1
            if isinstance(tok, IntToken):
                if not _INT.fullmatch(word):
                    raise _Mismatch(f"{where}: token {w} {word!r} is not an int")
                v = int(word)
                if not tok.min <= v <= tok.max:
                    out.append(f"{where}: token {w} {v} is outside [{tok.min}, {tok.max}]")
                if tok.name is not None:
                    env[tok.name] = v
            elif isinstance(tok, FloatToken):
                k = _fixed(word, tok.decimals)
                if k is None:
                    raise _Mismatch(f"{where}: token {w} {word!r} is not a number with at most {tok.decimals} decimals")
                lo, hi = float_grid(tok)
                if not lo <= k <= hi:
                    out.append(f"{where}: token {w} {word} is outside [{tok.min}, {tok.max}]")
            else:
                chars = set(token_chars(tok.alphabet))
                if not tok.min_len <= len(word) <= tok.max_len:
                    out.append(f"{where}: token {w} has length {len(word)}, outside [{tok.min_len}, {tok.max_len}]")
                if any(c not in chars for c in word):
                    out.append(f"{where}: token {w} {_short(word)} has characters outside the alphabet")
    if w != len(words):
        raise _Mismatch(f"{where}: {len(words)} tokens, the template has {w}")


def _fixed(word: str, decimals: int) -> int | None:
    """k such that word is the number k / 10**decimals (written with at most ``decimals`` decimals), or None."""
    m = re.fullmatch(r"(-?)([0-9]+)(?:\.([0-9]+))?", word)
    if m is None or len(m.group(3) or "") > decimals:
        return None
    sign, whole, frac = m.group(1), m.group(2), (m.group(3) or "").ljust(decimals, "0")
    k = int(whole) * 10**decimals + (int(frac) if frac else 0)
    return -k if sign else k
