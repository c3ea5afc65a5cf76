"""Score probabilities from a reply's `top_logprobs`, the way G-Eval reads them.

G-Eval (Liu et al. 2023, "G-Eval: NLG Evaluation using GPT-4 with Better Human Alignment") does not take the score
a judge model wrote at face value: it reads the model's probability for each allowed score s_i at the position where
the score is written, and reports score = sum_i p(s_i) * s_i, normalised over the allowed scores' probability mass.
The figure is finer than the sampled integer and tells a confident 4 from a coin-toss between 3 and 5. This module
computes that from an OpenAI-compatible chat completion requested with `logprobs=True, top_logprobs=k`.

`parse_token_logprobs(choice.logprobs)` turns the provider's per-token figures into `TokenLogprob`s (or None when
they are absent or malformed: providers are hostile, and nothing here raises on their input). Then
`score_distribution(content, tokens, probe)` works as follows:

1. Alignment: the token texts must concatenate to exactly the reply's content, or the character offsets below mean
   nothing and the result is None. (A token that splits a multi-byte character carries a replacement character
   and so fails this check: such a reply is not read rather than misread.)
2. The JSON object is located by the same rule as `validate.extract_json`: the whole stripped text if it parses as
   JSON (it must then be an object), else the body of the first ```json (or ```) fence. Its top-level keys are then
   scanned with the standard library's own JSON scanner (`json.decoder.scanstring` for each key, `raw_decode` to
   skip each value), so a key name inside a nested value or inside a string (a rationale saying `"accepted": true`)
   is never taken for the field. The field's value begins at some character offset; absent field or a content that
   is not a parseable object gives None. If the field appears more than once, the last one is read, as `json.loads`
   (and so the recorded verdict) keeps the last.
3. The token whose span [start, end) contains that offset is the one the model chose the value with. The part of
   its text before the offset is the `prefix` (in practice whitespace or a `:`, e.g. the token " 4" after `":`).
4. The candidates there are the token's `top_logprobs` alternatives plus the sampled token itself, if it is not
   among them; a text listed twice counts once, at its higher logprob. A candidate counts only if it continues the
   same prefix, JSON's insignificant whitespace ignored (" true", "true" and ": true" all spell `true` where the
   sampled token was " true"); the rest r maps to an allowed value a when r == a, or when r is a followed only by JSON
   delimiters or whitespace (",", "}", "]", " ", "\\n", "\\t", "\\r"; e.g. "4," or "true}"), or when r is a
   non-empty proper prefix of exactly one allowed value (e.g. `"acc` for `"accept"`; a prefix of two or more is
   ambiguous and not counted). Each allowed value's probability is the sum of exp(logprob) over the candidates
   mapping to it (several token texts can spell one value), at most 1; if a provider's figures add up past 1
   (disjoint tokens cannot), all are scaled down to sum to 1.
5. mass = min(1, sum of the probabilities); expected = sum(p_i * v_i) / sum(p_i), None when mass is 0. The
   divisor is the probabilities' own sum, which is the mass whenever the provider's figures are a distribution;
   when hostile figures sum past 1, dividing by the clamped mass would put the expected value outside the allowed
   range. The result is kept within [min(values), max(values)] against rounding.

Limits of the method (the paper's too): it sees only the one token where the value starts, so a value spelled over
several tokens (a string value whose first token is only `"`) gets no mass, and a value that is a prefix of another
(allowed "1" and "10") is credited with the shorter one's exact spelling. Mass well below 1 says the reading is weak.

A pure library module: the standard library only, nothing of the platform.
"""

from __future__ import annotations

import bisect
import json
import json.decoder
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from services.lib.llm.validate import JSON_FENCE

__all__ = [
    "METHOD",
    "LogprobProbe",
    "ScoreDistribution",
    "TokenLogprob",
    "parse_token_logprobs",
    "score_distribution",
    "from_probabilities",
]

METHOD = "top_logprobs"

# A logprob is log(p) <= 0; providers round, so a hair above 0 is accepted, anything more is not a logprob.
LOGPROB_TOLERANCE = 1e-6
# What may follow a value inside the same token: the JSON delimiters and whitespace.
_DELIMITERS = frozenset(",}] \n\t\r")
_JSON_WHITESPACE = " \t\n\r"
_MISSING = object()


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, its logprob, and the (text, logprob) alternatives the provider listed at its
    position (`top_logprobs`, possibly including the token itself)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class LogprobProbe:
    """Which value of a reply to read probabilities for: a top-level field of the reply's JSON object and its
    allowed values, as the JSON text each would be written as (e.g. ("0","1",...,"5") or ("true","false")), with
    the number each stands for (for the expected value)."""

    field: str
    allowed: tuple[str, ...]
    values: tuple[float, ...]  # same length as allowed


@dataclass(frozen=True)
class ScoreDistribution:
    """The model's probability for each allowed value at the position the value was written.

    `probabilities` maps every allowed JSON text to exp(logprob) summed over the candidates spelling it (0.0 when
    none did); `mass` is their sum, at most 1; `expected` is the G-Eval score, None when the mass is 0."""

    method: str
    probabilities: dict[str, float]
    mass: float
    expected: float | None


def parse_token_logprobs(raw: object) -> list[TokenLogprob] | None:
    """From a chat completion choice's `logprobs` (an object with `.content`, as the openai client gives, or a dict
    {"content": [...]}, or None). Items are objects with attributes token/logprob/top_logprobs or dicts with those
    keys. Returns None when absent or malformed (never raises: providers are hostile — non-list content, non-str
    token, non-finite or positive-beyond-rounding logprob (> 1e-6), wrong types all give None). A missing or null
    `top_logprobs` is an empty tuple of alternatives."""
    try:
        content = _get(raw, "content")
        if not isinstance(content, list):
            return None
        tokens: list[TokenLogprob] = []
        for item in content:
            token = _get(item, "token")
            logprob = _logprob(_get(item, "logprob"))
            if not isinstance(token, str) or logprob is None:
                return None
            top = _alternatives(_get(item, "top_logprobs"))
            if top is None:
                return None
            tokens.append(TokenLogprob(token, logprob, top))
        return tokens
    except Exception:  # a hostile object's properties can raise anything; the promise is None, not a crash
        return None


def _get(obj: object, name: str) -> object:
    """A dict's key or an object's attribute; `_MISSING` when there is neither (None stays None)."""
    if obj is None:
        return _MISSING
    if isinstance(obj, Mapping):
        return obj.get(name, _MISSING)
    return getattr(obj, name, _MISSING)


def _logprob(value: object) -> float | None:
    """A finite number no greater than `LOGPROB_TOLERANCE`, as a float; None otherwise (bools are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    if not math.isfinite(number) or number > LOGPROB_TOLERANCE:
        return None
    return number


def _alternatives(value: object) -> tuple[tuple[str, float], ...] | None:
    """A `top_logprobs` list as (text, logprob) pairs; missing or null is empty; malformed is None."""
    if value is _MISSING or value is None:
        return ()
    if not isinstance(value, list):
        return None
    pairs: list[tuple[str, float]] = []
    for item in value:
        token = _get(item, "token")
        logprob = _logprob(_get(item, "logprob"))
        if not isinstance(token, str) or logprob is None:
            return None
        pairs.append((token, logprob))
    return tuple(pairs)


def score_distribution(content: str, tokens: list[TokenLogprob], probe: LogprobProbe) -> ScoreDistribution | None:
    """The probabilities of `probe.field`'s allowed values where the reply `content` writes that field (the module
    docstring gives the algorithm). None when the tokens do not spell `content`, the content has no JSON object
    with that top-level field, or the probe is malformed (no allowed values, lengths differ, an empty or repeated
    allowed text, a non-finite value)."""
    if not _probe_is_sound(probe):
        return None
    if "".join(t.token for t in tokens) != content:
        return None
    offset = _value_offset(content, probe.field)
    if offset is None:
        return None
    position = _token_at(tokens, offset)
    if position is None:
        return None
    index, start = position
    prefix = content[start:offset]
    totals = dict.fromkeys(probe.allowed, 0.0)
    for text, logprob in _candidates(tokens[index]).items():
        rest = _after_prefix(text, prefix)
        if rest is None or math.isnan(logprob) or logprob > LOGPROB_TOLERANCE:
            continue
        value = _match(rest, probe.allowed)
        if value is not None:
            totals[value] += math.exp(logprob)
    return from_probabilities(totals, probe)


def _after_prefix(text: str, prefix: str) -> str | None:
    """What a candidate spells after the sampled token's part before the value (`prefix`, e.g. " " or ": "), with
    JSON's insignificant whitespace ignored on both sides: " true", "true" and ": true" all spell `true` where the
    sampled token was " true". None when the candidate does not continue the prefix's other characters."""
    core = "".join(c for c in prefix if c not in _JSON_WHITESPACE)
    rest = text.lstrip(_JSON_WHITESPACE)
    if not rest.startswith(core):
        return None
    return rest[len(core) :].lstrip(_JSON_WHITESPACE)


def from_probabilities(probabilities: Mapping[str, object], probe: LogprobProbe) -> ScoreDistribution:
    """The distribution of the allowed values' probabilities (each clamped to [0, 1]; a value not given counts 0):
    its mass and G-Eval's expected value. What `score_distribution` ends with, and what a cached answer's stored
    probabilities are read back as."""
    given: Mapping[str, object] = probabilities if isinstance(probabilities, Mapping) else {}
    clean: dict[str, float] = {text: _probability(given.get(text, 0.0)) for text in probe.allowed}
    total = sum(clean.values())
    if total > 1.0:
        # Disjoint tokens cannot add up past 1; a provider's figures that do are scaled down, so that what is
        # stored and served is a sub-distribution.
        clean = {text: p / total for text, p in clean.items()}
        total = 1.0
    mass = min(1.0, total)
    if mass <= 0.0:
        return ScoreDistribution(METHOD, clean, 0.0, None)
    weighted = sum(clean[text] * value for text, value in zip(probe.allowed, probe.values, strict=True))
    expected = min(max(weighted / total, min(probe.values)), max(probe.values))
    return ScoreDistribution(METHOD, clean, mass, expected)


def _probability(value: object) -> float:
    """A stored or computed probability as a float in [0, 1]; anything else (text, None, a boolean, NaN) is 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, float(value)))


def _probe_is_sound(probe: LogprobProbe) -> bool:
    return (
        len(probe.allowed) > 0
        and len(probe.allowed) == len(probe.values)
        and all(probe.allowed)
        and len(set(probe.allowed)) == len(probe.allowed)
        and all(math.isfinite(v) for v in probe.values)
    )


def _reject_constant(name: str) -> object:
    # As in validate.py: NaN and Infinity are not JSON, and such a reply is rejected there.
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
# The scanner's own string reader (what `json` reads every key with); typeshed's stub leaves it out.
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _object_start(content: str) -> int | None:
    """The offset in `content` of the `{` opening the reply's JSON object, by `extract_json`'s rule; None when the
    reply holds no JSON object."""
    text = content.strip()
    lead = len(content) - len(content.lstrip())
    try:
        whole = json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        fenced = JSON_FENCE.search(text)
        if fenced is None:
            return None
        body = fenced.group(1)
        try:
            parsed = json.loads(body, parse_constant=_reject_constant)
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        return lead + fenced.start(1) + len(body) - len(body.lstrip(_JSON_WHITESPACE))
    return lead if isinstance(whole, dict) else None


def _skip_whitespace(content: str, index: int) -> int:
    while index < len(content) and content[index] in _JSON_WHITESPACE:
        index += 1
    return index


def _value_offset(content: str, field: str) -> int | None:
    """The offset where the value of the top-level key `field` of the reply's JSON object begins (its last
    occurrence, as `json.loads` keeps the last); None when there is no such object or key."""
    try:
        start = _object_start(content)
    except RecursionError:  # absurdly deep nesting: not a reply we can read
        return None
    if start is None:
        return None
    found: int | None = None
    try:
        index = _skip_whitespace(content, start + 1)
        if content[index] == "}":
            return None
        while True:
            if content[index] != '"':
                return None
            key, index = _scanstring(content, index + 1)
            index = _skip_whitespace(content, index)
            if content[index] != ":":
                return None
            index = _skip_whitespace(content, index + 1)
            if key == field:
                found = index
            _, index = _DECODER.raw_decode(content, index)
            index = _skip_whitespace(content, index)
            if content[index] == ",":
                index = _skip_whitespace(content, index + 1)
            elif content[index] == "}":
                return found
            else:
                return None
    except (ValueError, IndexError, RecursionError):
        return None


def _token_at(tokens: list[TokenLogprob], offset: int) -> tuple[int, int] | None:
    """The index and start offset of the token whose span [start, end) contains `offset`."""
    ends: list[int] = []
    end = 0
    for token in tokens:
        end += len(token.token)
        ends.append(end)
    index = bisect.bisect_right(ends, offset)  # the first token ending after `offset` (empty tokens end at their start)
    if index >= len(tokens):
        return None
    return index, ends[index] - len(tokens[index].token)


def _candidates(token: TokenLogprob) -> dict[str, float]:
    """The alternatives at a token's position, each text once at its highest logprob, plus the sampled token when
    it is not listed."""
    candidates: dict[str, float] = {}
    for text, logprob in token.top:
        if text not in candidates or logprob > candidates[text]:
            candidates[text] = logprob
    if token.token not in candidates or token.logprob > candidates[token.token]:
        candidates[token.token] = token.logprob
    return candidates


def _match(rest: str, allowed: tuple[str, ...]) -> str | None:
    """The allowed value a candidate's text (after the prefix) spells: exactly; or followed only by delimiters; or as
    a non-empty proper prefix of exactly one allowed value. None when it spells none, or ambiguously."""
    if rest in allowed:
        return rest
    delimited = [a for a in allowed if rest.startswith(a) and all(c in _DELIMITERS for c in rest[len(a) :])]
    if delimited:
        return delimited[0] if len(delimited) == 1 else None
    if not rest:
        return None
    prefixed = [a for a in allowed if len(rest) < len(a) and a.startswith(rest)]
    return prefixed[0] if len(prefixed) == 1 else None
