"""AXIOM's context disruption (paper 000, III-B4): 0-point programs, each a program paired with a requirement far
from its own. Pure: the embedding is injected (`embed`, e.g. `embedding.MiniLMEmbedder`); the perturb service's
synthesis job (services/perturb/synthesis.py) plans the pairs and creates them as attempts.

- `cosine_distances` between requirement embeddings, `softmax_probabilities` over a row of them (tau = 0.03),
  `sample_disruptors` (M distinct distant requirements, without replacement), and `context_disruption` (the pairs).
- `ProgramRef`: a program as context disruption and representative selection (`selection.py`) see it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from services.perturb.axiom.sequences import derive_seed

DISRUPTION_TAU = 0.03  # III-B4: softmax temperature over cosine distances


def cosine_distances(embeddings: ArrayLike) -> NDArray[np.float64]:
    """D_ij = 1 - E_i . E_j / (|E_i| |E_j|), in [0, 2] (III-B4)."""
    matrix = np.asarray(embeddings, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ValueError("embeddings must be a non-empty 2-D array, one row per requirement")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("an embedding has zero length; cosine distance is undefined")
    unit = matrix / norms
    return np.clip(1.0 - unit @ unit.T, 0.0, 2.0)


def softmax_probabilities(distances: ArrayLike, tau: float = DISRUPTION_TAU) -> NDArray[np.float64]:
    """P_j = exp(D_j / tau) / sum_k exp(D_k / tau) over the given distances (III-B4), computed stably."""
    row = np.asarray(distances, dtype=np.float64)
    if tau <= 0:
        raise ValueError("the temperature must be positive")
    if row.ndim != 1 or row.size == 0:
        raise ValueError("distances must be a non-empty 1-D array")
    scaled = row / tau
    weights = np.exp(scaled - scaled.max())
    return np.asarray(weights / weights.sum(), dtype=np.float64)


def sample_disruptors(
    distances: ArrayLike,
    index: int,
    m: int,
    seed: str,
    *,
    tau: float = DISRUPTION_TAU,
    eligible: Sequence[bool] | None = None,
) -> list[int]:
    """M distinct requirements for requirement `index`, drawn by softmax over its row of D (III-B4).

    Draws are sequential without replacement: each draw is a softmax over the requirements not yet drawn, which is
    the paper's P_ij renormalised over what is left. `index` itself is never drawn (a program is not unrelated to
    its own requirement), nor a requirement marked not `eligible` (e.g. one without programs). Fewer than M come
    back when fewer are eligible. Reproducible from `seed`.
    """
    matrix = np.asarray(distances, dtype=np.float64)
    n = matrix.shape[0]
    if matrix.shape != (n, n) or not 0 <= index < n:
        raise ValueError("distances must be square and index one of its rows")
    pool = [j for j in range(n) if j != index and (eligible is None or eligible[j])]
    rng = random.Random(derive_seed("axiom-disrupt", seed, index))
    chosen: list[int] = []
    while pool and len(chosen) < m:
        probabilities = softmax_probabilities(matrix[index, pool], tau)
        u = rng.random()
        position = int(np.searchsorted(np.cumsum(probabilities), u, side="right"))
        position = min(position, len(pool) - 1)
        chosen.append(pool.pop(position))
    return chosen


@dataclass(frozen=True)
class ProgramRef:
    """A program of a requirement, as context disruption and selection see it."""

    program_id: str
    code: str
    language: str


@dataclass(frozen=True)
class RequirementPrograms:
    """A requirement and its programs (any score: III-B4 pairs "one of its associated programs")."""

    requirement_id: str
    text: str
    programs: Sequence[ProgramRef] = field(default_factory=tuple)


@dataclass(frozen=True)
class ZeroPair:
    """A 0-point program: `program` (written for `source_requirement_id`) paired with `requirement_id`."""

    requirement_id: str
    source_requirement_id: str
    program: ProgramRef
    distance: float
    probability: float  # its first-draw softmax probability (III-B4's P_ij, renormalised without i)

    score: int = 0


def context_disruption(
    requirements: Sequence[RequirementPrograms],
    embed: Callable[[Sequence[str]], ArrayLike],
    m: int,
    seed: str,
    *,
    tau: float = DISRUPTION_TAU,
) -> list[ZeroPair]:
    """0-point programs (III-B4): embed every requirement, take cosine distances, and for each requirement r_i
    sample M distinct requirements by softmax (tau) over distances; for each, pick one of its programs at random
    and pair it with r_i. `embed` maps texts to vectors (e.g. `MiniLMEmbedder`)."""
    if not requirements:
        return []
    vectors = np.asarray(embed([requirement.text for requirement in requirements]), dtype=np.float64)
    if vectors.shape[0] != len(requirements):
        raise ValueError("embed must return one vector per requirement")
    distances = cosine_distances(vectors)
    eligible = [bool(requirement.programs) for requirement in requirements]
    pairs: list[ZeroPair] = []
    for i, requirement in enumerate(requirements):
        pool = [j for j in range(len(requirements)) if j != i and eligible[j]]
        if not pool:
            continue
        first_draw = dict(zip(pool, softmax_probabilities(distances[i, pool], tau), strict=True))
        rng = random.Random(derive_seed("axiom-disrupt-program", seed, requirement.requirement_id))
        for j in sample_disruptors(
            distances, i, m, derive_seed(seed, requirement.requirement_id), tau=tau, eligible=eligible
        ):
            source = requirements[j]
            program = source.programs[rng.randrange(len(source.programs))]
            pairs.append(
                ZeroPair(
                    requirement.requirement_id,
                    source.requirement_id,
                    program,
                    float(distances[i, j]),
                    float(first_draw[j]),
                )
            )
    return pairs
