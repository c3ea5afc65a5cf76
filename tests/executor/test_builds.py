"""The build cache (compile once, share, publish atomically, never follow what the compiler planted) and the
language descriptions (Java class names, toolchain versions)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import stat
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from executor.builds import UnsafeBuildError, secure_output
from executor.languages import LANGUAGES, java_main_class, java_public_class
from executor.run import Executor
from services.kernel.contracts import TestCase
from services.lib.sandbox import STAGING_ROOT, sandbox_visible_root
from tests.executor.conftest import SUM_SOURCES, dispose, run

# Jail tier: executors of its own beside the fixture's, not only through the `executor` or `tool_jail` fixture.
pytestmark = pytest.mark.jail


def unique(language: str) -> str:
    """The sum program with a comment that makes it a source nobody compiled yet."""
    marker = "#" if language == "python" else "//"
    return f"{marker} {uuid.uuid4().hex}\n{SUM_SOURCES[language]}"


def published_builds(executor: Executor) -> list[str]:
    return sorted(entry.name for entry in executor.builds_root.iterdir() if not entry.name.startswith("."))


@pytest.mark.parametrize("language", ["c", "cpp", "java"])
async def test_second_execute_uses_the_cached_build(executor: Executor, language: str) -> None:
    source = unique(language)
    before = set(published_builds(executor))
    first = await run(executor, language, source, stdin="2 3", expected="5")
    second = await run(executor, language, source, stdin="4 4", expected="8")
    assert (first.verdict, second.verdict) == ("AC", "AC")
    assert (first.build_cached, second.build_cached) == (False, True)
    assert len(set(published_builds(executor)) - before) == 1


async def test_python_has_no_build_its_syntax_is_checked_in_each_run(executor: Executor) -> None:
    """A Python program is its source: nothing is published, and a SyntaxError is found by the run's own jail."""
    source = unique("python")
    before = set(published_builds(executor))
    first = await run(executor, "python", source, stdin="2 3", expected="5")
    second = await run(executor, "python", source, stdin="4 4", expected="8")
    assert (first.verdict, second.verdict) == ("AC", "AC")
    assert (first.build_cached, second.build_cached) == (False, False)
    assert set(published_builds(executor)) == before
    broken = await run(executor, "python", source + "def broken(:\n    pass\n")
    assert broken.verdict == "CE" and "SyntaxError" in broken.compile_output and broken.tests == []


@pytest.mark.parametrize("language", ["c", "cpp"])
async def test_builds_are_not_shared_between_tenants(executor: Executor, language: str) -> None:
    """A cache hit answers faster: tenant B must not learn that tenant A compiled the same source."""
    source = unique(language)
    before = set(published_builds(executor))
    first_a = await run(executor, language, source, stdin="2 3", expected="5", tenant="tenant-a")
    first_b = await run(executor, language, source, stdin="2 3", expected="5", tenant="tenant-b")
    second_b = await run(executor, language, source, stdin="4 4", expected="8", tenant="tenant-b")
    second_a = await run(executor, language, source, stdin="4 4", expected="8", tenant="tenant-a")
    assert [o.verdict for o in (first_a, first_b, second_b, second_a)] == ["AC"] * 4
    assert [o.build_cached for o in (first_a, first_b, second_b, second_a)] == [False, False, True, True]
    assert len(set(published_builds(executor)) - before) == 2


async def test_concurrent_executes_of_one_source_by_two_tenants_compile_twice(executor: Executor) -> None:
    source = unique("c")
    outcomes = await asyncio.gather(
        *(run(executor, "c", source, stdin="1 1", expected="2", tenant=f"tenant-{i % 2}") for i in range(4))
    )
    assert [o.verdict for o in outcomes] == ["AC"] * 4
    assert sorted(o.build_cached for o in outcomes) == [False, False, True, True]


async def test_concurrent_executes_of_one_source_compile_once(executor: Executor) -> None:
    source = unique("c")
    before = set(published_builds(executor))
    outcomes = await asyncio.gather(
        *(run(executor, "c", source, stdin=f"{i} 1", expected=str(i + 1)) for i in range(6))
    )
    assert [o.verdict for o in outcomes] == ["AC"] * 6
    assert sorted(o.build_cached for o in outcomes) == [False] + [True] * 5
    assert len(set(published_builds(executor)) - before) == 1
    assert list((executor.builds_root / ".tmp").iterdir()) == []


async def test_compile_errors_are_cached_too(executor: Executor) -> None:
    source = f"// {uuid.uuid4().hex}\nint main(void) {{ return nope; }}\n"
    first = await run(executor, "c", source)
    second = await run(executor, "c", source)
    assert (first.verdict, second.verdict) == ("CE", "CE")
    assert (first.build_cached, second.build_cached) == (False, True)
    assert first.compile_output == second.compile_output


async def test_compiler_errors_quoting_bad_alloc_are_ordinary_compile_errors(executor: Executor) -> None:
    """Compiler output quotes the source; only a program's own stderr can report running out of memory."""
    source = f"// {uuid.uuid4().hex}\n#include <new>\nint main() {{ throw std::bad_alloc() }}\n"
    first = await run(executor, "cpp", source)
    second = await run(executor, "cpp", source)
    assert (first.verdict, second.verdict) == ("CE", "CE")
    assert second.build_cached
    assert not first.compile_output.startswith("compilation aborted")


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("public class Main { static void helper() {} }\n", "no class has `public static void main"),
        ("class A { public void main(String[] a) {} }\n", "no class has `public static void main"),
    ],
)
async def test_java_without_a_main_method_is_a_compile_error(executor: Executor, source: str, reason: str) -> None:
    outcome = await run(executor, "java", source)
    assert outcome.verdict == "CE"
    assert reason in outcome.compile_output


async def test_python_source_with_a_nul_byte_is_a_compile_error(executor: Executor) -> None:
    outcome = await run(executor, "python", "print(1)\x00\n")
    assert outcome.verdict == "CE"


async def test_a_build_is_shared_by_executors_on_the_same_work_root(executor: Executor) -> None:
    source = unique("c")
    await run(executor, "c", source, stdin="1 1", expected="2")
    other = Executor(executor.work_root, slots=1)
    try:
        outcome = await run(other, "c", source, stdin="1 1", expected="2")
    finally:
        other.close()
    assert outcome.build_cached


async def test_published_build_belongs_to_root_and_is_read_only_for_others(executor: Executor) -> None:
    source = unique("c")
    await run(executor, "c", source, stdin="1 1", expected="2")
    build = max((executor.builds_root / name for name in published_builds(executor)), key=lambda p: p.stat().st_mtime)
    for path in [build, *build.rglob("*")]:
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (0, 0), path
        assert not info.st_mode & 0o022, path


def _planted_build(tmp_path: Path, secret: Path) -> Path:
    program_dir = tmp_path / "prog"
    program_dir.mkdir()
    (program_dir / "main").symlink_to(secret)
    return program_dir


async def test_a_symlink_in_compiler_output_is_refused_not_followed(executor: Executor, tmp_path: Path) -> None:
    """Judge0's CVE-2024-28185 class: the host must never chown/chmod/read through a planted link."""
    secret = tmp_path / "admin.key"
    secret.write_text("top secret\n")
    secret.chmod(0o600)
    os.chown(secret, 12345, 12345)
    program_dir = _planted_build(tmp_path, secret)
    with pytest.raises(UnsafeBuildError, match="symbolic link"):
        secure_output(program_dir, LANGUAGES["c"], "main.c")
    info = secret.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (12345, 0o600)


async def test_special_files_in_compiler_output_are_refused(executor: Executor, tmp_path: Path) -> None:
    program_dir = tmp_path / "prog"
    program_dir.mkdir()
    os.mkfifo(program_dir / "main")
    with pytest.raises(UnsafeBuildError, match="not a regular file"):
        secure_output(program_dir, LANGUAGES["c"], "main.c")


def test_java_public_class_ignores_comments_strings_and_nested_types() -> None:
    source = (
        "// public class Comment {}\n/* public class Block {} */\n"
        'class Helper { String s = "public class Text {"; public static class Nested {} }\n'
        "public final class Real { public static void main(String[] a) {} }\n"
    )
    assert java_public_class(source) == "Real"
    assert java_public_class("class OnlyPackagePrivate {}") is None
    assert java_public_class("public record Point(int x, int y) {}") == "Point"


def test_java_main_class_rejects_garbage() -> None:
    assert java_main_class(b"") is None
    assert java_main_class(b"\xca\xfe\xba\xbe" + b"\xff" * 64) is None
    assert java_main_class(os.urandom(4096)) is None


def test_languages_report_real_toolchains(executor: Executor) -> None:
    listed = {entry["id"]: entry for entry in executor.languages()}
    assert list(listed) == ["python", "c", "cpp", "java"]
    assert listed["python"]["version"].startswith("3.11.")
    assert listed["java"]["version"].startswith("17.")
    assert "gcc" in listed["c"]["compiler"] and "g++" in listed["cpp"]["compiler"]
    assert all(entry["name"] and entry["runtime"] for entry in listed.values())


async def test_builds_are_always_staged_under_a_random_name() -> None:
    """Even a work root the sandbox uid could reach keeps no jail-visible files: they live under
    /var/cache/tribunal-sandbox/<random id>, the id kept (0600) in the work root, not derived from its path."""
    base = Path("/tmp") / f"tribunal-test-{uuid.uuid4().hex}"
    base.mkdir(mode=0o711)
    base.chmod(0o711)
    executors: list[Executor] = []
    try:
        executor = Executor(base / "work", slots=1)
        executors.append(executor)
        staging = executor.builds_root.parent
        id_file = base / "work" / "sandbox-id"
        assert staging.parent == STAGING_ROOT
        assert id_file.read_text().strip() == staging.name
        assert len(staging.name) == 32 and int(staging.name, 16) >= 0
        assert stat.S_IMODE(id_file.stat().st_mode) == 0o600
        assert (staging / "work_root").read_text() == str(base / "work")
        assert stat.S_IMODE(staging.stat().st_mode) == 0o711
        assert not (base / "work" / "builds").exists() and not (base / "work" / "harness").exists()
        outcome = await run(executor, "python", SUM_SOURCES["python"], [TestCase(input="1 2", expected="3")])
        assert outcome.verdict == "AC"

        # Another work root gets another id; the same path recreated gets a new one, and the old staging
        # directory goes as garbage when the next Executor starts.
        other = Executor(base / "other", slots=1)
        executors.append(other)
        assert other.builds_root.parent not in (staging, STAGING_ROOT)
        executor.close()
        shutil.rmtree(base / "work")
        again = Executor(base / "work", slots=1)
        executors.append(again)
        assert again.builds_root.parent != staging
        assert not staging.exists()
    finally:
        for each in executors:
            dispose(each)
        shutil.rmtree(base)


def test_concurrent_processes_agree_on_the_staging_id(tmp_path: Path) -> None:
    """The id is published by link(): racing processes all read the winner's."""
    work_root = tmp_path / "work"
    work_root.mkdir()
    with ProcessPoolExecutor(max_workers=4, mp_context=multiprocessing.get_context("spawn")) as pool:
        ids = list(pool.map(sandbox_visible_root, [work_root] * 8))
    try:
        assert len(set(ids)) == 1
        assert ids[0].name == (work_root / "sandbox-id").read_text().strip()
        assert [p.name for p in work_root.iterdir()] == ["sandbox-id"]
    finally:
        shutil.rmtree(ids[0], ignore_errors=True)
