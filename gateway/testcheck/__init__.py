"""Test code is checked when a problem is created: a test that reads a name it never binds (HumanEval's `poly`
without the prompt's helper) or does not compile is refused with a 422 naming `tests[i].code`, instead of an IE on
every attempt later.

Test code is tenant code, so it is read only inside nsjail (services/lib/sandbox), never in the gateway's process:
`analyser.py` (stdlib only, one file) runs under the jail's Python 3.11 (`/usr/bin/python3 -I -S -B`), the
interpreter the executor's harness runs test code with, in a reusable jail (the tool jails' setup, as the judge's
lint runs: a zygote execs each run in fresh namespaces with its own /box, /tmp and /prog; /usr read-only, /proc,
/dev/null; no network, no host files but the analyser; the sandbox uid; 32 processes). It only parses: `ast.parse`,
`compile` and a walk of the tree; nothing of the test runs. Limits: CPU_SECONDS of CPU, WALL_SECONDS of wall time,
MEMORY_MB of memory, ANSWER_LIMIT bytes of answer.

Its answer is untrusted data: read up to ANSWER_LIMIT, one JSON line per test, each validated (the index one we
sent, in order; names that are identifiers, at most 20 of at most 100 characters; a line number that is an
integer). What reaches the API is built here from those fields, never the analyser's text. A test whose analysis
exhausts a limit (or kills the jail: the first test without an answer line) is refused as too large or complex to
check. When this process cannot jail (no nsjail, no privileges) the check is skipped and logged: the reference's
validation run, and the harness's own check at run time, still catch a broken test (docs/api.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from pathlib import Path
from typing import Any

from gateway.errors import ApiError
from services.kernel.contracts import TestCase
from services.kernel.settings import get_settings
from services.lib.sandbox import (
    INSIDE_ID,
    ZYGOTE_SOURCE,
    JailProfile,
    RunResult,
    Sandbox,
    default_nsjail_path,
    ensure_cgroup_parents,
    install_readable,
    sandbox_visible_root,
)

log = logging.getLogger(__name__)

ANALYSER_SOURCE = (Path(__file__).parent / "analyser.py").read_bytes()
PYTHON = "/usr/bin/python3"
CPU_SECONDS = 5.0
WALL_SECONDS = 10.0
MEMORY_MB = 512
PROCESSES = 32
ANSWER_LIMIT = 1 << 20
_MAX_NAMES = 20
_MAX_NAME_CHARS = 100
_JAIL_SLOTS = 2

Loc = list[str | int]


class TestCodeJail:
    """The analyser's jail: reusable jails, at most `_JAIL_SLOTS` runs at once. Thread-safe."""

    __test__ = False  # not a pytest test class

    def __init__(self, work_root: Path, *, nsjail_path: Path | None = None, sandbox_uid: int = INSIDE_ID) -> None:
        work_root = Path(work_root).absolute()
        work_root.mkdir(parents=True, exist_ok=True)
        ensure_cgroup_parents()
        self._sandbox = Sandbox(nsjail_path or default_nsjail_path(), work_root / "jail", sandbox_uid)
        visible = sandbox_visible_root(work_root)
        self._sandbox.enable_warm(
            zygote=install_readable(visible / "testcheck-zygote", ZYGOTE_SOURCE),
            slots_root=visible / "testcheck-warm",
            per_kind=_JAIL_SLOTS,
        )
        self._slots = threading.BoundedSemaphore(_JAIL_SLOTS)
        self.profile = JailProfile(
            cpu_time_s=CPU_SECONDS,
            wall_time_s=WALL_SECONDS,
            memory_mb=MEMORY_MB,
            processes=PROCESSES,
            devices=("/dev/null",),
            warm=True,
        )

    def close(self) -> None:
        """End the reusable jails waiting for a run."""
        self._sandbox.close()

    def run(self, request: bytes) -> RunResult:
        """The analyser on one request (blocking: call from a worker thread)."""
        argv = [PYTHON, "-I", "-S", "-B", "/prog/analyser.py"]
        with self._slots:
            return self._sandbox.run(
                self.profile,
                argv,
                program_files={"analyser.py": ANALYSER_SOURCE},
                stdin=request,
                stdout_limit=ANSWER_LIMIT,
                stderr_limit=4096,
                stderr_keep=(0, 0),
            )


_jail: TestCodeJail | None = None
_unavailable = False
_jail_lock = threading.Lock()


def default_jail() -> TestCodeJail | None:
    """This process's analyser jail, its work root under the data dir (made on first use); None if this process
    cannot jail (logged once)."""
    global _jail, _unavailable
    with _jail_lock:
        if _jail is None and not _unavailable:
            settings = get_settings()
            try:
                _jail = TestCodeJail(
                    settings.data_dir / "testcheck", nsjail_path=settings.nsjail_path, sandbox_uid=settings.sandbox_uid
                )
            except Exception:  # noqa: BLE001 - logged; the validation run still catches broken tests
                log.exception("no sandbox for checking test code: problems are stored unchecked")
                _unavailable = True
        return _jail


def close_default_jail() -> None:
    """End this process's analyser jails (the gateway's shutdown)."""
    global _jail, _unavailable
    with _jail_lock:
        _unavailable = False
        if _jail is not None:
            with contextlib.suppress(Exception):
                _jail.close()
            _jail = None


def _finding(line: Any, index: int) -> str | None:
    """The message for one answer line about test `index`; ValueError if the line is not of the analyser's shape."""
    if not isinstance(line, dict) or line.get("i") != index or not set(line) <= {"i", "names", "syntax", "deep"}:
        raise ValueError("unexpected answer")
    if "names" in line:
        names = line["names"]
        if (
            not isinstance(names, list)
            or not 0 < len(names) <= _MAX_NAMES
            or not all(isinstance(n, str) and n.isidentifier() and len(n) <= _MAX_NAME_CHARS for n in names)
        ):
            raise ValueError("unexpected names")
        quoted = ", ".join(repr(name) for name in names)
        found = f"name {quoted} is" if len(names) == 1 else f"names {quoted} are"
        return f"{found} used but never defined (test code sees only `candidate`, the entry point and the built-ins)"
    if "syntax" in line:
        where = line["syntax"]
        if type(where) is not int or where < 0:
            raise ValueError("unexpected line")
        return "the test code does not compile" + (f" (line {where})" if where else "")
    if "deep" in line:
        if line["deep"] != 1:
            raise ValueError("unexpected flag")
        return "the test code is nested too deeply to check"
    return None


def findings(result: RunResult, indices: list[int]) -> dict[int, str]:
    """Each test's finding from the analyser's run over `indices` (in order): what it found, and for the first test
    it gave no answer for (a limit or a crash stopped it), that the test is too large or complex to check."""
    if result.jail_error:
        raise RuntimeError(f"the sandbox could not run the test-code analyser: {result.jail_error}")
    found: dict[int, str] = {}
    complete = result.stdout.split(b"\n")[:-1]  # the last piece is what follows the last newline
    for position, index in enumerate(indices):
        if position >= len(complete):
            found[index] = "the test code is too large or complex to check within the limits"
            break
        try:
            message = _finding(json.loads(complete[position]), index)
        except ValueError:
            found[index] = "the test code could not be checked"
            break
        if message is not None:
            found[index] = message
    return found


async def check_tests(tests: list[TestCase], entry_point: str | None, loc: Loc) -> None:
    """Raise a 422 naming every `tests[i].code` that reads a name it never binds, does not compile, or cannot be
    checked within the limits. Only code tests are read; identical code is analysed once."""
    coded = [(index, test.code) for index, test in enumerate(tests) if test.code is not None]
    if not coded or entry_point is None:
        return
    jail = default_jail()
    if jail is None:
        return
    first: dict[str, int] = {}
    for index, code in coded:
        first.setdefault(code, index)
    unique = [(index, code) for code, index in first.items()]
    request = json.dumps({"entry_point": entry_point, "tests": unique}).encode()
    try:
        result = await asyncio.to_thread(jail.run, request)
        by_first = findings(result, [index for index, _ in unique])
    except Exception:  # noqa: BLE001 - the platform's fault, never the test's: logged, the problem stored unchecked
        log.exception("test code left unchecked")
        return
    errors = [
        {"loc": [*loc, "tests", index, "code"], "msg": by_first[first[code]]}
        for index, code in coded
        if first[code] in by_first
    ]
    if errors:
        where = ".".join(str(part) for part in errors[0]["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ApiError(422, f"{where}: {errors[0]['msg']}{more}", errors)
