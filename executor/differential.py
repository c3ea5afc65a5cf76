"""Differential fuzzing (paper 002, LoCaL, Algorithm 1): run a reference and a candidate program on the same
inputs and score the share of inputs on which they agree.

Each side runs in its own jail (two nsjail launches at once, one executor slot each), under the trusted
supervisor executor/harness/diff_runner.py, which answers whole repetitions from one worker process (function
mode) or runs the program once per input (stdio mode), keeps the time, and reports each side's results as data
on its private result channel. Everything is compared here, on the host, on decoded plain data: nothing a program
returned is ever called, and neither program can see, signal or outlive the other.

This departs on purpose from "both functions run inside one sandboxed process over a batch of inputs": in one
process (or one jail) the candidate could read the reference's results from memory or /proc, or patch the code
that compares them. Two jails cost one extra jail start (about 0.1 s, in parallel) per pair.

Matching rules (LoCaL compares with Python's `==`; so do we, with these exceptions):
- floats: NaN equals NaN; with `float_tolerance` two numbers match when `math.isclose(a, b, rel_tol=tol,
  abs_tol=tol)`; an int and a float compare as Python does (1 == 1.0), and so do bools (True == 1);
- lists/tuples/dicts compare element by element with these rules (a list never equals a tuple, as in Python);
  sets, strings, bytes and everything else with Python's `==` on the decoded data;
- a generator (or other iterator) returned is compared as the sequence of its items, and only with another one;
- both sides raising the same exception type (module and qualified name) is a match;
- a per-input timeout, MemoryError, a process that died, a value that is not data or is too large never matches.
A repetition is excluded (timed out) if either side did not finish it within `time_budget_s` of its own
supervisor's clock: Algorithm 1's rule (`timeout_rule="paper"`, the default). That rule lets a program choose to
be excluded, by stalling once it meets an input it would get wrong; `timeout_rule="strict"` excludes a repetition
only when the reference ran out of time, and the candidate's unanswered inputs then count as mismatches.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import math
import reprlib
import struct
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from executor.harness import function_runner as harness
from executor.languages import LanguageSpec, get_language
from services.fuzzing.score import TIMEOUT_RULES, Repetition, TimeoutRule, df_score
from services.kernel.contracts import Checker, Language, Limits, Mode
from services.sandbox.jail import JAIL_SOURCE_DIR, JailProfile, RunResult, printable

if TYPE_CHECKING:
    from executor.builds import Build, BuildLease
    from executor.run import Executor

log = logging.getLogger(__name__)

SIDES = ("reference", "candidate")
MAX_INPUT_BYTES = 64 * 1024 * 1024
# A single reply from a worker, and all of one side's results, as the supervisor forwards them.
MAX_REPLY_BYTES = 1024 * 1024
MAX_SIDE_BYTES = 48 * 1024 * 1024
MAX_COUNTEREXAMPLES = 3
TEXT_CAP = 200
MESSAGE_CAP = 300
JAIL_STDIO_CAP = 64 * 1024
# Loading the program (imports) before the first repetition: its own deadline, outside the budget (LoCaL imports
# both functions before it starts timing).
LOAD_TIMEOUT_S = 10.0
# Per repetition, what the supervisor may need beyond the budget (killing and reaping a worker).
_REPETITION_SLACK_S = 1.0
_JAIL_SLACK_S = 3.0
_DIFF_HARNESS = f"{JAIL_SOURCE_DIR}/diff_runner.py"
_FRAME = struct.Struct(">I")

# Reply and marker codes (executor/harness/diff_runner.py).
_OK, _RAISED, _ALARM, _MEMORY, _NOT_DATA, _TOO_LARGE, _LOAD_FAILED = 0, 1, 2, 3, 4, 5, 9
_NO_ANSWER, _DIED, _UNREADABLE, _OUTPUT_LIMIT, _SIDE_CAP = 10, 11, 12, 13, 14
_EXITED, _SIGNALED = 20, 21
# A set's elements or a dict's keys of which more than this many share one hash value: crafted to make building
# the set (and comparing it) quadratic, never what a program's data holds. Refused before anything is built.
_MAX_SAME_HASH = 16
_TIMEOUT_CODES = (_ALARM, _NO_ANSWER)
_CRASH_CODES = (_MEMORY, _DIED, _UNREADABLE, _LOAD_FAILED)


@dataclass(frozen=True)
class RepetitionRun:
    """One repetition: `matches` of `n`; `timed_out` if either side ran out of the budget (listed in
    `timed_out_sides`); `elapsed_s` per side as its supervisor measured; per-input timeouts and crashes per side."""

    index: int
    n: int
    matches: int
    timed_out: bool
    timed_out_sides: tuple[str, ...]
    elapsed_s: dict[str, float]
    input_timeouts: dict[str, int]
    crashes: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["timed_out_sides"] = list(self.timed_out_sides)
        return data


@dataclass(frozen=True)
class Counterexample:
    """An input on which the two sides disagree, each part as capped printable text."""

    repetition: int
    index: int
    input: str
    reference: str
    candidate: str


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


# --- validation and encoding of the request ------------------------------------------------------------------


def encode_repetitions(mode: Mode, repetitions: Sequence[Sequence[Any]]) -> tuple[list[int], list[bytes]]:
    """(N per repetition, one JSON line per repetition); ValueError for anything that cannot be sent."""
    if not repetitions:
        raise ValueError("repetitions must not be empty")
    counts: list[int] = []
    lines: list[bytes] = []
    total = 0
    for rep, inputs in enumerate(repetitions):
        if isinstance(inputs, str | bytes) or not isinstance(inputs, Sequence) or not inputs:
            raise ValueError(f"repetitions[{rep}] must be a non-empty list of inputs")
        encoded: list[Any] = []
        for index, item in enumerate(inputs):
            if mode == Mode.STDIO:
                if not isinstance(item, str):
                    raise ValueError(f"repetitions[{rep}][{index}]: a stdio input must be text")
                encoded.append(item)
            else:
                if not isinstance(item, list | tuple):
                    raise ValueError(f"repetitions[{rep}][{index}]: an input must be a list of positional arguments")
                try:
                    encoded.append([harness.encode_value(arg, 0, harness.MAX_ARGUMENT_DEPTH) for arg in item])
                except (harness.NotData, RecursionError) as exc:
                    raise ValueError(f"repetitions[{rep}][{index}]: {str(exc)[:200]}") from None
        line = json.dumps(encoded, separators=(",", ":"), allow_nan=False).encode("utf-8", "surrogatepass")
        total += len(line) + 1
        if total > MAX_INPUT_BYTES:
            raise ValueError(f"the inputs are over {MAX_INPUT_BYTES >> 20} MiB serialized")
        counts.append(len(inputs))
        lines.append(line)
    return counts, lines


def _validate(
    mode: str,
    languages: Sequence[LanguageSpec],
    entry_point: str | None,
    time_budget_s: float,
    per_input_timeout_s: float,
    float_tolerance: float | None,
) -> None:
    if mode not in tuple(Mode):
        raise ValueError(f"unknown mode {mode!r}")
    if mode == Mode.FUNCTION:
        if any(lang.id != Language.PYTHON for lang in languages):
            raise ValueError("function mode is available for Python only")
        if not entry_point or not entry_point.isidentifier():
            raise ValueError("function mode needs entry_point, a Python identifier")
    if not (0 < time_budget_s <= 3600) or not math.isfinite(time_budget_s):
        raise ValueError("time_budget_s must be a positive number of seconds (at most 3600)")
    if not (0 < per_input_timeout_s <= 60) or not math.isfinite(per_input_timeout_s):
        raise ValueError("per_input_timeout_s must be positive (at most 60)")
    if float_tolerance is not None and not (float_tolerance >= 0 and math.isfinite(float_tolerance)):
        raise ValueError("float_tolerance must be None or a finite number >= 0")


# --- running -------------------------------------------------------------------------------------------------


async def differential(
    executor: Executor,
    *,
    tenant: str,
    reference_language: str,
    reference_source: str,
    candidate_language: str,
    candidate_source: str,
    mode: Mode,
    entry_point: str | None,
    repetitions: Sequence[Sequence[Any]],
    time_budget_s: float,
    per_input_timeout_s: float = 2.0,
    float_tolerance: float | None = None,
    timeout_rule: TimeoutRule = "paper",
    checker: Checker,
    limits: Limits,
) -> DifferentialResult:
    """df_score of a (reference, candidate) pair over the given inputs; see the module docstring."""
    langs = (get_language(reference_language), get_language(candidate_language))
    _validate(mode, langs, entry_point, time_budget_s, per_input_timeout_s, float_tolerance)
    if timeout_rule not in TIMEOUT_RULES:
        raise ValueError(f"timeout_rule must be one of {', '.join(TIMEOUT_RULES)}")
    # Encoding (up to MAX_INPUT_BYTES) and, below, decoding and comparing (up to MAX_SIDE_BYTES a side) are
    # seconds of CPU: in the executor's threads, so the event loop stays free.
    counts, lines = await executor._in_thread(encode_repetitions, mode, repetitions)
    builds: list[Build] = []
    # Each build is leased until both sides have run: no executor evicts it from the cache meanwhile.
    leases: list[BuildLease] = []
    try:
        for side, lang, source in zip(SIDES, langs, (reference_source, candidate_source), strict=True):
            if lang.id not in executor._toolchains:
                executor._toolchains[lang.id] = await executor._in_thread(_toolchain, lang.id)
            tools = executor._toolchains[lang.id]
            if tools is None:
                return DifferentialResult(
                    "unsupported", None, message=f"the {lang.id} toolchain is not available", side=side
                )
            try:
                build, lease = await executor._leased_build(lang, tools.key, source, tenant=tenant)
            except Exception as exc:
                log.exception("building the %s's %s program failed", side, lang.id)
                return DifferentialResult(
                    "internal_error", None, message=f"internal error while compiling ({type(exc).__name__})", side=side
                )
            if lease is not None:
                leases.append(lease)
            if build.status != "ok":
                status = "compile_error" if build.status == "ce" else "internal_error"
                text = printable(build.compile_output)[:MESSAGE_CAP] if build.status == "ce" else "the build failed"
                return DifferentialResult(status, None, message=f"the {side} does not compile: {text}", side=side)
            builds.append(build)
        wall = LOAD_TIMEOUT_S + len(counts) * (time_budget_s + _REPETITION_SLACK_S) + _JAIL_SLACK_S
        header: dict[str, Any] = {
            "mode": str(mode),
            "entry_point": entry_point or "",
            "timeout": per_input_timeout_s,
            "budget": time_budget_s,
            "load_timeout": LOAD_TIMEOUT_S,
            "counts": counts,
            "reply_cap": MAX_REPLY_BYTES,
            "side_cap": MAX_SIDE_BYTES,
            "output_cap": limits.output_kb * 1024,
        }
        body = b"\n".join(lines)
        try:
            results = await asyncio.gather(
                *(
                    _run_side(executor, lang, build, header, body, wall, limits)
                    for lang, build in zip(langs, builds, strict=True)
                )
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("a differential run failed inside the executor")
            return DifferentialResult("internal_error", None, message=f"internal error ({type(exc).__name__})")
    finally:
        for lease in leases:
            lease.release()
    for side, result in zip(SIDES, results, strict=True):
        if result.jail_error or result.cancelled:
            log.error("differential run: the %s's jail failed: %s\n%s", side, result.jail_error, result.nsjail_log)
            return DifferentialResult("internal_error", None, message="sandbox failure", side=side)
    return await executor._in_thread(
        _decide, results, repetitions, counts, mode, float_tolerance, checker, per_input_timeout_s, timeout_rule
    )


def _decide(
    results: Sequence[RunResult],
    repetitions: Sequence[Sequence[Any]],
    counts: Sequence[int],
    mode: Mode,
    tolerance: float | None,
    checker: Checker,
    per_input_timeout_s: float,
    timeout_rule: TimeoutRule = "paper",
) -> DifferentialResult:
    reports = [parse_side(result.result or b"", counts) for result in results]
    return compare(
        reports[0], reports[1], repetitions, counts, mode, tolerance, checker, per_input_timeout_s, timeout_rule
    )


def _toolchain(language_id: str) -> Any:
    from executor.languages import toolchain

    return toolchain(language_id)


async def _run_side(
    executor: Executor,
    lang: LanguageSpec,
    build: Build,
    header: dict[str, Any],
    body: bytes,
    wall: float,
    limits: Limits,
) -> RunResult:
    side_header = dict(header)
    if header["mode"] == Mode.FUNCTION:
        side_header["program"] = f"/prog/{build.main}"
    else:
        side_header["argv"] = lang.run_argv(main=build.main, memory_mb=limits.memory_mb)
        if lang.id == Language.PYTHON:
            # Forked from the supervisor per input instead of a fresh interpreter (diff_runner's docstring).
            side_header["python"] = f"/prog/{build.main}"
    stdin = json.dumps(side_header, separators=(",", ":")).encode() + b"\n" + body
    profile = JailProfile(
        # RLIMIT_CPU is per process: a worker that answers every repetition may use all of the wall time.
        cpu_time_s=wall,
        wall_time_s=wall,
        memory_mb=limits.memory_mb,
        # The supervisor, and a worker beside it.
        processes=limits.processes + lang.extra_processes + 2,
        readonly_mounts=lang.extra_readonly_mounts,
        with_harness=True,
        with_source_dir=True,
    )
    argv = ["/usr/bin/python3", "-I", "-S", "-B", _DIFF_HARNESS]
    async with executor._slots:
        return await executor._jailed(
            executor._sandbox.run,
            profile,
            argv,
            program_dir=build.program_dir,
            stdin=stdin,
            source_dir=executor._harness.parent,
            harness=executor._harness,
            stdout_limit=JAIL_STDIO_CAP,
            stderr_limit=JAIL_STDIO_CAP,
            result_limit=MAX_SIDE_BYTES + 4 * 1024 * 1024,
        )


# --- what a side reported ------------------------------------------------------------------------------------


@dataclass
class SideRepetition:
    elapsed_s: float
    timed_out: bool
    frames: list[bytes]


@dataclass
class SideReport:
    loaded: bool
    message: str
    repetitions: list[SideRepetition] = field(default_factory=list)
    complete: bool = False


def parse_side(data: bytes, counts: Sequence[int]) -> SideReport:
    """A side's result channel, as far as it is intact. Repetitions it never reported are missing (their
    inputs count as crashes: a jail that died early never earns a match)."""
    frames = _frames(data)
    report = SideReport(loaded=False, message="the sandbox ended before the harness reported")
    try:
        first = json.loads(frames[0]) if frames else None
        if not isinstance(first, dict) or not isinstance(first.get("loaded"), bool):
            return report
        report.loaded = first["loaded"]
        report.message = str(first.get("message", ""))[:MESSAGE_CAP]
        position = 1
        for rep, count in enumerate(counts):
            if position >= len(frames):
                return report
            summary = json.loads(frames[position])
            if not isinstance(summary, dict) or summary.get("rep") != rep:
                return report
            k = summary["frames"]
            if not isinstance(k, int) or not 0 <= k <= count or position + 1 + k > len(frames):
                return report
            report.repetitions.append(
                SideRepetition(
                    float(summary["elapsed"]), bool(summary["timed_out"]), frames[position + 1 : position + 1 + k]
                )
            )
            position += 1 + k
        report.complete = position < len(frames) and json.loads(frames[position]) == {"end": True}
    except (ValueError, KeyError, TypeError):
        log.error("unreadable differential report")
    return report


def _frames(data: bytes) -> list[bytes]:
    frames = []
    offset = 0
    while offset + _FRAME.size <= len(data):
        (size,) = _FRAME.unpack_from(data, offset)
        if offset + _FRAME.size + size > len(data):
            break
        frames.append(data[offset + _FRAME.size : offset + _FRAME.size + size])
        offset += _FRAME.size + size
    return frames


# --- deciding --------------------------------------------------------------------------------------------------


class _Iterated(tuple):  # type: ignore[type-arg]
    """The items of an iterator a function returned: equal only to another iterator's same items."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is _Iterated and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return "<iterator of " + tuple.__repr__(self) + ">"


@dataclass(frozen=True)
class Outcome:
    """One side's result on one input, decided here from its frame."""

    kind: str  # value | raised | timeout | crash | bad | exited | signaled | overflow
    value: Any = None
    code: int | None = None


_CONTAINERS: dict[str, Any] = {"tuple": tuple, "set": set, "frozenset": frozenset, "deque": collections.deque}


def _decode(node: Any, depth: int = 0) -> Any:
    """A value from function_runner's tagged encoding (host side): built-in data only, iterators as _Iterated."""
    if depth > harness.MAX_DEPTH + 1:
        raise ValueError("nested too deeply")
    if type(node) is dict and len(node) == 1 and "iter" in node:
        items = node["iter"]
        if type(items) is not list:
            raise ValueError("malformed iter")
        return _Iterated(_decode(item, depth + 1) for item in items)
    if type(node) is list:
        return [_decode(item, depth + 1) for item in node]
    if type(node) is dict and len(node) == 1:
        ((tag, payload),) = node.items()
        if tag in ("tuple", "set", "frozenset", "deque") and type(payload) is list:
            items = [_decode(item, depth + 1) for item in payload]
            try:
                if tag in ("set", "frozenset"):
                    _check_hashes(items)
                return _CONTAINERS[tag](items)
            except TypeError as exc:
                raise ValueError(str(exc)) from None
        if tag in ("dict", "odict") and type(payload) is list:
            pairs = []
            for pair in payload:
                if type(pair) is not list or len(pair) != 2:
                    raise ValueError("malformed dict item")
                pairs.append((_decode(pair[0], depth + 1), _decode(pair[1], depth + 1)))
            try:
                _check_hashes([key for key, _ in pairs])
                return collections.OrderedDict(pairs) if tag == "odict" else dict(pairs)
            except TypeError as exc:
                raise ValueError(str(exc)) from None
    return harness.decode_value(node, 0, 2)


def _check_hashes(keys: list[Any]) -> None:
    """ValueError if more than _MAX_SAME_HASH of `keys` share a hash value (hash flooding: each would probe past
    all the others); TypeError for an unhashable one."""
    if len(keys) > _MAX_SAME_HASH:
        same = collections.Counter(map(hash, keys))
        if max(same.values()) > _MAX_SAME_HASH:
            raise ValueError("a set or dict whose keys are crafted to share hash values")


def outcome_of(frame: bytes, stdio: bool) -> Outcome:
    try:
        reply = harness.loads_limited(frame)
        if type(reply) is not list or not reply or type(reply[0]) is not int:
            return Outcome("bad")
        code = reply[0]
        if stdio:
            if code == _EXITED and len(reply) == 3 and type(reply[1]) is str and type(reply[2]) is int:
                return Outcome("exited", reply[1], reply[2])
            if code == _SIGNALED and len(reply) == 2 and type(reply[1]) is int:
                return Outcome("signaled", code=reply[1])
        else:
            if code == _OK and len(reply) == 2:
                return Outcome("value", _decode(reply[1]))
            if code == _RAISED and len(reply) == 3 and type(reply[1]) is str and type(reply[2]) is str:
                return Outcome("raised", (reply[1], reply[2]))
        if code in _TIMEOUT_CODES:
            return Outcome("timeout")
        if code in _CRASH_CODES:
            return Outcome("crash", code=code)
        if code == _OUTPUT_LIMIT:
            return Outcome("overflow")
        return Outcome("bad", code=code)
    except (ValueError, RecursionError, OverflowError, MemoryError):
        return Outcome("bad")


def values_same(a: Any, b: Any, tolerance: float | None, depth: int = 0) -> bool:
    """Python's `==` on decoded data, except: NaN equals NaN, floats within `tolerance` (math.isclose with it as
    both rel_tol and abs_tol), and containers compared element by element with these rules."""
    if depth > 2 * harness.MAX_DEPTH:
        return False
    ta, tb = type(a), type(b)
    if ta is float or tb is float:
        if ta in (int, float, bool) and tb in (int, float, bool):
            try:
                fa, fb = float(a), float(b)
            except OverflowError:
                return bool(a == b)
            if math.isnan(fa) or math.isnan(fb):
                return math.isnan(fa) and math.isnan(fb)
            if tolerance is None or math.isinf(fa) or math.isinf(fb):
                return bool(a == b)
            return math.isclose(fa, fb, rel_tol=tolerance, abs_tol=tolerance)
        return bool(a == b)
    if ta in (list, tuple, _Iterated, collections.deque) and ta is tb:
        return len(a) == len(b) and all(values_same(x, y, tolerance, depth + 1) for x, y in zip(a, b, strict=True))
    if ta in (dict, collections.OrderedDict) and tb in (dict, collections.OrderedDict):
        if a.keys() != b.keys():
            return False
        if ta is tb is collections.OrderedDict and list(a) != list(b):
            return False
        return all(values_same(a[key], b[key], tolerance, depth + 1) for key in a)
    return bool(a == b)


def outcomes_match(ref: Outcome, cand: Outcome, tolerance: float | None, checker: Checker) -> bool:
    if ref.kind != cand.kind:
        return False
    if ref.kind == "value":
        return values_same(ref.value, cand.value, tolerance)
    if ref.kind == "raised":
        return bool(ref.value == cand.value)
    if ref.kind == "exited":
        if ref.code != cand.code:
            return False
        from executor.checkers import mismatch

        return mismatch(checker.kind, ref.value, cand.value, checker.abs_tol, checker.rel_tol) is None
    return False  # timeouts, crashes, signals, unreadable replies never match


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
) -> DifferentialResult:
    stdio = mode == Mode.STDIO
    runs: list[RepetitionRun] = []
    scored: list[Repetition] = []
    examples: list[Counterexample] = []
    missing = Outcome("crash", code=_DIED)
    for rep, count in enumerate(counts):
        sides = (reference, candidate)
        reps = [side.repetitions[rep] if rep < len(side.repetitions) else None for side in sides]
        timed_out_sides = tuple(name for name, r in zip(SIDES, reps, strict=True) if r is not None and r.timed_out)
        matches = 0
        timeouts = dict.fromkeys(SIDES, 0)
        crashes = dict.fromkeys(SIDES, 0)
        for index in range(count):
            outcomes = []
            for name, side_rep in zip(SIDES, reps, strict=True):
                if side_rep is None:
                    outcome = missing  # the jail ended before reporting this repetition
                elif index < len(side_rep.frames):
                    outcome = outcome_of(side_rep.frames[index], stdio)
                else:
                    outcome = Outcome("unanswered")  # the budget ran out first (the repetition is excluded)
                if outcome.kind == "timeout":
                    timeouts[name] += 1
                elif outcome.kind in ("crash", "bad", "signaled", "overflow"):
                    crashes[name] += 1
                outcomes.append(outcome)
            if outcomes_match(outcomes[0], outcomes[1], tolerance, checker):
                matches += 1
            elif len(examples) < MAX_COUNTEREXAMPLES and "unanswered" not in (outcomes[0].kind, outcomes[1].kind):
                examples.append(
                    Counterexample(
                        repetition=rep,
                        index=index,
                        input=_text(repetitions[rep][index], stdio),
                        reference=_render(outcomes[0], per_input_timeout_s),
                        candidate=_render(outcomes[1], per_input_timeout_s),
                    )
                )
        # Algorithm 1 excludes a repetition either side ran out of time on; the strict rule only the reference's
        # (the candidate's unanswered inputs have then counted as mismatches above).
        timed_out = bool(timed_out_sides) if timeout_rule == "paper" else "reference" in timed_out_sides
        elapsed = {name: round(r.elapsed_s, 4) if r is not None else 0.0 for name, r in zip(SIDES, reps, strict=True)}
        runs.append(RepetitionRun(rep, count, matches, timed_out, timed_out_sides, elapsed, timeouts, crashes))
        scored.append(Repetition(index=rep, n=count, matches=matches, timed_out=timed_out))
    notes = [
        f"the {name}'s program failed to load: {side.message}"
        for name, side in zip(SIDES, (reference, candidate), strict=True)
        if not side.loaded
    ]
    notes += [
        f"the {name}'s sandbox ended before it reported every repetition"
        for name, side in zip(SIDES, (reference, candidate), strict=True)
        if side.loaded and not side.complete
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

    def repr__Iterated(self, x: _Iterated, level: int) -> str:  # noqa: N802 - reprlib's "repr_" + type name
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


def _render(outcome: Outcome, per_input_timeout_s: float) -> str:
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
            _MEMORY: "ran out of memory",
            _LOAD_FAILED: "the program failed to load",
            _UNREADABLE: "sent an unreadable reply",
        }.get(outcome.code or 0, "the process died")
    return "no usable result"


__all__ = ["Counterexample", "DifferentialResult", "RepetitionRun", "differential"]
