"""The test runner, the executor's public interface: compile a program once, run every test against it in the
sandbox (in parallel, within the engine's slots), and decide the verdicts (executor/verdicts.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from executor.builds import BuildLease, BuildLimits
from executor.engine import Engine, Program, jail_plan
from executor.harness import function_runner as harness
from executor.languages import LanguageSpec, get_language, toolchain
from executor.verdicts import decide
from services.kernel.contracts import Checker, ExecutionResult, Language, Limits, Mode, TestCase, TestResult, Verdict
from services.kernel.text import clean_text
from services.lib.sandbox import INSIDE_ID, Sandbox, printable, unjudged_reason

log = logging.getLogger(__name__)

DEFAULT_CHECKER = Checker()
DEFAULT_LIMITS = Limits()
STDERR_EXCERPT = (16 * 1024, 16 * 1024)
# A test run the machine's load held past its wall limit (jail.unjudged_reason) is run again at most this many
# times, after a pause that grows with each (the load may pass); then it is IE, retryable.
MAX_RERUNS = 2
RERUN_PAUSE_S = 0.5


class InvalidRequest(ValueError):
    """A request the executor cannot execute as given (the gateway refuses these first); its message names what is
    wrong with the request, never a host path or a tool's output."""


class Executor:
    """Compiles and runs programs' tests in nsjail, on an engine of its own (executor/engine.py: sandbox, slots,
    builds). One per process; safe to share between concurrent tasks."""

    def __init__(
        self,
        work_root: Path,
        slots: int = os.cpu_count() or 1,
        nsjail_path: Path | None = None,
        sandbox_uid: int = INSIDE_ID,
        build_limits: BuildLimits | None = None,
    ) -> None:
        self.engine = Engine(work_root, slots, nsjail_path, sandbox_uid, build_limits)

    def close(self) -> None:
        """Release the worker threads (runs in progress finish first) and end the pre-made jails."""
        self.engine.close()

    @property
    def work_root(self) -> Path:
        return self.engine.work_root

    @property
    def builds_root(self) -> Path:
        return self.engine.builds_root

    @property
    def sandbox(self) -> Sandbox:
        return self.engine.sandbox

    def languages(self) -> list[dict[str, str]]:
        """The languages this machine runs, with versions read from the installed toolchains (cached after
        the first call, which runs the tools and may block for a fraction of a second)."""
        listed = []
        for language_id in Language:
            tools = toolchain(language_id)
            if tools is None:
                continue
            listed.append(
                {
                    "id": language_id,
                    "name": language_id.display_name,
                    "version": tools.version,
                    "compiler": tools.compiler,
                    "runtime": tools.runtime,
                }
            )
        return listed

    async def execute(
        self,
        *,
        tenant: str,
        language: str,
        source_code: str,
        tests: Sequence[TestCase],
        mode: Mode = Mode.STDIO,
        entry_point: str | None = None,
        checker: Checker = DEFAULT_CHECKER,
        limits: Limits = DEFAULT_LIMITS,
    ) -> ExecutionResult:
        """Compile once (cached per tenant), run every test, and return the verdicts.

        `tenant` scopes the build cache: builds are never shared between tenants, so how fast a compile
        answers cannot tell one tenant what another submitted.

        Raises InvalidRequest (a ValueError) for requests that cannot be executed as given (unknown language,
        function mode outside Python, malformed tests): retrying cannot help. Everything that goes wrong with the
        program is a verdict.
        """
        tests = list(tests)
        try:
            lang = get_language(language)
            _validate(lang, tests, mode, entry_point)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        tools = await self.engine.toolchain(lang)
        if tools is None:
            return _failed(Verdict.IE, f"the {lang.id} toolchain is not available on this executor", len(tests))
        if lang.id == Language.PYTHON:
            # No separate syntax check: each test's zygote compiles the program before anything runs, and a
            # SyntaxError there is the attempt's CE (services/lib/sandbox/zygote.py).
            program = Program.python(source_code)
            compile_output, cached = "", False
            lease: BuildLease | None = None
        else:
            try:
                build, lease = await self.engine.leased_build(lang, tools.key, source_code, tenant=tenant)
            except Exception as exc:
                log.exception("building a %s program failed", lang.id)
                return _failed(
                    Verdict.IE, f"internal error while compiling ({type(exc).__name__})", len(tests), tools.key
                )
            if build.status != "ok":
                verdict = Verdict.CE if build.status == "ce" else Verdict.IE
                return _failed(verdict, build.compile_output, len(tests), tools.key, build.cached)
            program = Program.built(build)
            compile_output, cached = build.compile_output, build.cached
        try:
            runs = await asyncio.gather(
                *(
                    self._run_test(index, test, lang, program, mode, entry_point, checker, limits)
                    for index, test in enumerate(tests)
                )
            )
        finally:
            if lease is not None:
                lease.release()
        syntax_error = next((error for _, error in runs if error is not None), None)
        if syntax_error is not None:
            return _failed(Verdict.CE, printable(syntax_error.strip()), len(tests), tools.key, cached)
        outcomes = [outcome for outcome, _ in runs]
        verdict = next((o.status for o in outcomes if o.status != Verdict.AC), Verdict.AC)
        return ExecutionResult(
            verdict=verdict,
            passed=sum(o.status == Verdict.AC for o in outcomes),
            total=len(outcomes),
            compile_output=clean_text(compile_output),
            tests=list(outcomes),
            toolchain=tools.key,
            build_cached=cached,
        )

    # --- running tests ----------------------------------------------------------------------------------

    async def _run_test(
        self,
        index: int,
        test: TestCase,
        lang: LanguageSpec,
        program: Program,
        mode: Mode,
        entry_point: str | None,
        checker: Checker,
        limits: Limits,
    ) -> tuple[TestResult, str | None]:
        """One test in its own (pre-made) jail: its result, and the compiler's message if a Python program did
        not compile (then nothing ran and the result is a placeholder)."""
        try:
            function_mode = mode == Mode.FUNCTION
            if function_mode:
                request: dict[str, Any] = {"entry_point": entry_point}
                if test.code is not None:
                    request["code"] = test.code
                else:
                    request["args"] = list(test.input or [])
                stdin = json.dumps(request).encode("utf-8", "surrogatepass")
            else:
                stdin = str(test.input or "").encode("utf-8", "surrogatepass")
            profile, argv = jail_plan(lang, program.main, mode, limits)
            output_limit = limits.output_kb * 1024
            # A run the machine's load held past its wall limit is not judged: it is run again, at most MAX_RERUNS
            # times (docs/sandbox.md, "Clocks under load").
            rerun_reasons: list[str] = []
            while True:
                result = await self.engine.run(
                    profile,
                    argv,
                    program,
                    stdin,
                    output_limit=output_limit,
                    stderr_keep=STDERR_EXCERPT,
                    result_limit=harness.MAX_RESULT_BYTES + 65536,
                )
                if result.syntax_error is not None:
                    return TestResult(index=index, status=Verdict.CE, public=test.public), result.syntax_error
                outcome = decide(index, test, lang, result, limits, checker)
                unjudged = unjudged_reason(result, cpu_time_s=limits.cpu_time_s) if outcome.status == "IE" else None
                if unjudged is None or len(rerun_reasons) >= MAX_RERUNS:
                    break
                rerun_reasons.append(unjudged)
                log.warning("test %d is run again (%d of %d): %s", index, len(rerun_reasons), MAX_RERUNS, unjudged)
                await asyncio.sleep(RERUN_PAUSE_S * len(rerun_reasons))
            extra = {"runs": len(rerun_reasons) + 1, "rerun_reasons": rerun_reasons, "retryable": unjudged is not None}
            return outcome.model_copy(update=extra), None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("test %d failed inside the executor", index)
            return (
                TestResult(
                    index=index,
                    status=Verdict.IE,
                    public=test.public,
                    message=f"internal error ({type(exc).__name__})",
                ),
                None,
            )


def _failed(
    verdict: Verdict, output: str, total: int, toolchain_key: str = "", cached: bool = False
) -> ExecutionResult:
    return ExecutionResult(
        verdict=verdict,
        passed=0,
        total=total,
        compile_output=clean_text(output),
        tests=[],
        toolchain=toolchain_key,
        build_cached=cached,
    )


def _validate(lang: LanguageSpec, tests: list[TestCase], mode: str, entry_point: str | None) -> None:
    if mode not in tuple(Mode):
        raise ValueError(f"unknown mode {mode!r}")
    if mode == Mode.FUNCTION:
        if lang.id != Language.PYTHON:
            raise ValueError("function mode is available for Python only")
        if not entry_point or not entry_point.isidentifier():
            raise ValueError("function mode needs entry_point, a Python identifier")
    for index, test in enumerate(tests):
        if mode == Mode.STDIO:
            if test.code is not None:
                raise ValueError(f"tests[{index}]: test code is for function mode")
            if test.input is not None and not isinstance(test.input, str):
                raise ValueError(f"tests[{index}]: stdio input must be text")
            if test.expected is not None and not isinstance(test.expected, str):
                raise ValueError(f"tests[{index}]: stdio expected output must be text")
        elif test.code is None and test.input is not None and not isinstance(test.input, list | tuple):
            raise ValueError(f"tests[{index}]: function-mode input must be a list of positional arguments")
