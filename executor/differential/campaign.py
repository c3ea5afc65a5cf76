"""A differential campaign: one (reference, candidate) pair, fuzzed over the given inputs within a time budget
(executor/differential/__init__.py says how), each side run by its mode's driver through the engine."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from executor.builds import BuildLease
from executor.differential.function import function_side
from executor.differential.inputs import encode_repetitions, test_positions_of
from executor.differential.sides import MESSAGE_CAP, SIDES, Fuzzing, SideReport, SideStopped
from executor.differential.stdio import stdio_side
from executor.differential.verdict import DifferentialResult, compare
from executor.engine import Engine, Program, jail_plan
from executor.languages import LanguageSpec, get_language
from services.kernel.contracts import Checker, Language, Limits, Mode
from services.lib.fuzzing import TIMEOUT_RULES, TimeoutRule
from services.lib.sandbox import printable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DifferentialRequest:
    """One pair to fuzz: both programs, the inputs (`repetitions`, each a list of inputs: function mode, a list of
    positional arguments; stdio mode, a stdin text), the time budget per repetition and side, and how outcomes are
    compared. `limits` are the problem's test limits, under which both programs run; `test_positions` marks, per
    repetition, the inputs that are the problem's own tests."""

    tenant: str
    reference_language: str
    reference_source: str
    candidate_language: str
    candidate_source: str
    mode: Mode
    entry_point: str | None
    repetitions: Sequence[Sequence[Any]]
    time_budget_s: float
    per_input_timeout_s: float = 2.0
    float_tolerance: float | None = None
    timeout_rule: TimeoutRule = "paper"
    checker: Checker = field(default_factory=Checker)
    limits: Limits = field(default_factory=Limits)
    test_positions: Sequence[Collection[int]] | None = None


def validate(request: DifferentialRequest, languages: Sequence[LanguageSpec]) -> None:
    """ValueError, naming the field, for a request that cannot be run as given."""
    mode = request.mode
    if mode not in tuple(Mode):
        raise ValueError(f"unknown mode {mode!r}")
    if mode == Mode.FUNCTION:
        if any(lang.id != Language.PYTHON for lang in languages):
            raise ValueError("function mode is available for Python only")
        if not request.entry_point or not request.entry_point.isidentifier():
            raise ValueError("function mode needs entry_point, a Python identifier")
    time_budget_s, per_input_timeout_s = request.time_budget_s, request.per_input_timeout_s
    if not (0 < time_budget_s <= 3600) or not math.isfinite(time_budget_s):
        raise ValueError("time_budget_s must be a positive number of seconds (at most 3600)")
    if not (0 < per_input_timeout_s <= 60) or not math.isfinite(per_input_timeout_s):
        raise ValueError("per_input_timeout_s must be positive (at most 60)")
    float_tolerance = request.float_tolerance
    if float_tolerance is not None and not (float_tolerance >= 0 and math.isfinite(float_tolerance)):
        raise ValueError("float_tolerance must be None or a finite number >= 0")
    if request.timeout_rule not in TIMEOUT_RULES:
        raise ValueError(f"timeout_rule must be one of {', '.join(TIMEOUT_RULES)}")


async def fuzz_pair(engine: Engine, request: DifferentialRequest) -> DifferentialResult:
    """df_score of a (reference, candidate) pair over the request's inputs (executor/differential/__init__.py).
    Raises ValueError for a request that cannot be run as given."""
    langs = (get_language(request.reference_language), get_language(request.candidate_language))
    validate(request, langs)
    mode = request.mode
    # Encoding (up to MAX_INPUT_BYTES) and, below, decoding and comparing (up to MAX_SIDE_BYTES a side) are
    # seconds of CPU: in the engine's threads, so the event loop stays free.
    counts, lines = await engine.in_thread(encode_repetitions, mode, request.repetitions)
    tests = test_positions_of(request.test_positions, counts)
    fuzzing = Fuzzing(
        Mode(mode), request.entry_point or "", request.time_budget_s, request.per_input_timeout_s, request.limits
    )
    programs: list[Program] = []
    # Each build is leased until both sides have run: no executor evicts it from the cache meanwhile.
    leases: list[BuildLease] = []
    sources = (request.reference_source, request.candidate_source)
    try:
        for side, lang, source in zip(SIDES, langs, sources, strict=True):
            got = await side_program(engine, side, lang, source, request.tenant)
            if isinstance(got, DifferentialResult):
                return got
            program, lease = got
            programs.append(program)
            if lease is not None:
                leases.append(lease)
        tasks = [
            asyncio.ensure_future(run_side(engine, lang, program, fuzzing, lines, tests))
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
            if isinstance(error, SideStopped):
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
    return await engine.in_thread(
        compare,
        reports[0],
        reports[1],
        request.repetitions,
        counts,
        mode,
        request.float_tolerance,
        request.checker,
        request.per_input_timeout_s,
        request.timeout_rule,
        tests,
    )


async def side_program(
    engine: Engine, side: str, lang: LanguageSpec, source: str, tenant: str
) -> tuple[Program, BuildLease | None] | DifferentialResult:
    """The side's program as a test run gets it (Executor.execute): a Python program's source as its file, anything
    else its build (leased)."""
    tools = await engine.toolchain(lang)
    if tools is None:
        return DifferentialResult("unsupported", None, message=f"the {lang.id} toolchain is not available", side=side)
    if lang.id == Language.PYTHON:
        return Program.python(source), None
    try:
        build, lease = await engine.leased_build(lang, tools.key, source, tenant=tenant)
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
    return Program.built(build), lease


async def run_side(
    engine: Engine,
    lang: LanguageSpec,
    program: Program,
    fuzzing: Fuzzing,
    lines: Sequence[Sequence[bytes]],
    tests: Sequence[frozenset[int]],
) -> SideReport:
    """One side's runs over every repetition, by its mode's driver, in the jail and with the command of a test run."""
    profile, argv = jail_plan(lang, program.main, fuzzing.mode, fuzzing.limits)
    if fuzzing.mode == Mode.FUNCTION:
        return await function_side(engine, profile, argv, program, fuzzing, lines, tests)
    return await stdio_side(engine, profile, argv, program, fuzzing, lines)
