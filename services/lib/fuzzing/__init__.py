"""Differential fuzzing inputs (paper 002, LoCaL 3.3.2 Steps II-III): describe, generate and derive the inputs on
which a reference and a candidate are compared, and score Algorithm 1 (`services/lib/fuzzing/score.py`).

A pure library: no database, queue or web framework; running the programs is the executor's (nsjail).

- `InputSpec` (`FunctionSpec` | `StdinSpec`): the typed ``input_spec`` (docs/input-spec.md), made of value types
  (`IntType` ... `OneOfType`, in `values.py`), relations (`LengthOf`, `Compare`, solved by `relations.py`) and stdin
  line templates (`Line`, `Block`, tokens); `parse_spec` validates JSON or a mapping, raising `SpecError` with the
  field path.
- `generate_inputs(spec, n, seed)`, `generate_repetitions(spec, n, repeats, seed)`: deterministic inputs drawn
  with Hypothesis's distributions; `strategy_for(spec)`: the same inputs as a Hypothesis strategy.
- `violations(spec, value)`: what keeps a value from satisfying a spec.
- `derive_spec(mode=, reference_source=, entry_point=, tests=)`: a spec from type hints and test literals
  (parsed with `ast`, never executed), with where each part came from (`derive.py`, `derive_stdin.py`; the ranges
  observed values give, `observed.py`; the literals of calls, `literals.py`).
- `inputs_of_tests(mode, entry_point, tests)`, `mix_tests(repetitions, inputs, seed)`: a problem's own test inputs, and
  every repetition with them among its generated inputs (docs/similarity.md, departures from Algorithm 1).
- `df_score(repetitions)` over `Repetition`s, under a `TimeoutRule` (`TIMEOUT_RULES`).

This `__init__` is the library's public surface: callers outside it import from `services.lib.fuzzing`; the modules
inside import one another directly (so that none of them imports the package, and the import graph has no circle).
"""

from services.lib.fuzzing.check import violations
from services.lib.fuzzing.derive import derive_spec
from services.lib.fuzzing.generate import FunctionInput, generate_inputs, generate_repetitions, strategy_for
from services.lib.fuzzing.mix import MAX_TEST_INPUTS, inputs_of_tests, mix_tests
from services.lib.fuzzing.observed import DerivedSpec
from services.lib.fuzzing.relations import Compare, LengthOf
from services.lib.fuzzing.score import (
    DEFAULT_INPUTS_FUNCTION,
    DEFAULT_INPUTS_PROGRAM,
    DEFAULT_REPEATS,
    TIMEOUT_RULES,
    Repetition,
    TimeoutRule,
    df_score,
    repetition_seed,
)
from services.lib.fuzzing.spec import (
    Block,
    FloatToken,
    FunctionSpec,
    InputSpec,
    IntToken,
    Line,
    StdinSpec,
    StrToken,
    parse_spec,
)
from services.lib.fuzzing.values import (
    MAX_INPUT_BYTES,
    MAX_INPUTS,
    MAX_TOTAL_INPUT_BYTES,
    Arg,
    BoolType,
    Chars,
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
)

__all__ = [
    "Arg",
    "Block",
    "BoolType",
    "Chars",
    "Compare",
    "DEFAULT_INPUTS_FUNCTION",
    "DEFAULT_INPUTS_PROGRAM",
    "DEFAULT_REPEATS",
    "DerivedSpec",
    "DictType",
    "FloatToken",
    "FloatType",
    "FunctionInput",
    "FunctionSpec",
    "InputSpec",
    "IntToken",
    "IntType",
    "LengthOf",
    "Line",
    "ListType",
    "MAX_INPUTS",
    "MAX_INPUT_BYTES",
    "MAX_TEST_INPUTS",
    "MAX_TOTAL_INPUT_BYTES",
    "NoneType",
    "OneOfType",
    "Repetition",
    "SetType",
    "SpecError",
    "StdinSpec",
    "StrToken",
    "StrType",
    "TIMEOUT_RULES",
    "TimeoutRule",
    "TupleType",
    "derive_spec",
    "df_score",
    "generate_inputs",
    "generate_repetitions",
    "inputs_of_tests",
    "mix_tests",
    "parse_spec",
    "repetition_seed",
    "strategy_for",
    "violations",
]
