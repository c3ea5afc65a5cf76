"""Relations between a function spec's arguments, as interval bounds on numeric variables.

Every argument a relation touches becomes a variable: a numeric argument is one (its ``[min, max]``), and a
container whose length some int argument equals is one (``len(arr)``, its length range intersected with each such
int's range; those ints are aliases of it). ``le``/``lt`` relations are edges ``left -> right``. The graph must be
acyclic; bounds are propagated along it (lows forwards, highs backwards) until each variable's interval is
consistent. For such order constraints, consistent bounds guarantee a solution, and fixing one variable to any
value inside its interval and propagating again keeps that true: generation draws the variables one by one, each
inside its current interval, so every relation holds by construction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from services.lib.fuzzing.values import (
    Arg,
    DictType,
    FloatType,
    Identifier,
    IntType,
    ListType,
    SetType,
    SpecError,
    SpecModel,
    container_length_range,
    domain_size,
)


class LengthOf(SpecModel):
    """The int argument ``arg`` equals ``len(of)``."""

    kind: Literal["length_of"] = "length_of"
    arg: Identifier
    of: Identifier


class Compare(SpecModel):
    """``left <= right`` (``le``) or ``left < right`` (``lt``), both numeric arguments."""

    kind: Literal["le", "lt"]
    left: Identifier
    right: Identifier


Relation = Annotated[LengthOf | Compare, Field(discriminator="kind")]

Num = int | float
Kind = Literal["int", "float"]


def distinct_cap(t: object) -> int:
    """The most elements a container of type ``t`` can hold when they must be distinct."""
    if isinstance(t, ListType) and t.unique or isinstance(t, SetType):
        return domain_size(t.elements)
    if isinstance(t, DictType):
        return domain_size(t.keys)
    return 10**9


def raise_low(kind: Kind, x: Num, strict: bool) -> Num:
    """The smallest value of ``kind`` that is >= x (> x when strict)."""
    if kind == "int":
        return math.floor(x) + 1 if strict else math.ceil(x)
    f = float(x)
    if f < x or (strict and f == x):
        f = math.nextafter(f, math.inf)
    return f


def lower_high(kind: Kind, x: Num, strict: bool) -> Num:
    """The largest value of ``kind`` that is <= x (< x when strict)."""
    if kind == "int":
        return math.ceil(x) - 1 if strict else math.floor(x)
    f = float(x)
    if f > x or (strict and f == x):
        f = math.nextafter(f, -math.inf)
    return f


@dataclass(frozen=True)
class Edge:
    left: str
    right: str
    strict: bool
    index: int  # of the relation, for messages


@dataclass
class RelationPlan:
    """The variables of a function spec's relations and their propagated bounds."""

    var_of_arg: dict[int, str]  # arg index -> variable
    kinds: dict[str, Kind]
    initial: dict[str, tuple[Num, Num]]
    edges: list[Edge]  # in topological order of their left variable
    length_of: dict[int, int] = field(default_factory=dict)  # int arg index -> container arg index

    @classmethod
    def build(cls, args: Sequence[Arg], relations: Sequence[LengthOf | Compare]) -> RelationPlan:
        """The plan of a function spec's arguments and relations; `SpecError` if they cannot all hold."""
        index = {a.name: i for i, a in enumerate(args)}
        var_of_arg: dict[int, str] = {}
        kinds: dict[str, Kind] = {}
        bounds: dict[str, tuple[Num, Num]] = {}
        length_of: dict[int, int] = {}
        for rel in relations:
            if isinstance(rel, LengthOf):
                c, n = index[rel.of], index[rel.arg]
                var = f"len({rel.of})"
                if var not in bounds:
                    lo, hi = container_length_range(args[c].type)
                    bounds[var] = (lo, min(hi, distinct_cap(args[c].type)))
                    kinds[var] = "int"
                    var_of_arg[c] = var
                t = args[n].type
                assert isinstance(t, IntType)
                low, high = bounds[var]
                bounds[var] = (max(low, t.min), min(high, t.max))
                var_of_arg[n] = var
                length_of[n] = c
        for rel in relations:
            if isinstance(rel, Compare):
                for name in (rel.left, rel.right):
                    i = index[name]
                    if i not in var_of_arg:
                        t = args[i].type
                        assert isinstance(t, IntType | FloatType)
                        var_of_arg[i] = name
                        kinds[name] = "int" if isinstance(t, IntType) else "float"
                        bounds[name] = (t.min, t.max)
        edges: list[Edge] = []
        for j, rel in enumerate(relations):
            if isinstance(rel, Compare):
                left, right = var_of_arg[index[rel.left]], var_of_arg[index[rel.right]]
                if left == right:
                    raise SpecError(f"relations[{j}]: {rel.left!r} and {rel.right!r} are both {left}")
                edges.append(Edge(left, right, rel.kind == "lt", j))
        plan = cls(var_of_arg, kinds, bounds, _topological(edges, list(bounds)), length_of)
        for var, (low, high) in bounds.items():
            if low > high:
                raise SpecError(f"relations: {var} has no possible value (range [{low}, {high}])")
        plan.initial = plan.propagate(bounds)
        return plan

    @property
    def container_of_var(self) -> dict[str, int]:
        """Length variable -> the container argument it is the length of."""
        return {self.var_of_arg[n]: c for n, c in self.length_of.items()}

    def aliases(self, var: str) -> list[int]:
        """The int arguments that equal the length variable ``var``."""
        return [n for n, c in self.length_of.items() if self.var_of_arg[n] == var]

    def propagate(self, bounds: dict[str, tuple[Num, Num]]) -> dict[str, tuple[Num, Num]]:
        """Consistent bounds: lows pushed forwards along the edges, highs backwards; `SpecError` if one empties."""
        out = dict(bounds)
        for e in self.edges:
            lo, hi = out[e.right]
            out[e.right] = (max(lo, raise_low(self.kinds[e.right], out[e.left][0], e.strict)), hi)
        for e in reversed(self.edges):
            lo, hi = out[e.left]
            out[e.left] = (lo, min(hi, lower_high(self.kinds[e.left], out[e.right][1], e.strict)))
        for e in self.edges:
            for var in (e.left, e.right):
                if out[var][0] > out[var][1]:
                    raise SpecError(
                        f"relations[{e.index}]: cannot hold: {var} would need a value in [{out[var][0]}, {out[var][1]}]"
                    )
        return out


def _topological(edges: list[Edge], variables: list[str]) -> list[Edge]:
    """The edges sorted by the topological rank of their left variable; `SpecError` on a cycle."""
    succ: dict[str, list[str]] = {v: [] for v in variables}
    indegree = dict.fromkeys(variables, 0)
    for e in edges:
        succ[e.left].append(e.right)
        indegree[e.right] += 1
    order: dict[str, int] = {}
    ready = [v for v in variables if indegree[v] == 0]
    while ready:
        v = ready.pop(0)
        order[v] = len(order)
        for w in succ[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    if len(order) < len(variables):
        cyclic = sorted(v for v in variables if v not in order)
        raise SpecError(f"relations: the le/lt relations form a cycle through {', '.join(cyclic)}")
    # A forward pass in this order sees every left variable final before its edges are used (and backwards).
    return sorted(edges, key=lambda e: (order[e.left], order[e.right]))
