"""Canary for the one module that uses Hypothesis internals (services/lib/fuzzing/hypothesis_backend.py, written
for 6.170).

If one of these fails after a Hypothesis upgrade, generation changed: either the internals it relies on moved
(fix `hypothesis_backend.py`), or the same seed now gives other inputs (update the golden values, knowing that inputs
stored with a df_score are no longer reproducible from their seed with the new version).
"""

from __future__ import annotations

import inspect

import hypothesis
from hypothesis.internal.conjecture import providers, utils

from services.lib.fuzzing.hypothesis_backend import HYPOTHESIS_VERSION_WRITTEN_FOR, SeededDraws


def test_the_internals_relied_on_exist() -> None:
    assert hasattr(providers, "HypothesisProvider") and hasattr(providers, "GLOBAL_CONSTANTS")
    assert callable(getattr(utils, "_calc_p_continue", None))
    provider = providers.HypothesisProvider
    assert "_maybe_draw_constant" in vars(provider)
    draw_float = inspect.signature(provider.draw_float).parameters
    assert {"min_value", "max_value", "allow_nan", "smallest_nonzero_magnitude"} <= set(draw_float)
    assert {"min_value", "max_value"} <= set(inspect.signature(provider.draw_integer).parameters)
    assert hasattr(providers.GLOBAL_CONSTANTS, "integers") and hasattr(providers.GLOBAL_CONSTANTS, "floats")


def test_the_same_seed_gives_the_golden_draws() -> None:
    d = SeededDraws(2026)
    ints = [d.integer(-1000, 1000) for _ in range(8)]
    floats = [d.floating(-1.0, 1.0, False, False) for _ in range(4)]
    lengths = [d.length(0, 20) for _ in range(6)]
    text = d.string("abc", 0, 8)
    assert (ints, floats, lengths, text) == (
        [14, -334, 345, 321, -310, 404, 217, -293],
        [-0.01444816654945158, 0.1327973694955651, 0.7529496199607109, 0.0],
        [10, 2, 7, 5, 3, 0],
        "babbaaa",
    ), f"generation changed with hypothesis {hypothesis.__version__} (written for {HYPOTHESIS_VERSION_WRITTEN_FOR})"


def test_draws_stay_in_range() -> None:
    d = SeededDraws(1)
    for lo, hi in [(0, 0), (-1, 1), (5, 500), (-(10**18), 10**18), (0, 1)]:
        assert all(lo <= d.integer(lo, hi) <= hi for _ in range(300))
    for flo, fhi in [(0.0, 0.0), (-1e300, 1e300), (1e-9, 2e-9), (-5.0, -4.0)]:
        assert all(flo <= d.floating(flo, fhi, False, False) <= fhi for _ in range(300))
    assert all(2 <= d.length(2, 9) <= 9 for _ in range(300))
    assert all(set(d.string("xy", 0, 5)) <= {"x", "y"} for _ in range(100))
