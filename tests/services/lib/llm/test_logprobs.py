"""G-Eval score probabilities from `top_logprobs` (services/lib/llm/logprobs.py): worked examples computed by hand,
the JSON scanner's choice of position (never a key inside a string or a nested value), hostile provider figures,
properties over random score sets, and one reply through the scripted OpenAI-compatible server and the openai
client."""

from __future__ import annotations

import json
import math
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat.chat_completion import ChoiceLogprobs

from services.lib.llm.logprobs import (
    METHOD,
    LogprobProbe,
    ScoreDistribution,
    TokenLogprob,
    _object_start,
    from_probabilities,
    parse_token_logprobs,
    score_distribution,
)
from services.lib.llm.validate import extract_json
from tests.fake_llm import Behaviour, ScriptedLLM, scripted_logprobs

SCORES = LogprobProbe("score", tuple(str(i) for i in range(6)), tuple(float(i) for i in range(6)))
ACCEPTED = LogprobProbe("accepted", ("true", "false"), (1.0, 0.0))
DECISION = LogprobProbe("decision", ('"accept"', '"reject"', '"revise"'), (1.0, 0.0, 0.5))
EXACT = {"rel": 1e-12}


def tokens(pieces: list[str], alternatives: dict[int, list[tuple[str, float]]]) -> list[TokenLogprob]:
    """The reply split into `pieces`, with `alternatives` at the given token indices (as the scripted server's)."""
    parsed = parse_token_logprobs({"content": scripted_logprobs(pieces, alternatives)})
    assert parsed is not None
    return parsed


def read(pieces: list[str], alternatives: dict[int, list[tuple[str, float]]], probe: LogprobProbe) -> ScoreDistribution:
    result = score_distribution("".join(pieces), tokens(pieces, alternatives), probe)
    assert result is not None
    assert result.method == METHOD == "top_logprobs"
    return result


def expect(result: ScoreDistribution, probabilities: dict[str, float], expected: float | None) -> None:
    """Every allowed value's probability as given (0.0 for the unlisted), mass their sum, and the expected value."""
    assert set(result.probabilities) >= set(probabilities)
    for text, p in result.probabilities.items():
        assert p == pytest.approx(probabilities.get(text, 0.0), **EXACT)
    assert result.mass == pytest.approx(min(1.0, sum(probabilities.values())), **EXACT)
    if expected is None:
        assert result.expected is None
    else:
        assert result.expected == pytest.approx(expected, **EXACT)


# The brief's worked example: '{"score": 4, "rationale": "ok"}' as a tokenizer would split it.
SCORE_PIECES = ['{"', "score", '":', " 4", ",", ' "', "rationale", '":', ' "', "ok", '"}']


def test_the_worked_example_of_a_score() -> None:
    alternatives = {3: [(" 4", math.log(0.6)), (" 3", math.log(0.25)), (" 5", math.log(0.1)), (" x", math.log(0.03))]}
    result = read(SCORE_PIECES, alternatives, SCORES)
    assert list(result.probabilities) == ["0", "1", "2", "3", "4", "5"]
    expect(result, {"3": 0.25, "4": 0.6, "5": 0.1}, (3 * 0.25 + 4 * 0.6 + 5 * 0.1) / 0.95)
    assert result.mass == pytest.approx(0.95, **EXACT)
    assert result.probabilities["0"] == 0.0


def test_booleans_and_a_prefix_of_one_value() -> None:
    pieces = ['{"', "accepted", '":', " true", ",", ' "', "rationale", '":', ' "', "fine", '"}']
    alternatives = {3: [(" true", math.log(0.7)), (" false", math.log(0.2)), (" tr", math.log(0.05))]}
    result = read(pieces, alternatives, ACCEPTED)
    expect(result, {"true": 0.75, "false": 0.2}, 0.75 / 0.95)


def test_a_value_token_that_carries_its_delimiter() -> None:
    pieces = ['{"score":', " 4,", ' "rationale": "ok"}']
    alternatives = {
        1: [
            (" 4,", math.log(0.5)),
            (" 3,", math.log(0.2)),
            (" 5}", math.log(0.1)),
            (" 2 \n", math.log(0.05)),
            (' 4,"', math.log(0.04)),  # a quote is not a delimiter
            (" 45", math.log(0.03)),  # neither is a digit: 45 is no allowed score
        ]
    }
    result = read(pieces, alternatives, SCORES)
    expect(result, {"4": 0.5, "3": 0.2, "5": 0.1, "2": 0.05}, (4 * 0.5 + 3 * 0.2 + 5 * 0.1 + 2 * 0.05) / 0.85)


def test_several_spellings_of_one_value_add_up() -> None:
    pieces = ['{"score":', " 4", "}"]
    alternatives = {1: [(" 4", math.log(0.5)), (" 4}", math.log(0.2)), (" 3", math.log(0.1))]}
    expect(read(pieces, alternatives, SCORES), {"4": 0.7, "3": 0.1}, (4 * 0.7 + 3 * 0.1) / 0.8)


def test_a_key_spelled_inside_a_string_is_not_the_field() -> None:
    # The rationale says `"score": 1` (escaped, as JSON must) and `score: 2` before the real key.
    pieces = ['{"rationale": "not \\"score\\":', " 1", " nor score:", " 2", '", "score":', " 4", "}"]
    alternatives = {
        1: [(" 1", math.log(0.9))],
        3: [(" 2", math.log(0.9))],
        5: [(" 4", math.log(0.6)), (" 5", math.log(0.3))],
    }
    result = read(pieces, alternatives, SCORES)
    assert json.loads("".join(pieces))["score"] == 4
    expect(result, {"4": 0.6, "5": 0.3}, (4 * 0.6 + 5 * 0.3) / 0.9)


def test_a_nested_key_of_the_same_name_is_not_the_field() -> None:
    pieces = ['{"details": {"score":', " 1", '}, "score":', " 4", ', "more": [{"score":', " 2", "}]}"]
    alternatives = {
        1: [(" 1", math.log(0.9))],
        3: [(" 4", math.log(0.8)), (" 3", math.log(0.1))],
        5: [(" 2", math.log(0.9))],
    }
    expect(read(pieces, alternatives, SCORES), {"4": 0.8, "3": 0.1}, (4 * 0.8 + 3 * 0.1) / 0.9)


def test_a_repeated_key_is_read_where_json_loads_reads_it_the_last() -> None:
    pieces = ['{"score":', " 1", ', "score":', " 4", "}"]
    alternatives = {1: [(" 1", math.log(0.9))], 3: [(" 4", math.log(0.6))]}
    assert json.loads("".join(pieces))["score"] == 4
    expect(read(pieces, alternatives, SCORES), {"4": 0.6}, 4.0)


def test_fenced_content() -> None:
    # As the scripted server's `fenced` behaviour writes it: json.dumps(..., indent=2) inside a ```json fence.
    pieces = ["Here is my verdict:\n```json\n", '{\n  "score":', " 4", ',\n  "rationale": "ok"\n}', "\n```\n"]
    alternatives = {2: [(" 4", math.log(0.5)), (" 5", math.log(0.5))]}
    expect(read(pieces, alternatives, SCORES), {"4": 0.5, "5": 0.5}, 4.5)


def test_a_bare_fence_and_surrounding_whitespace() -> None:
    fenced = ["```\n", '{"score":', " 3", "}\n```"]
    expect(read(fenced, {2: [(" 3", math.log(0.7))]}, SCORES), {"3": 0.7}, 3.0)
    padded = ["\n  ", '{"score":', " 3", "}  \n"]
    expect(read(padded, {2: [(" 3", math.log(0.7))]}, SCORES), {"3": 0.7}, 3.0)


def test_a_token_holding_the_values_start_after_a_prefix() -> None:
    pieces = ['{"score"', ":4", "}"]
    alternatives = {1: [(":4", math.log(0.5)), (":3", math.log(0.4)), ("4", math.log(0.05)), (": 5", math.log(0.01))]}
    # "4" lacks the token's prefix ":" and so is not at this position; ": 5" keeps it, and JSON's whitespace after
    # the colon is insignificant, so it spells 5.
    expect(read(pieces, alternatives, SCORES), {"4": 0.5, "3": 0.4, "5": 0.01}, (4 * 0.5 + 3 * 0.4 + 5 * 0.01) / 0.91)


def test_alternatives_that_differ_from_the_sampled_token_only_in_whitespace_count() -> None:
    """ " 2" where "4" was sampled, and "true" where " true" was: the same values, spelled with or without JSON's
    insignificant whitespace."""
    pieces = ['{"score": ', "4", "}"]
    alternatives = {1: [("4", math.log(0.4)), (" 2", math.log(0.5)), ("5", math.log(0.1))]}
    expect(read(pieces, alternatives, SCORES), {"4": 0.4, "2": 0.5, "5": 0.1}, 3.1)
    booleans = LogprobProbe("accepted", ("true", "false"), (1.0, 0.0))
    tokens = ['{"accepted":', " true", "}"]
    chosen = {1: [(" true", math.log(0.6)), ("false", math.log(0.3)), ("true", math.log(0.05))]}
    result = read(tokens, chosen, booleans)
    assert result is not None and result.probabilities == pytest.approx({"true": 0.65, "false": 0.3}, rel=1e-12)


def test_figures_past_one_are_scaled_down_and_junk_reads_as_zero() -> None:
    probe = LogprobProbe("accepted", ("true", "false"), (1.0, 0.0))
    scaled = from_probabilities({"true": 1.0, "false": 1.0}, probe)
    assert scaled.probabilities == {"true": 0.5, "false": 0.5} and scaled.mass == 1.0 and scaled.expected == 0.5
    junk = from_probabilities({"true": "x", "false": None}, probe)
    assert junk.probabilities == {"true": 0.0, "false": 0.0} and junk.expected is None
    assert from_probabilities({"true": True, "false": float("nan")}, probe).mass == 0.0
    assert from_probabilities([1, 2], probe).mass == 0.0  # type: ignore[arg-type]


def test_the_sampled_tokens_own_logprob_wins_over_a_lower_listing() -> None:
    pieces = ['{"score":', " 4", "}"]
    tokens = [TokenLogprob(p, -0.01, ()) for p in pieces]
    tokens[1] = TokenLogprob(" 4", math.log(0.8), ((" 4", math.log(0.01)), (" 3", math.log(0.1))))
    result = score_distribution("".join(pieces), tokens, SCORES)
    assert result is not None and result.probabilities["4"] == pytest.approx(0.8, rel=1e-12)


def test_a_string_value_by_a_prefix_of_exactly_one_allowed_value() -> None:
    pieces = ['{"', "decision", '":', ' "accept', '"}']
    alternatives = {
        3: [
            (' "accept', math.log(0.5)),  # a proper prefix of '"accept"' only
            (' "rej', math.log(0.2)),
            (' "re', math.log(0.2)),  # a prefix of '"reject"' and '"revise"': ambiguous, not counted
            (' "', math.log(0.05)),  # a prefix of all three
            (' "revise"}', math.log(0.01)),
        ]
    }
    expect(read(pieces, alternatives, DECISION), {'"accept"': 0.5, '"reject"': 0.2, '"revise"': 0.01}, 0.505 / 0.71)


def test_duplicate_candidate_texts_count_once_at_the_higher_logprob() -> None:
    token = TokenLogprob(" 4", math.log(0.2), ((" 4", math.log(0.3)), (" 4", math.log(0.6)), (" 3", math.log(0.1))))
    pieces = ['{"score":', " 4", "}"]
    plain = [TokenLogprob(p, -0.01, ()) for p in pieces]
    result = score_distribution("".join(pieces), [plain[0], token, plain[2]], SCORES)
    assert result is not None
    # The sampled token is listed, so its own logprob (0.2) is not a further candidate.
    expect(result, {"4": 0.6, "3": 0.1}, (4 * 0.6 + 3 * 0.1) / 0.7)


def test_the_sampled_token_counts_when_it_is_not_listed() -> None:
    token = TokenLogprob(" 4", math.log(0.6), ((" 3", math.log(0.1)),))
    pieces = ['{"score":', " 4", "}"]
    plain = [TokenLogprob(p, -0.01, ()) for p in pieces]
    result = score_distribution("".join(pieces), [plain[0], token, plain[2]], SCORES)
    assert result is not None
    expect(result, {"4": 0.6, "3": 0.1}, (4 * 0.6 + 3 * 0.1) / 0.7)


def test_no_allowed_value_among_the_candidates_is_zero_mass() -> None:
    result = read(['{"score":', " 7", "}"], {1: [(" 8", math.log(0.2)), (" 9", math.log(0.1))]}, SCORES)
    assert result.mass == 0.0
    assert result.expected is None
    assert set(result.probabilities.values()) == {0.0}


def test_the_mass_is_clamped() -> None:
    # A hostile provider: two spellings of 4 at 0.7 and 0.6, and 3 at 0.5. The 4 is clamped to 1, then the figures
    # (summing to 1.5, which disjoint tokens cannot) are scaled down to sum to 1; the expected value is unchanged
    # by the scaling and inside the allowed range.
    alternatives = {1: [(" 4", math.log(0.7)), (" 4}", math.log(0.6)), (" 3", math.log(0.5))]}
    result = read(['{"score":', " 4", "}"], alternatives, SCORES)
    assert result.probabilities["4"] == pytest.approx(1.0 / 1.5, **EXACT)
    assert result.probabilities["3"] == pytest.approx(0.5 / 1.5, **EXACT)
    assert result.mass == 1.0
    assert result.expected == pytest.approx((4 * 1.0 + 3 * 0.5) / 1.5, **EXACT)
    # Rounding: a logprob a hair above 0 is a probability of 1, not more.
    rounded = read(['{"score":', " 4", "}"], {1: [(" 4", 1e-7)]}, SCORES)
    assert rounded.probabilities["4"] == 1.0
    assert rounded.mass == 1.0
    assert rounded.expected == 4.0


def test_tokens_that_do_not_spell_the_content_cannot_be_aligned() -> None:
    pieces = ['{"score":', " 4", "}"]
    content = "".join(pieces)
    assert score_distribution(content, tokens(['{"score":', " 4"], {}), SCORES) is None
    assert score_distribution(content, tokens([*pieces, " "], {}), SCORES) is None
    assert score_distribution(content, tokens(['{"score":', "4", "}"], {}), SCORES) is None
    assert score_distribution(content, [], SCORES) is None


@pytest.mark.parametrize(
    "pieces",
    [
        ['{"rationale":', ' "no score"', "}"],  # field absent
        ['{"details": {"score":', " 4", "}}"],  # only nested
        ["{", "}"],  # empty object
        ['[{"score":', " 4", "}]"],  # an array, not an object
        ['{"score":', " 4"],  # truncated
        ['{"score":', " NaN", "}"],  # not JSON, and validate rejects it
        ['{"score": 4} and', " more"],  # trailing text, no fence
        ["```json\n", '{"score":', " 4", "}", " trailing\n```"],  # the fence's body is not one object
        ["I would say 4."],
        [""],
    ],
)
def test_no_readable_field_is_none(pieces: list[str]) -> None:
    assert score_distribution("".join(pieces), tokens(pieces, {}), SCORES) is None


@pytest.mark.parametrize(
    "probe",
    [
        LogprobProbe("score", (), ()),
        LogprobProbe("score", ("1", "2"), (1.0,)),
        LogprobProbe("score", ("1", "1"), (1.0, 1.0)),
        LogprobProbe("score", ("", "1"), (0.0, 1.0)),
        LogprobProbe("score", ("1", "2"), (1.0, math.nan)),
    ],
)
def test_a_malformed_probe_is_none(probe: LogprobProbe) -> None:
    pieces = ['{"score":', " 1", "}"]
    assert score_distribution("".join(pieces), tokens(pieces, {}), probe) is None


@pytest.mark.parametrize(
    "content",
    [
        '{"score": 4}',
        '  \n{"score": 4}\n',
        'Here is my verdict:\n```json\n{\n  "score": 4\n}\n```\n',
        '```\n{"score": 4}```',
        'text ```JSON {"score": 4} ``` more ```json\n{"score": 5}\n```',
        '{"a": "```json\\n{\\"score\\": 1}\\n```", "score": 4}',
    ],
)
def test_the_object_is_the_one_extract_json_reads(content: str) -> None:
    start = _object_start(content)
    assert start is not None
    value, _ = json.JSONDecoder().raw_decode(content, start)
    assert value == extract_json(content)


# Properties over random score sets: one spelling per allowed value at the value's position, random logprobs <= 0.
allowed_scores = st.lists(st.integers(-1000, 1000), min_size=1, max_size=8, unique=True)
logprob = st.one_of(st.floats(min_value=-60.0, max_value=0.0), st.just(-math.inf), st.just(-9999.0))


@st.composite
def scored_replies(draw: st.DrawFn, hostile: bool) -> tuple[str, list[TokenLogprob], LogprobProbe]:
    scores = draw(allowed_scores)
    values = draw(st.lists(st.floats(-1e6, 1e6), min_size=len(scores), max_size=len(scores)))
    sampled = draw(st.sampled_from(scores))
    top = [(f" {s}", draw(logprob)) for s in scores]
    if hostile:  # a second spelling of each value, which can push the sum past 1
        top += [(f" {s},", draw(logprob)) for s in scores]
    draw(st.randoms()).shuffle(top)
    pieces = ['{"score":', f" {sampled}", ', "rationale": "ok"}']
    own = dict(top)[f" {sampled}"]
    toks = [
        TokenLogprob(pieces[0], -0.01, ()),
        TokenLogprob(pieces[1], own, tuple(top)),
        TokenLogprob(pieces[2], 0, ()),
    ]
    probe = LogprobProbe("score", tuple(str(s) for s in scores), tuple(values))
    return "".join(pieces), toks, probe


def check_bounds(content: str, toks: list[TokenLogprob], probe: LogprobProbe) -> ScoreDistribution:
    result = score_distribution(content, toks, probe)
    assert result is not None
    assert set(result.probabilities) == set(probe.allowed)
    assert all(0.0 <= p <= 1.0 for p in result.probabilities.values())
    assert 0.0 <= result.mass <= 1.0
    if result.mass > 0:
        assert result.expected is not None
        assert min(probe.values) <= result.expected <= max(probe.values)
    else:
        assert result.expected is None
    return result


@settings(deadline=None)
@given(scored_replies(hostile=False))
def test_probabilities_and_the_expected_value_are_in_range(reply: tuple[str, list[TokenLogprob], LogprobProbe]) -> None:
    content, toks, probe = reply
    result = check_bounds(content, toks, probe)
    top = dict(toks[1].top)
    raw = {text: min(1.0, math.exp(top[f" {text}"])) for text in probe.allowed}
    scale = max(1.0, sum(raw.values()))  # figures past 1 in all are scaled down to sum to 1
    for text in probe.allowed:
        assert result.probabilities[text] == pytest.approx(raw[text] / scale, **EXACT)


@settings(deadline=None)
@given(scored_replies(hostile=True))
def test_hostile_sums_past_one_stay_in_range(reply: tuple[str, list[TokenLogprob], LogprobProbe]) -> None:
    check_bounds(*reply)


# parse_token_logprobs: the openai client's objects, plain dicts, and hostile figures.
WIRE: list[dict[str, Any]] = [
    {"token": '{"score":', "logprob": -0.001, "bytes": None, "top_logprobs": []},
    {
        "token": " 4",
        "logprob": math.log(0.6),
        "bytes": [32, 52],
        "top_logprobs": [
            {"token": " 4", "logprob": math.log(0.6), "bytes": [32, 52]},
            {"token": " 3", "logprob": math.log(0.3), "bytes": None},
        ],
    },
    {"token": "}", "logprob": 0, "bytes": None, "top_logprobs": [{"token": "}", "logprob": 0.0, "bytes": None}]},
]
PARSED = [
    TokenLogprob('{"score":', -0.001, ()),
    TokenLogprob(" 4", math.log(0.6), ((" 4", math.log(0.6)), (" 3", math.log(0.3)))),
    TokenLogprob("}", 0.0, (("}", 0.0),)),
]


def test_parse_from_dicts() -> None:
    assert parse_token_logprobs({"content": WIRE}) == PARSED


def test_parse_from_the_openai_clients_objects() -> None:
    assert parse_token_logprobs(ChoiceLogprobs.model_validate({"content": WIRE})) == PARSED
    assert parse_token_logprobs(ChoiceLogprobs.model_validate({"content": None})) is None
    assert parse_token_logprobs(ChoiceLogprobs.model_validate({"content": []})) == []


def test_missing_or_null_alternatives_are_none_listed() -> None:
    assert parse_token_logprobs({"content": [{"token": "a", "logprob": -1.0}]}) == [TokenLogprob("a", -1.0, ())]
    assert parse_token_logprobs({"content": [{"token": "a", "logprob": -1.0, "top_logprobs": None}]}) == [
        TokenLogprob("a", -1.0, ())
    ]
    assert parse_token_logprobs({"content": [{"token": "a", "logprob": 1e-7}]}) == [TokenLogprob("a", 1e-7, ())]


class _Exploding:
    @property
    def content(self) -> object:
        raise RuntimeError("hostile")


def _item(**changes: object) -> dict[str, object]:
    item: dict[str, object] = {"token": " 4", "logprob": -0.5, "top_logprobs": [{"token": " 4", "logprob": -0.5}]}
    item.update(changes)
    return {"content": [item]}


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {},
        {"content": None},
        {"content": "tokens"},
        {"content": {"token": " 4"}},
        {"content": ({"token": " 4", "logprob": -0.5},)},
        {"content": [3]},
        {"content": [None]},
        _Exploding(),
        "content",
        _item(logprob=math.nan),
        _item(logprob=math.inf),
        _item(logprob=-math.inf),
        _item(logprob=0.5),
        _item(logprob=True),
        _item(logprob="-0.5"),
        _item(logprob=None),
        _item(token=4),
        _item(token=None),
        _item(top_logprobs="x"),
        _item(top_logprobs=[{"token": " 3"}]),
        _item(top_logprobs=[{"token": 3, "logprob": -1.0}]),
        _item(top_logprobs=[{"token": " 3", "logprob": math.nan}]),
        _item(top_logprobs=[{"token": " 3", "logprob": 2.0}]),
        _item(top_logprobs=[None]),
    ],
)
def test_hostile_logprobs_are_none(raw: object) -> None:
    assert parse_token_logprobs(raw) is None


# Through the scripted server and the openai client, as a judge would ask.
def test_a_reply_with_logprobs_through_the_scripted_server() -> None:
    payload = {"score": 4, "rationale": "Looks right."}
    content = json.dumps(payload)  # what the scripted server answers with
    offset = content.index('"score":') + len('"score":')
    pieces = [content[:offset], content[offset : offset + 2], content[offset + 2 :]]
    assert pieces[1] == " 4"
    alternatives = {1: [(" 4", math.log(0.6)), (" 3", math.log(0.25)), (" 5", math.log(0.1))]}
    behaviour = Behaviour(payload=payload, logprobs=scripted_logprobs(pieces, alternatives))
    with (
        ScriptedLLM(script=lambda _request, _nth: behaviour) as server,
        openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client,
    ):
        response = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Judge this."}], logprobs=True, top_logprobs=5
        )
    assert server.requests[0].json["logprobs"] is True
    assert server.requests[0].json["top_logprobs"] == 5
    choice = response.choices[0]
    assert choice.message.content == content
    toks = parse_token_logprobs(choice.logprobs)
    assert toks is not None
    assert [t.token for t in toks] == pieces
    result = score_distribution(content, toks, SCORES)
    assert result is not None
    expect(result, {"4": 0.6, "3": 0.25, "5": 0.1}, (4 * 0.6 + 3 * 0.25 + 5 * 0.1) / 0.95)


def test_the_scripted_server_sends_no_logprobs_unless_scripted() -> None:
    with (
        ScriptedLLM() as server,
        openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client,
    ):
        response = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Judge this."}])
    assert response.choices[0].logprobs is None
    assert parse_token_logprobs(response.choices[0].logprobs) is None


def test_scripted_logprobs_lists_the_sampled_token_first_unless_listed() -> None:
    wire = scripted_logprobs(["a", "b", "c"], {1: [("x", -1.0)], 2: [("y", -2.0), ("c", -0.5)]}, sampled_logprob=-0.2)
    assert wire == [
        {
            "token": "a",
            "logprob": -0.2,
            "bytes": None,
            "top_logprobs": [{"token": "a", "logprob": -0.2, "bytes": None}],
        },
        {
            "token": "b",
            "logprob": -0.2,
            "bytes": None,
            "top_logprobs": [
                {"token": "b", "logprob": -0.2, "bytes": None},
                {"token": "x", "logprob": -1.0, "bytes": None},
            ],
        },
        {
            "token": "c",
            "logprob": -0.5,
            "bytes": None,
            "top_logprobs": [
                {"token": "y", "logprob": -2.0, "bytes": None},
                {"token": "c", "logprob": -0.5, "bytes": None},
            ],
        },
    ]
