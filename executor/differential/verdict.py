"""The pair's verdict: both sides' reports compared input by input (values.py), repetitions scored with
Algorithm 1's rules (services/lib/fuzzing/score.py), and counterexamples shown as capped printable text."""

from __future__ import annotations

import collections
import math
import reprlib
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from executor.differential.sides import MESSAGE_CAP, SIDES, SideReport
from executor.differential.values import DIED, LOAD_FAILED, MEMORY, UNREADABLE, Iterated, Outcome, outcomes_match
from executor.harness import function_runner as harness
from services.kernel.contracts import Checker, Mode
from services.lib.fuzzing import Repetition, TimeoutRule, df_score
from services.lib.sandbox import printable

MAX_COUNTEREXAMPLES = 3
TEXT_CAP = 200


@dataclass(frozen=True)
class RepetitionRun:
    """One repetition: `matches` of `n`; `timed_out` if either side ran out of the budget (listed in
    `timed_out_sides`); `elapsed_s` per side; per-input timeouts and crashes per side; how many of the inputs were
    the problem's own test inputs, and how many of those matched."""

    index: int
    n: int
    matches: int
    timed_out: bool
    timed_out_sides: tuple[str, ...]
    elapsed_s: dict[str, float]
    input_timeouts: dict[str, int]
    crashes: dict[str, int]
    test_inputs: int = 0
    test_matches: int = 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["timed_out_sides"] = list(self.timed_out_sides)
        return data


@dataclass(frozen=True)
class Counterexample:
    """An input on which the two sides disagree, each part as capped printable text; `test_input` when it is one
    of the problem's tests."""

    repetition: int
    index: int
    input: str
    reference: str
    candidate: str
    test_input: bool = False


@dataclass(frozen=True)
class DifferentialResult:
    status: str  # ok | compile_error | unsupported | internal_error
    df_score: float | None
    runs: tuple[RepetitionRun, ...] = ()
    counterexamples: tuple[Counterexample, ...] = ()
    message: str = ""
    side: str | None = None  # which side a compile error (or a side-specific failure) is about

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "df_score": self.df_score,
            "runs": [run.to_json() for run in self.runs],
            "counterexamples": [asdict(example) for example in self.counterexamples],
            "message": self.message,
            "side": self.side,
        }


def compare(
    reference: SideReport,
    candidate: SideReport,
    repetitions: Sequence[Sequence[Any]],
    counts: Sequence[int],
    mode: Mode,
    tolerance: float | None,
    checker: Checker,
    per_input_timeout_s: float,
    timeout_rule: TimeoutRule = "paper",
    tests: Sequence[Collection[int]] | None = None,
) -> DifferentialResult:
    stdio = mode == Mode.STDIO
    runs: list[RepetitionRun] = []
    scored: list[Repetition] = []
    examples: list[Counterexample] = []
    missing = Outcome("crash", code=DIED)
    for rep, count in enumerate(counts):
        sides = (reference, candidate)
        reps = [side.repetitions[rep] if rep < len(side.repetitions) else None for side in sides]
        timed_out_sides = tuple(name for name, r in zip(SIDES, reps, strict=True) if r is not None and r.timed_out)
        positions = tests[rep] if tests is not None else ()
        matches = test_matches = 0
        timeouts = dict.fromkeys(SIDES, 0)
        crashes = dict.fromkeys(SIDES, 0)
        for index in range(count):
            outcomes = []
            for name, side_rep in zip(SIDES, reps, strict=True):
                if side_rep is None:
                    outcome = missing  # the side never reported this repetition
                elif index < len(side_rep.outcomes):
                    outcome = side_rep.outcomes[index]
                else:
                    outcome = Outcome("unanswered")  # the budget ran out first (the repetition is excluded)
                if outcome.kind == "timeout":
                    timeouts[name] += 1
                elif outcome.kind in ("crash", "bad", "signaled", "overflow"):
                    crashes[name] += 1
                outcomes.append(outcome)
            if outcomes_match(outcomes[0], outcomes[1], tolerance, checker):
                matches += 1
                test_matches += index in positions
            elif len(examples) < MAX_COUNTEREXAMPLES and "unanswered" not in (outcomes[0].kind, outcomes[1].kind):
                examples.append(
                    Counterexample(
                        repetition=rep,
                        index=index,
                        input=_text(repetitions[rep][index], stdio),
                        reference=render(outcomes[0], per_input_timeout_s),
                        candidate=render(outcomes[1], per_input_timeout_s),
                        test_input=index in positions,
                    )
                )
        # Algorithm 1 excludes a repetition either side ran out of time on; the strict rule only the reference's
        # (the candidate's unanswered inputs have then counted as mismatches above).
        timed_out = bool(timed_out_sides) if timeout_rule == "paper" else "reference" in timed_out_sides
        elapsed = {name: round(r.elapsed_s, 4) if r is not None else 0.0 for name, r in zip(SIDES, reps, strict=True)}
        runs.append(
            RepetitionRun(
                rep,
                count,
                matches,
                timed_out,
                timed_out_sides,
                elapsed,
                timeouts,
                crashes,
                len(positions),
                test_matches,
            )
        )
        scored.append(Repetition(index=rep, n=count, matches=matches, timed_out=timed_out))
    notes = [
        f"the {name}'s program failed to load: {side.message}"
        for name, side in zip(SIDES, (reference, candidate), strict=True)
        if not side.loaded
    ]
    message = printable("; ".join(notes))[:MESSAGE_CAP]
    return DifferentialResult("ok", df_score(scored), tuple(runs), tuple(examples), message)


class _Repr(reprlib.Repr):
    """reprlib's bounded repr, for every type a decoded value can hold: an int too long for str() (Python refuses
    more than 4300 digits; hex decodes any length) is described, and iterators and OrderedDicts are shown with the
    same bounds as tuples and dicts (reprlib would call their full repr)."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > harness.MAX_INT_BITS:
            return f"<an int of about {int(x.bit_length() * math.log10(2)) + 1} digits>"
        return super().repr_int(x, level)

    def repr_Iterated(self, x: Iterated, level: int) -> str:  # noqa: N802 - reprlib's "repr_" + type name
        return "<iterator of " + self.repr_tuple(x, level) + ">"

    def repr_OrderedDict(self, x: collections.OrderedDict[Any, Any], level: int) -> str:  # noqa: N802
        return "OrderedDict(" + self.repr_dict(x, level) + ")"


_REPR = _Repr()
_REPR.maxlevel = 4
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = _REPR.maxdeque = _REPR.maxfrozenset = 10
_REPR.maxstring = _REPR.maxlong = _REPR.maxother = TEXT_CAP


def _cap(text: str) -> str:
    text = printable(text).replace("\n", "\\n").replace("\t", "\\t")
    return text if len(text) <= TEXT_CAP else text[: TEXT_CAP - 3] + "..."


def _text(item: Any, stdio: bool) -> str:
    if stdio:
        return _cap(str(item))
    return _cap(", ".join(_REPR.repr(arg) for arg in item))


def render(outcome: Outcome, per_input_timeout_s: float) -> str:
    if outcome.kind == "value":
        return _cap(_REPR.repr(outcome.value))
    if outcome.kind == "raised":
        module, name = outcome.value
        return _cap("raised " + (name if module == "builtins" else f"{module}.{name}"))
    if outcome.kind == "exited":
        shown = _cap(str(outcome.value))
        return shown if outcome.code == 0 else _cap(f"exit code {outcome.code}; stdout: {shown}")
    if outcome.kind == "signaled":
        return f"killed by signal {outcome.code}"
    if outcome.kind == "timeout":
        return f"timed out (over {per_input_timeout_s:g} s)"
    if outcome.kind == "overflow":
        return "output limit exceeded"
    if outcome.kind == "crash":
        return {
            MEMORY: "ran out of memory",
            LOAD_FAILED: "the program failed to load",
            UNREADABLE: "sent an unreadable reply",
        }.get(outcome.code or 0, "the process died")
    return "no usable result"
