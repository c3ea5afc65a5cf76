"""AXIOM's LLM steps (III-B1) against the scripted OpenAI-compatible server on a real socket: applicability, then
the rewrite, under strict schemas; code passed through (syntax-labelled); failures classified into a fixed
vocabulary: malformed output, refusal, ignored rule, provider failure (a 429 storm, bounded)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from services.lib.llm import Endpoint, Runner
from services.lib.mutation.axiom_rules import load_rules
from services.perturb.axiom.synthesis import (
    Candidate,
    FailureKind,
    Rejection,
    SeedProgram,
    augment_exemplar,
    extract_code,
    perturb,
    synthesize,
)
from tests.fake_llm import Behaviour, ScriptedLLM

PROGRAM = "def total(xs):\n    result = 0\n    for x in xs:\n        result += x\n    return result\n"
SEED = SeedProgram(
    requirement="Return the sum of a list of integers.", code=PROGRAM, language="python", program_id="p1"
)
RULES = load_rules()
MAX_TRIES = 3


def _endpoint(server: ScriptedLLM, name: str = "axiom", model: str = "gen-1", **overrides: Any) -> Endpoint:
    config: dict[str, Any] = {
        "name": name,
        "base_url": server.base_url,
        "model": model,
        "temperature": 0.3,
        "max_tokens": 8192,
        "timeout_s": 5,
        "max_tries": MAX_TRIES,
        "deadline_s": 20,
        "requests_per_minute": 60_000,
        **overrides,
    }
    return Endpoint.model_validate(config)


@asynccontextmanager
async def _runners(server: ScriptedLLM, *models: str, **overrides: Any) -> AsyncIterator[list[Runner]]:
    runners = [
        Runner(_endpoint(server, f"axiom-{i}", model, **overrides), backoff_multiplier=0.01, backoff_max=0.05)
        for i, model in enumerate(models or ("gen-1",))
    ]
    try:
        yield runners
    finally:
        for runner in runners:
            await runner.close()


def _schema(request: dict[str, Any]) -> str:
    return str(request["response_format"]["json_schema"]["name"])


def _program(request: dict[str, Any]) -> str:
    user = request["messages"][-1]["content"]
    found = re.search(r"Program:\n```[a-z+]*\n(.*?)\n```", user, re.DOTALL)
    assert found is not None
    return found.group(1) + "\n"


def _script(
    rewrite: Callable[[str, dict[str, Any]], Behaviour],
    applicable: Callable[[dict[str, Any]], bool] = lambda _request: True,
) -> Callable[[dict[str, Any], int], Behaviour]:
    def script(request: dict[str, Any], _nth: int) -> Behaviour:
        if _schema(request) == "axiom_applicability":
            return Behaviour(payload={"applicable": applicable(request), "reason": "It has a loop and a sum."})
        return rewrite(_program(request), request)

    return script


def _rewrite_to(code: str, summary: str = "Renamed the accumulator.") -> Behaviour:
    return Behaviour(payload={"code": code, "summary": summary})


def _rename(program: str, _request: dict[str, Any]) -> Behaviour:
    return _rewrite_to(program.replace("result", "r"))


async def test_a_rule_is_checked_then_applied_under_strict_schemas(server: ScriptedLLM) -> None:
    server.script = _script(_rename)
    rule = RULES.get("read-single-letter-names")
    async with _runners(server) as runners:
        outcome = await perturb(runners, SEED, [rule], 4, "seed-1")
    assert isinstance(outcome, Candidate), outcome
    assert outcome.code == PROGRAM.replace("result", "r")
    assert (outcome.rules, outcome.target_score, outcome.parent_id) == (("read-single-letter-names",), 4, "p1")
    assert outcome.syntax.ok is True and outcome.labels == ()
    assert [step.applicable for step in outcome.steps] == [True]
    first, second = (request.json for request in server.requests)
    assert _schema(first) == "axiom_applicability" and _schema(second) == "axiom_rewrite"
    for request in (first, second):
        assert request["response_format"]["json_schema"]["strict"] is True
        assert request["temperature"] == 0.3 and request["max_tokens"] == 8192
        assert rule.instruction in request["messages"][-1]["content"]
    schema = second["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["code", "summary"] and schema["additionalProperties"] is False
    json.dumps(outcome.record())


@pytest.mark.parametrize(
    ("language", "broken"),
    [
        ("python", "def total(xs:\n    return sum(xs)\n"),
        ("cpp", "#include <vector>\nlong total(std::vector<long> xs) {\n    long r = 0\n    return r;\n}\n"),
    ],
)
async def test_code_that_does_not_compile_is_passed_through_and_labelled(
    server: ScriptedLLM, language: str, broken: str
) -> None:
    server.script = _script(lambda _program, _request: _rewrite_to(broken))
    seed = SeedProgram("Return the sum.", "long total(std::vector<long> xs) { return 0; }\n", language)
    if language == "python":
        seed = SEED
    async with _runners(server) as runners:
        outcome = await perturb(runners, seed, [RULES.get("bug-off-by-one")], 2, "seed-2")
    assert isinstance(outcome, Candidate), outcome
    assert outcome.code == broken  # not compiled here: the executor will say CE
    assert outcome.syntax.ok is False and outcome.labels == ("syntax_error",)
    assert outcome.record()["axiom"]["labels"] == ["syntax_error"]


async def test_code_that_ignores_the_rule_is_an_ignored_rule_failure(server: ScriptedLLM) -> None:
    # The same program back, down to trailing spaces and a missing final newline.
    server.script = _script(lambda program, _request: _rewrite_to(program.replace("\n", "  \n").rstrip()))
    async with _runners(server) as runners:
        outcome = await perturb(runners, SEED, [RULES.get("bug-swap-operator")], 2, "seed-3")
    assert isinstance(outcome, Rejection)
    assert outcome.kind == FailureKind.IGNORED_RULE == "ignored_rule"
    assert outcome.rule_id == "bug-swap-operator"
    assert len(server.requests) == 2  # one question, one rewrite: a valid reply is not reissued


async def test_malformed_output_is_reissued_within_bounds_then_classified(server: ScriptedLLM) -> None:
    def rewrite(_program: str, _request: dict[str, Any]) -> Behaviour:
        return Behaviour(kind="raw", content='{"code": "def total(xs):\\n    return sum(xs', status=200)

    server.script = _script(rewrite)
    async with _runners(server) as runners:
        outcome = await perturb(runners, SEED, [RULES.get("bug-swap-operator")], 2, "seed-4")
    assert isinstance(outcome, Rejection)
    assert outcome.kind == FailureKind.MALFORMED and outcome.reason.startswith("unparseable")
    rewrites = [request for request in server.requests if _schema(request.json) == "axiom_rewrite"]
    assert len(rewrites) == MAX_TRIES
    assert len({request.body for request in rewrites}) == 1  # the identical request, reissued


async def test_a_reply_missing_a_field_is_malformed(server: ScriptedLLM) -> None:
    server.script = _script(lambda program, _request: Behaviour(payload={"code": program + "x = 1\n"}))
    async with _runners(server) as runners:
        outcome = await perturb(runners, SEED, [RULES.get("bug-swap-operator")], 2, "seed-4b")
    assert isinstance(outcome, Rejection) and outcome.kind == FailureKind.MALFORMED
    assert outcome.reason.startswith("schema")


@pytest.mark.parametrize(
    "behaviour",
    [
        Behaviour(kind="raw", content="I'm sorry, but I can't help with deliberately introducing bugs into code."),
        Behaviour(kind="raw", content=""),  # strict mode's refusal: no content
        Behaviour(payload={"code": "I cannot help with that request.", "summary": "Refused."}),
    ],
    ids=["refusal-text", "no-content", "refusal-in-code"],
)
async def test_a_refusal_is_classified_as_a_refusal(server: ScriptedLLM, behaviour: Behaviour) -> None:
    server.script = _script(lambda _program, _request: behaviour)
    async with _runners(server) as runners:
        outcome = await perturb(runners, SEED, [RULES.get("defect-plausible-wrong-algorithm")], 1, "seed-5")
    assert isinstance(outcome, Rejection)
    assert outcome.kind == FailureKind.REFUSAL


async def test_a_429_storm_ends_in_a_bounded_classified_provider_failure(server: ScriptedLLM) -> None:
    server.script = lambda _request, _nth: Behaviour(kind="status", status=429, retry_after=0.05)
    started = time.monotonic()
    async with _runners(server) as runners:
        outcome = await perturb(runners, SEED, [RULES.get("bug-off-by-one")], 2, "seed-6")
    elapsed = time.monotonic() - started
    assert isinstance(outcome, Rejection)
    assert outcome.kind == FailureKind.PROVIDER and outcome.reason == "http 429"
    assert len(server.requests) == MAX_TRIES  # bounded: the applicability question, tried max_tries times
    assert elapsed < 5


async def test_a_storm_is_also_bounded_by_the_deadline(server: ScriptedLLM) -> None:
    server.script = lambda _request, _nth: Behaviour(kind="status", status=429, retry_after=0.6)
    started = time.monotonic()
    async with _runners(server, max_tries=20, deadline_s=1.0) as runners:
        outcome = await perturb(runners, SEED, [RULES.get("bug-off-by-one")], 2, "seed-6b")
    assert isinstance(outcome, Rejection) and outcome.kind == FailureKind.PROVIDER
    assert time.monotonic() - started < 3
    assert len(server.requests) <= 3


async def test_an_inapplicable_rule_is_skipped_and_the_target_must_still_be_reached(server: ScriptedLLM) -> None:
    recursion = RULES.get("defect-remove-base-case")
    names = RULES.get("read-single-letter-names")
    server.script = _script(_rename, applicable=lambda request: "recursion" not in request["messages"][-1]["content"])
    async with _runners(server) as runners:
        # The rule of the target's ceiling (1) does not apply: min ceiling of what was applied is 4, not 1.
        unreached = await perturb(runners, SEED, [recursion, names], 1, "seed-7")
        assert isinstance(unreached, Rejection) and unreached.kind == FailureKind.TARGET_UNREACHED
        assert [step.applicable for step in unreached.steps] == [False, True]
        # A skipped rule above the target is harmless.
        reached = await perturb(runners, SEED, [recursion, names], 4, "seed-8")
    assert isinstance(reached, Candidate) and reached.skipped == ("defect-remove-base-case",)
    assert reached.rules == ("read-single-letter-names",)
    server.script = _script(_rename, applicable=lambda _request: False)
    async with _runners(server) as runners:
        # Nothing applied: even a 5-point target is not reached by the unchanged parent (III-B2 needs a new program).
        nothing = await perturb(runners, SEED, [RULES.get("alt-functional-style")], 5, "seed-8b")
    assert isinstance(nothing, Rejection) and nothing.kind == FailureKind.TARGET_UNREACHED


async def test_a_fenced_program_in_the_code_field_is_extracted(server: ScriptedLLM) -> None:
    fenced = "```python\n" + PROGRAM.replace("result", "acc") + "```"
    server.script = _script(lambda _program, _request: _rewrite_to(fenced))
    async with _runners(server) as runners:
        outcome = await perturb(runners, SEED, [RULES.get("read-single-letter-names")], 4, "seed-9")
    assert isinstance(outcome, Candidate) and outcome.code == PROGRAM.replace("result", "acc")
    assert extract_code("no fence\n\n") == "no fence\n"


async def test_a_sequence_runs_step_by_step_one_llm_sampled_per_step_reproducibly(server: ScriptedLLM) -> None:
    counter = {"n": 0}

    def rewrite(program: str, _request: dict[str, Any]) -> Behaviour:
        counter["n"] += 1
        return _rewrite_to(program + f"\n\ndef _unused_{counter['n']}():\n    return {counter['n']}\n")

    server.script = _script(rewrite)
    sequence = [RULES.get("read-unused-declarations"), RULES.get("design-deep-nesting"), RULES.get("bug-off-by-one")]
    async with _runners(server, "gen-a", "gen-b") as runners:
        outcome = await perturb(runners, SEED, sequence, 2, "seed-10")
        assert isinstance(outcome, Candidate), outcome
        again = await perturb(runners, SEED, sequence, 2, "seed-10")
    assert isinstance(again, Candidate)
    assert outcome.rules == tuple(rule.id for rule in sequence)
    models = [step.model for step in outcome.steps]
    assert set(models) <= {"gen-a", "gen-b"} and models == [step.model for step in again.steps]
    # Each step rewrote the previous step's output (intermediate programs are not verified, III-B3).
    rewrites = [request.json for request in server.requests if _schema(request.json) == "axiom_rewrite"]
    assert "_unused_1" in _program(rewrites[1]) and "_unused_2" in _program(rewrites[2])


async def test_synthesize_samples_a_sequence_for_the_target_and_exemplars_use_ceiling_5_rules(
    server: ScriptedLLM,
) -> None:
    server.script = _script(lambda program, _request: _rewrite_to(program + "# rewritten\n"))
    async with _runners(server) as runners:
        outcome = await synthesize(runners, SEED, 3, RULES, "seed-11")
        assert isinstance(outcome, Candidate), outcome
        assert min(RULES.get(rule_id).ceiling for rule_id in outcome.rules) == 3
        server.requests.clear()
        exemplar = await augment_exemplar(runners, [SEED], RULES, "seed-12")
    assert isinstance(exemplar, Candidate) and exemplar.target_score == 5
    assert all(RULES.get(rule_id).ceiling == 5 for rule_id in exemplar.rules)
    with pytest.raises(ValueError):
        await synthesize([], SeedProgram("r", "x", "python", score=2), 3, RULES, "s")
