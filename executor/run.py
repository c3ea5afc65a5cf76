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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from executor.builds import Build, BuildCache
from executor.checkers import CHECKER_KINDS, CheckerKind, excerpt, mismatch, values_equal
from executor.harness import function_runner as harness
from executor.languages import LANGUAGE_IDS, Language, Toolchain, get_language, toolchain
from executor.sandbox import (
    INSIDE_ID,
    JailProfile,
    RunControl,
    RunResult,
    Sandbox,
    classify,
    default_nsjail_path,
    ensure_cgroup_parents,
    sandbox_visible_root,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

Mode = Literal["stdio", "function"]
VERDICTS = ("AC", "WA", "TLE", "MLE", "OLE", "RE", "CE", "IE")

STDOUT_EXCERPT = 64 * 1024
STDERR_EXCERPT = (16 * 1024, 16 * 1024)
MESSAGE_CAP = 300
# A cancelled execute keeps its slot until the jail it started is really gone (SIGTERM to nsjail).
_CANCEL_WAIT_S = 5.0
_HARNESS_SOURCE = Path(__file__).parent / "harness" / "function_runner.py"
_KNOWN_BUILDS = 4096


@dataclass(frozen=True)
class Limits:
    """Per-test resource limits. `processes` counts threads too (a pids cgroup)."""

    cpu_time_s: float = 2
    wall_time_s: float = 5
    memory_mb: int = 256
    output_kb: int = 1024
    processes: int = 32

    def __post_init__(self) -> None:
        for name in ("cpu_time_s", "wall_time_s", "memory_mb", "output_kb", "processes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"limits.{name} must be positive, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class CheckerSpec:
    """How stdout is compared with the expected output (see checkers.check); tolerances also apply to
    floats in function-mode return values."""

    kind: CheckerKind = "tokens"
    abs_tol: float = 1e-6
    rel_tol: float = 1e-6

    def __post_init__(self) -> None:
        if self.kind not in CHECKER_KINDS:
            raise ValueError(f"unknown checker kind {self.kind!r}; expected one of {', '.join(CHECKER_KINDS)}")
        if self.abs_tol < 0 or self.rel_tol < 0:
            raise ValueError("checker tolerances must not be negative")


@dataclass(frozen=True)
class TestCase:
    """One test.

    stdio mode: `input` is stdin text; `expected` the expected stdout (None: no check, the exit decides).
    function mode: either `input` = positional args and `expected` = the return value (JSON-equal, floats
    within the checker's tolerance; None means the function must return None), or `code` = test code
    defining check(candidate) that asserts (HumanEval/MBPP style).
    """

    __test__ = False  # not a pytest test class

    input: str | list[Any] | None = None
    expected: Any = None
    code: str | None = None
    public: bool = False


@dataclass
class TestOutcome:
    __test__ = False  # not a pytest test class

    index: int
    status: str
    time_ms: int
    memory_kb: int
    public: bool
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    message: str = ""


@dataclass
class ExecutionOutcome:
    verdict: str
    passed: int
    total: int
    compile_output: str
    tests: list[TestOutcome] = field(default_factory=list)
    toolchain: str = ""
    build_cached: bool = False


class Executor:
    """Compiles and runs programs in nsjail. One per process; safe to share between concurrent tasks."""

    def __init__(
        self,
        work_root: Path,
        slots: int = os.cpu_count() or 1,
        nsjail_path: Path | None = None,
        sandbox_uid: int = INSIDE_ID,
    ) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        work_root = Path(work_root).absolute()
        work_root.mkdir(parents=True, exist_ok=True)
        ensure_cgroup_parents()
        self.work_root = work_root
        visible = sandbox_visible_root(work_root)
        self._sandbox = Sandbox(nsjail_path or default_nsjail_path(), work_root / "jail", sandbox_uid)
        self._builds = BuildCache(visible / "builds", self._sandbox)
        self.builds_root = self._builds.root
        self._harness = _install_harness(visible / "harness")
        # Bounds the sandboxes running at once, across every concurrent execute() of this Executor.
        self._slots = asyncio.Semaphore(slots)
        # Our own threads: a run blocks its thread for up to the wall limit, which must not starve the
        # loop's default executor (asyncio's getaddrinfo, other libraries).
        self._pool = ThreadPoolExecutor(max_workers=slots + 2, thread_name_prefix="tribunal-sandbox")
        self._inflight: dict[str, asyncio.Future[Build]] = {}
        # Published builds never change, so once seen they are remembered (bounded, least recently used).
        self._known_builds: OrderedDict[str, Build] = OrderedDict()
        self._toolchains: dict[str, Toolchain | None] = {}

    def close(self) -> None:
        """Release the worker threads (runs in progress finish first)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def languages(self) -> list[dict[str, str]]:
        """The languages this machine runs, with versions read from the installed toolchains (cached after
        the first call, which runs the tools and may block for a fraction of a second)."""
        listed = []
        for language_id in LANGUAGE_IDS:
            tools = toolchain(language_id)
            if tools is None:
                continue
            listed.append(
                {
                    "id": language_id,
                    "name": get_language(language_id).name,
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
        mode: Mode = "stdio",
        entry_point: str | None = None,
        checker: CheckerSpec = CheckerSpec(),
        limits: Limits = Limits(),
    ) -> ExecutionOutcome:
        """Compile once (cached per tenant), run every test, and return the verdicts.

        `tenant` scopes the build cache: builds are never shared between tenants, so how fast a compile
        answers cannot tell one tenant what another submitted.

        Raises ValueError for requests that cannot be executed as given (unknown language, function mode
        outside Python, malformed tests); everything that goes wrong with the program is a verdict.
        """
        lang = get_language(language)
        tests = list(tests)
        _validate(lang, tests, mode, entry_point)
        if lang.id not in self._toolchains:
            self._toolchains[lang.id] = await self._in_thread(toolchain, lang.id)
        tools = self._toolchains[lang.id]
        if tools is None:
            return _failed("IE", f"the {lang.id} toolchain is not available on this executor", len(tests))
        try:
            build = await self._build(lang, tools.key, source_code, tenant=tenant)
        except Exception as exc:
            log.exception("building a %s program failed", lang.id)
            return _failed("IE", f"internal error while compiling ({type(exc).__name__})", len(tests), tools.key)
        if build.status != "ok":
            verdict = "CE" if build.status == "ce" else "IE"
            return _failed(verdict, build.compile_output, len(tests), tools.key, build.cached)
        outcomes = await asyncio.gather(
            *(
                self._run_test(index, test, lang, build, mode, entry_point, checker, limits)
                for index, test in enumerate(tests)
            )
        )
        verdict = next((o.status for o in outcomes if o.status != "AC"), "AC")
        return ExecutionOutcome(
            verdict=verdict,
            passed=sum(o.status == "AC" for o in outcomes),
            total=len(outcomes),
            compile_output=build.compile_output,
            tests=list(outcomes),
            toolchain=tools.key,
            build_cached=build.cached,
        )

    # --- building -----------------------------------------------------------------------------------

    async def _build(self, lang: Language, toolchain_key: str, source: str, *, tenant: str) -> Build:
        """One compile per key (the tenant's) at a time: later callers wait for the first one's build."""
        key = self._builds.key(lang, toolchain_key, source, tenant=tenant)
        shared = self._inflight.get(key)
        if shared is not None:
            return replace(await asyncio.shield(shared), cached=True)
        task = asyncio.ensure_future(self._load_or_compile(lang, source, key))
        self._inflight[key] = task

        def forget(done: asyncio.Future[Build]) -> None:
            self._inflight.pop(key, None)
            if not done.cancelled():
                done.exception()  # retrieved, so an error seen only by cancelled waiters is not "lost"

        task.add_done_callback(forget)
        # Shielded: a cancelled execute must not abort a compile that others may be waiting for.
        return await asyncio.shield(task)

    async def _load_or_compile(self, lang: Language, source: str, key: str) -> Build:
        known = self._known_builds.get(key)
        if known is not None:
            self._known_builds.move_to_end(key)
            return known
        build = await self._in_thread(self._builds.load, key)
        if build is None:
            async with self._slots:
                build = await self._jailed(self._builds.compile, lang, source, key)
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
        lang: Language,
        build: Build,
        mode: Mode,
        entry_point: str | None,
        checker: CheckerSpec,
        limits: Limits,
    ) -> TestOutcome:
        try:
            function_mode = mode == "function"
            if function_mode:
                request: dict[str, Any] = {"entry_point": entry_point}
                if test.code is not None:
                    request["code"] = test.code
                else:
                    request["args"] = list(test.input or [])
                stdin = json.dumps(request).encode("utf-8", "surrogatepass")
            else:
                stdin = str(test.input or "").encode("utf-8", "surrogatepass")
            profile = JailProfile(
                cpu_time_s=limits.cpu_time_s,
                wall_time_s=limits.wall_time_s,
                memory_mb=limits.memory_mb,
                # Function mode: one more process, the harness's supervisor beside the candidate.
                processes=limits.processes + lang.extra_processes + int(function_mode),
                readonly_mounts=lang.extra_readonly_mounts,
                with_harness=function_mode,
            )
            argv = lang.run_argv(main=build.main, memory_mb=limits.memory_mb, function_mode=function_mode)
            output_limit = limits.output_kb * 1024
            async with self._slots:
                result = await self._jailed(
                    self._sandbox.run,
                    profile,
                    argv,
                    program_dir=build.program_dir,
                    stdin=stdin,
                    harness=self._harness if function_mode else None,
                    stdout_limit=output_limit,
                    stderr_limit=output_limit,
                    stderr_keep=STDERR_EXCERPT,
                    result_limit=harness.MAX_RESULT_BYTES + 65536,
                )
            return _judge(index, test, lang, result, limits, checker)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("test %d failed inside the executor", index)
            return TestOutcome(index, "IE", 0, 0, test.public, message=f"internal error ({type(exc).__name__})")

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


def _judge(
    index: int,
    test: TestCase,
    lang: Language,
    result: RunResult,
    limits: Limits,
    checker: CheckerSpec,
) -> TestOutcome:
    status, message = classify(
        result, cpu_time_s=limits.cpu_time_s, memory_mb=limits.memory_mb, output_limit=limits.output_kb * 1024
    )
    if status == "IE":
        log.error("sandbox failure on test %d: %s\n%s", index, message, result.nsjail_log)
    # surrogateescape: invalid UTF-8 never equals valid expected text, so `exact` stays byte-exact.
    stdout = result.stdout.decode("utf-8", "surrogateescape")
    stderr = result.stderr_text
    if status == "OK":
        if result.result is not None:
            status, message = _judge_harness(result, test, limits, checker)
        elif test.expected is None:
            status = "AC"
        else:
            reason = mismatch(checker.kind, test.expected, stdout, checker.abs_tol, checker.rel_tol)
            status, message = ("AC", "") if reason is None else ("WA", reason)
    if status in ("RE", "MLE") and not message.startswith(_HARNESS_PREFIXES):
        detail = _error_line(stderr, lang)
        message = f"{message}: {detail}" if detail else message
    return TestOutcome(
        index=index,
        status=status,
        time_ms=round(result.cpu_s * 1000),
        memory_kb=result.memory_kb,
        public=test.public,
        exit_code=result.exit_code,
        stdout=stdout[:STDOUT_EXCERPT].encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
        stderr=stderr,
        message=message[:MESSAGE_CAP],
    )


# Messages the harness already made specific; stderr's last line adds nothing to them.
_HARNESS_PREFIXES = ("the program ", "the function ")


def _judge_harness(result: RunResult, test: TestCase, limits: Limits, checker: CheckerSpec) -> tuple[str, str]:
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
        # The candidate's process ended on its own: judge that ending as if it were the whole run.
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


def _error_line(stderr: str, lang: Language) -> str:
    """The line of stderr that says what went wrong (Python: the exception, Java: the uncaught one)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return ""
    if lang.id == "java":
        for line in lines:
            if line.startswith("Exception in thread"):
                return line.split(" ", 4)[-1] if line.count(" ") >= 4 else line
            if line.startswith(("Error:", "Caused by:")):
                return line
    if lang.id == "cpp":
        for position, line in enumerate(lines):
            if line.startswith("terminate called"):
                return " ".join(lines[position : position + 2])[:MESSAGE_CAP]
    return lines[-1][:MESSAGE_CAP]


def _failed(verdict: str, output: str, total: int, toolchain_key: str = "", cached: bool = False) -> ExecutionOutcome:
    return ExecutionOutcome(
        verdict=verdict,
        passed=0,
        total=total,
        compile_output=output,
        tests=[],
        toolchain=toolchain_key,
        build_cached=cached,
    )


def _validate(lang: Language, tests: list[TestCase], mode: str, entry_point: str | None) -> None:
    if mode not in ("stdio", "function"):
        raise ValueError(f"unknown mode {mode!r}")
    if mode == "function":
        if lang.id != "python":
            raise ValueError("function mode is available for Python only")
        if not entry_point or not entry_point.isidentifier():
            raise ValueError("function mode needs entry_point, a Python identifier")
    for index, test in enumerate(tests):
        if mode == "stdio":
            if test.code is not None:
                raise ValueError(f"tests[{index}]: test code is for function mode")
            if test.input is not None and not isinstance(test.input, str):
                raise ValueError(f"tests[{index}]: stdio input must be text")
            if test.expected is not None and not isinstance(test.expected, str):
                raise ValueError(f"tests[{index}]: stdio expected output must be text")
        elif test.code is None and test.input is not None and not isinstance(test.input, list | tuple):
            raise ValueError(f"tests[{index}]: function-mode input must be a list of positional arguments")


def _install_harness(directory: Path) -> Path:
    """A copy of the harness in the staging directory, which is known to be reachable from inside the jail
    (the package itself may live under a directory the sandbox user cannot search)."""
    directory.mkdir(exist_ok=True)
    directory.chmod(0o755)
    target = directory / _HARNESS_SOURCE.name
    content = _HARNESS_SOURCE.read_bytes()
    if not target.exists() or target.read_bytes() != content:
        temp = directory / f".{target.name}.{os.getpid()}"
        temp.write_bytes(content)
        temp.chmod(0o644)
        os.replace(temp, target)
    return target
