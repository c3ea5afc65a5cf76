"""Paper 001's operators on accepted C, C++ and Java programs, every mutant run by the real executor in nsjail.

The programs live in tests/services/lib/mutation/programs/<problem>/ (main.c, main.cpp, Main.java and tests.json; a
tests.<ext>.json beside them overrides the tests for one language). Every site of every operator is mutated
(`all_sites=True`), so that any site that would not compile is found, and the kill rate of each operator per
language is printed and written to <pytest tmp>/perturb-kill-rates.json.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from executor.run import Executor
from services.kernel.contracts import Arm, ExecutionResult, Limits, TestCase, Verdict
from services.lib.mutation import Mutant, generate

pytestmark = [pytest.mark.corpus, pytest.mark.timeout(900)]  # every program of tests/services/lib/mutation/programs

PROGRAMS = Path(__file__).parent / "programs"
FILES = {"c": "main.c", "cpp": "main.cpp", "java": "Main.java"}
LIMITS = Limits(cpu_time_s=2, wall_time_s=10, memory_mb=256, output_kb=256, processes=32)
PAPER_OPERATORS = ("TYPE_NARROW", "ROR_BOUNDARY", "LOOP_SHORTEN", "ARITH_FLIP")


@dataclass(frozen=True)
class Program:
    problem: str
    language: str
    source: str
    tests: list[TestCase]


@dataclass(frozen=True)
class Run:
    program: Program
    mutant: Mutant | None  # None: the reference solution itself
    result: ExecutionResult

    @property
    def label(self) -> str:
        where = f"{self.mutant.operator} line {self.mutant.line}" if self.mutant else "reference"
        return f"{self.program.problem}/{FILES[self.program.language]} {where}"


def load_programs() -> list[Program]:
    programs = []
    for folder in sorted(d for d in PROGRAMS.iterdir() if d.is_dir()):
        for language, name in FILES.items():
            own = folder / f"tests.{name.rsplit('.', 1)[1]}.json"
            tests = json.loads((own if own.exists() else folder / "tests.json").read_text())
            programs.append(
                Program(folder.name, language, (folder / name).read_text(), [TestCase(**test) for test in tests])
            )
    return programs


def test_the_corpus_is_what_the_tests_claim() -> None:
    programs = load_programs()
    for language in FILES:
        assert sum(p.language == language for p in programs) >= 6
    java_concatenation = [p for p in programs if p.language == "java" and '" + ' in p.source]
    assert java_concatenation, "a Java program with String concatenation checks that ARITH_FLIP skips it"


@pytest_asyncio.fixture(scope="module")
async def runs(executor: Executor) -> list[Run]:
    programs = load_programs()
    jobs: list[tuple[Program, Mutant | None]] = [(program, None) for program in programs]
    for program in programs:
        jobs += [(program, mutant) for mutant in generate(program.source, program.language, all_sites=True)]

    async def run(program: Program, mutant: Mutant | None) -> Run:
        source = mutant.source if mutant else program.source
        if mutant is None or mutant.arm is Arm.CONTROL:  # must pass everything: run every test
            return Run(program, mutant, await execute(program, source, program.tests))
        # A semantic mutant is killed by its first failing test: run the tests one at a time (the build is
        # cached after the first), which saves most of the runs.
        for test in program.tests:
            result = await execute(program, source, [test])
            if result.verdict != Verdict.AC:
                return Run(program, mutant, result)
        return Run(program, mutant, result)

    async def execute(program: Program, source: str, tests: list[TestCase]) -> ExecutionResult:
        return await executor.execute(
            tenant="perturb", language=program.language, source_code=source, tests=tests, limits=LIMITS
        )

    return list(await asyncio.gather(*(run(program, mutant) for program, mutant in jobs)))


@pytest.fixture(scope="module")
def kill_rates(runs: list[Run], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, float]]]:
    """Per language and operator: mutants, killed (any test not AC), rate, and the guard-context count."""
    counts: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for run in runs:
        if run.mutant is None:
            continue
        entry = counts[run.program.language].setdefault(
            run.mutant.operator, {"mutants": 0, "killed": 0, "rate": 0.0, "guard": 0}
        )
        entry["mutants"] += 1
        entry["killed"] += run.result.verdict != Verdict.AC
        entry["guard"] += run.mutant.guard_context
    for per_operator in counts.values():
        for entry in per_operator.values():
            entry["rate"] = round(entry["killed"] / entry["mutants"], 3)
    report = {language: dict(sorted(per_operator.items())) for language, per_operator in sorted(counts.items())}
    survivors = [
        {"program": run.label, "diff": run.mutant.diff}
        for run in runs
        if run.mutant is not None and run.mutant.arm is Arm.SEMANTIC and run.result.verdict == Verdict.AC
    ]
    path = tmp_path_factory.getbasetemp() / "perturb-kill-rates.json"
    path.write_text(json.dumps({"kill_rates": report, "surviving_semantic_mutants": survivors}, indent=2) + "\n")
    return report


def test_every_reference_solution_is_accepted(runs: list[Run]) -> None:
    failed = {
        r.label: (r.result.verdict, r.result.compile_output[:300])
        for r in runs
        if r.mutant is None and r.result.verdict != Verdict.AC
    }
    assert not failed


def test_every_mutant_compiles(runs: list[Run]) -> None:
    """A compile error is an operator bug: every operator only proposes sites whose mutant compiles."""
    broken = {r.label: r.result.compile_output[:400] for r in runs if r.mutant and r.result.verdict == Verdict.CE}
    assert not broken
    assert not [r.label for r in runs if r.result.verdict == Verdict.IE]


def test_every_control_mutant_passes_every_test(runs: list[Run]) -> None:
    controls = [r for r in runs if r.mutant is not None and r.mutant.arm is Arm.CONTROL]
    assert len(controls) >= 3 * 8
    failed = {r.label: r.result.verdict for r in controls if r.result.verdict != Verdict.AC}
    assert not failed


def test_arith_flip_kills_nine_in_ten(kill_rates: dict[str, dict[str, dict[str, float]]]) -> None:
    flips = [kill_rates[language]["ARITH_FLIP"] for language in FILES]
    mutants = sum(entry["mutants"] for entry in flips)
    killed = sum(entry["killed"] for entry in flips)
    assert mutants >= 20
    assert killed / mutants >= 0.9, kill_rates


def test_kill_rates_are_reported_and_every_paper_operator_kills(
    kill_rates: dict[str, dict[str, dict[str, float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print("\nkill rates (killed/mutants, guard-context mutants), all sites of every program:")
        for language, per_operator in kill_rates.items():
            for operator, entry in per_operator.items():
                print(
                    f"  {language:5} {operator:22} {int(entry['killed']):3}/{int(entry['mutants']):<3} "
                    f"= {entry['rate']:.2f}   guard {int(entry['guard'])}"
                )
    for language in FILES:
        for operator in PAPER_OPERATORS:
            entry = kill_rates[language].get(operator)
            assert entry is not None and entry["mutants"] > 0, (language, operator)
            assert entry["rate"] > 0, (language, operator)
        for control in ("POST_TO_PRE_INCREMENT", "COMMENT_INSERT"):
            assert kill_rates[language][control]["rate"] == 0
