"""The stdio driver: every input is a run of its own, exactly a test run with that stdin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from executor.differential.sides import STARVED_RERUNS, Fuzzing, SideRepetition, SideReport, own_time_s, run_checked
from executor.differential.values import DIED, Outcome
from executor.engine import Engine, Program
from services.lib.sandbox import JailProfile, RunResult, unjudged_reason


async def stdio_side(
    engine: Engine,
    profile: JailProfile,
    argv: list[str],
    program: Program,
    fuzzing: Fuzzing,
    lines: Sequence[Sequence[bytes]],
) -> SideReport:
    """Each input is a test run with that stdin. The per-input timeout is the run's wall limit (which nothing in
    the jail can see) when it is below the test's; the budget is the sum of the runs' own times (their elapsed time
    less what they waited for a CPU), so that a busy machine does not spend it; a run the load held past its wall
    limit is run again (at most STARVED_RERUNS times)."""
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
            for _attempt in range(STARVED_RERUNS + 1):
                result = await run_checked(
                    engine, profile, argv, program, stdin, output_limit=output_limit, stdout_keep=output_limit
                )
                if unjudged_reason(result, cpu_time_s=profile.cpu_time_s) is None:
                    break
            elapsed += own_time_s(result)
            if elapsed > fuzzing.time_budget_s:
                timed_out = True  # this input ended past the budget: unanswered, as Algorithm 1 has it
                break
            outcomes.append(_stdio_outcome(result))
        report.repetitions.append(SideRepetition(elapsed, timed_out, outcomes))
    return report


def _stdio_outcome(result: RunResult) -> Outcome:
    if result.stdout_overflow or result.stderr_overflow:
        return Outcome("overflow")
    if result.wall_timeout or result.stop is not None:
        return Outcome("timeout")  # its wall limit, or its CPU limit (the test's)
    if result.signal is not None:
        return Outcome("signaled", code=result.signal)
    if result.exit_code is None:
        return Outcome("crash", code=DIED)
    return Outcome("exited", result.stdout.decode("utf-8", "surrogateescape"), result.exit_code)
