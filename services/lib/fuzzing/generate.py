"""Generating inputs from an input spec: deterministic, fast, relations true by construction.

A spec compiles to a *sampler*: a function of a `Draws` source of primitive choices (integer in a range, float,
boolean, collection length, index, string over characters). Two sources implement it:

- `SeededDraws` (services/lib/fuzzing/hypothesis_backend.py): Hypothesis's own primitive provider, seeded; what
  `generate_inputs` uses (about 20 us per HumanEval-style input).
- `StrategyDraws`: ordinary Hypothesis strategies inside ``st.composite``; what `strategy_for(spec)` returns, a real
  ``SearchStrategy`` for ``@given`` (it shrinks), with the same semantics since it runs the same sampler.

Function inputs are lists of positional arguments (plain data: int, float, str, bool, None, list, tuple, dict,
set); stdin inputs are text (tokens joined by single spaces, lines by "\\n", a final newline).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, Protocol, overload

from hypothesis import strategies as st

from services.lib.fuzzing.hypothesis_backend import SeededDraws
from services.lib.fuzzing.relations import RelationPlan
from services.lib.fuzzing.score import repetition_seed
from services.lib.fuzzing.spec import (
    Block,
    FloatToken,
    FunctionSpec,
    IntToken,
    Line,
    StdinSpec,
    float_grid,
    parse_spec,
    token_chars,
)
from services.lib.fuzzing.values import (
    MAX_INPUTS,
    MAX_TOTAL_INPUT_BYTES,
    BoolType,
    DictType,
    FloatType,
    IntType,
    ListType,
    NoneType,
    OneOfType,
    SetType,
    SpecError,
    StrType,
    TupleType,
    alphabet_chars,
    domain_size,
)

FunctionInput = list[Any]


class Draws(Protocol):
    """A source of primitive choices."""

    def integer(self, lo: int, hi: int) -> int: ...
    def floating(self, lo: float, hi: float, allow_nan: bool, allow_infinity: bool) -> float: ...
    def boolean(self) -> bool: ...
    def length(self, lo: int, hi: int) -> int: ...
    def index(self, n: int) -> int: ...
    def string(self, chars: str, lo: int, hi: int) -> str: ...


Sampler = Callable[[Draws], Any]
SizedSampler = Callable[[Draws, int, int], Any]

# ---- value samplers -----------------------------------------------------------------------------------------------


def value_sampler(t: Any) -> Sampler:
    """The sampler of one value of type ``t``."""
    if isinstance(t, IntType):
        lo, hi = t.min, t.max
        return lambda d: d.integer(lo, hi)
    if isinstance(t, FloatType):
        flo, fhi, nan, inf = t.min, t.max, t.allow_nan, t.allow_infinity
        return lambda d: d.floating(flo, fhi, nan, inf)
    if isinstance(t, BoolType):
        return lambda d: d.boolean()
    if isinstance(t, NoneType):
        return lambda d: None
    if isinstance(t, TupleType):
        items = [value_sampler(i) for i in t.items]
        return lambda d: tuple([s(d) for s in items])
    if isinstance(t, OneOfType):
        options = [value_sampler(o) for o in t.options]
        if len(options) == 1:
            return options[0]
        return lambda d: options[d.index(len(options))](d)
    sized = sized_sampler(t)
    lo, hi = t.min_len, t.max_len
    return lambda d: sized(d, lo, hi)


def sized_sampler(t: Any) -> SizedSampler:
    """The sampler of a container of type ``t`` whose length is drawn in [lo, hi] (given by the caller)."""
    if isinstance(t, StrType):
        chars = alphabet_chars(t.alphabet)
        return lambda d, lo, hi: d.string(chars, lo, hi)
    if isinstance(t, TupleType):
        whole = value_sampler(t)
        return lambda d, lo, hi: whole(d)
    if isinstance(t, ListType):
        element = value_sampler(t.elements)
        elements_t, unique, ordered = t.elements, t.unique, t.sorted

        def sample_list(d: Draws, lo: int, hi: int) -> list[Any]:
            k = d.length(lo, hi)
            xs = _distinct(d, elements_t, element, k, lo) if unique else [element(d) for _ in range(k)]
            if ordered:
                xs.sort()
            return xs

        return sample_list
    if isinstance(t, SetType):
        element = value_sampler(t.elements)
        elements_t = t.elements
        return lambda d, lo, hi: set(_distinct(d, elements_t, element, d.length(lo, hi), lo))
    if isinstance(t, DictType):
        key, value = value_sampler(t.keys), value_sampler(t.values)
        keys_t = t.keys

        def sample_dict(d: Draws, lo: int, hi: int) -> dict[Any, Any]:
            keys = _distinct(d, keys_t, key, d.length(lo, hi), lo)
            return {k: value(d) for k in keys}

        return sample_dict
    raise TypeError(f"not a container type: {t!r}")


def _distinct(d: Draws, t: Any, sample: Sampler, target: int, minimum: int) -> list[Any]:
    """``target`` distinct values of type ``t`` in drawing order (so deterministic whatever the hash seed)."""
    target = min(target, domain_size(t))
    if isinstance(t, IntType | BoolType | NoneType) and domain_size(t) <= 4 * target + 16:
        pool: list[Any] = [None]
        if isinstance(t, IntType):
            pool = list(range(t.min, t.max + 1))
        elif isinstance(t, BoolType):
            pool = [False, True]
        out = []
        for _ in range(target):  # a partial Fisher-Yates shuffle
            out.append(pool.pop(d.index(len(pool))))
        return out
    seen: set[Any] = set()
    out = []
    attempts = 10 * target + 50
    while len(out) < target and attempts > 0:
        attempts -= 1
        v = sample(d)
        if v not in seen:
            seen.add(v)
            out.append(v)
    if len(out) < minimum:
        raise SpecError(f"could not draw {minimum} distinct values of {t.type} in {10 * target + 50} attempts")
    return out


# ---- function and stdin samplers ----------------------------------------------------------------------------------


def function_sampler(spec: FunctionSpec) -> Callable[[Draws], FunctionInput]:
    plain = [value_sampler(a.type) for a in spec.args]
    if not spec.relations:
        return lambda d: [s(d) for s in plain]
    plan = RelationPlan.build(spec.args, spec.relations)
    container_of_var = plan.container_of_var
    aliases = {var: plan.aliases(var) for var in container_of_var}
    sized = {c: sized_sampler(spec.args[c].type) for c in container_of_var.values()}
    n = len(spec.args)

    def sample(d: Draws) -> FunctionInput:
        bounds = plan.initial
        values: list[Any] = [None] * n
        done = [False] * n
        for i in range(n):
            if done[i]:
                continue
            var = plan.var_of_arg.get(i)
            if var is None:
                values[i] = plain[i](d)
                done[i] = True
                continue
            lo: Any
            hi: Any
            lo, hi = bounds[var]
            c = container_of_var.get(var)
            if c is not None:
                container = sized[c](d, lo, hi)
                values[c], done[c] = container, True
                k: Any = len(container)
                for alias in aliases[var]:
                    values[alias], done[alias] = k, True
            else:
                k = d.integer(lo, hi) if plan.kinds[var] == "int" else d.floating(lo, hi, False, False)
                values[i], done[i] = k, True
            bounds = plan.propagate({**bounds, var: (k, k)})
        return values

    return sample


def stdin_sampler(spec: StdinSpec) -> Callable[[Draws], str]:
    def sample(d: Draws) -> str:
        out: list[str] = []
        _emit_items(spec.lines, d, {}, out)
        return "\n".join(out) + "\n" if out else ""

    return sample


def _emit_items(items: list[Line | Block], d: Draws, env: dict[str, int], out: list[str]) -> None:
    for item in items:
        repeats = item.count if isinstance(item.count, int) else env[item.count]
        if isinstance(item, Block):
            for _ in range(repeats):
                _emit_items(item.lines, d, dict(env), out)
        else:
            for _ in range(repeats):
                out.append(" ".join(_emit_tokens(item, d, env if item.count == 1 else dict(env))))


def _emit_tokens(line: Line, d: Draws, env: dict[str, int]) -> list[str]:
    words: list[str] = []
    for tok in line.tokens:
        repeats = tok.count if isinstance(tok.count, int) else env[tok.count]
        if isinstance(tok, IntToken):
            for _ in range(repeats):
                v = d.integer(tok.min, tok.max)
                words.append(str(v))
                if tok.name is not None:
                    env[tok.name] = v
        elif isinstance(tok, FloatToken):
            lo, hi = float_grid(tok)
            for _ in range(repeats):
                words.append(render_fixed(d.integer(lo, hi), tok.decimals))
        else:
            chars = token_chars(tok.alphabet)
            for _ in range(repeats):
                words.append(d.string(chars, tok.min_len, tok.max_len))
    return words


def render_fixed(k: int, decimals: int) -> str:
    """The number k / 10**decimals written with exactly ``decimals`` decimals, without float rounding."""
    if decimals == 0:
        return str(k)
    sign = "-" if k < 0 else ""
    whole, frac = divmod(abs(k), 10**decimals)
    return f"{sign}{whole}.{frac:0{decimals}d}"


def compile_spec(spec: FunctionSpec | StdinSpec) -> Callable[[Draws], Any]:
    return function_sampler(spec) if isinstance(spec, FunctionSpec) else stdin_sampler(spec)


# ---- public API ---------------------------------------------------------------------------------------------------

SpecLike = FunctionSpec | StdinSpec | Mapping[str, Any] | str


def _check_n(n: int, name: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_INPUTS:
        raise SpecError(f"{name} must be an int in [0, {MAX_INPUTS}], not {n!r}")


@overload
def generate_inputs(spec: FunctionSpec, n: int, seed: int) -> list[FunctionInput]: ...
@overload
def generate_inputs(spec: StdinSpec, n: int, seed: int) -> list[str]: ...
@overload
def generate_inputs(spec: SpecLike, n: int, seed: int) -> list[FunctionInput] | list[str]: ...
def generate_inputs(spec: SpecLike, n: int, seed: int) -> list[FunctionInput] | list[str]:
    """``n`` inputs satisfying ``spec``, the same ones for the same (spec, n, seed) in any process (whatever
    PYTHONHASHSEED; with the same Hypothesis version). Function specs give lists of positional arguments, stdin
    specs give stdin text. `SpecError` for an invalid spec."""
    parsed = parse_spec(spec)
    _check_n(n, "n")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SpecError(f"seed must be an int, not {seed!r}")
    sampler = compile_spec(parsed)
    return _draw(sampler, SeededDraws(seed), n, [0])


@overload
def generate_repetitions(spec: FunctionSpec, n: int, repeats: int, seed: int) -> list[list[FunctionInput]]: ...
@overload
def generate_repetitions(spec: StdinSpec, n: int, repeats: int, seed: int) -> list[list[str]]: ...
@overload
def generate_repetitions(
    spec: SpecLike, n: int, repeats: int, seed: int
) -> list[list[FunctionInput]] | list[list[str]]: ...
def generate_repetitions(
    spec: SpecLike, n: int, repeats: int, seed: int
) -> list[list[FunctionInput]] | list[list[str]]:
    """Algorithm 1's inputs: for repetition i, ``generate_inputs(spec, n, repetition_seed(seed, i))``."""
    parsed = parse_spec(spec)
    _check_n(n, "n")
    _check_n(repeats, "repeats")
    if n * repeats > MAX_INPUTS:
        raise SpecError(f"n * repeats must be at most {MAX_INPUTS}, not {n * repeats}")
    sampler = compile_spec(parsed)
    out: list[Any] = []
    used = [0]
    for i in range(repeats):
        out.append(_draw(sampler, SeededDraws(repetition_seed(seed, i)), n, used))
    return out


def _draw(sampler: Callable[[Draws], Any], draws: Draws, n: int, used: list[int]) -> list[Any]:
    """``n`` inputs; `SpecError` as soon as all the inputs drawn so far (``used[0]``, their repr's length, about
    their serialized size) are over MAX_TOTAL_INPUT_BYTES, before they could fill the memory."""
    out = []
    for _ in range(n):
        value = sampler(draws)
        used[0] += len(value) if isinstance(value, str) else len(repr(value))
        if used[0] > MAX_TOTAL_INPUT_BYTES:
            raise SpecError(
                f"the inputs would be over {MAX_TOTAL_INPUT_BYTES >> 20} MiB in all: lower n_inputs, repeats or the "
                "spec's lengths and ranges"
            )
        out.append(value)
    return out


# ---- the Hypothesis strategy --------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


@lru_cache(maxsize=1024)
def _floats(lo: float, hi: float, allow_nan: bool, allow_infinity: bool) -> st.SearchStrategy[float]:
    finite = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    extra = [x for x, ok in ((float("inf"), allow_infinity), (float("-inf"), allow_infinity)) if ok]
    if allow_nan:
        extra.append(float("nan"))
    return st.one_of(finite, st.sampled_from(extra)) if extra else finite


@lru_cache(maxsize=1024)
def _text(chars: str, lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=st.sampled_from(chars), min_size=lo, max_size=hi)


class StrategyDraws:
    """`Draws` through ordinary Hypothesis strategies, inside ``st.composite`` (so examples shrink)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return int(self.draw(_integers(lo, hi)))

    def floating(self, lo: float, hi: float, allow_nan: bool, allow_infinity: bool) -> float:
        return float(self.draw(_floats(lo, hi, allow_nan, allow_infinity)))

    def boolean(self) -> bool:
        return bool(self.draw(st.booleans()))

    def length(self, lo: int, hi: int) -> int:
        return int(self.draw(_integers(lo, hi)))

    def index(self, n: int) -> int:
        return int(self.draw(_integers(0, n - 1)))

    def string(self, chars: str, lo: int, hi: int) -> str:
        return str(self.draw(_text(chars, lo, hi)))


def strategy_for(spec: SpecLike) -> st.SearchStrategy[Any]:
    """A Hypothesis strategy of the inputs of ``spec`` (for ``@given``); same semantics as `generate_inputs`."""
    sampler = compile_spec(parse_spec(spec))

    @st.composite
    def inputs(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Any:
        return sampler(StrategyDraws(draw))

    return inputs()
