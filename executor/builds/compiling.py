"""Compiling one program, jailed: the compile's own limits, a watchdog on what the compiler writes, and the
checks on its output before the host trusts any of it (executor/builds/cache.py publishes the result).

The compiler is untrusted input's first reader: it runs jailed, with limits of its own. A compiled program is at
most `max_build_bytes` (all the files the compiler wrote; larger is a CE and nothing is kept; a watchdog stops a
compiler that writes more while it runs), and the compiler's output kept is at most COMPILE_OUTPUT_STORED
characters. The host then walks the compiler's output with O_NOFOLLOW only (secure_output), regular files and
directories only, and takes it away from the sandbox uid.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import shutil
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from executor.languages import LanguageSpec, java_main_class
from services.kernel.contracts import Language, Verdict
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

BuildStatus = Literal["ok", "ce", "ie"]


class UnsafeBuildError(Exception):
    """The compiler's output contains something other than regular files and directories."""


@dataclass(frozen=True)
class CompileOutcome:
    """What a compile came to: its status and output, what to run, whether it may be cached, and the folder (under
    the build) that holds the program."""

    status: BuildStatus
    compile_output: str
    main: str
    cacheable: bool = True
    program_dir_name: str = "prog"


def compile_into(
    sandbox: Sandbox,
    max_build_bytes: int,
    temp: Path,
    language: LanguageSpec,
    source: str,
    key: str,
    control: RunControl,
) -> CompileOutcome:
    """Write the source into `temp` and compile it there in the sandbox (blocking), with the compile's own limits
    and the build size watched (`max_build_bytes`); the outcome says what to publish, if anything."""
    source_name = language.source_name(source)
    temp.mkdir(mode=0o755)
    temp.chmod(0o755)
    source_dir = temp / "src"
    source_dir.mkdir()
    source_dir.chmod(0o755)
    fd = os.open(source_dir / source_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as source_file:
        source_file.write(_encode(source))
    os.chmod(source_dir / source_name, 0o644)

    if language.compiled:
        program_dir = temp / "prog"
        program_dir.mkdir()
        # Writable by the jailed compiler (and nobody else) only while it runs.
        os.chown(program_dir, sandbox.sandbox_uid, sandbox.sandbox_uid)
        program_dir.chmod(0o755)
    else:
        program_dir = source_dir
    profile = JailProfile(
        cpu_time_s=COMPILE_CPU_S,
        wall_time_s=COMPILE_WALL_S,
        memory_mb=COMPILE_MEMORY_MB,
        processes=COMPILE_PROCESSES + language.extra_processes,
        # One file may pass the cap (then its size is reported); the watchdog bounds them all together.
        file_size_mb=max(COMPILE_FILE_SIZE_MB, -(-max_build_bytes // MIB) + 1),
        tmpfs_mb=COMPILE_TMPFS_MB,
        writable_program_dir=language.compiled,
        with_source_dir=language.compiled,
        readonly_mounts=language.extra_readonly_mounts,
        # No /dev/zero or /dev/urandom: `#include "/dev/zero"` should fail at once, not fill memory.
        devices=("/dev/null",),
    )
    # prog/ is on the host's disk: what the compiler writes there is measured while it runs, and the
    # compile stopped as soon as it passes the cap (RLIMIT_FSIZE bounds one file, not how many).
    watch = SizeWatch(program_dir, max_build_bytes, control) if language.compiled else None
    try:
        result = sandbox.run(
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
    make = functools.partial(CompileOutcome, program_dir_name=program_dir.name)
    if watch is not None:
        try:
            written = watch.written if watch.tripped else _tree_size(program_dir)
            if watch.unusable is not None:
                raise UnsafeBuildError(watch.unusable)
        except UnsafeBuildError as exc:
            shutil.rmtree(program_dir)
            return make("ce", _join(f"compilation produced an unusable program: {exc}", output), "")
        if written > max_build_bytes:
            # Whatever else happened: nothing of it is kept, and it is not cached (the next attempt compiles
            # again, as after any limit), so the disk only ever holds it for the moment it takes to remove.
            shutil.rmtree(program_dir)
            limit = f"more than the {_size(max_build_bytes)} limit for a compiled program"
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
        main = secure_output(program_dir, language, source_name)
    except UnsafeBuildError as exc:
        shutil.rmtree(program_dir)
        return make("ce", _join(f"compilation produced an unusable program: {exc}", output), "")
    return make("ok", output, main)


def secure_output(program_dir: Path, language: LanguageSpec, source_name: str) -> str:
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


class SizeWatch:
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
    _MAX_BUILD_ENTRIES entries or _MAX_BUILD_DEPTH levels (as secure_output would refuse the build)."""
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
