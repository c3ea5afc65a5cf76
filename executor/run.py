"""The executor's public interface: compile a program once, run every test against it in the sandbox
(in parallel, within a fixed number of slots), and decide the verdicts."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from executor import differential as _differential
from executor.builds import Build, BuildCache, BuildLease, BuildLimits
from executor.checkers import excerpt, mismatch, values_equal
from executor.differential import DifferentialResult
from executor.harness import function_runner as harness
from executor.languages import LanguageSpec, Toolchain, get_language, toolchain
from services.kernel.contracts import Checker, ExecutionResult, Language, Limits, Mode, TestCase, TestResult, Verdict
from services.kernel.fair import FairSlots
from services.kernel.text import clean_text
from services.lib.fuzzing import TimeoutRule
from services.lib.sandbox.jail import (
    INSIDE_ID,
    JAIL_PROGRAM_DIR,
    JailProfile,
    RunControl,
    RunResult,
    Sandbox,
    classify,
    default_nsjail_path,
    ensure_cgroup_parents,
    printable,
    sandbox_visible_root,
    unjudged_reason,
)
from services.lib.sandbox.warm import LAUNCHER_SOURCE, install_readable

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_CHECKER = Checker()
DEFAULT_LIMITS = Limits()
STDOUT_EXCERPT = 64 * 1024
STDERR_EXCERPT = (16 * 1024, 16 * 1024)
MESSAGE_CAP = 300
# A cancelled execute keeps its slot until the jail it started is really gone (SIGTERM to nsjail).
_CANCEL_WAIT_S = 5.0
_HARNESS_SOURCE = Path(__file__).parent / "harness" / "function_runner.py"
# A test run the machine's load held past its wall limit (jail.unjudged_reason) is run again at most this many
# times, after a pause that grows with each (the load may pass); then it is IE, retryable.
MAX_RERUNS = 2
RERUN_PAUSE_S = 0.5
# The Python program's path inside a run's jail, and the file its syntax is checked as.
_PYTHON_MAIN = "main.py"
_KNOWN_BUILDS = 4096


class InvalidRequest(ValueError):
    """A request the executor cannot execute as given (the gateway refuses these first); its message names what is
    wrong with the request, never a host path or a tool's output."""


class Executor:
    """Compiles and runs programs in nsjail. One per process; safe to share between concurrent tasks."""

    def __init__(
        self,
        work_root: Path,
        slots: int = os.cpu_count() or 1,
        nsjail_path: Path | None = None,
        sandbox_uid: int = INSIDE_ID,
        build_limits: BuildLimits | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        work_root = Path(work_root).absolute()
        work_root.mkdir(parents=True, exist_ok=True)
        ensure_cgroup_parents()
        self.work_root = work_root
        visible = sandbox_visible_root(work_root)
        self._sandbox = Sandbox(nsjail_path or default_nsjail_path(), work_root / "jail", sandbox_uid)
        # The build cache's bounds: TRIBUNAL_MAX_BUILD_MB, TRIBUNAL_BUILD_CACHE_MB, TRIBUNAL_BUILD_CACHE_TENANT_MB.
        self._builds = BuildCache(visible / "builds", self._sandbox, build_limits or BuildLimits.from_settings())
        self.builds_root = self._builds.root
        self._harness = install_readable(visible / "harness", _HARNESS_SOURCE)
        # Test runs happen in pre-made jails (services/lib/sandbox/warm.py): one kind per (limits, language, mode),
        # as many ready as there are slots.
        self._sandbox.enable_warm(
            launcher=install_readable(visible / "harness", LAUNCHER_SOURCE),
            slots_root=visible / "warm",
            harness=self._harness,
            per_kind=slots,
        )
        # Bounds the sandboxes running at once, across every concurrent execute() of this Executor.
        self._slots = FairSlots(slots)  # waiting tenants served in turn (services/kernel/fair.py)
        # Our own threads: a run blocks its thread for up to the wall limit, which must not starve the
        # loop's default executor (asyncio's getaddrinfo, other libraries).
        self._pool = ThreadPoolExecutor(max_workers=slots + 2, thread_name_prefix="tribunal-sandbox")
        self._inflight: dict[str, asyncio.Future[Build]] = {}
        # Published builds never change, so once seen they are remembered (bounded, least recently used).
        self._known_builds: OrderedDict[str, Build] = OrderedDict()
        self._toolchains: dict[str, Toolchain | None] = {}

    def close(self) -> None:
        """Release the worker threads (runs in progress finish first) and end the pre-made jails."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._sandbox.close()

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox

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
        if lang.id not in self._toolchains:
            self._toolchains[lang.id] = await self._in_thread(toolchain, lang.id)
        tools = self._toolchains[lang.id]
        if tools is None:
            return _failed(Verdict.IE, f"the {lang.id} toolchain is not available on this executor", len(tests))
        if lang.id == Language.PYTHON:
            # No separate syntax check: each test's launcher compiles the program before anything runs, and a
            # SyntaxError there is the attempt's CE (services/lib/sandbox/zygote.py).
            program = _Program(main=_PYTHON_MAIN, files={_PYTHON_MAIN: _encode(source_code)})
            compile_output, cached = "", False
            lease: BuildLease | None = None
        else:
            try:
                build, lease = await self._leased_build(lang, tools.key, source_code, tenant=tenant)
            except Exception as exc:
                log.exception("building a %s program failed", lang.id)
                return _failed(
                    Verdict.IE, f"internal error while compiling ({type(exc).__name__})", len(tests), tools.key
                )
            if build.status != "ok":
                verdict = Verdict.CE if build.status == "ce" else Verdict.IE
                return _failed(verdict, build.compile_output, len(tests), tools.key, build.cached)
            program = _Program(main=build.main, directory=build.program_dir)
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

    async def differential(
        self,
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
        checker: Checker = DEFAULT_CHECKER,
        limits: Limits = DEFAULT_LIMITS,
        test_positions: Sequence[Sequence[int]] | None = None,
    ) -> DifferentialResult:
        """Differential fuzzing of a (reference, candidate) pair, each program run as its tests are (`limits`: the
        problem's); `test_positions` marks, per repetition, the inputs that are the problem's own tests. See
        executor/differential.py. Raises ValueError for requests that cannot be executed."""
        return await _differential.differential(
            self,
            tenant=tenant,
            reference_language=reference_language,
            reference_source=reference_source,
            candidate_language=candidate_language,
            candidate_source=candidate_source,
            mode=mode,
            entry_point=entry_point,
            repetitions=repetitions,
            time_budget_s=time_budget_s,
            per_input_timeout_s=per_input_timeout_s,
            float_tolerance=float_tolerance,
            timeout_rule=timeout_rule,
            checker=checker,
            limits=limits,
            test_positions=test_positions,
        )

    # --- building -----------------------------------------------------------------------------------

    async def _leased_build(
        self, lang: LanguageSpec, toolchain_key: str, source: str, *, tenant: str
    ) -> tuple[Build, BuildLease | None]:
        """The build and, when it is a program, a lease that keeps any process from evicting it while it runs
        (release it after the last run). A build this process remembered, but another evicted since, is built
        again (once)."""
        for _ in range(2):
            build = await self._build(lang, toolchain_key, source, tenant=tenant)
            if build.status != "ok":
                return build, None
            lease = self._builds.acquire(build)
            if lease is not None:
                return build, lease
            self._known_builds.pop(build.key, None)
        raise RuntimeError("the build was evicted from the cache before it could run")

    async def _build(self, lang: LanguageSpec, toolchain_key: str, source: str, *, tenant: str) -> Build:
        """One compile per key (the tenant's) at a time: later callers wait for the first one's build."""
        key = self._builds.key(lang, toolchain_key, source, tenant=tenant)
        shared = self._inflight.get(key)
        if shared is not None:
            return replace(await asyncio.shield(shared), cached=True)
        task = asyncio.ensure_future(self._load_or_compile(lang, source, key, tenant))
        self._inflight[key] = task

        def forget(done: asyncio.Future[Build]) -> None:
            self._inflight.pop(key, None)
            if not done.cancelled():
                done.exception()  # retrieved, so an error seen only by cancelled waiters is not "lost"

        task.add_done_callback(forget)
        # Shielded: a cancelled execute must not abort a compile that others may be waiting for.
        return await asyncio.shield(task)

    async def _load_or_compile(self, lang: LanguageSpec, source: str, key: str, tenant: str) -> Build:
        known = self._known_builds.get(key)
        # Remembered, and still published (the cache evicts least recently used builds: this is a use).
        if known is not None and self._builds.touch(key):
            self._known_builds.move_to_end(key)
            return known
        build = await self._in_thread(self._builds.load, key)
        if build is None:
            async with self._slots:
                build = await self._jailed(self._builds.compile, lang, source, key, tenant=tenant)
            if not build.published:
                return build  # an internal error, or a compile aborted by a limit: try again next time
        self._known_builds[key] = replace(build, cached=True)
        if len(self._known_builds) > _KNOWN_BUILDS:
            self._known_builds.popitem(last=False)
        return build

    # --- running --------------------------------------------------------------------------------------

    async def _run_test(
        self,
        index: int,
        test: TestCase,
        lang: LanguageSpec,
        program: _Program,
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
                async with self._slots:
                    result = await self._jailed(
                        self._sandbox.run,
                        profile,
                        argv,
                        program_dir=program.directory,
                        program_files=program.files,
                        check_syntax=f"{JAIL_PROGRAM_DIR}/{program.main}" if program.files is not None else None,
                        stdin=stdin,
                        harness=self._harness if function_mode else None,
                        stdout_limit=output_limit,
                        stderr_limit=output_limit,
                        stderr_keep=STDERR_EXCERPT,
                        result_limit=harness.MAX_RESULT_BYTES + 65536,
                    )
                if result.syntax_error is not None:
                    return TestResult(index=index, status=Verdict.CE, public=test.public), result.syntax_error
                outcome = _decide(index, test, lang, result, limits, checker)
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

    async def _jailed(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking sandbox call in our threads; if we are cancelled, stop its jail."""
        control = RunControl()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, functools.partial(fn, *args, control=control, **kwargs))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            control.cancel()
            # Keep the caller's slot until the jail is gone, so `slots` really bounds running jails.
            await asyncio.wait([future], timeout=_CANCEL_WAIT_S)
            if future.done() and not future.cancelled():
                future.exception()
            raise

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args))


def jail_plan(lang: LanguageSpec, main: str, mode: Mode, limits: Limits) -> tuple[JailProfile, list[str]]:
    """The jail and the command of one test run. Differential fuzzing runs programs with exactly these
    (executor/differential.py), so that nothing a program can see tells a fuzzing run from a test run."""
    function_mode = mode == Mode.FUNCTION
    profile = JailProfile(
        cpu_time_s=limits.cpu_time_s,
        wall_time_s=limits.wall_time_s,
        memory_mb=limits.memory_mb,
        # Function mode: one more process, the harness's supervisor beside the candidate.
        processes=limits.processes + lang.extra_processes + int(function_mode),
        readonly_mounts=lang.extra_readonly_mounts,
        with_harness=function_mode,
        # Every test runs in a reusable jail (services/lib/sandbox/warm.py): the zygote forks the run into fresh
        # namespaces; a Python program runs in that fork of the warm interpreter, anything else is exec'd there.
        warm=True,
    )
    return profile, lang.run_argv(main=main, memory_mb=limits.memory_mb, function_mode=function_mode)


def _decide(
    index: int,
    test: TestCase,
    lang: LanguageSpec,
    result: RunResult,
    limits: Limits,
    checker: Checker,
) -> TestResult:
    """The verdict of one test, decided here in the executor from what the jail returned."""
    status, message = classify(
        result, cpu_time_s=limits.cpu_time_s, memory_mb=limits.memory_mb, output_limit=limits.output_kb * 1024
    )
    if status == "IE" and unjudged_reason(result, cpu_time_s=limits.cpu_time_s) is None:
        log.error("sandbox failure on test %d: %s\n%s", index, message, result.nsjail_log)
    # surrogateescape: invalid UTF-8 never equals valid expected text, so `exact` stays byte-exact.
    stdout = result.stdout.decode("utf-8", "surrogateescape")
    stderr = result.stderr_text
    if status == "OK":
        if result.result is not None:
            status, message = _decide_function_call(result, test, limits, checker)
        elif test.expected is None:
            status = "AC"
        else:
            reason = mismatch(checker.kind, test.expected, stdout, checker.abs_tol, checker.rel_tol)
            status, message = ("AC", "") if reason is None else ("WA", reason)
    if status in ("RE", "MLE") and not message.startswith(_HARNESS_PREFIXES):
        detail = _error_line(stderr, lang)
        message = f"{message}: {detail}" if detail else message
    return TestResult(
        index=index,
        status=Verdict(status),
        cpu_time_ms=round(result.cpu_s * 1000),
        wall_time_ms=round(result.wall_s * 1000),
        wait_time_ms=round(result.wait_s * 1000),
        stopped_by=result.stop,
        memory_kb=result.memory_kb,
        public=test.public,
        exit_code=result.exit_code,
        # What the program and the harness wrote is stored and answered: valid UTF-8 without NUL, within the caps
        # (cleaning never lengthens text). A candidate's exception text may hold lone surrogates (`'\udc80'`).
        stdout=clean_text(stdout[:STDOUT_EXCERPT].encode("utf-8", "surrogateescape")),
        stderr=clean_text(stderr),
        message=clean_text(message[:MESSAGE_CAP]),
    )


# Messages the harness already made specific; stderr's last line adds nothing to them.
_HARNESS_PREFIXES = ("the program ", "the function ")


def _decide_function_call(result: RunResult, test: TestCase, limits: Limits, checker: Checker) -> tuple[str, str]:
    """The verdict of a function-mode run whose supervisor ended normally, from what it wrote on the result
    channel. Only the supervisor writes there; the candidate's own claims reach us as data we compare here."""
    try:
        if result.result_overflow:
            raise ValueError("the result is too large")
        report = harness.loads_limited(result.result or b"")
        if not isinstance(report, dict) or not isinstance(report.get("status"), str):
            raise ValueError("no status")
    except ValueError:
        # Only a harness bug (or a harness killed mid-write, which classify() has already ruled out) gets here.
        log.error("unreadable function-mode result: %r", (result.result or b"")[:200])
        return "IE", "the harness's result could not be read"
    kind = report["status"]
    text = str(report.get("message", ""))
    # An argument test is decided here, from a value; a code test by its own code. Neither accepts the other's.
    if (kind == "value") != (test.code is None) and kind in ("value", "pass", "fail"):
        log.error("function-mode harness answered %r for a %s test", kind, "code" if test.code else "argument")
        return "IE", "internal error in the function-mode harness"
    if kind == "value":
        # Plain JSON data, converted from the candidate's encoded value inside the jail (harness.json_data).
        value = report.get("value")
        if values_equal(test.expected, value, checker.abs_tol, checker.rel_tol):
            return "AC", ""
        return "WA", f"expected {excerpt(test.expected)}, got {excerpt(value)}"
    if kind == "pass":
        return "AC", ""
    if kind in ("fail", "bad_value"):
        return "WA", text
    if kind == "memory":
        return "MLE", text or "MemoryError"
    if kind == "error":
        return "RE", text
    if kind == "died":
        # The candidate's process ended on its own: decide on that ending as if it were the whole run.
        ended = replace(
            result,
            exit_code=report.get("exit_code") if isinstance(report.get("exit_code"), int) else None,
            signal=report.get("signal") if isinstance(report.get("signal"), int) else None,
        )
        if ended.exit_code is None and ended.signal is None:
            ended.exit_code = -1
        status, message = classify(
            ended, cpu_time_s=limits.cpu_time_s, memory_mb=limits.memory_mb, output_limit=limits.output_kb * 1024
        )
        if status == "OK":  # exit(0) in the middle of a test is still no result
            return "RE", "the program ended its process during the test (exit code 0)"
        if status == "TLE" and ended.signal == signal.SIGKILL and ended.cpu_s < 0.9 * limits.cpu_time_s:
            # Unlike the jail's PID 1, the candidate's process can SIGKILL itself. (RLIMIT_CPU's SIGKILL comes
            # with CPU time at the limit, which wait4 may read a little under: hence the margin.)
            return "RE", "the program's process was killed by SIGKILL"
        if status == "RE" and ended.exit_code is not None:
            return "RE", f"the program ended its process during the test (exit code {ended.exit_code})"
        return status, message
    if kind == "bad_test":
        return "IE", text
    log.error("function-mode harness failure: %s", text)
    return "IE", "internal error in the function-mode harness"


@dataclass(frozen=True)
class _Program:
    """What a test runs: a published build's folder (linked into the jail), or files written for this run
    (Python, whose source is the program)."""

    main: str
    directory: Path | None = None
    files: dict[str, bytes] | None = None


def _encode(source: str) -> bytes:
    return source.encode("utf-8", "surrogatepass")


def _error_line(stderr: str, lang: LanguageSpec) -> str:
    """The line of stderr that says what went wrong (Python: the exception, Java: the uncaught one)."""
    # Lines end at "\n" only: str.splitlines() would also end one at U+0085 or U+2028 inside an exception's text.
    lines = [line.strip() for line in stderr.split("\n") if line.strip()]
    if not lines:
        return ""
    if lang.id == Language.JAVA:
        for line in lines:
            if line.startswith("Exception in thread"):
                return line.split(" ", 4)[-1] if line.count(" ") >= 4 else line
            if line.startswith(("Error:", "Caused by:")):
                return line
    if lang.id == Language.CPP:
        for position, line in enumerate(lines):
            if line.startswith("terminate called"):
                return " ".join(lines[position : position + 2])[:MESSAGE_CAP]
    return lines[-1][:MESSAGE_CAP]


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
