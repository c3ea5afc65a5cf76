"""Red team s7 (posix_spawn in the reusable jail's run process, services/sandbox/launcher.py `_start`).

os.posix_spawn raises more than OSError: an argv that the file system encoding cannot encode (a lone surrogate)
raises UnicodeEncodeError, one holding a NUL ValueError. The fork+execv path it replaced ended such a run with
exit 127 (`finally: os._exit(127)` in the child); now the exception leaves `_start` in the run's PID 1 and unwinds
through the zygote's `main()`: the launcher's traceback (its paths and source lines) lands on the program's stderr,
which the API returns. A candidate reaches this with Java: a class named with a supplementary character (𝒜) is
read from the class file as a surrogate pair (modified UTF-8 decoded with surrogatepass, executor/languages.py), and
that name is the JVM's last argument.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from executor.run import Executor
from services.kernel.contracts import Limits
from tests.executor.conftest import dispose, make_executor, run

JAVA_LIMITS = Limits(cpu_time_s=3, wall_time_s=10, memory_mb=256, output_kb=64, processes=16)


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    executor = make_executor(tmp_path_factory.mktemp("redteam-s7"), slots=1)
    yield executor
    dispose(executor)


async def test_a_program_that_cannot_be_spawned_sees_nothing_of_the_launcher(executor: Executor) -> None:
    source = 'class \U0001d49c { public static void main(String[] a) { System.out.println("hi"); } }\n'
    outcome = await run(executor, "java", source, limits=JAVA_LIMITS)
    stderr = outcome.tests[0].stderr if outcome.tests else ""
    assert "launcher.py" not in stderr and "Traceback" not in stderr, stderr
