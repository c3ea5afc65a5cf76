"""The one place that touches Hypothesis internals (written against hypothesis 6.170.x): a seeded primitive provider.

Why not ``strategy.example()`` or ``ConjectureData.draw(strategy)``? Measured on 2,000 inputs of a list[int] (up to 20)
plus an int: ``ConjectureData(random=Random(seed))`` + ``BuildContext`` + ``data.draw(strategy)`` per input takes
0.4-0.5 s (about 14 us per choice: spans, observers, choice-node bookkeeping), which x5 repetitions is the whole
2 s budget of a df_score. ``example()`` is slower still and unseeded. Drawing the same primitives straight from
Hypothesis's ``HypothesisProvider`` (its integer distribution with boundary/nasty values, its float distribution with
its "weird floats", its collection-size rule) takes about 0.04 s: that is what generation uses. The public
strategy built from the same spec (`services.lib.fuzzing.generate.strategy_for`) draws through ordinary strategies.

What this module relies on, checked by tests/services/lib/fuzzing/test_hypothesis_backend.py (which fails loudly if
Hypothesis changes them): ``HypothesisProvider(ConjectureData(random=...))`` takes its randomness from that ``Random``;
``draw_integer(min, max)``, ``draw_float(min_value=, max_value=, allow_nan=, smallest_nonzero_magnitude=)`` and
``draw_boolean(p)`` draw from it; ``_maybe_draw_constant`` is the hook that mixes in constants; ``GLOBAL_CONSTANTS``
and ``_calc_p_continue`` exist. The provider's "local constants" (literals harvested from whatever modules of the
working directory are imported) are disabled: they would make the inputs depend on what the process imported.
"""

from __future__ import annotations

import math
import random
from typing import Any

from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.internal.conjecture.providers import GLOBAL_CONSTANTS, HypothesisProvider
from hypothesis.internal.conjecture.utils import _calc_p_continue

HYPOTHESIS_VERSION_WRITTEN_FOR = "6.170"
_SMALLEST_SUBNORMAL = 5e-324
_CONSTANTS: dict[tuple[str, Any, Any], tuple[Any, ...]] = {}


class _Provider(HypothesisProvider):
    """Hypothesis's own provider, with constants drawn from its global pool only (deterministic, import-free)."""

    def _maybe_draw_constant(self, choice_type: Any, constraints: Any, *, p: float = 0.05) -> Any:
        assert self._random is not None
        if self._random.random() > p:
            return None
        lo, hi = constraints.get("min_value"), constraints.get("max_value")
        key = (str(choice_type), lo, hi)
        pool = _CONSTANTS.get(key)
        if pool is None:
            if choice_type == "integer":
                pool = tuple(c for c in GLOBAL_CONSTANTS.integers if lo <= c <= hi)
            elif choice_type == "float":
                pool = tuple(c for c in GLOBAL_CONSTANTS.floats if not math.isnan(c) and lo <= c <= hi)
            else:
                pool = ()
            if len(_CONSTANTS) < 4096:
                _CONSTANTS[key] = pool
        return self._random.choice(pool) if pool else None


class SeededDraws:
    """Primitive draws from Hypothesis's distributions, reproducible from one integer seed in any process."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self._provider = _Provider(ConjectureData(random=self.random))
        self._p_continue: dict[tuple[int, int], float] = {}

    def integer(self, lo: int, hi: int) -> int:
        if lo == hi:
            return lo
        r = self.random.random()
        if hi - lo > 127 and r < 6 / 128:  # st.integers' weights: the bounds 2/128 each, the near-bounds 1/128
            return (lo, lo, lo + 1, hi - 1, hi, hi)[int(r * 128)]
        if r < 0.08:  # small edge values, which Hypothesis reaches only through its constants
            small = [v for v in (0, 1, -1) if lo <= v <= hi]
            if small:
                return self.random.choice(small)
        return int(self._provider.draw_integer(lo, hi))

    def floating(self, lo: float, hi: float, allow_nan: bool, allow_infinity: bool) -> float:
        if allow_infinity and self.random.random() < 0.04:
            return math.inf if self.random.random() < 0.5 else -math.inf
        if allow_nan and self.random.random() < 0.02:
            return math.nan
        if lo == hi:
            return lo
        if self.random.random() < 0.5:  # half uniform: Hypothesis's distribution favours tiny magnitudes
            return min(hi, max(lo, self.random.uniform(lo, hi)))
        value = float(
            self._provider.draw_float(
                min_value=lo, max_value=hi, allow_nan=False, smallest_nonzero_magnitude=_SMALLEST_SUBNORMAL
            )
        )
        return value if lo <= value <= hi else lo  # the provider clamps; belt and braces

    def boolean(self) -> bool:
        return bool(self._provider.draw_boolean(0.5))

    def length(self, lo: int, hi: int) -> int:
        """A collection size in [lo, hi], with the average size Hypothesis's collections use."""
        if lo == hi:
            return lo
        p = self._p_continue.get((lo, hi))
        if p is None:
            average = min(max(lo * 2, lo + 5), 0.5 * (lo + hi))
            p = self._p_continue[(lo, hi)] = _calc_p_continue(average - lo, hi - lo)
        n = lo
        rand = self.random.random
        while n < hi and rand() < p:
            n += 1
        return n

    def index(self, n: int) -> int:
        return self.random.randrange(n)

    def string(self, chars: str, lo: int, hi: int) -> str:
        k = self.length(lo, hi)
        if k == 0:
            return ""
        if len(chars) == 1:
            return chars * k
        randrange = self.random.randrange
        m = len(chars)
        return "".join([chars[randrange(m)] for _ in range(k)])
