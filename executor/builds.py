"""Build cache: compile each (tenant, language, toolchain, source) once, inside the sandbox, and publish the
build atomically so that concurrent executes of the same source by one tenant share it.

Layout under the cache root (everything the host reads was written by the host, except the program files,
which are only ever opened with O_NOFOLLOW and checked to be regular files):

    <key>/meta.json      compile status, output and main class (written by the host)
    <key>/src/<file>     the source (written by the host; the program itself for Python)
    <key>/prog/          compiler output (compiled languages; bound read-write into the compile jail only)
    .tmp/<key>.<rand>/   a build in progress, renamed to <key>/ when complete
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import logging
import os
import secrets
import shutil
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from executor.languages import LanguageSpec, java_main_class
from services.kernel.contracts import Language
from services.sandbox.jail import JailProfile, RunControl, Sandbox, classify, printable

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

# Bounds on what the host will walk in a compiler's output directory.
_MAX_BUILD_ENTRIES = 10_000
_MAX_BUILD_DEPTH = 32
_MAX_CLASS_FILE = 16 * 1024 * 1024
_STALE_TEMP_S = 3600

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


class UnsafeBuildError(Exception):
    """The compiler's output contains something other than regular files and directories."""


class BuildCache:
    """Compiles into a temp folder and renames it into place; a finished build is never modified."""

    def __init__(self, root: Path, sandbox: Sandbox) -> None:
        self.root = root
        self.sandbox = sandbox
        self._temp = root / ".tmp"
        self._temp.mkdir(parents=True, exist_ok=True)
        for directory in (root, self._temp):
            directory.chmod(0o711)
        self._remove_stale_temps()

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
        """The published build for `key`, or None."""
        try:
            fd = os.open(self.root / key / "meta.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as meta_file:
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

    def compile(self, language: LanguageSpec, source: str, key: str, control: RunControl | None = None) -> Build:
        """Compile in the sandbox and publish the build (blocking: call from a worker thread)."""
        temp = self._temp / f"{key}.{secrets.token_hex(8)}"
        try:
            outcome = self._compile_into(temp, language, source, key, control)
            build = Build(
                key=key,
                language=language.id,
                status=outcome.status,
                compile_output=outcome.compile_output,
                program_dir=self.root / key / outcome.program_dir_name,
                main=outcome.main,
                cached=False,
            )
            if not outcome.cacheable or (control is not None and control.cancelled):
                return replace(build, published=False)
            return self._publish(temp, build)
        finally:
            if temp.exists():
                shutil.rmtree(temp, ignore_errors=True)

    def _compile_into(
        self, temp: Path, language: LanguageSpec, source: str, key: str, control: RunControl | None
    ) -> _Outcome:
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
            file_size_mb=COMPILE_FILE_SIZE_MB,
            tmpfs_mb=COMPILE_TMPFS_MB,
            writable_program_dir=language.compiled,
            with_source_dir=language.compiled,
            readonly_mounts=language.extra_readonly_mounts,
            # No /dev/zero or /dev/urandom: `#include "/dev/zero"` should fail at once, not fill memory.
            devices=("/dev/null",),
        )
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
        # The compiler's diagnostics, as the jail saw them (only /usr, /src and /prog exist there), with control
        # characters removed: what a `#line 1 "\x01"` directive puts in a file name does not reach a response.
        output = printable((result.stdout.decode("utf-8", "replace") + result.stderr_text).strip())
        status, reason = classify(
            result,
            cpu_time_s=COMPILE_CPU_S,
            memory_mb=COMPILE_MEMORY_MB,
            output_limit=COMPILE_OUTPUT_LIMIT,
            runtime_messages=False,
        )
        make = functools.partial(_Outcome, program_dir_name=program_dir.name)
        if status == "IE":
            log.error("compile of %s failed in the sandbox: %s\n%s", key, reason, result.nsjail_log)
            return make("ie", reason, "", cacheable=False)
        if status == "RE":
            # The compiler rejected the program: an ordinary, cacheable compilation error.
            if language.compiled:
                shutil.rmtree(program_dir)
            return make("ce", output or f"compilation failed ({reason})", "")
        if status != "OK":
            # Limits hit while compiling are compile errors too, but host load can cause them: not cached.
            if language.compiled:
                shutil.rmtree(program_dir)
            return make("ce", _join(f"compilation aborted: {reason}", output), "", cacheable=False)

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

    def _publish(self, temp: Path, build: Build) -> Build:
        """Rename the finished build into place; if another process won the race, use theirs."""
        meta = {
            "language": build.language,
            "status": build.status,
            "compile_output": build.compile_output,
            "program_dir": build.program_dir.name,
            "main": build.main,
            "created": time.time(),
        }
        fd = os.open(temp / "meta.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w") as meta_file:
            json.dump(meta, meta_file)
        final = self.root / build.key
        try:
            os.rename(temp, final)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            published = self.load(build.key)
            if published is None:
                raise
            return replace(published, cached=False)
        return build

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
