"""A seed is parsed in nsjail (issue #20 item 7): the same mutants as in-process, a program the parser chokes on
ends only its jail, the jail is a jail (checked from outside, on the running process), and the jail's answer is
untrusted data that cannot forge a mutant."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.kernel.contracts import Language
from services.lib import mutation
from services.lib.sandbox import INSIDE_ID, JAIL_ENV
from services.perturb import isolation
from services.perturb.isolation import PARSER_PACKAGES, NotPerturbable, ParserJail, generate_isolated

# Jail tier: the parser's own jails (services/perturb/isolation.py), not through the `executor` fixture.
pytestmark = pytest.mark.jail

SEED = "def total(xs):\n    s = 0\n    for x in xs:\n        if x > 0:\n            s = s + x\n    return s\n"
SEEDS = {
    "python": SEED,
    "c": "#include <stdio.h>\nint main(void) {\n    long long s = 0;\n    for (int i = 0; i < 10; i++) s += i;\n"
    '    printf("%lld\\n", s);\n    return 0;\n}\n',
    "cpp": "#include <iostream>\nint main() {\n    long long s = 0;\n"
    "    for (int i = 0; i <= 9; ++i) { if (i > 2) s += i; }\n    std::cout << s << std::endl;\n    return 0;\n}\n",
    "java": "public class Main {\n    public static void main(String[] a) {\n        long s = 0;\n"
    "        for (int i = 0; i < 10; i++) { if (i >= 3) s += i; }\n        System.out.println(s);\n    }\n}\n",
}
# Every site of every operator, each mutant parsed again: seconds of CPU, long enough to look at the process.
SLOW = "def f(a, b):\n" + "    x = a + b * 2 - 1 if a < b else a\n" * 300 + "    return x\n"


@pytest.fixture(scope="module")
def jail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ParserJail]:
    jail = ParserJail(tmp_path_factory.mktemp("parser"))
    yield jail
    shutil.rmtree(jail.program_dir.parent, ignore_errors=True)  # the jail-visible staging folder


@pytest.mark.parametrize("language", list(SEEDS))
async def test_the_jail_makes_the_same_mutants_as_the_library(jail: ParserJail, language: str) -> None:
    for all_sites in (False, True):
        isolated = await generate_isolated(
            SEEDS[language], language, seed=3, operators=None, all_sites=all_sites, jail=jail
        )
        assert isolated == mutation.generate(SEEDS[language], language, seed=3, all_sites=all_sites)
        assert isolated


async def test_a_worker_with_a_private_umask_stages_a_reachable_runtime(tmp_path: Path) -> None:
    """Workers run with umask 077 (their data dir is private): the staged copies are still searchable by the
    sandbox uid, whatever the umask."""
    previous = os.umask(0o077)
    try:
        jail = ParserJail(tmp_path / "private")
    finally:
        os.umask(previous)
    try:
        assert await generate_isolated(SEED, "python", seed=0, operators=None, all_sites=False, jail=jail) == (
            mutation.generate(SEED, "python", seed=0)
        )
    finally:
        shutil.rmtree(jail.program_dir.parent, ignore_errors=True)


async def test_named_operators_non_ascii_text_and_the_limit(jail: ParserJail) -> None:
    seed = SEED.replace("s = 0", "s = 0  # ünï \U0001f600")
    named = await generate_isolated(seed, "python", seed=1, operators=["AOR", "ROR"], all_sites=True, jail=jail)
    assert named == mutation.generate(seed, "python", seed=1, operators=["AOR", "ROR"], all_sites=True)
    assert {m.operator for m in named} == {"AOR", "ROR"}
    every = mutation.generate(seed, "python", seed=1, all_sites=True)
    assert len(every) > 5
    assert (
        await generate_isolated(seed, "python", seed=1, operators=None, all_sites=True, limit=5, jail=jail)
        == (every[:5])
    )


async def test_an_unparsable_or_pathological_seed_ends_only_its_jail(
    jail: ParserJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(NotPerturbable, match="does not parse"):
        await generate_isolated("def broken(:\n", "python", seed=0, operators=None, all_sites=False, jail=jail)
    # Nested far past what CPython's parser accepts: a syntax error.
    parens = "x = " + "(" * 100_000 + "1" + ")" * 100_000 + "\n"
    with pytest.raises(NotPerturbable, match="does not parse"):
        await generate_isolated(parens, "python", seed=0, operators=None, all_sites=False, jail=jail)
    # Syntax trees 100,000 levels deep, which the parsers accept and the walkers over them cannot follow.
    for language, deep in (
        ("python", "x = " + "+".join(["a"] * 100_000) + "\n"),
        ("c", "int main(void) { return " + "+".join(["1"] * 100_000) + "; }\n"),
        ("java", "class Main { int f() { return " + "+".join(["1"] * 100_000) + "; } }\n"),
    ):
        with pytest.raises(NotPerturbable, match="nested too deeply"):
            await generate_isolated(deep, language, seed=0, operators=None, all_sites=False, jail=jail)
    # CPython's own parser gives up on 100,000 unary minuses with a MemoryError.
    unary = "x = " + "-" * 100_000 + "1\n"
    with pytest.raises(NotPerturbable, match="memory limit"):
        await generate_isolated(unary, "python", seed=0, operators=None, all_sites=False, jail=jail)
    # Huge: a 256 KiB program whose syntax tree does not fit the (lowered) memory limit.
    monkeypatch.setattr(isolation, "MEMORY_BYTES", 96 << 20)
    huge = "x = [" + "1," * (128 << 10) + "]\n"
    with pytest.raises(NotPerturbable, match="memory limit"):
        await generate_isolated(huge, "python", seed=0, operators=None, all_sites=True, jail=jail)
    monkeypatch.undo()
    # The jail is unharmed: the next seed is perturbed as before.
    assert await generate_isolated(SEED, "python", seed=0, operators=None, all_sites=False, jail=jail) == (
        mutation.generate(SEED, "python", seed=0)
    )


async def test_a_parse_past_its_wall_time_is_stopped(jail: ParserJail, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "WALL_SECONDS", 0.3)
    started = time.monotonic()
    with pytest.raises(NotPerturbable, match="wall-time"):
        await generate_isolated(SLOW, "python", seed=0, operators=None, all_sites=True, jail=jail)
    assert time.monotonic() - started < 30


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _parser_process(interpreter: str) -> int | None:
    """The seed parser's process: a descendant running this interpreter on the parser's bootstrap. (This
    interpreter alone would also match the servers and workers other tests of the session have started.)"""
    for pid in _descendants(os.getpid()):
        try:
            if os.readlink(f"/proc/{pid}/exe") == interpreter and (
                isolation.BOOTSTRAP.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            ):
                return pid
        except OSError:
            continue
    return None


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


async def test_the_parse_runs_jailed_as_seen_from_outside(jail: ParserJail) -> None:
    """While a slow seed is being parsed, its process is looked at from this (the worker's) side: other
    namespaces, the sandbox uid, no capabilities, seccomp, a bare environment, a file system holding only what
    the parser needs. Cancelling the parse ends the jail."""
    task = asyncio.ensure_future(generate_isolated(SLOW, "python", seed=0, operators=None, all_sites=True, jail=jail))
    interpreter = jail.runtime.interpreter
    deadline = time.monotonic() + 60
    pid = None
    while pid is None and time.monotonic() < deadline and not task.done():
        await asyncio.sleep(0.02)
        pid = _parser_process(interpreter)
    assert pid is not None, "the parser's process was never seen"
    try:
        for namespace in ("pid", "mnt", "net", "user", "ipc", "uts", "cgroup"):
            assert os.readlink(f"/proc/{pid}/ns/{namespace}") != os.readlink(f"/proc/self/ns/{namespace}"), namespace
        status = _status(pid)
        assert status["Uid"].split() == [str(INSIDE_ID)] * 4
        assert status["Gid"].split() == [str(INSIDE_ID)] * 4
        assert status["CapEff"] == status["CapPrm"] == "0000000000000000"
        assert status["NoNewPrivs"] == "1"
        assert status["Seccomp"] == "2"
        assert status["NSpid"].split()[-1] == "1"  # the jail's init: alone in its PID namespace
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert sorted(v.decode() for v in environ if v) == sorted(JAIL_ENV)
        # Only lo in its network namespace.
        devices = [line.split(":")[0].strip() for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]]
        assert devices == ["lo"]
        # Its file system: the project holds only `services`, the virtualenv only the parser's packages, and the
        # interpreter's prefix only what runs it (no site-packages of its own); no /etc, no data dir.
        root = Path(f"/proc/{pid}/root")
        project = Path(jail.runtime.project_root)
        assert sorted(p.name for p in (root / project.relative_to("/")).iterdir()) == sorted(
            [".venv", "services"] if Path(jail.runtime.site_packages).is_relative_to(project) else ["services"]
        )
        site = root / Path(jail.runtime.site_packages).relative_to("/")
        assert sorted(p.name.removesuffix(".py") for p in site.iterdir() if p.name != "__pycache__") == sorted(
            PARSER_PACKAGES
        )
        # Besides the packages' own, only the bytecode of the single-file modules among them.
        assert {p.name.split(".")[0] for p in (site / "__pycache__").iterdir()} <= set(PARSER_PACKAGES)
        stdlib = root / Path(jail.runtime.stdlib).relative_to("/")
        assert (stdlib / "os.py").is_file() and not (stdlib / "site-packages").exists()
        assert not (root / "etc").exists()
        assert not (root / Path(jail.program_dir).relative_to("/")).exists()
        assert list((root / "prog").iterdir()) == []
        # Every bind of the host's files is read-only.
        mounts = {line.split()[4]: line.split()[5].split(",") for line in Path(f"/proc/{pid}/mountinfo").open()}
        for _, target in jail.profile.binds:
            assert "ro" in mounts[target], target
    finally:
        task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 10
    while _parser_process(interpreter) is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _parser_process(interpreter) is None, "the cancelled parse's jail still runs"


def _answer(mutants: list[dict[str, object]], total: int | None = None) -> bytes:
    return json.dumps({"mutants": mutants, "total": len(mutants) if total is None else total}).encode()


def test_a_forged_answer_is_malformed() -> None:
    """What the jail writes is untrusted: an answer `generate` could not have given is refused whole."""
    real = [{**m.__dict__, "arm": m.arm.value} for m in mutation.generate(SEED, "python", seed=0, all_sites=True)]
    semantic = next(m for m in real if m["arm"] == "semantic")
    control = next(m for m in real if m["arm"] == "control")

    def read(stdout: bytes, operators: list[str] | None = None, limit: int = 200) -> list[mutation.Mutant]:
        return isolation._read_answer(stdout, SEED, Language.PYTHON, operators, limit)

    assert read(_answer(real)) == mutation.generate(SEED, "python", seed=0, all_sites=True)
    forged = [
        b"not json",
        b"[" * 100_000 + b"]" * 100_000,
        json.dumps({"mutants": real, "total": len(real), "extra": 1}).encode(),
        json.dumps({"unparsable": True, "mutants": []}).encode(),
        json.dumps({"unparsable": False}).encode(),
        _answer([{**semantic, "attempt_id": "someone-else's"}]),
        _answer([{k: v for k, v in semantic.items() if k != "diff"}]),
        _answer([{**semantic, "operator": "NO_SUCH_OPERATOR"}]),
        _answer([{**semantic, "operator": "TYPE_NARROW"}]),  # not an operator of Python
        _answer([{**semantic, "arm": "control"}]),  # relabelled arm
        _answer([{**control, "severity": 4}]),
        _answer([{**control, "guard_context": True}]),
        _answer([{**semantic, "line": 10_000}]),
        _answer([{**semantic, "line": 0}]),
        _answer([{**semantic, "line": "2"}]),
        _answer([{**semantic, "guard_context": 1}]),
        _answer([{**semantic, "source": SEED}]),  # the parent itself
        _answer([{**semantic, "source": 7}]),
        _answer(list(reversed(real))),  # out of catalogue order
        _answer(real, total=len(real) - 1),
        _answer(real[:3], total=len(real)),  # cut short below the limit
    ]
    for stdout in forged:
        with pytest.raises(NotPerturbable, match="malformed"):
            read(stdout)
    with pytest.raises(NotPerturbable, match="malformed"):
        read(_answer(real), operators=["ROR"])  # operators the request did not ask for
    with pytest.raises(NotPerturbable, match="malformed"):
        read(_answer(real), limit=2)
    assert read(_answer(real[:2], total=len(real)), limit=2) == mutation.generate(SEED, "python", all_sites=True)[:2]
    with pytest.raises(NotPerturbable, match="does not parse"):
        read(json.dumps({"unparsable": True}).encode())
