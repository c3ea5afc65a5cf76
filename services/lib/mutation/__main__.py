"""`python -m services.lib.mutation`: `generate` in a process of its own, for callers that parse untrusted source.

Reads one JSON request on stdin (`source`, `language`, `seed`, `operators`, `all_sites`, and optionally `limit`)
and writes one JSON answer on stdout: `{"mutants": [...], "total": N}` (the first `limit` mutants, each `Mutant`
as a dict, and how many `generate` made) or `{"unparsable": true}`. Options: `--memory-bytes N` (RLIMIT_AS) and
`--cpu-seconds N` (RLIMIT_CPU), both applied before a byte of the request is read. A program the parser cannot
take ends the process with EXIT_MEMORY (memory) or EXIT_RECURSION (nesting), any other failure with 1.

The platform runs it inside nsjail (services/perturb/isolation.py: no network, no host file but the interpreter,
this package and its libraries, read-only; an unprivileged uid; the jail's memory, CPU and process limits), so a
hostile or pathological program can exhaust or subvert only this process, and its answer is checked as untrusted
data by the caller.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import sys
from collections.abc import Sequence

from services.lib.mutation import UnparsableSource, generate

# How the process ends when the program is too much for the parser (the caller names the reason): out of memory
# (RLIMIT_AS), or nested deeper than the interpreter's recursion limit. Any other failure is a traceback and 1.
EXIT_MEMORY = 3
EXIT_RECURSION = 4


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m services.lib.mutation")
    parser.add_argument("--memory-bytes", type=int)
    parser.add_argument("--cpu-seconds", type=int)
    options = parser.parse_args(argv)
    # Limits first, before a byte of the program is read.
    if options.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (options.memory_bytes, options.memory_bytes))
    if options.cpu_seconds is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (options.cpu_seconds, options.cpu_seconds))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    request = json.loads(sys.stdin.buffer.read())
    limit = request.get("limit")
    try:
        mutants = generate(
            request["source"],
            request["language"],
            seed=int(request["seed"]),
            operators=request.get("operators"),
            all_sites=bool(request.get("all_sites")),
        )
    except UnparsableSource:
        answer: dict[str, object] = {"unparsable": True}
    except MemoryError:
        os._exit(EXIT_MEMORY)  # at once: no traceback, nothing more to allocate
    except RecursionError:
        os._exit(EXIT_RECURSION)
    else:
        kept = mutants if limit is None else mutants[: int(limit)]
        answer = {"mutants": [dataclasses.asdict(m) for m in kept], "total": len(mutants)}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
