"""Deriving a stdin template from a problem's stdio test inputs (`derive_spec` in stdio mode): a line template
inferred line by line (`_StdinInference`), its tokens' ranges mutated around the words observed (`observed.py`), and
its counts capped until one input fits MAX_INPUT_BYTES."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from services.lib.fuzzing.observed import DerivedSpec, alphabet, float_range, int_type, len_range
from services.lib.fuzzing.spec import Block, FloatToken, IntToken, Line, StdinSpec, StrToken
from services.lib.fuzzing.values import (
    FLOAT_BOUND,
    MAX_DECIMALS,
    MAX_INPUT_BYTES,
    MAX_LEN,
    MAX_LINES,
    MAX_TOKENS,
    STDIN_FLOAT_BOUND,
    Chars,
    SpecError,
    spec_error_from,
)

# Stdio inference: int tokens named as possible counts (each line is matched against every name, so the names
# bound its cost), and the digits of a word read as an int (Python refuses to convert more than 4300).
MAX_COUNT_NAMES = 64
MAX_INT_WORD_DIGITS = 40

_INT_WORD = re.compile(r"-?[0-9]+")
_FIXED_WORD = re.compile(r"-?[0-9]+\.([0-9]+)")


@dataclass
class _Slot:
    """One token template and every word observed in it."""

    words: list[str] = field(default_factory=list)
    count: int | str = 1
    name: str | None = None
    used_as_count: bool = False


@dataclass
class _LineT:
    slots: list[_Slot]
    count: int | str = 1


@dataclass
class _BlockT:
    items: list[Any]
    count: str


class _StdinInference:
    """Infers a line template from sample inputs (each a list of lines of whitespace-separated words), line by
    line: at each point, if the lines left in every sample are a multiple k of an earlier count's value, they are
    that count's repetitions (k = 1: a repeated line, k > 1: a block of k lines); otherwise the next line is a
    fixed line, whose words are a count's number of values, or a fixed number of tokens, or a count followed by
    that many values. Every int token whose values could be counts is named; unused names are dropped."""

    def __init__(self) -> None:
        self.slots_by_name: dict[str, _Slot] = {}

    def fresh(self) -> str:
        return f"n{len(self.slots_by_name) + 1}"

    def items(self, samples: list[list[list[str]]], envs: list[dict[str, int]]) -> list[Any]:
        cursors = [0] * len(samples)
        out: list[Any] = []
        while True:
            remaining = [len(s) - c for s, c in zip(samples, cursors, strict=True)]
            if all(r == 0 for r in remaining):
                return out
            repeat = self._repetition(remaining, envs)
            if repeat is not None:
                name, k = repeat
                self.slots_by_name[name].used_as_count = True
                sub_samples, sub_envs = [], []
                for s, c, env in zip(samples, cursors, envs, strict=True):
                    rest = s[c:]
                    for start in range(0, len(rest), k):
                        sub_samples.append(rest[start : start + k])
                        sub_envs.append(dict(env))
                if k == 1:
                    out.append(self.line([(sub[0], env) for sub, env in zip(sub_samples, sub_envs, strict=True)], name))
                else:
                    out.append(_BlockT(self.items(sub_samples, sub_envs), name))
                return out
            if any(r == 0 for r in remaining):
                raise SpecError("the stdio test inputs have different numbers of lines that no count explains")
            if len(out) >= MAX_LINES:  # a template has at most MAX_LINES items: stop before reading every line
                raise SpecError(
                    f"cannot infer a stdin template: more than {MAX_LINES} lines that no count explains; "
                    "send an input_spec"
                )
            out.append(self.line([(s[c], env) for s, c, env in zip(samples, cursors, envs, strict=True)], 1))
            cursors = [c + 1 for c in cursors]

    def _repetition(self, remaining: list[int], envs: list[dict[str, int]]) -> tuple[str, int] | None:
        common = [n for n in envs[0] if all(n in e for e in envs)]
        for name in reversed(common):
            values = [e[name] for e in envs]
            if max(values) < 2 and len(set(remaining)) == 1:
                continue  # a count that is always 0 or 1 explains nothing
            ks = set()
            ok = True
            for r, v in zip(remaining, values, strict=True):
                if v == 0:
                    ok = ok and r == 0
                elif r % v:
                    ok = False
                else:
                    ks.add(r // v)
            if ok and len(ks) == 1 and min(ks) >= 1:
                return name, ks.pop()
        return None

    def line(self, instances: list[tuple[list[str], dict[str, int]]], count: int | str) -> _LineT:
        lengths = [len(w) for w, _ in instances]
        common = [n for n in instances[0][1] if all(n in e for _, e in instances)]
        for name in reversed(common):
            if all(len(w) == e[name] for w, e in instances) and (max(lengths) >= 2 or len(set(lengths)) > 1):
                self.slots_by_name[name].used_as_count = True
                return _LineT([_Slot([x for w, _ in instances for x in w], count=name)], count)
        if len(set(lengths)) == 1:
            if lengths[0] > MAX_TOKENS:
                raise SpecError(
                    f"cannot infer a stdin template: a line of more than {MAX_TOKENS} tokens that no count "
                    "explains; send an input_spec"
                )
            slots = [_Slot([w[i] for w, _ in instances]) for i in range(lengths[0])]
            for i, slot in enumerate(slots):
                if len(self.slots_by_name) >= MAX_COUNT_NAMES:
                    break  # every later line is matched against every name: their number bounds the work
                if all(_count_word(x) for x in slot.words):
                    slot.name = self.fresh()
                    self.slots_by_name[slot.name] = slot
                    for w, env in instances:
                        env[slot.name] = int(w[i])
            return _LineT(slots, count)
        if all(w and _count_word(w[0]) and int(w[0]) == len(w) - 1 for w, _ in instances):
            if len(self.slots_by_name) >= MAX_COUNT_NAMES:
                raise SpecError("cannot infer a stdin template: too many counts; send an input_spec")
            head = _Slot([w[0] for w, _ in instances], name=self.fresh(), used_as_count=True)
            self.slots_by_name[str(head.name)] = head
            return _LineT([head, _Slot([x for w, _ in instances for x in w[1:]], count=str(head.name))], count)
        raise SpecError(
            "cannot infer a stdin template: a line has a varying number of tokens that no count explains; "
            "send an input_spec"
        )


def _count_word(word: str) -> bool:
    """Whether a word is an int that could be a count, in [0, MAX_LEN]."""
    return len(word) <= len(str(MAX_LEN)) and _INT_WORD.fullmatch(word) is not None and 0 <= int(word) <= MAX_LEN


def _word_int(word: str) -> int:
    """An int word's value; one of more than MAX_INT_WORD_DIGITS digits (far beyond INT_BOUND, which clamps it)
    as +-10**MAX_INT_WORD_DIGITS, never converted (Python refuses more than 4300 digits)."""
    digits = word.lstrip("-")
    if len(digits) > MAX_INT_WORD_DIGITS:
        return -(10**MAX_INT_WORD_DIGITS) if word.startswith("-") else 10**MAX_INT_WORD_DIGITS
    return int(word)


def _token(slot: _Slot) -> IntToken | FloatToken | StrToken:
    words = slot.words
    name = slot.name if slot.used_as_count else None
    if not words or all(_INT_WORD.fullmatch(w) for w in words):
        values = [_word_int(w) for w in words] or [0, 10]
        if slot.used_as_count:
            a, b = min(values), max(values)
            m = max(3, (b - a) // 2)
            lo = 0 if a <= 0 else max(1, a - m)
            return IntToken(name=name, min=lo, max=min(MAX_LEN, b + m), count=slot.count)
        t = int_type(values)
        return IntToken(name=name, min=t.min, max=t.max, count=slot.count)
    fixed = [_FIXED_WORD.fullmatch(w) or _INT_WORD.fullmatch(w) for w in words]
    if all(fixed):
        decimals = min(MAX_DECIMALS, max((len(m.group(1)) if m and m.groups() else 0) for m in fixed))
        flo, fhi = float_range([float(w) for w in words])
        bound = min(STDIN_FLOAT_BOUND, FLOAT_BOUND)
        flo, fhi = min(bound, max(-bound, flo)), max(-bound, min(bound, fhi))
        return FloatToken(min=flo, max=fhi, decimals=decimals, count=slot.count)
    lo_len, hi_len = len_range([len(w) for w in words])
    chars = alphabet({c for w in words for c in w if not c.isspace()})
    return StrToken(
        min_len=max(1, lo_len), max_len=max(1, hi_len), alphabet=Chars(chars=chars[:1024]), count=slot.count
    )


def _to_items(items: list[Any]) -> list[Line | Block]:
    out: list[Line | Block] = []
    for item in items:
        if isinstance(item, _BlockT):
            out.append(Block(count=item.count, lines=_to_items(item.items)))
        else:
            out.append(Line(tokens=[_token(s) for s in item.slots], count=item.count))
    return out


def _count_tokens(items: list[Line | Block]) -> list[tuple[list[Any], int, int]]:
    """(container, line index, token index) of every named int token, for shrinking."""
    found: list[tuple[list[Any], int, int]] = []
    for i, item in enumerate(items):
        if isinstance(item, Block):
            found.extend(_count_tokens(item.lines))
        else:
            for j, tok in enumerate(item.tokens):
                if isinstance(tok, IntToken) and tok.name is not None:
                    found.append((items, i, j))
    return found


def derive_stdin(inputs: list[str]) -> DerivedSpec:
    """A stdin template that every input fits, its counts capped until one input fits MAX_INPUT_BYTES."""
    notes: list[str] = []
    samples = [[ln.split() for ln in text.replace("\r\n", "\n").rstrip("\n").split("\n")] for text in inputs]
    samples = [[] if s == [[]] else s for s in samples]
    if any("  " in text or "\t" in text for text in inputs):
        notes.append("runs of spaces in the test inputs are rendered as single spaces")
    inference = _StdinInference()
    items = _to_items(inference.items(samples, [{} for _ in samples]))
    for _ in range(60):
        try:
            spec = StdinSpec(lines=items)
            break
        except ValueError as err:
            if "the cap is" not in str(err):
                shown = spec_error_from(err) if isinstance(err, ValidationError) else err
                raise SpecError(f"the derived stdin template is not valid ({shown}); send an input_spec") from None
            counts = _count_tokens(items)
            container, i, j = max(counts, key=lambda c: c[0][c[1]].tokens[c[2]].max)  # type: ignore[union-attr]
            line = container[i]
            tok = line.tokens[j]
            if tok.max <= max(1, tok.min):
                shown = spec_error_from(err) if isinstance(err, ValidationError) else err
                raise SpecError(f"the derived stdin template is too large ({shown}); send an input_spec") from None
            new_tok = tok.model_copy(update={"max": max(tok.min, 1, tok.max // 2)})
            container[i] = line.model_copy(update={"tokens": [*line.tokens[:j], new_tok, *line.tokens[j + 1 :]]})
            notes.append(f"count {tok.name} capped at {new_tok.max} to keep one input under {MAX_INPUT_BYTES:,} bytes")
    else:
        raise SpecError("the derived stdin template is too large; send an input_spec")
    notes.append(f"line template inferred from {len(inputs)} stdio test input(s)")
    return DerivedSpec(spec=spec, sources={"lines": "stdio_tests"}, notes=notes)
