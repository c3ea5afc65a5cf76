"""Generating a seed's mutants parses a tenant's program (tree-sitter, Python's `ast`); it never runs it. Parsing is
done in a child process with bounded memory (which also bounds its answer), CPU time and wall time, so a
pathological program (deeply
nested, enormous, or crafted against a parser) can only end that child: the worker records the seed as not
perturbable and goes on. Running the program, and anything that could read the machine, happens in nsjail alone
(the executor)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence

from services.kernel.contracts import Arm
from services.mutation import Mutant

MEMORY_BYTES = 1 << 30
CPU_SECONDS = 60
WALL_SECONDS = 120.0
CHILD_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


class NotPerturbable(Exception):
    """The seed could not be perturbed within the limits; the message says why (a fixed vocabulary)."""


async def generate_isolated(
    source: str, language: str, *, seed: int, operators: Sequence[str] | None, all_sites: bool
) -> list[Mutant]:
    """`services.mutation.generate` in a bounded child process. Raises NotPerturbable."""
    request = json.dumps(
        {"source": source, "language": language, "seed": seed, "operators": operators, "all_sites": all_sites}
    ).encode("utf-8", "surrogatepass")
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-m",
        "services.mutation",
        "--memory-bytes",
        str(MEMORY_BYTES),
        "--cpu-seconds",
        str(CPU_SECONDS),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        # None of the worker's environment (database URL, provider keys): the child sets its own limits.
        env=CHILD_ENV,
    )
    try:
        stdout, _ = await asyncio.wait_for(child.communicate(request), WALL_SECONDS)
    except TimeoutError:
        child.kill()
        await child.wait()
        raise NotPerturbable("parsing took longer than the wall-time limit") from None
    except asyncio.CancelledError:
        child.kill()  # the job was cancelled (or the worker stops): the parse ends with it
        await child.wait()
        raise
    if child.returncode != 0:
        raise NotPerturbable("parsing exceeded a resource limit or failed")
    answer = json.loads(stdout)
    if answer.get("unparsable"):
        raise NotPerturbable("the program does not parse")
    return [Mutant(**{**m, "arm": Arm(m["arm"])}) for m in answer["mutants"]]
