"""The LLMs of a synthesis job: one runner per configured LLM judge it names (created once per process, with
paper 000 IV-A's generation settings), and the tokens they spend, counted against the tenant's
judge_tokens_per_day."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from services.kernel.judges import Endpoint, LLMJudge, configured_judges
from services.kernel.ratelimit import JudgeTokenBudget
from services.kernel.settings import get_settings
from services.lib.llm import Answer, DbResponseCache, Failure, LLMRequest, Runner
from services.perturb.axiom.synthesis import PAPER_LLM_TEMPERATURE, PAPER_MAX_OUTPUT_TOKENS

log = logging.getLogger("tribunal.perturb")


class MeteredRunner(Runner):
    """A runner that adds up the tokens of the answers it got from the provider (not those from the cache): what a
    synthesis step spends of its tenant's judge_tokens_per_day."""

    def __init__(self, runner: Runner) -> None:  # a view of `runner`: its endpoint, cache and bounds are the inner's
        self.inner = runner
        self.tokens = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run(self, request: LLMRequest) -> Answer | Failure:
        answer = await self.inner.run(request)
        if isinstance(answer, Answer) and not answer.from_cache:
            self.tokens += (answer.tokens_in or 0) + (answer.tokens_out or 0)
        return answer


async def spend(budget: JudgeTokenBudget | None, metered: Sequence[MeteredRunner]) -> None:
    """Count the tokens the metered runners got from their providers against the tenant's day (best effort)."""
    tokens = sum(runner.tokens for runner in metered)
    if budget is None or tokens <= 0:
        return
    try:
        await budget.spend(tokens)
    except Exception:  # noqa: BLE001 - a count missed is logged; the judge worker's own checks stand
        log.warning("could not count %d LLM tokens of tenant %s", tokens, budget.tenant, exc_info=True)


def axiom_endpoint(judge: LLMJudge) -> Endpoint:
    """The endpoint of a configured LLM judge (its URL, model, key variable and bounds), with paper 000 IV-A's
    generation settings: temperature 0.3, 8192 output tokens."""
    config = judge.model_dump(exclude={"kind", "enabled", "rubric"})
    return Endpoint.model_validate(
        {**config, "temperature": PAPER_LLM_TEMPERATURE, "max_tokens": PAPER_MAX_OUTPUT_TOKENS}
    )


def runners(ctx: dict[str, Any], names: Sequence[str]) -> list[Runner] | str:
    """One runner per named LLM judge (created once per process), or why there is none."""
    settings = get_settings()
    configured = {j.name: j for j in configured_judges(str(settings.judges_file) if settings.judges_file else None)}
    cache: dict[str, Runner] = ctx.setdefault("axiom_runners", {})
    made = []
    for name in names:
        judge = configured.get(name)
        if not isinstance(judge, LLMJudge):
            return f"no LLM judge named {name!r} is configured here"
        if name not in cache:
            cache[name] = Runner(axiom_endpoint(judge), cache=DbResponseCache())
        made.append(cache[name])
    return made


async def close(ctx: dict[str, Any]) -> None:
    """Close the runners this worker made (its shutdown)."""
    for runner in ctx.get("axiom_runners", {}).values():
        await runner.close()
