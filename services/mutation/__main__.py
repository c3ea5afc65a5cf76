"""`python -m services.mutation`: `generate` in a process of its own, for callers that parse untrusted source.

Reads one JSON request on stdin (`source`, `language`, `seed`, `operators`, `all_sites`) and writes one JSON
answer on stdout: `{"mutants": [...]}` (each `Mutant` as a dict) or `{"unparsable": true}`. The caller bounds its
memory, CPU time and wall time (services/perturb/isolation.py), so a hostile or pathological program can exhaust
only this process.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import sys

from services.mutation import UnparsableSource, generate


def main() -> None:
    # Limits first, before a byte of the program is read: `--memory-bytes N --cpu-seconds M`.
    memory, cpu = int(sys.argv[2]), int(sys.argv[4])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    request = json.loads(sys.stdin.buffer.read())
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
    else:
        answer = {"mutants": [dataclasses.asdict(m) for m in mutants]}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
