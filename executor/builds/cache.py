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

Bounds: what one compile may write is executor/builds/compiling.py's; the cache holds at most `cache_bytes`,
each tenant at most `tenant_bytes` of it: publishing a build first evicts its tenant's least recently used builds
past the tenant's budget, then everyone's least recently used past the whole budget. A build in use (leased) is
never evicted.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from executor.builds.compiling import MIB, BuildStatus, compile_into
from executor.languages import LanguageSpec
from services.kernel import telemetry
from services.kernel.settings import get_settings
from services.lib.sandbox import RunControl, Sandbox

log = logging.getLogger(__name__)

_STALE_TEMP_S = 3600
# A publish waits at most this long for another process's publish (a scan and a few renames) to finish.
_PUBLISH_LOCK_WAIT_S = 30.0


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
            outcome = compile_into(self.sandbox, self.limits.max_build_bytes, temp, language, source, key, control)
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


def _encode(source: str) -> bytes:
    return source.encode("utf-8", "surrogatepass")
