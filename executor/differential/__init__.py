"""Differential fuzzing (paper 002, LoCaL, Algorithm 1): run a reference and a candidate program on the same
inputs and score the share of inputs on which they agree.

A program being fuzzed runs exactly as it does for one of its tests: the same jail (executor.engine.jail_plan:
the problem's limits, the same pre-made kind), the same command, the same harness (function mode:
executor/harness/function_runner.py, the jail's PID 1, with the candidate's process made before the request is
read) and the same files. Nothing the program can see tells it whether it is being tested or fuzzed; only the
request on the supervisor's stdin differs, and the supervisor never shows it. So a program cannot behave
one way under fuzzing and another under its tests, except by the inputs themselves, which is why the similarity
worker mixes the problem's own test inputs into the fuzzing inputs (`test_positions`, services/lib/fuzzing/mix.py).

Function mode: one run answers a *segment* of a repetition, one call at a time over the same call messages a
code test makes; the supervisor keeps the time (its own clock, never the program's), ends the run when the
candidate's process ended or timed out, when the run's clock (the test's wall limit) or the CPU share of the test's
CPU limit is used, and forwards each reply, unread, to the host. The host starts a fresh run for the rest of the
repetition, so every process that answers an input is one a test run could have made; an input that is one of
the problem's tests always starts a fresh run, as in a test, where it is the process's first call.
Stdio mode: every input is a run of its own, exactly a test run with that stdin.

Each side runs in its own jails, so neither program can see, signal or outlive the other's, nor read its
results. Everything is compared here, on the host, on decoded plain data: nothing a program returned is ever
called.

Matching rules (LoCaL compares with Python's `==`; so do we, with these exceptions):
- floats: NaN equals NaN; with `float_tolerance` two numbers match when `math.isclose(a, b, rel_tol=tol,
  abs_tol=tol)`; an int and a float compare as Python does (1 == 1.0), and so do bools (True == 1);
- lists/tuples/dicts compare element by element with these rules (a list never equals a tuple, as in Python);
  sets, strings, bytes and everything else with Python's `==` on the decoded data;
- a generator (or other iterator) returned is compared as the sequence of its items, and only with another one;
- both sides raising the same exception type (module and qualified name) is a match;
- a per-input timeout, MemoryError, a process that died, a value that is not data or is too large never matches.
A repetition is excluded (timed out) if either side did not finish it within `time_budget_s` (Algorithm 1's rule,
`timeout_rule="paper"`, the default). That rule lets a program choose to be excluded, by stalling once it meets an
input it would get wrong; `timeout_rule="strict"` excludes a repetition only when the reference ran out of time,
and the candidate's unanswered inputs then count as mismatches.

The package, one concept per module:
- campaign.py: the request (`DifferentialRequest`) and the campaign over a pair (`fuzz_pair`), on an engine;
- inputs.py: the inputs encoded as the programs receive them, and which are the problem's tests;
- sides.py, stdio.py, function.py: what a side reports, and the two modes' drivers;
- values.py: one input's outcome and the matching rules above; verdict.py: the score and counterexamples.
"""

from executor.differential.campaign import DifferentialRequest, fuzz_pair
from executor.differential.function import LOAD_TIMEOUT_S, outcome_of, parse_segment
from executor.differential.inputs import MAX_INPUT_BYTES, encode_repetitions
from executor.differential.sides import MESSAGE_CAP
from executor.differential.values import Outcome, values_same
from executor.differential.verdict import TEXT_CAP, Counterexample, DifferentialResult, RepetitionRun

__all__ = [
    "LOAD_TIMEOUT_S",
    "MAX_INPUT_BYTES",
    "MESSAGE_CAP",
    "TEXT_CAP",
    "Counterexample",
    "DifferentialRequest",
    "DifferentialResult",
    "Outcome",
    "RepetitionRun",
    "encode_repetitions",
    "fuzz_pair",
    "outcome_of",
    "parse_segment",
    "values_same",
]
