"""A reusable jail's program folders on the host: the jail's slot (mounted read-only on its /prog), a fresh folder
in it per run with the run's program (hard-linked from a build, or written), their clean-up, and the zygote's own
file installed where jails can read it."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from pathlib import Path

from services.lib.sandbox.warm import STALE_SLOT_S


def link_program(source: Path, slot: Path) -> None:
    """Hard-link a published build's files into a jail's /prog (the same inodes, read-only in the jail); copy
    when a link is impossible. Only regular files and directories, never following a symlink."""
    for entry in os.scandir(source):
        target = slot / entry.name
        if entry.is_dir(follow_symlinks=False):
            target.mkdir(mode=0o755)
            target.chmod(0o755)
            link_program(Path(entry.path), target)
        elif entry.is_file(follow_symlinks=False):
            try:
                os.link(entry.path, target, follow_symlinks=False)
            except OSError:
                shutil.copy2(entry.path, target, follow_symlinks=False)
        else:
            raise ValueError(f"{entry.path} is neither a file nor a directory")


def write_program(files: dict[str, bytes], slot: Path) -> None:
    """Write a run's program files (plain names) into a jail's /prog, readable by the jail's user."""
    for name, data in files.items():
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"not a plain file name: {name!r}")
        fd = os.open(slot / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(slot / name, 0o644)


# The zygote's program: copied (install_readable) to where jails can read it, for Sandbox.enable_warm.
ZYGOTE_SOURCE = Path(__file__).with_name("zygote.py")


def install_readable(directory: Path, source: Path) -> Path:
    """A copy of `source` in `directory` (made if missing), readable from inside jails: the package itself may
    live under a directory the sandbox user cannot search. Replaced atomically when its content changed."""
    directory.mkdir(exist_ok=True)
    directory.chmod(0o755)
    target = directory / source.name
    content = source.read_bytes()
    if not target.exists() or target.read_bytes() != content:
        temp = directory / f".{target.name}.{os.getpid()}"
        temp.write_bytes(content)
        temp.chmod(0o644)
        os.replace(temp, target)
    return target


def make_run_dir(slot: Path) -> Path:
    """A fresh, empty folder in a jail's /prog for one run's program (random name: it says nothing)."""
    run_dir = slot / secrets.token_hex(8)
    run_dir.mkdir(mode=0o755)
    run_dir.chmod(0o755)
    return run_dir


def make_slot(root: Path) -> Path:
    """A fresh, empty directory for one jail's /prog. Its name is random only: the jail can read it in
    /proc/self/mountinfo, so it says nothing (not this process's pid, nor how many runs came before)."""
    slot = root / f"warm-{secrets.token_hex(16)}"
    slot.mkdir(mode=0o755)
    slot.chmod(0o755)
    return slot


def remove_stale_slots(root: Path) -> None:
    """Slots no live jail can still use: nsjail ends every pre-made jail by MAX_AGE_S plus the longest a run may
    last (JAIL_LIFETIME_S, JailProfile.config), and a live process touches a slot when its run comes; twice that is
    garbage."""
    cutoff = time.time() - STALE_SLOT_S
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(root):
            with contextlib.suppress(OSError):
                if entry.name.startswith("warm-") and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    shutil.rmtree(entry.path, ignore_errors=True)
