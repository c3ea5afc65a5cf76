"""The unweighted percentile-rank panel (paper 001, VI-A10)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metrics import MetricInputError
from metrics.panel import (
    Consensus,
    Output,
    Population,
    consensus_by_item,
    judge_output,
    panel_consensus,
    panel_from_rows,
    percentile_ranks,
)


def test_panel_worked_example() -> None:
    # Judge A .1 .5 .5 .9 -> average ranks 1, 2.5, 2.5, 4 -> / 4: .25 .625 .625 1.
    # Judge B .2 .1 .8 .7 -> ranks 2 1 4 3 -> .5 .25 1 .75. Panel = mean: .375 .4375 .8125 .875.
    scores = [[0.1, 0.5, 0.5, 0.9], [0.2, 0.1, 0.8, 0.7]]
    assert panel_consensus(scores).tolist() == pytest.approx([0.375, 0.4375, 0.8125, 0.875])


def test_percentile_rank_is_scipys_rank_kind() -> None:
    values = np.random.default_rng(2).integers(0, 5, 30).astype(float)
    expected = [stats.percentileofscore(values, v, kind="rank") / 100 for v in values]
    assert percentile_ranks(values).tolist() == pytest.approx(expected)


def test_panel_scales_do_not_matter_only_orders() -> None:
    rng = np.random.default_rng(1)
    judge = rng.random(20)
    assert panel_consensus([judge, judge**3 * 5]).tolist() == pytest.approx(percentile_ranks(judge).tolist())


def test_missing_outputs_are_left_out() -> None:
    # Judge B has no output for item 2: B ranks items 0, 1 among themselves; item 2 gets A's rank alone.
    consensus = panel_consensus([[0.1, 0.2, 0.3], [0.9, 0.1, None]])
    assert consensus.tolist() == pytest.approx([(1 / 3 + 1.0) / 2, (2 / 3 + 0.5) / 2, 1.0])
    with pytest.raises(MetricInputError, match="every item"):
        panel_consensus([[0.1, None], [0.2, None]])


def test_population_from_counts_ranks_as_from_outputs() -> None:
    outputs = [0.3, 0.1, 0.3, 0.9, 0.3, 0.1]
    counted = Population.from_counts([(0.1, 2), (0.3, 1), (0.9, 1), (0.3, 2)])  # a GROUP BY may split a value
    assert counted.size == Population.of(outputs).size == 6
    # 0.1: ranks 1, 2 -> 1.5 / 6; 0.3: ranks 3..5 -> 4 / 6; 0.9: 6 / 6.
    assert counted.percentile_ranks([0.1, 0.3, 0.9]).tolist() == pytest.approx([0.25, 4 / 6, 1.0])
    assert Population.of(outputs).percentile_ranks(outputs).tolist() == pytest.approx(
        percentile_ranks(outputs).tolist()
    )


def test_a_value_outside_the_population_is_ranked_as_if_added() -> None:
    population = Population.of([0.1, 0.5, 0.5])
    # 0.5 added: 0.1 < it, then it ties with two more: ranks 2..4 -> 3 / 4. 0.7 added: 4 / 4; 0.0 added: 1 / 4.
    assert population.percentile_ranks([0.2, 0.7, 0.0]).tolist() == pytest.approx([0.5, 1.0, 0.25])
    assert Population.from_counts([]).percentile_ranks([0.4]).tolist() == [1.0]


def test_judge_output_is_p_ac_else_the_score_over_five() -> None:
    assert (judge_output(0.31, 2.0), judge_output(None, 4.0), judge_output(None, None)) == (0.31, 0.8, None)


def _row(aid: str, judge: str, condition: str, **values: object) -> dict[str, object]:
    return {"attempt_id": aid, "judge": judge, "condition": condition, "status": "ok", "repeat": 0, **values}


def test_panel_from_rows_worked_example_and_population() -> None:
    """Judge A under blind: a1 .1, a2 .5, a3 .5, a4 .9 -> .25 .625 .625 1; B: .2 .1 .8 .7 -> .5 .25 1 .75;
    panel .375 .4375 .8125 .875. The mutant m (A .0, B .0), B's repeat 1 of a4 and a failed row do not count:
    with the mutant, A's ranks would be .4 .7 .7 1. Under nonblind C ranks p_ac (a1 .31, a2 .35, both score 2):
    .5 and 1, not a tie at .75."""
    rows = [
        *(_row(a, "A", "blind", p_ac=p) for a, p in (("a1", 0.1), ("a2", 0.5), ("a3", 0.5), ("a4", 0.9))),
        *(_row(a, "B", "blind", p_ac=p) for a, p in (("a1", 0.2), ("a2", 0.1), ("a3", 0.8), ("a4", 0.7))),
        _row("m", "A", "blind", p_ac=0.0, parent_attempt_id="a1"),
        _row("m", "B", "blind", p_ac=0.0, parent_attempt_id="a1"),
        _row("a4", "B", "blind", p_ac=0.05, repeat=1),
        _row("a3", "C", "nonblind", status="failed", p_ac=None, score=None),
        _row("a1", "C", "nonblind", p_ac=0.31, score=2.0),
        _row("a2", "C", "nonblind", p_ac=0.35, score=2.0),
    ]
    panel = panel_from_rows(rows)
    assert set(panel) == {"a1", "a2", "a3", "a4"}
    blind = {a: panel[a]["blind"] for a in ("a1", "a2", "a3", "a4")}
    assert [c.consensus for c in blind.values()] == pytest.approx([0.375, 0.4375, 0.8125, 0.875])
    assert {c.judges for c in blind.values()} == {2}
    assert (panel["a1"]["nonblind"], panel["a2"]["nonblind"]) == (
        Consensus(0.5, 1, ("C",), {"C": 2}),
        Consensus(1.0, 1, ("C",), {"C": 2}),
    )
    # Every value names the judges it averaged and the size of each one's population (mutant and repeat left out).
    assert panel["a4"]["blind"].used == ("A", "B") and panel["a4"]["blind"].population == {"A": 4, "B": 4}
    # The same numbers as the judges x items matrix the reports pass.
    assert panel_consensus([[0.1, 0.5, 0.5, 0.9], [0.2, 0.1, 0.8, 0.7]]).tolist() == pytest.approx(
        [c.consensus for c in blind.values()]
    )


def test_consensus_by_item_refuses_what_it_cannot_rank() -> None:
    with pytest.raises(MetricInputError, match="no population"):
        consensus_by_item([Output("a", "A", "blind", 0.5)], {})
    twice = [Output("a", "A", "blind", 0.5), Output("a", "A", "blind", 0.6)]
    with pytest.raises(MetricInputError, match="two outputs"):
        consensus_by_item(twice, {("A", "blind"): Population.of([0.5, 0.6])})
