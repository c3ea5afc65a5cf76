"""The unweighted percentile-rank panel (paper 001, VI-A10)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metrics import MetricInputError
from metrics.panel import panel_consensus, percentile_ranks


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
