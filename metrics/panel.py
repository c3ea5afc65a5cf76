"""The judge panel: a judge-agnostic consensus score (paper 001, IV-C3 and VI-A10), defined once for the platform.

Definition
    For an attempt ``a`` under an input condition ``c``, ``q(a, c) = (1/|J|) sum_{j in J} F_jc(p_j(a, c))``: the
    unweighted mean, over the judges ``J`` that have an output for ``a`` under ``c``, of each judge's percentile rank
    of its own output. ``F_jc`` maps judge j's output to its percentile rank among j's outputs under ``c`` over the
    population below. The paper does not define the percentile rank under ties; here it is the average rank divided
    by the population size (pandas ``rank(pct=True)``, scipy ``percentileofscore(kind="rank") / 100``), so ties share
    the mean of their ranks and the value is in (0, 1]. Ranks are scale-free, which is what lets judges on different
    scales be averaged. A judge without an output for an attempt is left out of that attempt's mean and of its own
    population.

The output a judge is ranked on (:func:`judge_output`)
    Its acceptance probability ``p^(j)`` as in IV-C3: ``p_ac`` when the judgment has one, else its 0-5 ``score``
    divided by 5 (the reports read a judge's probability the same way, ``metrics.reports.common.probability``).
    For the co-creation rubric ``score`` is ``p_ac``; for the offline judges ``score`` is ``round(5 * p_ac)``, a
    coarsened copy that would turn distinct outputs into ties, so ``p_ac`` is what is ranked.

Population (:func:`in_population`): which judgments count
    The judgments of one judge under one condition in one tenant (a report ranks within the rows it reads, which
    without a filter are the tenant's) that are repeat 0 (one output per attempt; repeats measure consistency, not
    a further vote), have status ``ok`` (a failure is never a score) and have an output; judgments of perturbation
    mutants (attempts with a ``parent_attempt_id``) do not count. The panel ranks the submissions of participants:
    ``q_{u,p,k}`` is indexed by participant, problem and turn (IV-C3) and VI-A10 evaluates it over the 517 contest
    attempts, while a mutant is a synthetic program "with no participant history of its own" (V-D), judged under
    blind only and analysed apart by its probability shift from its seed (VI-B). Counting mutants would move every
    participant's rank with how many mutants were generated, and under blind only, so the blind and nonblind panels
    would rank against different populations. A mutant therefore has no panel value of its own either.

Only numbers live here (no database): the API fetches a population as counts of distinct outputs
(``gateway/panel.py``, the API's read path) and ranks with :class:`Population`, the reports pass a judges x
items matrix to
:func:`panel_consensus`, and :func:`panel_from_rows` computes the API's values from the tidy judgment table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from metrics.arrays import FloatArray, IntArray, as_float_vector, as_ratings_matrix
from metrics.errors import MetricInputError

PANEL_STATUS = "ok"
PANEL_REPEAT = 0


def judge_output(p_ac: float | None, score: float | None) -> float | None:
    """What a judge is ranked on: ``p_ac`` when present, else the 0-5 ``score`` / 5, else None (no output)."""
    if p_ac is not None:
        return float(p_ac)
    if score is not None:
        return float(score) / 5.0
    return None


def in_population(row: Mapping[str, Any]) -> bool:
    """Whether a tidy judgment row (``status, repeat, p_ac, score, parent_attempt_id``) counts in the panel."""
    return (
        row.get("status") == PANEL_STATUS
        and (row.get("repeat") or 0) == PANEL_REPEAT
        and not row.get("parent_attempt_id")
        and judge_output(row.get("p_ac"), row.get("score")) is not None
    )


@dataclass(frozen=True)
class Population:
    """One judge's outputs under one condition, held as its distinct outputs (ascending) and their counts."""

    outputs: FloatArray
    counts: IntArray

    @classmethod
    def of(cls, outputs: ArrayLike) -> Population:
        """The population of these outputs (no missing value)."""
        values = as_float_vector(outputs, "outputs")
        distinct, counts = np.unique(values, return_counts=True)
        return cls(distinct.astype(np.float64), counts.astype(np.int64))

    @classmethod
    def from_counts(cls, counts: Iterable[tuple[float, int]]) -> Population:
        """The population from ``(output, how many)`` pairs, e.g. a GROUP BY; equal outputs are merged."""
        merged: dict[float, int] = defaultdict(int)
        for value, count in counts:
            if int(count) < 1:
                raise MetricInputError(f"a population count must be positive, got {count!r}")
            merged[float(value)] += int(count)
        distinct = as_float_vector(sorted(merged), "outputs")
        return cls(distinct, np.array([merged[v] for v in distinct.tolist()], dtype=np.int64))

    @property
    def size(self) -> int:
        return int(self.counts.sum())

    def percentile_ranks(self, values: ArrayLike) -> FloatArray:
        """Average rank / size of every value among the population: ``(less + (equal + 1) / 2) / size``.

        A value is normally one of the population's outputs. One that is not (a judgment rewritten between reading
        the attempt and reading its population) is ranked as if it were added: it counts once more in ``equal`` and
        in ``size``, so the result stays in (0, 1].
        """
        x = as_float_vector(values, "values")
        if self.outputs.size == 0:
            return np.ones_like(x)  # each value ranked alone
        below = np.concatenate(([0], np.cumsum(self.counts)))  # below[i]: how many outputs are < outputs[i]
        index = np.searchsorted(self.outputs, x, side="left")
        at = np.minimum(index, self.outputs.size - 1)
        found = (index < self.outputs.size) & (self.outputs[at] == x)
        less = below[index]
        equal = np.where(found, self.counts[at], 0)
        added = (~found).astype(np.int64)
        ranks: FloatArray = (less + (equal + added + 1) / 2) / (self.size + added)
        return ranks


def percentile_ranks(scores: ArrayLike) -> FloatArray:
    """Average rank / n of every non-missing score among the non-missing scores; NaN stays NaN."""
    values = as_float_vector(scores, "scores", allow_missing=True)
    present = ~np.isnan(values)
    ranks = np.full(values.shape, np.nan)
    ranks[present] = Population.of(values[present]).percentile_ranks(values[present])
    return ranks


@dataclass(frozen=True)
class Output:
    """One judgment as the panel sees it: the item (attempt) it is about, its judge, condition and output."""

    item: str
    judge: str
    condition: str
    value: float


DEFINITION = "unweighted mean percentile rank, paper 001 VI-A10"


@dataclass(frozen=True)
class Consensus:
    """An item's panel under one condition: the mean percentile rank and how many judges it averages; ``used``: those
    judges, and ``population``: the size of each one's population (how many outputs it was ranked among)."""

    consensus: float
    judges: int
    used: tuple[str, ...] = ()
    population: Mapping[str, int] = field(default_factory=dict)


def consensus_by_item(
    outputs: Iterable[Output], populations: Mapping[tuple[str, str], Population]
) -> dict[str, dict[str, Consensus]]:
    """``{item: {condition: Consensus}}``: each output ranked in ``populations[(judge, condition)]``, then the
    unweighted mean of an item's ranks across its judges under each condition.

    Raises:
        MetricInputError: an output whose (judge, condition) has no population, or two outputs of one judge for
            the same item and condition.
    """
    grouped: dict[tuple[str, str], list[Output]] = defaultdict(list)
    for output in outputs:
        grouped[(output.judge, output.condition)].append(output)
    ranks: dict[tuple[str, str], list[float]] = defaultdict(list)
    sizes: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for key, members in grouped.items():
        if key not in populations:
            raise MetricInputError(f"no population for judge {key[0]!r} under condition {key[1]!r}")
        if len({m.item for m in members}) != len(members):
            raise MetricInputError(f"judge {key[0]!r} has two outputs for one item under condition {key[1]!r}")
        values = populations[key].percentile_ranks([m.value for m in members])
        for member, rank in zip(members, values.tolist(), strict=True):
            ranks[(member.item, member.condition)].append(rank)
            sizes[(member.item, member.condition)][member.judge] = populations[key].size
    result: dict[str, dict[str, Consensus]] = {}
    for (item, condition), item_ranks in sorted(ranks.items()):
        population = dict(sorted(sizes[(item, condition)].items()))
        result.setdefault(item, {})[condition] = Consensus(
            sum(item_ranks) / len(item_ranks), len(item_ranks), tuple(population), population
        )
    return result


def population_outputs(rows: Iterable[Mapping[str, Any]]) -> list[Output]:
    """The outputs of the tidy judgment rows (``attempt_id, judge, condition, status, repeat, p_ac, score,
    parent_attempt_id``) that count in the panel (:func:`in_population`)."""
    outputs = []
    for row in rows:
        if in_population(row):
            value = judge_output(row.get("p_ac"), row.get("score"))
            assert value is not None
            outputs.append(Output(str(row["attempt_id"]), str(row["judge"]), str(row["condition"]), value))
    return outputs


def populations_of(outputs: Iterable[Output]) -> dict[tuple[str, str], Population]:
    """Every (judge, condition)'s population, from the outputs themselves."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for output in outputs:
        values[(output.judge, output.condition)].append(output.value)
    return {key: Population.of(vals) for key, vals in values.items()}


def panel_from_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Consensus]]:
    """The panel of every attempt in a tidy judgment table, ranking within the table: ``{attempt_id: {condition:
    Consensus}}``. Given a tenant's whole table, these are the values ``GET /v1/attempts`` returns."""
    outputs = population_outputs(rows)
    return consensus_by_item(outputs, populations_of(outputs))


def panel_consensus(scores: ArrayLike) -> FloatArray:
    """Mean percentile rank across judges for every item.

    Args:
        scores: judges x items matrix of outputs (e.g. acceptance probabilities), NaN/None where missing.

    Raises:
        MetricInputError: not a matrix, or an item that no judge scored.
    """
    matrix = as_ratings_matrix(scores, "scores")
    outputs = [
        Output(str(item), str(judge), "", float(value))
        for judge, row in enumerate(matrix)
        for item, value in enumerate(row)
        if not np.isnan(value)
    ]
    by_item = consensus_by_item(outputs, populations_of(outputs))
    if matrix.shape[0] == 0 or len(by_item) < matrix.shape[1]:
        raise MetricInputError("scores must hold at least one judge's output for every item")
    return np.array([by_item[str(item)][""].consensus for item in range(matrix.shape[1])], dtype=np.float64)
