"""A seed is parsed in a bounded child process: the same mutants as in-process, and a program the parser chokes on
ends only the child."""

from __future__ import annotations

import pytest

from services import mutation
from services.perturb import isolation
from services.perturb.isolation import NotPerturbable, generate_isolated

SEED = "def total(xs):\n    s = 0\n    for x in xs:\n        if x > 0:\n            s = s + x\n    return s\n"


async def test_the_child_makes_the_same_mutants_as_the_library() -> None:
    isolated = await generate_isolated(SEED, "python", seed=3, operators=None, all_sites=True)
    assert isolated == mutation.generate(SEED, "python", seed=3, all_sites=True)
    assert isolated


async def test_an_unparsable_or_pathological_seed_ends_only_the_child() -> None:
    with pytest.raises(NotPerturbable, match="does not parse"):
        await generate_isolated("def broken(:\n", "python", seed=0, operators=None, all_sites=False)
    # Nested far past what CPython's parser accepts: the child fails, this process carries on.
    nested = "x = " + "(" * 100_000 + "1" + ")" * 100_000 + "\n"
    with pytest.raises(NotPerturbable):
        await generate_isolated(nested, "python", seed=0, operators=None, all_sites=False)
    assert mutation.generate(SEED, "python", seed=0)


async def test_a_child_past_its_wall_time_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "WALL_SECONDS", 0.001)
    with pytest.raises(NotPerturbable, match="wall-time"):
        await generate_isolated(SEED, "python", seed=0, operators=None, all_sites=True)
