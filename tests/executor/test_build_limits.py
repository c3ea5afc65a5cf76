"""Bounded build cache: the size of a compiled program, the compiler output kept, and the cache's byte budgets
(least recently used builds evicted, a tenant's own first, never a build in use). Real nsjail throughout."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.builds import COMPILE_OUTPUT_STORED, MIB, Build, BuildCache, BuildLimits, tenant_digest
from executor.languages import LANGUAGES
from executor.run import Executor
from services.kernel.contracts import Language
from tests.executor.conftest import SUM_SOURCES, dispose, make_executor, run

LIMITS = BuildLimits(max_build_bytes=16 * MIB, cache_bytes=2048 * MIB, tenant_bytes=512 * MIB)
# 36 bytes of C, 60 MiB of initialised data: the program the audit found.
HUGE_PROGRAM = "char big[60<<20]={1};int main(){}\n"
# 10^5 errors, each with its macro-expansion notes: far more than the compile jail's output limit.
ERROR_FLOOD = "#define T(a) a a a a a a a a a a\nint main(void) { T(T(T(T(T(1 = 2;))))) }\n"


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    executor = make_executor(tmp_path_factory.mktemp("executor"), build_limits=LIMITS)
    yield executor
    dispose(executor)


def disk_usage(root: Path) -> int:
    """What the cache root takes on disk, its temp and trash folders included."""
    total = 0
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total


def published(root: Path) -> set[str]:
    return {entry.name for entry in root.iterdir() if not entry.name.startswith(".")}


def unique(language: str) -> str:
    return f"// {uuid.uuid4().hex}\n{SUM_SOURCES[language]}"


async def test_an_oversized_program_is_a_compile_error_and_leaves_nothing(executor: Executor) -> None:
    before_usage, before = disk_usage(executor.builds_root), published(executor.builds_root)
    outcome = await run(executor, "c", HUGE_PROGRAM, stdin="", expected="")
    assert outcome.verdict == "CE" and outcome.tests == []
    assert "more than the 16 MB limit for a compiled program" in outcome.compile_output
    assert published(executor.builds_root) == before
    assert disk_usage(executor.builds_root) == before_usage
    # Not cached: the next attempt compiles (and is refused) again.
    again = await run(executor, "c", HUGE_PROGRAM, stdin="", expected="")
    assert again.verdict == "CE" and not again.build_cached
    assert disk_usage(executor.builds_root) == before_usage


@pytest.mark.parametrize("language", ["c", "cpp", "java"])
async def test_ordinary_programs_pass_far_below_the_size_limit(executor: Executor, language: str) -> None:
    source = unique(language)
    outcome = await run(executor, language, source, stdin="2 3", expected="5")
    assert outcome.verdict == "AC"
    build = executor.builds_root / executor.engine.builds.key(
        LANGUAGES[Language(language)], outcome.toolchain, source, tenant="tenant-a"
    )
    program = sum(path.stat().st_size for path in (build / "prog").rglob("*") if path.is_file())
    assert 0 < program < LIMITS.max_build_bytes // 16
    meta = json.loads((build / "meta.json").read_text())
    assert meta["tenant"] == tenant_digest("tenant-a") and meta["bytes"] >= program


async def test_a_compiler_output_flood_is_bounded_and_cached(executor: Executor) -> None:
    first = await run(executor, "c", ERROR_FLOOD)
    assert first.verdict == "CE" and "output limit exceeded" in first.compile_output
    assert len(first.compile_output) <= sum(COMPILE_OUTPUT_STORED) + 100
    assert "lvalue required" in first.compile_output
    second = await run(executor, "c", ERROR_FLOOD)
    assert second.verdict == "CE" and second.build_cached
    assert second.compile_output == first.compile_output


class Cache:
    """A BuildCache of its own beside the executor's (visible to the sandbox), with the given budgets."""

    def __init__(self, executor: Executor, name: str, limits: BuildLimits) -> None:
        self.cache = BuildCache(executor.builds_root.parent / name, executor.sandbox, limits)
        self.toolchain = "test"

    def key(self, source: str, tenant: str) -> str:
        return self.cache.key(LANGUAGES[Language.C], self.toolchain, source, tenant=tenant)

    async def compile(self, name: str, tenant: str = "t1") -> Build:
        source = f"// {name}\n{SUM_SOURCES['c']}"
        key = self.key(source, tenant)
        build = await asyncio.to_thread(self.cache.compile, LANGUAGES[Language.C], source, key, tenant=tenant)
        assert build.status == "ok" and build.published
        return build

    def present(self) -> set[str]:
        return published(self.cache.root)


async def sized(executor: Executor, name: str) -> int:
    """The size the cache counts for one small C build."""
    probe = Cache(executor, name, LIMITS)
    await probe.compile("probe")
    return sum(probe.cache.usage().values())


async def test_the_size_limit_is_a_setting_and_a_refused_build_leaves_no_trace(executor: Executor) -> None:
    small = Cache(executor, "small", BuildLimits(max_build_bytes=8 * 1024))
    source = f"// small\n{SUM_SOURCES['c']}"
    build = await asyncio.to_thread(
        small.cache.compile, LANGUAGES[Language.C], source, small.key(source, "t1"), tenant="t1"
    )
    assert build.status == "ce" and not build.published
    assert "more than the 8 KB limit for a compiled program" in build.compile_output
    assert small.present() == set()
    assert not os.listdir(small.cache.root / ".tmp") and not os.listdir(small.cache.root / ".trash")


async def test_the_least_recently_used_build_is_evicted_first(executor: Executor) -> None:
    size = await sized(executor, "lru-probe")
    lru = Cache(executor, "lru", BuildLimits(16 * MIB, cache_bytes=3 * size + size // 2, tenant_bytes=100 * size))
    a, b, c = [await lru.compile(name) for name in "abc"]
    assert lru.present() == {a.key, b.key, c.key}
    assert lru.cache.load(a.key) is not None  # a use: b is now the least recently used
    d = await lru.compile("d")
    assert lru.present() == {a.key, c.key, d.key}
    assert sum(lru.cache.usage().values()) <= lru.cache.limits.cache_bytes
    assert not os.listdir(lru.cache.root / ".trash")
    # A build in use is never evicted: c, leased and then made the least recently used, stays; a goes instead.
    lease = lru.cache.acquire(c)
    assert lease is not None
    with lease:
        os.utime(lru.cache.root / c.key / "meta.json", (1, 1))
        e = await lru.compile("e")
        assert lru.present() == {c.key, d.key, e.key}
    # Evicted and gone: a lease cannot be had, and a load finds nothing (the build is compiled again).
    assert lru.cache.acquire(b) is None and lru.cache.load(b.key) is None


async def test_a_tenant_over_its_share_loses_its_own_builds_first(executor: Executor) -> None:
    size = await sized(executor, "tenant-probe")
    shared = Cache(executor, "tenants", BuildLimits(16 * MIB, cache_bytes=10 * size, tenant_bytes=2 * size + size // 2))
    quiet = await shared.compile("quiet", tenant="quiet")  # the oldest build in the cache
    flood = [await shared.compile(f"flood-{i}", tenant="flood") for i in range(4)]
    # The flooding tenant keeps its two most recent builds; the quiet tenant's older one stays.
    assert shared.present() == {quiet.key, flood[2].key, flood[3].key}
    usage = shared.cache.usage()
    assert usage[tenant_digest("flood")] <= shared.cache.limits.tenant_bytes
    assert usage[tenant_digest("quiet")] == size


async def test_a_build_another_process_uses_is_not_evicted(executor: Executor) -> None:
    """Workers share the cache: a lease is a flock, so one held by another process protects the build too."""
    size = await sized(executor, "process-probe")
    cache = Cache(executor, "processes", BuildLimits(16 * MIB, cache_bytes=size + size // 2, tenant_bytes=100 * size))
    a = await cache.compile("a")
    hold = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_SH)\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        hold,
        str(cache.cache.root / a.key / "meta.json"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert await asyncio.wait_for(holder.stdout.readline(), 30) == b"held\n"
        b = await cache.compile("b")
        assert cache.present() == {a.key, b.key}  # over budget: everything else is in use
    finally:
        holder.stdin.close()
        await holder.wait()
    c = await cache.compile("c")
    assert cache.present() == {c.key}


async def test_a_build_evicted_by_another_worker_is_compiled_again(executor: Executor) -> None:
    """The executor remembers builds it has seen; one that another worker evicted since is built again, not run
    from a folder that is gone."""
    source = unique("c")
    first = await run(executor, "c", source, stdin="1 2", expected="3")
    key = executor.engine.builds.key(LANGUAGES[Language.C], first.toolchain, source, tenant="tenant-a")
    shutil.rmtree(executor.builds_root / key)  # as another worker's eviction would
    second = await run(executor, "c", source, stdin="2 2", expected="4")
    assert (first.verdict, second.verdict) == ("AC", "AC") and not second.build_cached
    assert (executor.builds_root / key / "meta.json").exists()
