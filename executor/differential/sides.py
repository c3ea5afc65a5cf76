"""What one side of a pair is while it is fuzzed: what its runs share (`Fuzzing`), what it reports (`SideReport`),
and the one jailed run both drivers (stdio.py, function.py) make through the engine."""

from __future__ import annotations

from dataclasses import dataclass, field

from executor.differential.values import Outcome
from executor.engine import Engine, Program
from services.kernel.contracts import Limits, Mode
from services.lib.sandbox import JailProfile, RunResult, printable

SIDES = ("reference", "candidate")
MESSAGE_CAP = 300
# A run of one input that the machine's load held past its wall limit (jail.unjudged_reason) says nothing about the
# program: it is run again, at most this many times, before the input counts as timed out.
STARVED_RERUNS = 2


@dataclass(frozen=True)
class Fuzzing:
    """What every run of a pair shares."""

    mode: Mode
    entry_point: str
    time_budget_s: float
    per_input_timeout_s: float
    limits: Limits


class SideStopped(Exception):
    """A side cannot be fuzzed: its program does not compile, or its jail failed (the platform's fault)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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


async def run_checked(
    engine: Engine,
    profile: JailProfile,
    argv: list[str],
    program: Program,
    stdin: bytes,
    *,
    output_limit: int,
    stdout_keep: int,
    result_limit: int = 0,
) -> RunResult:
    """One run as a test run is made (Engine.run: one slot; the program's files, checked for syntax first, or its
    build), the program's stderr counted against the output limit but not kept; SideStopped if the program does
    not compile or the jail failed."""
    return checked(
        await engine.run(
            profile,
            argv,
            program,
            stdin,
            output_limit=output_limit,
            stdout_keep=stdout_keep,
            stderr_keep=(0, 0),
            result_limit=result_limit,
        )
    )


def checked(result: RunResult) -> RunResult:
    if result.syntax_error is not None:
        raise SideStopped("compile_error", "does not compile: " + printable(result.syntax_error.strip())[:MESSAGE_CAP])
    if result.jail_error or result.cancelled:
        raise SideStopped("internal_error", str(result.jail_error or "cancelled"))
    return result


def own_time_s(result: RunResult) -> float:
    """A run's elapsed time less what it waited for a CPU another process held (jail.RunResult.wait_s)."""
    return max(0.0, result.wall_s - result.wait_s)
