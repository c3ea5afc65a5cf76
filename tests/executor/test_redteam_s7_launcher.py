"""Red team s7 (posix_spawn in the reusable jail's run process, services/lib/sandbox/zygote.py `_start`).

os.posix_spawn raises more than OSError: an argv that the file system encoding cannot encode (a lone surrogate)
raises UnicodeEncodeError, one holding a NUL ValueError. The fork+execv path it replaced ended such a run with
exit 127 (`finally: os._exit(127)` in the child); now the exception leaves `_start` in the run's PID 1 and unwinds
through the zygote's `main()`: the zygote's traceback (its paths and source lines) lands on the program's stderr,
which the API returns. A candidate reached this with Java: a class named with a supplementary character (𝒜) was
read from the class file as two lone surrogates (modified UTF-8, executor/languages.py), and that name is the JVM's
last argument. Both are fixed: any exception there ends the run with exit 127, and the class file's surrogate pairs
are joined, so that program now runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from executor.languages import modified_utf8
from executor.run import Executor
from services.kernel.contracts import Limits
from services.lib.sandbox import JailProfile
from tests.executor.conftest import dispose, make_executor, run

JAVA_LIMITS = Limits(cpu_time_s=3, wall_time_s=10, memory_mb=256, output_kb=64, processes=16)


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    executor = make_executor(tmp_path_factory.mktemp("redteam-s7"), slots=1)
    yield executor
    dispose(executor)


@pytest.mark.parametrize("bad_argument", ["\ud835", "a\x00b"], ids=["lone-surrogate", "nul"])
def test_a_program_that_cannot_be_spawned_sees_nothing_of_the_zygote(executor: Executor, bad_argument: str) -> None:
    profile = JailProfile(cpu_time_s=1, wall_time_s=10, memory_mb=64, processes=8, warm=True)
    result = executor.sandbox.run(
        profile, ["/usr/bin/echo", bad_argument], program_files={}, stdout_limit=4096, stderr_limit=4096
    )
    assert result.exit_code == 127 and result.jail_error is None, result
    assert b"zygote.py" not in result.stderr and b"Traceback" not in result.stderr, result.stderr


async def test_a_class_named_outside_the_basic_multilingual_plane_runs(executor: Executor) -> None:
    # Its name is a surrogate pair in the class file (modified UTF-8); joined, the JVM finds the class.
    source = 'class \U0001d49c { public static void main(String[] a) { System.out.println("hi"); } }\n'
    outcome = await run(executor, "java", source, limits=JAVA_LIMITS)
    assert outcome.verdict == "AC", outcome


def test_modified_utf8_strings_of_a_class_file_are_decoded_as_java_writes_them() -> None:
    # JVMS 4.4.7: NUL is C0 80; U+1D49C is the surrogate pair D835 DC9C, each half in three bytes.
    assert modified_utf8(b"A\xc0\x80B") == "A\x00B"
    assert modified_utf8(b"\xed\xa0\xb5\xed\xb2\x9c") == "\U0001d49c"
    assert modified_utf8("caf\u00e9".encode()) == "caf\u00e9"
