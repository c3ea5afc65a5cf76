"""The lint judge's tools run in nsjail and nothing they print reaches a client (issue #7 item 1).

A tenant once submitted C++ that `#include`d the data dir's admin.key, plus `#line 1 "\\x01"` to make cppcheck's
XML unparseable, and the tool's raw output (with the key) came back in `judgment.error`. Each attempt here plants a
random secret in a root-only host file and checks that it appears nowhere in what `lint` returns or raises, that
the tool saw the file exactly as a missing one, and that a failure is one of a few fixed reasons.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from judge.offline import OfflineScore, OfflineUnavailable, cppcheck, lint, pylint_driver
from judge.tooljail import TOOL_FILES_DIR, ToolJail

REPO = Path(__file__).resolve().parents[2]

# Every reason `lint` may give for not scoring: fixed words, at most numbers, signal names and pylint/cppcheck
# message ids added.
FIXED_REASON = re.compile(
    r"lint: (?:"
    r"(?:pylint|cppcheck) (?:timed out \(\d+ s CPU, [\d.]+ s wall\)|ran out of memory \(\d+ MiB\)"
    r"|output passed the limit \(\d+ MiB\)|gave no readable report|gave no score|usage error|failed \(exit \d+\)"
    r"|was killed by SIG[A-Z0-9]+|failed on this file \([A-Za-z, -]+\)|is not installed)"
    r"|the sandbox could not run (?:pylint|cppcheck)|source larger than \d+ KiB|empty source"
    r"|no sandbox for the linter on this worker)"
)

# Jail tier: the judge worker's own jail beside the fixture's, not only through the `executor` or `tool_jail` fixture.
pytestmark = pytest.mark.jail
# A finding cppcheck reports wherever this code is: proof that a file holding it was (or was not) read.
FINDING_CODE = "static int leak_probe(void) { int a[10]; a[10] = 1; return a[0]; }\n"
C_MAIN = "int main(void) { return 0; }\n"


@dataclass(frozen=True)
class Secret:
    value: str
    key_file: Path  # <private dir>/admin.key, 0600 in a 0700 dir, like the data dir's
    loose_file: Path  # another 0600 file, in pytest's own temp dir
    directory: Path


@pytest.fixture()
def secret(tmp_path: Path) -> Secret:
    # An identifier, so that it can also be spliced into code as a name.
    value = "tribunalsecret" + secrets.token_hex(16)
    private = tmp_path / "data"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    key_file, loose_file = private / "admin.key", tmp_path / "secret.txt"
    for path in (key_file, loose_file):
        path.write_text(value + "\n")
        path.chmod(0o600)
    return Secret(value, key_file, loose_file, private)


@pytest.fixture()
def visible_dir() -> Iterator[Path]:
    """A host directory anybody may read (outside pytest's private temp dir): only the jail can hide it."""
    directory = Path(tempfile.mkdtemp(prefix="tribunal-lint-test-", dir="/var/tmp"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def outcome(source: str, language: str, jail: ToolJail) -> OfflineScore | str:
    """What `lint` returns, or the reason it raised (checked against the fixed vocabulary)."""
    try:
        return lint(source, language, jail=jail)
    except OfflineUnavailable as exc:
        assert FIXED_REASON.fullmatch(str(exc)), str(exc)
        return str(exc)


def assert_never_leaks(result: OfflineScore | str, secret: Secret) -> None:
    if isinstance(result, OfflineScore):
        text = json.dumps(result.fields) + result.rationale + repr(result)
    else:
        text = result
    assert secret.value not in text
    assert secret.value.removeprefix("tribunalsecret") not in text
    assert str(secret.directory) not in text


def same_result(first: OfflineScore | str, second: OfflineScore | str) -> bool:
    if isinstance(first, OfflineScore) and isinstance(second, OfflineScore):
        return first.fields == second.fields
    return first == second


# --- cppcheck --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["c", "cpp"])
@pytest.mark.parametrize("which", ["key_file", "loose_file"])
def test_include_of_a_host_secret_reads_nothing(tool_jail: ToolJail, secret: Secret, language: str, which: str) -> None:
    path = getattr(secret, which)
    result = outcome(f'#include "{path}"\n{C_MAIN}', language, tool_jail)
    assert_never_leaks(result, secret)
    # The tool saw the secret exactly as it sees a file that does not exist.
    assert same_result(result, outcome(f'#include "{path}.missing"\n{C_MAIN}', language, tool_jail))


@pytest.mark.parametrize("language", ["c", "cpp"])
def test_line_directive_with_a_control_character_and_an_include(
    tool_jail: ToolJail, secret: Secret, language: str
) -> None:
    # `#line 1 "\x01"` once made cppcheck's XML unparseable, and the raw report (with the key) became the error.
    program = (
        f'#line 1 "\x01"\n#include "{secret.key_file}"\n'
        "int main(void) {\n    int a[10];\n    a[10] = 1;\n    return a[0];\n}\n"
    )
    result = outcome(program, language, tool_jail)
    assert_never_leaks(result, secret)
    # The file name is cleaned before parsing: the program is still scored, not made unscoreable.
    assert isinstance(result, OfflineScore)
    assert [f["id"] for f in result.fields["findings"]] == ["arrayIndexOutOfBounds"]


def test_control_characters_everywhere_in_the_report_are_no_way_out(tool_jail: ToolJail, secret: Secret) -> None:
    names = "".join(f'#line {n} "\\x0{n}{chr(n)}{secret.key_file}"\nint v{n} = 1 / 0;\n' for n in range(1, 9))
    result = outcome(f'#include "{secret.key_file}"\n{names}{C_MAIN}', "c", tool_jail)
    assert_never_leaks(result, secret)


@pytest.mark.parametrize("language", ["c", "cpp"])
@pytest.mark.parametrize("line_directive", ["", '#line 1 "\x01"\n'])
def test_include_spliced_into_an_identifier(
    tool_jail: ToolJail, secret: Secret, language: str, line_directive: str
) -> None:
    # The secret is an identifier: read, it becomes a variable's name, which cppcheck quotes in unreadVariable's
    # message. With the `#line` directive this is the reported exploit: outside the jail cppcheck read admin.key,
    # the "\x01" file name made its XML unparseable, and the raw report (key included) became the error.
    program = (
        f"int main(void) {{\n{line_directive}    int\n"
        f'#include "{secret.key_file}"\n'
        "    = 1;\n    int a[2];\n    a[2] = 0;\n    return 0;\n}\n"
    )
    result = outcome(program, language, tool_jail)
    assert_never_leaks(result, secret)
    assert same_result(result, outcome(program.replace(str(secret.key_file), "/nonexistent/x"), language, tool_jail))


@pytest.mark.parametrize("language", ["c", "cpp"])
def test_error_directive_with_an_include(tool_jail: ToolJail, secret: Secret, language: str) -> None:
    program = (
        f'#define STR(x) #x\n#include "{secret.key_file}"\n'
        f'#error STR(\n#include "{secret.key_file}"\n)\n'
        f'#if 1\n#error "{secret.key_file}"\n#endif\n{C_MAIN}'
    )
    result = outcome(program, language, tool_jail)
    assert_never_leaks(result, secret)


def test_huge_cppcheck_report_is_a_fixed_failure(tool_jail: ToolJail, secret: Secret) -> None:
    # A macro makes each few bytes of source one finding (~400 bytes of XML): cppcheck's report passes the 4 MiB
    # output limit long before the end (or the time limit).
    functions = "#define BAD(n) static int f##n(void) { int a[1]; a[1] = n; return a[0]; }\n"
    functions += "".join(f"BAD({n})\n" for n in range(15_000))
    result = outcome(f'#include "{secret.key_file}"\n{functions}{C_MAIN}', "c", tool_jail)
    assert_never_leaks(result, secret)
    assert isinstance(result, str)
    assert result.startswith(("lint: cppcheck output passed the limit", "lint: cppcheck timed out")), result


def test_source_too_large_is_never_handed_to_a_tool(tool_jail: ToolJail, secret: Secret) -> None:
    result = outcome(f'#include "{secret.key_file}"\n' + "int x;\n" * 200_000, "c", tool_jail)
    assert result == "lint: source larger than 1024 KiB"


# --- pylint ----------------------------------------------------------------------------------------------------------


def plant_module(secret: Secret, name: str, body: str) -> None:
    path = secret.directory / f"{name}.py"
    path.write_text(body)
    path.chmod(0o600)


def test_python_import_of_a_host_module(tool_jail: ToolJail, secret: Secret) -> None:
    # pylint suggests close member names ("maybe ...?") and names modules in its messages; astroid would read
    # the module if it could find it.
    plant_module(secret, "secretmod", f'{secret.value} = "{secret.value}"\n\ndef {secret.value}_f():\n    pass\n')
    program = (
        '"""Exfiltration attempt."""\n'
        "import sys\n"
        f"sys.path.insert(0, {str(secret.directory)!r})\n"
        "import secretmod  # pylint: disable=wrong-import-position\n"
        f"from secretmod import {secret.value[:-1]}\n"
        "print(secretmod.tribunalsecret, secretmod.nothere)\n"
        f"print(open({str(secret.key_file)!r}, encoding='utf-8').read())\n"
    )
    result = outcome(program, "python", tool_jail)
    assert_never_leaks(result, secret)
    assert isinstance(result, OfflineScore)
    assert "import-error" in {m["symbol"] for m in result.fields["messages"]}


def test_python_relative_and_namespace_imports_of_host_code(tool_jail: ToolJail, secret: Secret) -> None:
    plant_module(secret, "__init__", f"KEY = {secret.value!r}\n")
    program = (
        f"from . import {secret.directory.name}\n"
        "from .. import data\n"
        "import rapidfuzz  # in the worker's virtualenv, never in the jail\n"
        "print(data, rapidfuzz)\n"
    )
    result = outcome(program, "python", tool_jail)
    assert_never_leaks(result, secret)
    assert isinstance(result, OfflineScore)
    assert "import-error" in {m["symbol"] for m in result.fields["messages"]}


def test_huge_python_source_or_report(tool_jail: ToolJail, secret: Secret) -> None:
    # ~30,000 messages (unused and reimported modules, bad names): a report of a MiB, or a timeout.
    lines = "".join(f"import os as Bad{n}\n" for n in range(10_000))
    result = outcome(f"import sys\nsys.path.insert(0, {str(secret.directory)!r})\n{lines}", "python", tool_jail)
    assert_never_leaks(result, secret)
    if isinstance(result, OfflineScore):
        assert len(result.fields["messages"]) == 50
        assert result.score == 0


def test_pylint_report_values_are_checked() -> None:
    # Whatever the driver's line says, only pylint-shaped symbols, known types and line numbers are kept.
    line = json.dumps(
        {
            "status": 4,
            "score": 7.5,
            "messages": [
                ["unused-import", "warning", 3],
                ["has space", "warning", 1],
                ["x" * 65, "warning", 1],
                ["eval-used", "secret-type", 1],
                ["eval-used", "warning", "7; rm"],
                "not a list",
            ],
        }
    )
    status, score, messages = pylint_driver.pylint_report(b"noise\n" + line.encode())
    assert (status, score) == (4, 7.5)
    assert messages == [("unused-import", "warning", 3), ("eval-used", "warning", None)]
    for bad in (b"", b"not json", b'{"status": 1000, "score": 1, "messages": []}', b'{"status": 0}'):
        with pytest.raises(OfflineUnavailable, match="^lint: pylint gave no readable report$"):
            pylint_driver.pylint_report(bad)


def test_cppcheck_report_values_are_checked() -> None:
    report = (
        '<?xml version="1.0"?><results version="2"><errors>'
        '<error id="nullPointer" severity="error" msg="m"><location file="\x01" line="4"/></error>'
        '<error id="bad id" severity="error" msg="m"/>'
        '<error id="uninitvar" severity="leaked" msg="m"/>'
        '<error id="unusedVariable" severity="style" msg="m"><location file="f" line="&#178;"/></error>'
        "</errors></results>"
    )
    assert cppcheck.cppcheck_report(report.encode()) == [("nullPointer", "error", 4), ("unusedVariable", "style", None)]
    with pytest.raises(OfflineUnavailable, match="^lint: cppcheck gave no readable report$"):
        cppcheck.cppcheck_report(b"<results><error id='x' severity='error'")


# --- what the jail can see -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reusable", [False, True], ids=["own-jail", "reusable-jail"])
def test_the_jail_sees_only_the_toolchain_and_the_source(
    tool_jail: ToolJail, secret: Secret, visible_dir: Path, reusable: bool
) -> None:
    readable = visible_dir / "readable.txt"
    readable.write_text("anyone may read this\n")
    readable.chmod(0o644)
    paths = [
        str(secret.key_file),
        str(secret.directory),
        str(readable),
        str(REPO / "README.md"),
        str(tool_jail.work_root),
        str(tool_jail.files_root),
        "/root",
        "/work",
        "/home",
        "/etc/passwd",
        "/var",
        "/srv",
        "/opt",
    ]
    probe = (
        "import json, os, sys\n"
        "print(json.dumps({'root': sorted(os.listdir('/')), 'prog': sorted(os.listdir('/prog')),\n"
        "                  'seen': [p for p in sys.argv[1:] if os.path.lexists(p)], 'uid': os.getuid(),\n"
        "                  'harness': sorted(os.listdir('/harness')) if os.path.isdir('/harness') else None}))\n"
    )
    result = tool_jail.run(
        ["/usr/bin/python3", "-I", "-c", probe, *paths],
        {"solution.c": b"int main(void) { return 0; }\n"},
        cpu_time_s=5,
        wall_time_s=10,
        memory_mb=256,
        output_limit=1 << 20,
        reusable=reusable,
    )
    assert result.exit_code == 0, result.stderr_text
    view = json.loads(result.stdout)
    assert view["seen"] == []
    assert view["prog"] == ["solution.c"]
    assert view["uid"] == 65534
    toolchain = {"usr", "bin", "lib", "lib64", "sbin", "dev", "proc", "box", "tmp", "prog"}
    # A reusable jail also holds its zygote's program (services/lib/sandbox/zygote.py), and nothing else there.
    assert set(view["root"]) <= toolchain | ({"harness"} if reusable else set())
    assert view["harness"] == (["zygote.py"] if reusable else None)
    assert TOOL_FILES_DIR == "/prog"
    # Nothing is left on the host once the run is over (a reusable jail's own folder stays, empty).
    assert not any(tool_jail.files_root.iterdir())
    tool_jail.sandbox.settle()  # a retired reusable jail's folder is removed by the pool's clean-up thread
    warm_slots = tool_jail.files_root.parent / "tools-warm"
    assert not [entry for slot in warm_slots.iterdir() for entry in slot.iterdir()]


@pytest.mark.parametrize("language", ["c", "cpp"])
def test_host_files_are_missing_includes_not_content(
    tool_jail: ToolJail, secret: Secret, visible_dir: Path, language: str
) -> None:
    # The probe code yields arrayIndexOutOfBounds wherever cppcheck reads it: inline it does...
    inline = outcome(FINDING_CODE + C_MAIN, language, tool_jail)
    assert isinstance(inline, OfflineScore) and inline.fields["finding_count"] == 1
    # ...from host files (root-only like the data dir's admin.key, or readable by anybody) it does not: they are
    # not in the jail at all. Markdown or /etc/passwd, if read, would be syntax errors.
    probe_files = [secret.key_file, visible_dir / "probe.h"]
    for path in probe_files:
        path.write_text(FINDING_CODE)
    (visible_dir / "probe.h").chmod(0o644)
    for path in [*probe_files, REPO / "README.md", REPO / "pyproject.toml", Path("/etc/passwd")]:
        result = outcome(f'#include "{path}"\n{C_MAIN}', language, tool_jail)
        assert isinstance(result, OfflineScore), (path, result)
        assert (result.fields["finding_count"], result.score) == (0, 5), (path, result.fields)


# --- the judge worker ------------------------------------------------------------------------------------------------


def test_the_judge_worker_owns_one_jail_under_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from judge import worker
    from services.kernel.settings import get_settings

    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    try:
        jail = worker._tool_jail()
        assert isinstance(jail, ToolJail)
        assert jail.work_root == (tmp_path / "data" / "judge").absolute()
        result = lint(C_MAIN, "c", jail=jail)
        assert result.score == 5
        jail.close()  # its reusable jails (cppcheck ran in one), before their folders go
        shutil.rmtree(jail.files_root.parent, ignore_errors=True)

        # A worker that cannot jail judges on without lint: never a linter outside the jail.
        def no_cgroups(*args: object, **kwargs: object) -> ToolJail:
            raise RuntimeError("cgroup v1 controller 'memory' is not mounted")

        monkeypatch.setattr(worker, "ToolJail", no_cgroups)
        assert worker._tool_jail() is None
    finally:
        get_settings.cache_clear()


def test_pragmas_are_neutralised_whatever_the_line_endings(tool_jail: ToolJail) -> None:
    """pylint reads a lone CR as a line end; `# pylint: disable=all` after one must not silence the linter."""
    bad = "import os,sys\ndef F( x ):\n  y=1\n  return eval(x)\n"
    plain = lint(bad, "python", jail=tool_jail)
    for ending in ("\r", "\r\n"):
        silenced = lint((bad + "# pylint: disable=all\n").replace("\n", ending), "python", jail=tool_jail)
        assert silenced.score <= plain.score + 1, ending
        assert silenced.fields["pragmas_neutralised"] == 1
