"""Build cache: compile each (tenant, language, toolchain, source) once, inside the sandbox, and publish the
build atomically so that concurrent executes of the same source by one tenant share it.

Layout under the cache root (everything the host reads was written by the host, except the program files,
which are only ever opened with O_NOFOLLOW and checked to be regular files):

    <key>/meta.json      compile status, output, main class, the build's size and owner (written by the host);
                         its mtime is the build's last use, and a shared flock on it marks the build in use
    <key>/src/<file>     the source (written by the host; the program itself for Python)
    <key>/prog/          compiler output (compiled languages; bound read-write into the compile jail only)
    .tmp/<key>.<rand>/   a build in progress, renamed to <key>/ when complete
    .trash/<key>.<rand>/ an evicted build, renamed out of the way (atomic) and then removed
    .lock                held (flock) while a process makes room for a build and publishes it

Bounds: a compiled program is at most `max_build_bytes` (all the files the compiler wrote; larger is a CE and
nothing is kept; a watchdog stops a compiler that writes more while it runs), the compiler's output kept is at
most COMPILE_OUTPUT_STORED characters, and the cache holds at most `cache_bytes`, each tenant at most
`tenant_bytes` of it: publishing a build first evicts its tenant's least recently used builds past the tenant's
budget, then everyone's least recently used past the whole budget. A build in use (leased) is never evicted.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import logging
import os
import secrets
import shutil
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from executor.languages import LanguageSpec, java_main_class
from services.kernel import telemetry
from services.kernel.contracts import Language, Verdict
from services.kernel.settings import get_settings
from services.lib.sandbox import JailProfile, RunControl, Sandbox, classify, printable

log = logging.getLogger(__name__)

# Compilers are untrusted input's first reader: they run jailed, with limits of their own.
COMPILE_CPU_S = 10.0
COMPILE_WALL_S = 20.0
COMPILE_MEMORY_MB = 1024
COMPILE_PROCESSES = 64
COMPILE_OUTPUT_LIMIT = 1024 * 1024
COMPILE_FILE_SIZE_MB = 64
COMPILE_TMPFS_MB = 256
COMPILE_OUTPUT_KEEP = (48 * 1024, 16 * 1024)
# What is stored (meta.json) and answered of the compiler's output, head and tail, in characters.
COMPILE_OUTPUT_STORED = (48 * 1024, 16 * 1024)
# How often the watchdog measures what a running compiler has written into the build's folder.
COMPILE_WATCH_INTERVAL_S = 0.02

MIB = 1024 * 1024

# Bounds on what the host will walk in a compiler's output directory.
_MAX_BUILD_ENTRIES = 10_000
_MAX_BUILD_DEPTH = 32
_MAX_CLASS_FILE = 16 * 1024 * 1024
_STALE_TEMP_S = 3600
# A publish waits at most this long for another process's publish (a scan and a few renames) to finish.
_PUBLISH_LOCK_WAIT_S = 30.0

BuildStatus = Literal["ok", "ce", "ie"]


@dataclass(frozen=True)
class Build:
    """A compiled (or syntax-checked) program, ready to run."""

    key: str
    language: str
    status: BuildStatus
    compile_output: str
    # Host folder mounted read-only at /prog in every run.
    program_dir: Path
    # What run_argv needs: the Python file, the Java main class, "main" for C and C++.
    main: str
    cached: bool
    # False when the build was not stored (an internal error, or a compile stopped by a limit).
    published: bool = True


@dataclass(frozen=True)
class BuildLimits:
    """The build cache's bounds, in bytes (services/kernel/settings.py: TRIBUNAL_MAX_BUILD_MB,
    TRIBUNAL_BUILD_CACHE_MB, TRIBUNAL_BUILD_CACHE_TENANT_MB)."""

    # A compiled program: every file the compiler wrote, summed.
    max_build_bytes: int = 16 * MIB
    # Every published build (program, source and meta.json, as allocated on disk).
    cache_bytes: int = 2048 * MIB
    # One tenant's share of cache_bytes.
    tenant_bytes: int = 512 * MIB

    @classmethod
    def from_settings(cls) -> BuildLimits:
        settings = get_settings()
        return cls(
            max_build_bytes=settings.max_build_mb * MIB,
            cache_bytes=settings.build_cache_mb * MIB,
            tenant_bytes=settings.build_cache_tenant_mb * MIB,
        )


class BuildLease:
    """A published build held in use: a shared flock on its meta.json, so no process evicts it, until release."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> BuildLease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class UnsafeBuildError(Exception):
    """The compiler's output contains something other than regular files and directories."""


class BuildCache:
    """Compiles into a temp folder and renames it into place; a finished build is never modified."""

    def __init__(self, root: Path, sandbox: Sandbox, limits: BuildLimits | None = None) -> None:
        self.root = root
        self.sandbox = sandbox
        self.limits = limits or BuildLimits()
        self._temp = root / ".tmp"
        self._trash = root / ".trash"
        for directory in (self._temp, self._trash):
            directory.mkdir(parents=True, exist_ok=True)
        for directory in (root, self._temp, self._trash):
            directory.chmod(0o711)
        # What never changes about a published build: its tenant (a digest) and size, by key.
        self._facts: dict[str, tuple[str, int]] = {}
        self._remove_stale_temps()
        self._empty_trash()

    def key(self, language: LanguageSpec, toolchain_key: str, source: str, *, tenant: str) -> str:
        """(tenant, language, toolchain, compile command, sha256 of the source): any of them changing is a new
        build. The tenant is part of it so that a cache hit (a fast answer) never tells one tenant that another
        compiled the same source."""
        digest = hashlib.sha256()
        argv = language.compile_argv(language.source_name(source))
        digest.update(json.dumps([tenant, language.id, toolchain_key, argv]).encode())
        digest.update(b"\0")
        digest.update(_encode(source))
        return f"{language.id}-{digest.hexdigest()}"

    def load(self, key: str) -> Build | None:
        """The published build for `key`, or None. Counts as a use (least recently used builds go first)."""
        try:
            fd = os.open(self.root / key / "meta.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as meta_file:
            with contextlib.suppress(OSError):
                os.utime(meta_file.fileno())
            meta = json.loads(meta_file.read())
        return Build(
            key=key,
            language=meta["language"],
            status=meta["status"],
            compile_output=meta["compile_output"],
            program_dir=self.root / key / meta["program_dir"],
            main=meta["main"],
            cached=True,
        )

    def touch(self, key: str) -> bool:
        """Mark a published build as just used; False if it is no longer published (evicted)."""
        try:
            os.utime(self.root / key / "meta.json", follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def acquire(self, build: Build) -> BuildLease | None:
        """Hold a published build in use (and mark it used) until the lease is released: no process evicts it
        meanwhile. None if it is no longer published, or is being evicted this instant (compile it again).

        Never blocks: a shared flock only waits for an evicting process's exclusive one, which is held for a
        rename, and then the build is gone anyway.
        """
        path = self.root / build.key / "meta.json"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            # Evicted (renamed away, perhaps published again) between the open and the lock: not this build.
            if os.stat(path, follow_symlinks=False).st_ino != os.fstat(fd).st_ino:
                raise FileNotFoundError(path)
            os.utime(fd)
        except (BlockingIOError, FileNotFoundError):
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return BuildLease(fd)

    def usage(self) -> dict[str, int]:
        """Bytes of published builds by tenant digest (tenant_digest(tenant)): for tests and telemetry."""
        totals: dict[str, int] = {}
        with self._publish_lock():
            entries = self._scan()
        for tenant, size, _ in entries.values():
            totals[tenant] = totals.get(tenant, 0) + size
        return totals

    def compile(
        self,
        language: LanguageSpec,
        source: str,
        key: str,
        control: RunControl | None = None,
        *,
        tenant: str,
    ) -> Build:
        """Compile in the sandbox and publish the build (blocking: call from a worker thread). `tenant` is the
        one `key` was made for: the build counts against that tenant's budget."""
        temp = self._temp / f"{key}.{secrets.token_hex(8)}"
        # Ours when the caller has none: the size watchdog stops the compile through it.
        control = control or RunControl()
        try:
            started = time.perf_counter()
            outcome = self._compile_into(temp, language, source, key, control)
            telemetry.sandbox_duration.labels(language.id, "compile").observe(time.perf_counter() - started)
            build = Build(
                key=key,
                language=language.id,
                status=outcome.status,
                compile_output=outcome.compile_output,
                program_dir=self.root / key / outcome.program_dir_name,
                main=outcome.main,
                cached=False,
            )
            if not outcome.cacheable or control.cancelled:
                return replace(build, published=False)
            return self._publish(temp, build, tenant_digest(tenant))
        finally:
            if temp.exists():
                shutil.rmtree(temp, ignore_errors=True)

    def _compile_into(self, temp: Path, language: LanguageSpec, source: str, key: str, control: RunControl) -> _Outcome:
        source_name = language.source_name(source)
        temp.mkdir(mode=0o755)
        temp.chmod(0o755)
        source_dir = temp / "src"
        source_dir.mkdir()
        source_dir.chmod(0o755)
        fd = os.open(
            source_dir / source_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
        with os.fdopen(fd, "wb") as source_file:
            source_file.write(_encode(source))
        os.chmod(source_dir / source_name, 0o644)

        if language.compiled:
            program_dir = temp / "prog"
            program_dir.mkdir()
            # Writable by the jailed compiler (and nobody else) only while it runs.
            os.chown(program_dir, self.sandbox.sandbox_uid, self.sandbox.sandbox_uid)
            program_dir.chmod(0o755)
        else:
            program_dir = source_dir
        profile = JailProfile(
            cpu_time_s=COMPILE_CPU_S,
            wall_time_s=COMPILE_WALL_S,
            memory_mb=COMPILE_MEMORY_MB,
            processes=COMPILE_PROCESSES + language.extra_processes,
            # One file may pass the cap (then its size is reported); the watchdog bounds them all together.
            file_size_mb=max(COMPILE_FILE_SIZE_MB, -(-self.limits.max_build_bytes // MIB) + 1),
            tmpfs_mb=COMPILE_TMPFS_MB,
            writable_program_dir=language.compiled,
            with_source_dir=language.compiled,
            readonly_mounts=language.extra_readonly_mounts,
            # No /dev/zero or /dev/urandom: `#include "/dev/zero"` should fail at once, not fill memory.
            devices=("/dev/null",),
        )
        # prog/ is on the host's disk: what the compiler writes there is measured while it runs, and the
        # compile stopped as soon as it passes the cap (RLIMIT_FSIZE bounds one file, not how many).
        watch = _SizeWatch(program_dir, self.limits.max_build_bytes, control) if language.compiled else None
        try:
            result = self.sandbox.run(
                profile,
                language.compile_argv(source_name),
                program_dir=program_dir,
                source_dir=source_dir if language.compiled else None,
                stdout_limit=COMPILE_OUTPUT_LIMIT,
                stderr_limit=COMPILE_OUTPUT_LIMIT,
                stdout_keep=COMPILE_OUTPUT_KEEP[0],
                stderr_keep=COMPILE_OUTPUT_KEEP,
                control=control,
            )
        finally:
            if watch is not None:
                watch.stop()
        # The compiler's diagnostics, as the jail saw them (only /usr, /src and /prog exist there), with control
        # characters removed: what a `#line 1 "\x01"` directive puts in a file name does not reach a response.
        output = _clip(printable((result.stdout.decode("utf-8", "replace") + result.stderr_text).strip()))
        make = functools.partial(_Outcome, program_dir_name=program_dir.name)
        if watch is not None:
            try:
                written = watch.written if watch.tripped else _tree_size(program_dir)
                if watch.unusable is not None:
                    raise UnsafeBuildError(watch.unusable)
            except UnsafeBuildError as exc:
                shutil.rmtree(program_dir)
                return make("ce", _join(f"compilation produced an unusable program: {exc}", output), "")
            if written > self.limits.max_build_bytes:
                # Whatever else happened: nothing of it is kept, and it is not cached (the next attempt compiles
                # again, as after any limit), so the disk only ever holds it for the moment it takes to remove.
                shutil.rmtree(program_dir)
                limit = f"more than the {_size(self.limits.max_build_bytes)} limit for a compiled program"
                if watch.tripped:
                    message = f"the compiler wrote {limit} (it had written {_size(written)} when it was stopped)"
                else:
                    message = f"the compiled program is {_size(written)}, {limit}"
                return make("ce", _join(message, output), "", cacheable=False)
        status, reason = classify(
            result,
            cpu_time_s=COMPILE_CPU_S,
            memory_mb=COMPILE_MEMORY_MB,
            output_limit=COMPILE_OUTPUT_LIMIT,
            runtime_messages=False,
        )
        if status == "IE":
            log.error("compile of %s failed in the sandbox: %s\n%s", key, reason, result.nsjail_log)
            return make("ie", reason, "", cacheable=False)
        if status == "RE":
            # The compiler rejected the program: an ordinary, cacheable compilation error.
            if language.compiled:
                shutil.rmtree(program_dir)
            return make("ce", output or f"compilation failed ({reason})", "")
        if status != "OK":
            # Limits hit while compiling are compile errors too, but host load can cause them: not cached. An
            # output flood is the source's doing alone (thousands of errors): cached, output clipped.
            if language.compiled:
                shutil.rmtree(program_dir)
            aborted = _join(f"compilation aborted: {reason}", output)
            return make("ce", aborted, "", cacheable=status == Verdict.OLE)

        if not language.compiled:
            return make("ok", output, source_name)
        try:
            main = self._secure_output(program_dir, language, source_name)
        except UnsafeBuildError as exc:
            shutil.rmtree(program_dir)
            return make("ce", _join(f"compilation produced an unusable program: {exc}", output), "")
        return make("ok", output, main)

    def _secure_output(self, program_dir: Path, language: LanguageSpec, source_name: str) -> str:
        """Take the compiler's output away from the sandbox uid and find what to run.

        Every entry is opened with O_NOFOLLOW (a planted symlink fails to open instead of being followed)
        and must be a regular file or a directory; ownership goes back to root, modes to 0755/0644. The jail
        has exited, so nothing changes underneath.
        """
        main_classes: list[str] = []
        has_main_binary = False
        entries = 0
        root_fd = os.open(program_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        stack: list[tuple[int, int]] = [(root_fd, 0)]
        try:
            while stack:
                dir_fd, depth = stack.pop()
                try:
                    for name in os.listdir(dir_fd):
                        entries += 1
                        if entries > _MAX_BUILD_ENTRIES:
                            raise UnsafeBuildError(f"more than {_MAX_BUILD_ENTRIES} files")
                        try:
                            fd = os.open(
                                name,
                                os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                dir_fd=dir_fd,
                            )
                        except OSError as exc:
                            if exc.errno == errno.ELOOP:
                                raise UnsafeBuildError(f"{name!r} is a symbolic link") from None
                            raise UnsafeBuildError(f"cannot open {name!r}: {exc.strerror}") from None
                        info = os.fstat(fd)
                        if stat.S_ISDIR(info.st_mode):
                            if depth + 1 > _MAX_BUILD_DEPTH:
                                os.close(fd)
                                raise UnsafeBuildError("directories nested too deep")
                            os.fchown(fd, 0, 0)
                            os.fchmod(fd, 0o755)
                            stack.append((fd, depth + 1))
                            continue
                        try:
                            if not stat.S_ISREG(info.st_mode):
                                raise UnsafeBuildError(f"{name!r} is not a regular file")
                            os.fchown(fd, 0, 0)
                            os.fchmod(fd, 0o755 if info.st_mode & 0o111 else 0o644)
                            if depth == 0 and name == "main":
                                has_main_binary = True
                            if language.id == Language.JAVA and name.endswith(".class"):
                                if info.st_size > _MAX_CLASS_FILE:
                                    raise UnsafeBuildError(f"{name!r} is too large")
                                with os.fdopen(os.dup(fd), "rb") as class_file:
                                    found = java_main_class(class_file.read(_MAX_CLASS_FILE))
                                if found:
                                    main_classes.append(found)
                        finally:
                            os.close(fd)
                finally:
                    os.close(dir_fd)
        finally:
            for dir_fd, _ in stack:
                os.close(dir_fd)
        os.chown(program_dir, 0, 0)
        program_dir.chmod(0o755)

        if language.id != Language.JAVA:
            if not has_main_binary:
                raise UnsafeBuildError("the compiler wrote no executable")
            return "main"
        if not main_classes:
            raise UnsafeBuildError("no class has `public static void main(String[] args)`")
        return _pick_main_class(main_classes, source_name.removesuffix(".java"))

    def _publish(self, temp: Path, build: Build, tenant: str) -> Build:
        """Make room (eviction), then rename the finished build into place; if another process won the race,
        use theirs. One process at a time does both (the root's .lock), so the budgets hold across processes."""
        meta: dict[str, str | int | float] = {
            "language": build.language,
            "status": build.status,
            "compile_output": build.compile_output,
            "program_dir": build.program_dir.name,
            "main": build.main,
            "created": time.time(),
            "tenant": tenant,
        }
        # The size counts meta.json too, in whole blocks (the size's own digits are in the spare 64 bytes).
        size = _disk_usage(temp) + -(-(len(json.dumps(meta)) + 64) // _BLOCK) * _BLOCK
        meta["bytes"] = size
        fd = os.open(temp / "meta.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w") as meta_file:
            json.dump(meta, meta_file)
        final = self.root / build.key
        evicted: list[Path] = []
        try:
            with self._publish_lock():
                if not os.path.lexists(final):
                    evicted = self._make_room(tenant, size)
                try:
                    os.rename(temp, final)
                except OSError as exc:
                    if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                        raise
                    published = self.load(build.key)
                    if published is None:
                        raise
                    return replace(published, cached=False)
                self._facts[build.key] = (tenant, size)
        finally:
            for path in evicted:
                shutil.rmtree(path, ignore_errors=True)
        return build

    @contextlib.contextmanager
    def _publish_lock(self) -> Iterator[None]:
        """The root's .lock, exclusively: threads of this process too (each opens its own description)."""
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            deadline = time.monotonic() + _PUBLISH_LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError("another process holds the build cache's lock") from None
                    time.sleep(0.005)
            yield
        finally:
            os.close(fd)

    def _make_room(self, tenant: str, size: int) -> list[Path]:
        """Evict (rename into .trash) least recently used builds: the tenant's own until the tenant fits its
        budget with `size` more, then anyone's until the cache does. Builds in use are skipped; if that leaves
        a budget exceeded, the build is published anyway (it is needed now) and the next publish tries again.
        Returns the renamed folders, for the caller to remove outside the lock."""
        entries = self._scan()
        evicted: list[Path] = []

        def evict_until(candidates: list[str], over: int) -> int:
            for key in sorted(candidates, key=lambda k: entries[k][2]):
                if over <= 0:
                    break
                gone = self._evict(key, entries[key][2])
                if gone is not None:
                    over -= entries.pop(key)[1]
                    evicted.append(gone)
            return over

        own = [key for key, (owner, _, _) in entries.items() if owner == tenant]
        evict_until(own, sum(entries[key][1] for key in own) + size - self.limits.tenant_bytes)
        over = evict_until(list(entries), sum(e[1] for e in entries.values()) + size - self.limits.cache_bytes)
        if over > 0:
            log.warning("the build cache is %d bytes over its budget: the rest is in use", over)
        telemetry.build_cache_evictions.inc(len(evicted))
        telemetry.build_cache_bytes.set(sum(e[1] for e in entries.values()) + size)
        return evicted

    def _scan(self) -> dict[str, tuple[str, int, float]]:
        """Every published build: (tenant, bytes, last use). Sizes and tenants are read once per key."""
        entries: dict[str, tuple[str, int, float]] = {}
        for entry in os.scandir(self.root):
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                used = os.stat(os.path.join(entry.path, "meta.json"), follow_symlinks=False).st_mtime
                facts = self._facts.get(entry.name)
                if facts is None:
                    facts = self._facts[entry.name] = self._read_facts(Path(entry.path))
            except (OSError, ValueError):
                continue  # evicted meanwhile, or half-written by a process that died: the next scan sees
            entries[entry.name] = (*facts, used)
        for key in self._facts.keys() - entries.keys():
            del self._facts[key]
        return entries

    def _read_facts(self, path: Path) -> tuple[str, int]:
        fd = os.open(path / "meta.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as meta_file:
            meta = json.loads(meta_file.read())
        # A build published before sizes were recorded: measured, and nobody's.
        return str(meta.get("tenant", "")), int(meta["bytes"]) if "bytes" in meta else _disk_usage(path)

    def _evict(self, key: str, used: float) -> Path | None:
        """Rename a build into .trash unless it is in use (a lease's shared flock) or was used since the scan;
        the rename is atomic, so a reader finds the whole build or none. The renamed path, or None if kept."""
        path = self.root / key
        try:
            fd = os.open(path / "meta.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None  # gone already
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None
            if os.fstat(fd).st_mtime != used:
                return None  # used since the scan
            gone = self._trash / f"{key}.{secrets.token_hex(8)}"
            os.rename(path, gone)
            return gone
        finally:
            os.close(fd)

    def _empty_trash(self) -> None:
        """Evicted builds a process renamed away but died before removing."""
        for entry in os.scandir(self._trash):
            shutil.rmtree(entry.path, ignore_errors=True)

    def _remove_stale_temps(self) -> None:
        """Builds left half-done by a process that died."""
        cutoff = time.time() - _STALE_TEMP_S
        for entry in os.scandir(self._temp):
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    shutil.rmtree(entry.path, ignore_errors=True)


@dataclass(frozen=True)
class _Outcome:
    status: BuildStatus
    compile_output: str
    main: str
    cacheable: bool = True
    program_dir_name: str = "prog"


class _SizeWatch:
    """Measures a running compiler's output folder every COMPILE_WATCH_INTERVAL_S and stops the compile (the
    jail, through its RunControl) once the files there pass `limit` bytes together."""

    def __init__(self, folder: Path, limit: int, control: RunControl) -> None:
        self._folder = folder
        self._limit = limit
        self._control = control
        self._stopped = threading.Event()
        self.tripped = False
        self.written = 0
        # Why the folder could not be measured (too many files, too deep), if that stopped the compile.
        self.unusable: str | None = None
        self._thread = threading.Thread(target=self._watch, name="tribunal-build-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stopped.wait(COMPILE_WATCH_INTERVAL_S):
            try:
                written = _tree_size(self._folder)
            except UnsafeBuildError as exc:
                self.unusable = str(exc)
                self._control.cancel()
                return
            if written > self._limit:
                self.written, self.tripped = written, True
                self._control.cancel()
                return

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


def _tree_size(folder: Path) -> int:
    """Bytes of the regular files under `folder` (apparent sizes: a sparse file counts whole), which the jail may
    be changing: walked through directory fds with O_NOFOLLOW, never following a symlink. UnsafeBuildError past
    _MAX_BUILD_ENTRIES entries or _MAX_BUILD_DEPTH levels (as _secure_output would refuse the build)."""
    total = entries = 0
    try:
        root_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return 0
    stack = [(root_fd, 0)]
    try:
        while stack:
            dir_fd, depth = stack.pop()
            try:
                with os.scandir(dir_fd) as listing:
                    for entry in listing:
                        entries += 1
                        if entries > _MAX_BUILD_ENTRIES:
                            raise UnsafeBuildError(f"more than {_MAX_BUILD_ENTRIES} files")
                        with contextlib.suppress(OSError):
                            info = entry.stat(follow_symlinks=False)
                            if stat.S_ISREG(info.st_mode):
                                total += info.st_size
                            elif stat.S_ISDIR(info.st_mode):
                                if depth + 1 > _MAX_BUILD_DEPTH:
                                    raise UnsafeBuildError("directories nested too deep")
                                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                                stack.append((os.open(entry.name, flags, dir_fd=dir_fd), depth + 1))
            except OSError:
                pass
            finally:
                os.close(dir_fd)
    finally:
        for dir_fd, _ in stack:
            os.close(dir_fd)
    return total


_BLOCK = 4096


def _disk_usage(folder: Path) -> int:
    """Bytes a host-owned tree takes on disk (allocated blocks of its files and folders, like `du`)."""
    total = os.lstat(folder).st_blocks * 512
    for directory, dirs, files in os.walk(folder):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total


def tenant_digest(tenant: str) -> str:
    """How meta.json names a build's tenant: a digest, so the cache's files do not list the tenants."""
    return hashlib.sha256(b"tribunal-build-tenant\0" + tenant.encode()).hexdigest()[:32]


def _size(size: int) -> str:
    """`60 MB`, `62.9 MB`, `8 KB` (binary units, as every other limit here)."""
    if size < MIB:
        return f"{-(-size // 1024)} KB"
    return f"{size / MIB:.1f}".removesuffix(".0") + " MB"


def _clip(text: str) -> str:
    """The compiler's output as stored and answered: its head and tail, at most COMPILE_OUTPUT_STORED."""
    head, tail = COMPILE_OUTPUT_STORED
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n... [{len(text) - head - tail} characters omitted] ...\n{text[-tail:]}"


def _pick_main_class(candidates: list[str], public_class: str) -> str:
    """Several classes may have main(): prefer the public one (the file's name), then Main, then top-level."""
    for wanted in (public_class, "Main"):
        for candidate in candidates:
            if candidate.rsplit(".", 1)[-1] == wanted:
                return candidate
    top_level = sorted(c for c in candidates if "$" not in c)
    return (top_level or sorted(candidates))[0]


def _join(first: str, second: str) -> str:
    return f"{first}\n{second}" if second else first


def _encode(source: str) -> bytes:
    return source.encode("utf-8", "surrogatepass")
