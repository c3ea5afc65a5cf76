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
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from judge.rubrics import RubricSpec

MAX_CODE_CHARS = 12_000
MAX_PROMPT_CHARS = 12_000
_LOG_SEPARATOR = "\n"


class BudgetExceeded(ValueError):
    """The input is over a budget; the judgment is recorded as failed, never truncated."""


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


def user_message(judge_input: JudgeInput) -> str:
    """The canonical serialisation of x_a^(cond) (IV-A4): the same text for every judge."""
    fence = "```"
    context = judge_input.context if judge_input.context else "(none)"
    return (
        f"problem_id: {judge_input.problem_id}\n"
        f"language: {judge_input.language}\n\n"
        f"## Problem statement\n{judge_input.statement}\n\n"
        f"## Source code\n{fence}{judge_input.language}\n{judge_input.source_code}\n{fence}\n\n"
        f"## Participant context\n{context}\n"
    )


def build_messages(rubric: RubricSpec, judge_input: JudgeInput) -> list[dict[str, str]]:
    """Chat messages for one judgment; raises BudgetExceeded rather than shortening anything."""
    if len(judge_input.source_code) > MAX_CODE_CHARS:
        raise BudgetExceeded(
            f"source code is {len(judge_input.source_code)} characters; the budget is {MAX_CODE_CHARS}"
        )
    if len(judge_input.context) > MAX_PROMPT_CHARS:
        raise BudgetExceeded(f"context is {len(judge_input.context)} characters; the budget is {MAX_PROMPT_CHARS}")
    return [
        {"role": "system", "content": rubric.prompt},
        {"role": "user", "content": user_message(judge_input)},
    ]
