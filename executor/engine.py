"""The executor's engine: what the test runner (executor/run.py) and differential fuzzing (executor/differential/)
share, through public methods only.

- the sandbox, with its pre-made jails (services/lib/sandbox/warm.py), and the threads jailed runs block in;
- the slots: how many jails run at once, across every caller of this engine (waiting tenants served in turn);
- the toolchains found on this machine;
- builds: one compile per (tenant, source) at a time, remembered, and leased while their runs go on;
- one jailed run: a program (`Program`) in the jail and with the command of a test run (`jail_plan`), in a slot.

Both users run a program exactly the same way, so that nothing a program can see tells a fuzzing run from a test
run (docs/similarity.md).
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from executor.builds import Build, BuildCache, BuildLease, BuildLimits
from executor.languages import LanguageSpec, Toolchain, toolchain
from services.kernel.contracts import Limits, Mode
from services.kernel.fair import FairSlots
from services.lib.sandbox import (
    INSIDE_ID,
    JAIL_PROGRAM_DIR,
    ZYGOTE_SOURCE,
    JailProfile,
    RunControl,
    RunResult,
    Sandbox,
    default_nsjail_path,
    ensure_cgroup_parents,
    install_readable,
    sandbox_visible_root,
)

T = TypeVar("T")

# A cancelled run keeps its slot until the jail it started is really gone (SIGTERM to nsjail).
CANCEL_WAIT_S = 5.0
HARNESS_SOURCE = Path(__file__).parent / "harness" / "function_runner.py"
# The Python program's path inside a run's jail, and the file its syntax is checked as.
PYTHON_MAIN = "main.py"
# Published builds this process remembers (least recently used forgotten first).
KNOWN_BUILDS = 4096


@dataclass(frozen=True)
class Program:
    """What a run runs: a published build's folder (linked into the jail), or files written for this run
    (Python, whose source is the program)."""

    main: str
    directory: Path | None = None
    files: dict[str, bytes] | None = None

    @classmethod
    def python(cls, source: str) -> Program:
        """A Python program: its source is its one file, checked for syntax in the jail before it runs."""
        return cls(main=PYTHON_MAIN, files={PYTHON_MAIN: encode_source(source)})

    @classmethod
    def built(cls, build: Build) -> Program:
        return cls(main=build.main, directory=build.program_dir)


def encode_source(source: str) -> bytes:
    """A program's source as the bytes of its file (lone surrogates kept, as the request had them)."""
    return source.encode("utf-8", "surrogatepass")


def jail_plan(lang: LanguageSpec, main: str, mode: Mode, limits: Limits) -> tuple[JailProfile, list[str]]:
    """The jail and the command of one test run. Differential fuzzing runs programs with exactly these, so that
    nothing a program can see tells a fuzzing run from a test run."""
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


class Engine:
    """Sandbox, slots, toolchains and builds of one process; safe to share between concurrent tasks."""

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
        self._harness = install_readable(visible / "harness", HARNESS_SOURCE)
        # Runs happen in pre-made jails (services/lib/sandbox/warm.py): one kind per (limits, language, mode), as
        # many ready as there are slots.
        self._sandbox.enable_warm(
            zygote=install_readable(visible / "harness", ZYGOTE_SOURCE),
            slots_root=visible / "warm",
            harness=self._harness,
            per_kind=slots,
        )
        # Bounds the sandboxes running at once, across every concurrent caller of this engine.
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

    @property
    def builds(self) -> BuildCache:
        return self._builds

    @property
    def builds_root(self) -> Path:
        return self._builds.root

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in the engine's threads: blocking work (seconds of CPU) off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args))

    async def toolchain(self, lang: LanguageSpec) -> Toolchain | None:
        """The language's toolchain on this machine (None: not installed), looked up once."""
        if lang.id not in self._toolchains:
            self._toolchains[lang.id] = await self.in_thread(toolchain, lang.id)
        return self._toolchains[lang.id]

    # --- building -----------------------------------------------------------------------------------

    async def leased_build(
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
        # Shielded: a cancelled caller must not abort a compile that others may be waiting for.
        return await asyncio.shield(task)

    async def _load_or_compile(self, lang: LanguageSpec, source: str, key: str, tenant: str) -> Build:
        known = self._known_builds.get(key)
        # Remembered, and still published (the cache evicts least recently used builds: this is a use).
        if known is not None and self._builds.touch(key):
            self._known_builds.move_to_end(key)
            return known
        build = await self.in_thread(self._builds.load, key)
        if build is None:
            async with self._slots:
                build = await self._jailed(self._builds.compile, lang, source, key, tenant=tenant)
            if not build.published:
                return build  # an internal error, or a compile aborted by a limit: try again next time
        self._known_builds[key] = replace(build, cached=True)
        if len(self._known_builds) > KNOWN_BUILDS:
            self._known_builds.popitem(last=False)
        return build

    # --- running --------------------------------------------------------------------------------------

    async def run(
        self,
        profile: JailProfile,
        argv: list[str],
        program: Program,
        stdin: bytes,
        *,
        output_limit: int,
        stdout_keep: int | None = None,
        stderr_keep: tuple[int, int],
        result_limit: int,
    ) -> RunResult:
        """One jailed run in one of the engine's slots: the program's files (checked for syntax first) or its
        build, `stdin`, the harness when the profile has one; stdout and stderr each bounded by `output_limit`,
        kept up to `stdout_keep` (all: None) and `stderr_keep` (head, tail). Cancelling it stops the jail."""
        async with self._slots:
            return await self._jailed(
                self._sandbox.run,
                profile,
                argv,
                program_dir=program.directory,
                program_files=program.files,
                check_syntax=f"{JAIL_PROGRAM_DIR}/{program.main}" if program.files is not None else None,
                stdin=stdin,
                harness=self._harness if profile.with_harness else None,
                stdout_limit=output_limit,
                stderr_limit=output_limit,
                stdout_keep=stdout_keep,
                stderr_keep=stderr_keep,
                result_limit=result_limit,
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
            await asyncio.wait([future], timeout=CANCEL_WAIT_S)
            if future.done() and not future.cancelled():
                future.exception()
            raise
