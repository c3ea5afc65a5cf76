"""The perturbation worker: the only place the perturb service's studies meet the queue (services/kernel/registry.py
names its five tasks; this module wires them to one arq worker).

- Paper 001's perturbation (perturbation.py): `perturb_attempt` (`seed@job`) makes a seed's mutants attempts.
- The verify stage of every mutant (verification.py): `verify_mutant` checks its execution against its arm, and
  keeps or rejects a synthesised program by its target score.
- AXIOM's synthesis: `synthesize_program` (`<slot>:<draw>@job`, synthesis.py), one LLM draw of one slot;
  `finish_synthesis` (`job`) and `prepare_calibration` (`attempt@job`, benchmark.py), the benchmark it makes. Its
  LLM runners (llms.py) are made once per process and closed when the worker stops.
"""

from __future__ import annotations

from typing import Any

from services.kernel import telemetry, worker
from services.kernel.contracts import Language
from services.perturb import llms
from services.perturb.benchmark import finish_synthesis, prepare_calibration
from services.perturb.perturbation import perturb_attempt
from services.perturb.synthesis import synthesize_program
from services.perturb.verification import verify_mutant

SERVICE = "perturb"
TASKS = (perturb_attempt, verify_mutant, synthesize_program, finish_synthesis, prepare_calibration)


async def _startup(ctx: dict[str, Any]) -> None:
    telemetry.start_mutant_series(language.value for language in Language)


def run_worker() -> None:
    """Run the perturbation worker until SIGTERM/SIGINT."""
    worker.run(worker.build_worker(SERVICE, functions=list(TASKS), on_startup=_startup, on_shutdown=llms.close))
