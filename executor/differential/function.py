"""The function-mode driver: one run answers a *segment* of a repetition, one call at a time over the same call
messages a code test makes (see the fuzzing section of executor/harness/function_runner.py); the host starts a
fresh run for the rest, and at each of the problem's test inputs."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from executor.differential.sides import (
    MESSAGE_CAP,
    STARVED_RERUNS,
    Fuzzing,
    SideRepetition,
    SideReport,
    own_time_s,
    run_checked,
)
from executor.differential.values import DIED, LOAD_FAILED, MEMORY, Outcome, decode
from executor.engine import Engine, Program
from executor.harness import function_runner as harness
from services.lib.sandbox import JailProfile, printable, unjudged_reason

# A single reply from a candidate, and all of one side's replies, as the supervisor forwards them.
MAX_REPLY_BYTES = 1024 * 1024
MAX_SIDE_BYTES = 48 * 1024 * 1024
# Loading the program (imports) before a repetition's first input: its own deadline, outside the budget (LoCaL
# imports both functions before it starts timing). A later run of the same repetition pays its load in the budget.
LOAD_TIMEOUT_S = 10.0
# A function-mode run ends itself this long before its wall limit (the test's), so it reports before the host's
# clock would stop it: the larger of these.
_SEGMENT_MARGIN_S = 0.5
_SEGMENT_MARGIN_SHARE = 0.2
# Markers and replies beyond the side's reply bytes: room on the result channel.
_RESULT_SLACK = 1024 * 1024
_FRAME = struct.Struct(">I")


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


async def function_side(
    engine: Engine,
    profile: JailProfile,
    argv: list[str],
    program: Program,
    fuzzing: Fuzzing,
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
                outcomes.append(Outcome("crash", code=LOAD_FAILED))
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
            result = await run_checked(
                engine,
                profile,
                argv,
                program,
                stdin,
                output_limit=output_limit,
                stdout_keep=0,
                result_limit=room + _RESULT_SLACK,
            )
            segment = await engine.in_thread(parse_segment, result.result or b"", end - index)
            if not segment.loaded and segment.stopped is not None:
                if rep == 0 and first_run:
                    # The program does not load: no input of any repetition is answered.
                    report.loaded, report.message = False, segment.message
                    continue
                outcomes.append(Outcome("crash", code=DIED))  # it loaded before: this time it failed
            if segment.stopped == "internal":
                raise RuntimeError("the function-mode harness failed while fuzzing")
            outcomes.extend(segment.outcomes)
            room = max(0, room - segment.reply_bytes)
            first_run = False
            if segment.stopped is None:
                # Stopped from outside (an output flood, the run's CPU limit, the wall clock on a machine too busy
                # for the supervisor's own): what it answered counts; the input it was on is tried again first in
                # a fresh run, unless it was already the first.
                elapsed += own_time_s(result)
                if segment.outcomes:
                    starved = 0
                elif unjudged_reason(result, cpu_time_s=profile.cpu_time_s) and starved < STARVED_RERUNS:
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
            return Outcome("value", decode(value))
        if key == "raised" and harness.exception_shaped(value):
            module, qualname = value[3], value[4]
            if (module, qualname) == ("builtins", "MemoryError"):
                return Outcome("crash", code=MEMORY)
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
        return Outcome("crash", code=DIED)
    return Outcome("bad", code=code if type(code) is int else None)
