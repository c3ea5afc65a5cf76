"""The judge request: problem statement, language, source code, and the participant context of a condition.

Conditions (co-creation paper, IV-A3):
* `blind`: no participant context.
* `prefix12k`: the first 12,000 characters of the participant's log across all their problems, in a fixed
  deterministic order (problem id, then turn, submission time, creation time, attempt id).
* `nonblind`: the log of this problem strictly before the first verbatim appearance of this attempt's code
  (`anchored`); when the code never appears, the problem's log up to and including this attempt (`segmented`);
  when the participant has no log for the problem, nothing (`none`). Capped at 12,000 characters, keeping the
  characters nearest the anchor (the paper fixes the cap, not which end; the latest context is the relevant one).

The participant's log is the `context` text of their attempts (each attempt carries the interaction text that
went with it). Participant identity and ground-truth labels never enter a request. Source code over its budget
is a recorded failure: inputs are never shortened.

What else a request holds is the rubric's `inputs` (services/kernel/rubrics.py): the statement, the code, the
problem's public tests (hidden tests are the ground truth judges are measured against, never shown), a reference
solution, the participant context. An input the rubric does not see is left out; one it sees that the problem
does not have (no reference, no public test) makes the judgment not applicable (`NotApplicable`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from judge.rubrics import RubricSpec

MAX_CODE_CHARS = 12_000
MAX_PROMPT_CHARS = 12_000
_LOG_SEPARATOR = "\n"


class BudgetExceeded(ValueError):
    """The input is over a budget; the judgment is recorded as failed, never truncated."""


class NotApplicable(ValueError):
    """The rubric sees an input this attempt's problem does not have (a reference, public tests): the judgment does
    not apply. Recorded as a `not_applicable` row with the reason (judge/worker.py), and nothing is asked."""


@dataclass(frozen=True)
class LogEntry:
    """One attempt's interaction text, with what orders it deterministically."""

    attempt_id: str
    problem_id: str
    turn: int | None
    submitted_at: datetime | None
    created_at: datetime
    text: str

    def sort_key(self) -> tuple[Any, ...]:
        return (
            self.problem_id,
            self.turn is None,
            self.turn or 0,
            self.submitted_at is None,
            self.submitted_at or self.created_at,
            self.created_at,
            self.attempt_id,
        )


@dataclass(frozen=True)
class JudgeInput:
    problem_id: str
    statement: str
    language: str
    source_code: str
    context: str
    provenance: str | None  # anchored | segmented | none (nonblind), prefix (prefix12k), None (blind)
    public_tests: tuple[dict[str, Any], ...] = ()  # the problem's public tests, as stored
    reference: str | None = None  # a reference solution's source (in the attempt's language when there is one)


def pick_reference(references: list[dict[str, Any]], language: str) -> str | None:
    """The reference a judge sees: the first in the attempt's language, else the first there is."""
    same = [r for r in references if r.get("language") == language]
    candidates = same or references
    return str(candidates[0].get("source_code") or "") or None if candidates else None


def render_tests(tests: tuple[dict[str, Any], ...]) -> str:
    """Public tests as a judge reads them: stdin and expected stdout, arguments and return value, or test code."""
    blocks = []
    for number, test in enumerate(tests, 1):
        if test.get("code"):
            blocks.append(f"### Test {number}\n{test['code']}")
            continue
        given = test.get("input")
        given_text = given if isinstance(given, str) else json.dumps(given)
        expected = test.get("expected")
        expected_text = expected if isinstance(expected, str) else json.dumps(expected)
        blocks.append(f"### Test {number}\ninput:\n{given_text}\nexpected:\n{expected_text}")
    return "\n\n".join(blocks)


_BACKTICKS = re.compile(r"`+")


def condition_context(
    condition: str, *, attempt_id: str, problem_id: str, source_code: str, log: list[LogEntry]
) -> tuple[str, str | None]:
    """(context text, provenance tier) for one attempt under one condition."""
    entries = sorted(log, key=LogEntry.sort_key)
    if condition == "blind":
        return "", None
    if condition == "prefix12k":
        return _LOG_SEPARATOR.join(e.text for e in entries)[:MAX_PROMPT_CHARS], "prefix"
    if condition != "nonblind":
        raise ValueError(f"unknown condition {condition!r}")
    own = [e for e in entries if e.problem_id == problem_id]
    problem_log = _LOG_SEPARATOR.join(e.text for e in own)
    if not problem_log:
        return "", "none"
    for needle in (source_code, source_code.strip()):
        anchor = problem_log.find(needle) if needle else -1
        if anchor >= 0:
            return problem_log[:anchor][-MAX_PROMPT_CHARS:], "anchored"
    position = next((i for i, e in enumerate(own) if e.attempt_id == attempt_id), len(own) - 1)
    segment = _LOG_SEPARATOR.join(e.text for e in own[: position + 1])
    return segment[-MAX_PROMPT_CHARS:], "segmented"


def user_message(judge_input: JudgeInput, inputs: frozenset[str] = frozenset({"statement", "code", "context"})) -> str:
    """The canonical serialisation of x_a^(cond) (IV-A4): the same text for every judge whose rubric sees the same
    inputs; a section the rubric does not see is left out. The code fences are longer than any run of backticks in
    the code they hold (CommonMark closes a fence only with one at least as long), so a program cannot close its
    own fence and write a section of the prompt, a forged reference solution say."""
    runs = [
        len(run) for text in (judge_input.source_code, judge_input.reference or "") for run in _BACKTICKS.findall(text)
    ]
    fence = "`" * max(3, max(runs, default=0) + 1)
    sections = [f"problem_id: {judge_input.problem_id}\nlanguage: {judge_input.language}\n"]
    if "statement" in inputs:
        sections.append(f"## Problem statement\n{judge_input.statement}\n")
    if "code" in inputs:
        sections.append(f"## Source code\n{fence}{judge_input.language}\n{judge_input.source_code}\n{fence}\n")
    if "tests" in inputs:
        sections.append(f"## Public tests\n{render_tests(judge_input.public_tests)}\n")
    if "reference" in inputs:
        sections.append(f"## Reference solution\n{fence}{judge_input.language}\n{judge_input.reference}\n{fence}\n")
    if "context" in inputs:
        sections.append(f"## Participant context\n{judge_input.context if judge_input.context else '(none)'}\n")
    return "\n".join(sections)


def build_messages(rubric: RubricSpec, judge_input: JudgeInput) -> list[dict[str, str]]:
    """Chat messages for one judgment; raises BudgetExceeded rather than shortening anything, and NotApplicable
    when the rubric sees an input the problem does not have."""
    if "reference" in rubric.inputs and not judge_input.reference:
        raise NotApplicable(f"rubric {rubric.name} sees the reference solution and the problem has none")
    if "tests" in rubric.inputs and not judge_input.public_tests:
        raise NotApplicable(f"rubric {rubric.name} sees the public tests and the problem has none")
    if "code" in rubric.inputs and len(judge_input.source_code) > MAX_CODE_CHARS:
        raise BudgetExceeded(
            f"source code is {len(judge_input.source_code)} characters; the budget is {MAX_CODE_CHARS}"
        )
    if "context" in rubric.inputs and len(judge_input.context) > MAX_PROMPT_CHARS:
        raise BudgetExceeded(f"context is {len(judge_input.context)} characters; the budget is {MAX_PROMPT_CHARS}")
    if "reference" in rubric.inputs and len(judge_input.reference or "") > MAX_CODE_CHARS:
        raise BudgetExceeded(
            f"the reference is {len(judge_input.reference or '')} characters; the budget is {MAX_CODE_CHARS}"
        )
    if "tests" in rubric.inputs and len(tests := render_tests(judge_input.public_tests)) > MAX_PROMPT_CHARS:
        raise BudgetExceeded(f"the public tests are {len(tests)} characters; the budget is {MAX_PROMPT_CHARS}")
    return [
        {"role": "system", "content": rubric.prompt},
        {"role": "user", "content": user_message(judge_input, rubric.inputs)},
    ]
