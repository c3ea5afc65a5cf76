"""Differential fuzzing (paper 002, LoCaL, Algorithm 1): run a reference and a candidate program on the same
inputs and score the share of inputs on which they agree.

A program being fuzzed runs exactly as it does for one of its tests: the same jail (executor.run.jail_plan:
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
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import math
import reprlib
import struct
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from executor.harness import function_runner as harness
from executor.languages import LanguageSpec, get_language
from services.kernel.contracts import Checker, Language, Limits, Mode
from services.lib.fuzzing import TIMEOUT_RULES, Repetition, TimeoutRule, df_score
from services.lib.sandbox.jail import JAIL_PROGRAM_DIR, JailProfile, RunResult, printable, unjudged_reason

if TYPE_CHECKING:
    from executor.builds import BuildLease
    from executor.run import Executor, _Program

log = logging.getLogger(__name__)

SIDES = ("reference", "candidate")
MAX_INPUT_BYTES = 64 * 1024 * 1024
# A single reply from a candidate, and all of one side's replies, as the supervisor forwards them.
MAX_REPLY_BYTES = 1024 * 1024
MAX_SIDE_BYTES = 48 * 1024 * 1024
MAX_COUNTEREXAMPLES = 3
TEXT_CAP = 200
MESSAGE_CAP = 300
# Loading the program (imports) before a repetition's first input: its own deadline, outside the budget (LoCaL
# imports both functions before it starts timing). A later run of the same repetition pays its load in the budget.
LOAD_TIMEOUT_S = 10.0
# A function-mode run ends itself this long before its wall limit (the test's), so it reports before the host's
# clock would stop it: the larger of these.
_SEGMENT_MARGIN_S = 0.5
_SEGMENT_MARGIN_SHARE = 0.2
# A run of one input that the machine's load held past its wall limit (jail.unjudged_reason) says nothing about the
# program: it is run again, at most this many times, before the input counts as timed out.
_STARVED_RERUNS = 2
# Markers and replies beyond the side's reply bytes: room on the result channel.
_RESULT_SLACK = 1024 * 1024
_FRAME = struct.Struct(">I")

# Outcome codes (crash kinds) shown in counterexamples; markers from the harness (function_runner.FUZZ_*).
_MEMORY, _LOAD_FAILED, _DIED, _UNREADABLE = 3, 9, 11, 12
# A set's elements or a dict's keys of which more than this many share one hash value: crafted to make building
# the set (and comparing it) quadratic, never what a program's data holds. Refused before anything is built.
_MAX_SAME_HASH = 16


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


# --- validation and encoding of the request ------------------------------------------------------------------


def encode_repetitions(mode: Mode, repetitions: Sequence[Sequence[Any]]) -> tuple[list[int], list[list[bytes]]]:
    """(N per repetition, each input's bytes per repetition: function mode, the JSON of its encoded arguments, the
    very text a test's call message holds; stdio mode, its stdin); ValueError for anything that cannot be sent."""
    if not repetitions:
        raise ValueError("repetitions must not be empty")
    counts: list[int] = []
    lines: list[list[bytes]] = []
    total = 0
    for rep, inputs in enumerate(repetitions):
        if isinstance(inputs, str | bytes) or not isinstance(inputs, Sequence) or not inputs:
            raise ValueError(f"repetitions[{rep}] must be a non-empty list of inputs")
        encoded: list[bytes] = []
        for index, item in enumerate(inputs):
            if mode == Mode.STDIO:
                if not isinstance(item, str):
                    raise ValueError(f"repetitions[{rep}][{index}]: a stdio input must be text")
                data = item.encode("utf-8", "surrogatepass")  # as a test's stdin (executor/run.py)
            else:
                if not isinstance(item, list | tuple):
                    raise ValueError(f"repetitions[{rep}][{index}]: an input must be a list of positional arguments")
                try:
                    args = [harness.encode_value(arg, 0, harness.MAX_ARGUMENT_DEPTH) for arg in item]
                except (harness.NotData, RecursionError) as exc:
                    raise ValueError(f"repetitions[{rep}][{index}]: {str(exc)[:200]}") from None
                data = json.dumps(args, separators=(",", ":")).encode("utf-8", "surrogatepass")
            total += len(data) + 1
            if total > MAX_INPUT_BYTES:
                raise ValueError(f"the inputs are over {MAX_INPUT_BYTES >> 20} MiB serialized")
            encoded.append(data)
        counts.append(len(inputs))
        lines.append(encoded)
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


def _positions(test_positions: Sequence[Collection[int]] | None, counts: Sequence[int]) -> list[frozenset[int]]:
    if test_positions is None:
        return [frozenset() for _ in counts]
    if len(test_positions) != len(counts):
        raise ValueError("test_positions must name one set of positions per repetition")
    out = []
    for rep, (positions, count) in enumerate(zip(test_positions, counts, strict=True)):
        chosen = frozenset(positions)
        if any(not isinstance(p, int) or not 0 <= p < count for p in chosen):
            raise ValueError(f"test_positions[{rep}] holds a position outside the repetition")
        out.append(chosen)
    return out


# --- running -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Fuzzing:
    """What every run of a pair shares."""

    mode: Mode
    entry_point: str
    time_budget_s: float
    per_input_timeout_s: float
    limits: Limits


class _SideStopped(Exception):
    """A side cannot be fuzzed: its program does not compile, or its jail failed (the platform's fault)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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
    test_positions: Sequence[Collection[int]] | None = None,
) -> DifferentialResult:
    """df_score of a (reference, candidate) pair over the given inputs; see the module docstring. `limits` are the
    problem's test limits, under which both programs run; `test_positions` (per repetition) marks the inputs that
    are the problem's own tests."""
    langs = (get_language(reference_language), get_language(candidate_language))
    _validate(mode, langs, entry_point, time_budget_s, per_input_timeout_s, float_tolerance)
    if timeout_rule not in TIMEOUT_RULES:
        raise ValueError(f"timeout_rule must be one of {', '.join(TIMEOUT_RULES)}")
    # Encoding (up to MAX_INPUT_BYTES) and, below, decoding and comparing (up to MAX_SIDE_BYTES a side) are
    # seconds of CPU: in the executor's threads, so the event loop stays free.
    counts, lines = await executor._in_thread(encode_repetitions, mode, repetitions)
    tests = _positions(test_positions, counts)
    fuzzing = _Fuzzing(Mode(mode), entry_point or "", time_budget_s, per_input_timeout_s, limits)
    programs: list[_Program] = []
    # Each build is leased until both sides have run: no executor evicts it from the cache meanwhile.
    leases: list[BuildLease] = []
    try:
        for side, lang, source in zip(SIDES, langs, (reference_source, candidate_source), strict=True):
            got = await _program(executor, side, lang, source, tenant)
            if isinstance(got, DifferentialResult):
                return got
            program, lease = got
            programs.append(program)
            if lease is not None:
                leases.append(lease)
        tasks = [
            asyncio.ensure_future(_run_side(executor, lang, program, fuzzing, lines, tests))
            for lang, program in zip(langs, programs, strict=True)
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        reports: list[SideReport] = []
        for side, task in zip(SIDES, tasks, strict=True):
            error = None if task.cancelled() else task.exception()
            if isinstance(error, _SideStopped):
                if error.status == "compile_error":
                    return DifferentialResult(error.status, None, message=f"the {side} {error.message}", side=side)
                log.error("differential run: the %s's jail failed: %s", side, error.message)
                return DifferentialResult("internal_error", None, message="sandbox failure", side=side)
            if error is not None:
                log.error("a differential run failed inside the executor", exc_info=error)
                return DifferentialResult("internal_error", None, message=f"internal error ({type(error).__name__})")
            if not task.cancelled():
                reports.append(task.result())
        if len(reports) != len(SIDES):
            return DifferentialResult("internal_error", None, message="internal error (a side did not finish)")
    finally:
        for lease in leases:
            lease.release()
    return await executor._in_thread(
        compare,
        reports[0],
        reports[1],
        repetitions,
        counts,
        mode,
        float_tolerance,
        checker,
        per_input_timeout_s,
        timeout_rule,
        tests,
    )


async def _program(
    executor: Executor, side: str, lang: LanguageSpec, source: str, tenant: str
) -> tuple[_Program, BuildLease | None] | DifferentialResult:
    """The side's program as a test run gets it (Executor.execute): a Python program's source as its file, anything
    else its build (leased)."""
    from executor.run import _PYTHON_MAIN, _encode, _Program

    if lang.id not in executor._toolchains:
        executor._toolchains[lang.id] = await executor._in_thread(_toolchain, lang.id)
    tools = executor._toolchains[lang.id]
    if tools is None:
        return DifferentialResult("unsupported", None, message=f"the {lang.id} toolchain is not available", side=side)
    if lang.id == Language.PYTHON:
        return _Program(main=_PYTHON_MAIN, files={_PYTHON_MAIN: _encode(source)}), None
    try:
        build, lease = await executor._leased_build(lang, tools.key, source, tenant=tenant)
    except Exception as exc:
        log.exception("building the %s's %s program failed", side, lang.id)
        return DifferentialResult(
            "internal_error", None, message=f"internal error while compiling ({type(exc).__name__})", side=side
        )
    if build.status != "ok":
        if lease is not None:
            lease.release()
        status = "compile_error" if build.status == "ce" else "internal_error"
        text = printable(build.compile_output)[:MESSAGE_CAP] if build.status == "ce" else "the build failed"
        return DifferentialResult(status, None, message=f"the {side} does not compile: {text}", side=side)
    return _Program(main=build.main, directory=build.program_dir), lease


def _toolchain(language_id: str) -> Any:
    from executor.languages import toolchain

    return toolchain(language_id)


async def _run_side(
    executor: Executor,
    lang: LanguageSpec,
    program: _Program,
    fuzzing: _Fuzzing,
    lines: Sequence[Sequence[bytes]],
    tests: Sequence[frozenset[int]],
) -> SideReport:
    from executor.run import jail_plan

    profile, argv = jail_plan(lang, program.main, fuzzing.mode, fuzzing.limits)
    if fuzzing.mode == Mode.FUNCTION:
        return await _function_side(executor, profile, argv, program, fuzzing, lines, tests)
    return await _stdio_side(executor, profile, argv, program, fuzzing, lines)


@dataclass
class SideRepetition:
    elapsed_s: float
    timed_out: bool
    outcomes: list[Outcome]


@dataclass
class SideReport:
    loaded: bool
    message: str
    repetitions: list[SideRepetition] = field(default_factory=list)


async def _jail_run(
    executor: Executor,
    profile: JailProfile,
    argv: list[str],
    program: _Program,
    stdin: bytes,
    *,
    output_limit: int,
    stdout_keep: int,
    result_limit: int = 0,
) -> RunResult:
    """One run as Executor._run_test makes it (one executor slot; the program's files, checked for syntax first, or
    its build), the program's stderr counted against the output limit but not kept."""
    async with executor._slots:
        return await executor._jailed(
            executor._sandbox.run,
            profile,
            argv,
            program_dir=program.directory,
            program_files=program.files,
            check_syntax=f"{JAIL_PROGRAM_DIR}/{program.main}" if program.files is not None else None,
            stdin=stdin,
            harness=executor._harness if profile.with_harness else None,
            stdout_limit=output_limit,
            stderr_limit=output_limit,
            stdout_keep=stdout_keep,
            stderr_keep=(0, 0),
            result_limit=result_limit,
        )


def _checked(result: RunResult) -> RunResult:
    if result.syntax_error is not None:
        raise _SideStopped("compile_error", "does not compile: " + printable(result.syntax_error.strip())[:MESSAGE_CAP])
    if result.jail_error or result.cancelled:
        raise _SideStopped("internal_error", str(result.jail_error or "cancelled"))
    return result


# --- function mode: segments -----------------------------------------------------------------------------------


@dataclass
class Segment:
    """What one function-mode run reported (see function_runner's fuzzing section): its outcomes in input order,
    why it stopped (None: it never said, the run was stopped from outside), its elapsed time on the supervisor's
    clock, and the reply bytes it forwarded."""

    loaded: bool = False
    message: str = ""
    outcomes: list[Outcome] = field(default_factory=list)
    stopped: str | None = None
    elapsed_s: float = 0.0
    reply_bytes: int = 0


def parse_segment(data: bytes, limit: int) -> Segment:
    """A function-mode run's result channel, as far as it is intact and well formed (never more than `limit`
    outcomes: a frame beyond the run's inputs is a harness fault, and ignored)."""
    segment = Segment(message="the sandbox ended before the harness reported")
    frames = _frames(data)
    if not frames or frames[0][:1] != b"H":
        return segment
    try:
        head = json.loads(frames[0][1:])
        if not isinstance(head, dict) or not isinstance(head.get("loaded"), bool):
            return segment
        segment.loaded, segment.message = head["loaded"], printable(str(head.get("message", "")))[:MESSAGE_CAP]
    except ValueError:
        return segment
    for data in frames[1:]:
        tag, body = data[:1], data[1:]
        if tag == b"E":
            try:
                end = json.loads(body)
                stopped, elapsed = end["stopped"], float(end.get("elapsed", 0.0))
            except (ValueError, KeyError, TypeError):
                return segment
            if isinstance(stopped, str) and math.isfinite(elapsed) and elapsed >= 0:
                segment.stopped, segment.elapsed_s = stopped, elapsed
            return segment
        if len(segment.outcomes) >= limit:
            continue
        if tag == b"R":
            segment.reply_bytes += len(body)
            segment.outcomes.append(outcome_of(body))
        elif tag == b"M":
            segment.outcomes.append(_marker(body))
    return segment


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


async def _function_side(
    executor: Executor,
    profile: JailProfile,
    argv: list[str],
    program: _Program,
    fuzzing: _Fuzzing,
    lines: Sequence[Sequence[bytes]],
    tests: Sequence[frozenset[int]],
) -> SideReport:
    """Every repetition, run by run (segments): a run starts at the first input not yet answered, or at each test
    input; it answers until it stops (see function_runner), and the next run goes on from there."""
    wall = profile.wall_time_s
    stop_after = max(0.1, wall - max(_SEGMENT_MARGIN_S, _SEGMENT_MARGIN_SHARE * wall))
    output_limit = fuzzing.limits.output_kb * 1024
    report = SideReport(loaded=True, message="")
    room = MAX_SIDE_BYTES
    for rep, inputs in enumerate(lines):
        outcomes: list[Outcome] = []
        elapsed = 0.0
        timed_out = False
        first_run = True
        starts = sorted(tests[rep])
        starved = 0
        while len(outcomes) < len(inputs):
            index = len(outcomes)
            if not report.loaded:
                outcomes.append(Outcome("crash", code=_LOAD_FAILED))
                continue
            left = fuzzing.time_budget_s - elapsed
            if left <= 0:
                timed_out = True
                break
            end = next((p for p in starts if p > index), len(inputs))
            options = {
                "timeout": fuzzing.per_input_timeout_s,
                "budget": left,
                "stop_after": stop_after,
                "load_timeout": LOAD_TIMEOUT_S,
                "count_load": not first_run,
                "cpu_limit": profile.cpu_time_s,
                "reply_cap": MAX_REPLY_BYTES,
                "result_cap": room,
            }
            header = json.dumps({"entry_point": fuzzing.entry_point, "fuzz": options}, separators=(",", ":"))
            stdin = header.encode() + b"\n" + b"".join(line + b"\n" for line in inputs[index:end])
            result = _checked(
                await _jail_run(
                    executor,
                    profile,
                    argv,
                    program,
                    stdin,
                    output_limit=output_limit,
                    stdout_keep=0,
                    result_limit=room + _RESULT_SLACK,
                )
            )
            segment = await executor._in_thread(parse_segment, result.result or b"", end - index)
            if not segment.loaded and segment.stopped is not None:
                if rep == 0 and first_run:
                    # The program does not load: no input of any repetition is answered.
                    report.loaded, report.message = False, segment.message
                    continue
                outcomes.append(Outcome("crash", code=_DIED))  # it loaded before: this time it failed
            if segment.stopped == "internal":
                raise RuntimeError("the function-mode harness failed while fuzzing")
            outcomes.extend(segment.outcomes)
            room = max(0, room - segment.reply_bytes)
            first_run = False
            if segment.stopped is None:
                # Stopped from outside (an output flood, the run's CPU limit, the wall clock on a machine too busy
                # for the supervisor's own): what it answered counts; the input it was on is tried again first in
                # a fresh run, unless it was already the first.
                elapsed += _own_time_s(result)
                if segment.outcomes:
                    starved = 0
                elif unjudged_reason(result, cpu_time_s=profile.cpu_time_s) and starved < _STARVED_RERUNS:
                    starved += 1
                else:
                    flood = result.stdout_overflow or result.stderr_overflow
                    outcomes.append(Outcome("overflow") if flood else Outcome("timeout"))
                continue
            starved = 0
            elapsed += segment.elapsed_s
            if segment.stopped == "budget":
                timed_out = True
                break
        report.repetitions.append(SideRepetition(elapsed, timed_out, outcomes))
    return report


def outcome_of(reply: bytes) -> Outcome:
    """One input's outcome from the candidate's reply, as it sent it (function_runner._candidate_main): only
    its shape as data counts; anything malformed is a bad reply, never an exception here."""
    try:
        message = harness.loads_limited(reply)
        if type(message) is not dict or len(message) != 1:
            return Outcome("bad")
        ((key, value),) = message.items()
        if key == "value":
            return Outcome("value", _decode(value))
        if key == "raised" and harness._exception_shaped(value):
            module, qualname = value[3], value[4]
            if (module, qualname) == ("builtins", "MemoryError"):
                return Outcome("crash", code=_MEMORY)
            return Outcome("raised", (module, qualname))
        return Outcome("bad")  # not_data, or anything else
    except (ValueError, RecursionError, OverflowError, MemoryError):
        return Outcome("bad")


def _marker(body: bytes) -> Outcome:
    """An outcome the supervisor decided (function_runner.FUZZ_*)."""
    try:
        marker = json.loads(body)
    except ValueError:
        return Outcome("bad")
    code = marker[0] if type(marker) is list and marker else None
    if code == harness.FUZZ_TIMED_OUT:
        return Outcome("timeout")
    if code == harness.FUZZ_DIED:
        return Outcome("crash", code=_DIED)
    return Outcome("bad", code=code if type(code) is int else None)


# --- stdio mode: a run per input -----------------------------------------------------------------------------


async def _stdio_side(
    executor: Executor,
    profile: JailProfile,
    argv: list[str],
    program: _Program,
    fuzzing: _Fuzzing,
    lines: Sequence[Sequence[bytes]],
) -> SideReport:
    """Each input is a test run with that stdin. The per-input timeout is the run's wall limit (which nothing in
    the jail can see) when it is below the test's; the budget is the sum of the runs' own times (their elapsed time
    less what they waited for a CPU), so that a busy machine does not spend it; a run the load held past its wall
    limit is run again (at most _STARVED_RERUNS times)."""
    profile = replace(profile, wall_time_s=min(profile.wall_time_s, fuzzing.per_input_timeout_s))
    output_limit = fuzzing.limits.output_kb * 1024
    report = SideReport(loaded=True, message="")
    for inputs in lines:
        outcomes: list[Outcome] = []
        elapsed = 0.0
        timed_out = False
        for stdin in inputs:
            if elapsed >= fuzzing.time_budget_s:
                timed_out = True
                break
            for _attempt in range(_STARVED_RERUNS + 1):
                result = _checked(
                    await _jail_run(
                        executor, profile, argv, program, stdin, output_limit=output_limit, stdout_keep=output_limit
                    )
                )
                if unjudged_reason(result, cpu_time_s=profile.cpu_time_s) is None:
                    break
            elapsed += _own_time_s(result)
            if elapsed > fuzzing.time_budget_s:
                timed_out = True  # this input ended past the budget: unanswered, as Algorithm 1 has it
                break
            outcomes.append(_stdio_outcome(result))
        report.repetitions.append(SideRepetition(elapsed, timed_out, outcomes))
    return report


def _own_time_s(result: RunResult) -> float:
    """A run's elapsed time less what it waited for a CPU another process held (jail.RunResult.wait_s)."""
    return max(0.0, result.wall_s - result.wait_s)


def _stdio_outcome(result: RunResult) -> Outcome:
    if result.stdout_overflow or result.stderr_overflow:
        return Outcome("overflow")
    if result.wall_timeout or result.stop is not None:
        return Outcome("timeout")  # its wall limit, or its CPU limit (the test's)
    if result.signal is not None:
        return Outcome("signaled", code=result.signal)
    if result.exit_code is None:
        return Outcome("crash", code=_DIED)
    return Outcome("exited", result.stdout.decode("utf-8", "surrogateescape"), result.exit_code)


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
    tests: Sequence[Collection[int]] | None = None,
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
                        reference=_render(outcomes[0], per_input_timeout_s),
                        candidate=_render(outcomes[1], per_input_timeout_s),
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
