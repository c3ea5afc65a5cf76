"""The database side of the judge panel: fetching the populations the API ranks in, in one query.

What the panel is, and which judgments form a population, is defined once in ``metrics/panel.py`` (the co-creation
paper's VI-A10 panel): the mean across judges of each judge's percentile rank of the attempt among that judge's
ok, repeat-0 outputs under the same condition in the same tenant, perturbation mutants left out. This module only
turns that population into SQL and hands the numbers to the pure functions there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import func, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from metrics.panel import (
    PANEL_REPEAT,
    PANEL_STATUS,
    Consensus,
    Population,
    consensus_by_item,
    judge_output,
    population_outputs,
)
from services.kernel.models import Attempt, Judgment

PopulationKey = tuple[str, str]  # (judge, condition)


def tidy_row(attempt: Attempt, judgment: Judgment) -> dict[str, Any]:
    """The fields of a stored judgment that decide whether it counts in the panel, as ``metrics.panel`` reads them."""
    return {
        "attempt_id": attempt.attempt_id,
        "judge": judgment.judge,
        "condition": judgment.condition,
        "repeat": judgment.repeat,
        "status": judgment.status,
        "p_ac": judgment.p_ac,
        "score": judgment.score,
        "parent_attempt_id": attempt.parent_attempt_id,
    }


async def fetch_populations(
    session: AsyncSession, tenant: str, keys: Collection[PopulationKey]
) -> dict[PopulationKey, Population]:
    """The tenant's populations for these (judge, condition) pairs, in one statement (none when ``keys`` is empty).

    The database returns each population as counts of its distinct (p_ac, score) pairs, so what crosses the wire
    grows with the number of distinct outputs, not with the number of judgments. A pair without a single counting
    judgment gets an empty population.
    """
    if not keys:
        return {}
    query = (
        select(Judgment.judge, Judgment.condition, Judgment.p_ac, Judgment.score, func.count())
        .join(Attempt, Attempt.attempt_id == Judgment.attempt_id)
        .where(
            Attempt.tenant == tenant,
            Attempt.parent_attempt_id.is_(None),
            Judgment.repeat == PANEL_REPEAT,
            Judgment.status == PANEL_STATUS,
            or_(Judgment.p_ac.is_not(None), Judgment.score.is_not(None)),
            tuple_(Judgment.judge, Judgment.condition).in_(sorted(keys)),
        )
        .group_by(Judgment.judge, Judgment.condition, Judgment.p_ac, Judgment.score)
    )
    counts: dict[PopulationKey, list[tuple[float, int]]] = defaultdict(list)
    for judge, condition, p_ac, score, count in (await session.execute(query)).tuples():
        value = judge_output(p_ac, score)
        assert value is not None  # the WHERE clause keeps only rows with an output
        counts[(judge, condition)].append((value, int(count)))
    return {key: Population.from_counts(counts.get(key, [])) for key in keys}


async def panels(
    session: AsyncSession, attempts: Sequence[Attempt], judgments: Mapping[str, Iterable[Judgment]]
) -> dict[str, dict[str, Consensus]]:
    """``{attempt_id: {condition: Consensus}}`` for a page of attempts, given their judgments by attempt id.

    One statement per tenant on the page (normally one), whatever its size. An attempt outside the population (a
    mutant) or without a counting judgment is absent.
    """
    by_tenant: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for attempt in attempts:
        by_tenant[attempt.tenant] += [tidy_row(attempt, row) for row in judgments.get(attempt.attempt_id, ())]
    result: dict[str, dict[str, Consensus]] = {}
    for tenant, rows in by_tenant.items():
        outputs = population_outputs(rows)
        populations = await fetch_populations(session, tenant, {(o.judge, o.condition) for o in outputs})
        result.update(consensus_by_item(outputs, populations))
    return result
