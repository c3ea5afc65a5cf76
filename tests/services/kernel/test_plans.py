"""Job plans (services/kernel/plans.py): one model per job kind; a plan the earlier, dict-built code stored reads
back as the same plan and is stored again with the same keys and values (a key it lacked only with the value its
readers assumed); the routes build what they built before; and `Job.params` is read through `Job.plan()` only."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from gateway.routes.benchmarks import plan_slots
from gateway.routes.perturbations import confirmation_plan
from gateway.schemas import ExecutionIn, PerturbationsIn
from services.kernel import db, jobs
from services.kernel.contracts import Condition, JobKind, TimeoutRule
from services.kernel.models import Job
from services.kernel.plans import (
    PLANS,
    AttemptsPlan,
    DirectExecutionPlan,
    JudgingPlan,
    OwnedPlan,
    PerturbPlan,
    SimilarityPlan,
    SimilarityProtocol,
    SynthesisPlan,
    parse_plan,
    stored,
)
from tests.databases import migrated_database

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("executor", "judge", "gateway", "services", "metrics")

_LIMITS = {"cpu_time_s": 2, "wall_time_s": 5, "memory_mb": 256, "output_kb": 1024, "processes": 32}
_CHECKER = {"kind": "tokens", "abs_tol": 1e-6, "rel_tol": 1e-6}
_FUZZING = {
    "n_inputs": None,
    "repeats": 5,
    "time_budget_s": 60.0,
    "per_input_timeout_s": 2.0,
    "float_tolerance": None,
    "seed": 0,
    "timeout_rule": "paper",
}
_SYNTHESIS = {
    "owner_key_id": "key_1",
    "requirements": [{"problem_id": "sum", "problem_pk": 3, "seed_ids": ["att_1"]}],
    "seed_ids": ["att_1"],
    "targets": [4, 2],
    "m": 2,
    "select": 90,
    "max_draws": 4,
    "seed": 0,
    "llms": ["gpt"],
    "slots": [{"slot": "r0:t5:0", "after": []}, {"slot": "r0:t4:0", "after": ["r0:t5:0"]}],
    "judges": ["sample_tests"],
    "conditions": ["blind"],
    "repeats": 1,
}

# (kind, params exactly as the dict-built routes wrote them, what a dump adds: the value the old readers assumed)
OLD_ROWS: dict[str, tuple[JobKind, dict[str, Any], dict[str, Any]]] = {
    "submission": (JobKind.EXECUTE_ATTEMPT, {"attempt_ids": ["att_1"]}, {}),
    "batch": (JobKind.EXECUTE_BATCH, {"attempt_ids": ["att_1", "att_2"]}, {}),
    "direct on stdin": (
        JobKind.EXECUTE_DIRECT,
        {
            "language": "python",
            "source_code": "print(input())",
            "stdin": "hi\n",
            "tests": None,
            "mode": "stdio",
            "entry_point": None,
            "checker": _CHECKER,
            "limits": _LIMITS,
        },
        {"validation": False},  # not a problem's validation run (gateway/validation.py)
    ),
    "direct on tests": (
        JobKind.EXECUTE_DIRECT,
        {
            "language": "python",
            "source_code": "def f(x):\n    return x\n",
            "stdin": None,
            "tests": [{"input": [1], "expected": 1, "code": None, "public": True}],
            "mode": "function",
            "entry_point": "f",
            "checker": {"kind": "float", "abs_tol": 0.01, "rel_tol": 0.0},
            "limits": {**_LIMITS, "memory_mb": 512},
        },
        {"validation": False},
    ),
    "rejudge": (
        JobKind.JUDGE,
        {
            "attempt_ids": ["att_1"],
            "judges": ["sample_tests", "chrf"],
            "conditions": ["blind", "nonblind"],
            "repeats": 3,
        },
        {},
    ),
    "report": (JobKind.REPORT, {"report_id": "rep_1"}, {}),
    "perturbation": (
        JobKind.PERTURB,
        {
            "owner_key_id": "key_1",
            "attempt_ids": ["att_1", "att_2"],
            "operators": None,
            "seed": 7,
            "all_sites": False,
            "judges": [],
            "conditions": ["blind"],
            "repeats": 1,
        },
        {"confirm_job_id": None},
    ),
    "confirmed perturbation": (
        JobKind.PERTURB,
        {
            "owner_key_id": "key_1",
            "attempt_ids": ["att_1"],
            "operators": ["flip_comparison"],
            "seed": 0,
            "all_sites": True,
            "judges": ["sample_tests"],
            "conditions": ["blind"],
            "repeats": 1,
            "confirm_job_id": "job_2",
        },
        {},
    ),
    "synthesis": (JobKind.SYNTHESIZE, _SYNTHESIS, {}),
    "single pair": (
        JobKind.SIMILARITY,
        {**_FUZZING, "crystal_k": 50, "crystal_ignore": {"python": [["(", ")"]]}, "single": True},
        {"thresholds": None, "protocol": "local_rq3", "perturbation_job_id": None},
    ),
    "dataset": (
        JobKind.SIMILARITY,
        {
            **_FUZZING,
            "n_inputs": 100,
            "timeout_rule": "strict",
            "float_tolerance": 0.001,
            "crystal_k": 50,
            "crystal_ignore": {"python": [], "cpp": [["int", "main"]]},
            "single": False,
            "thresholds": {"x_lo": 0.2, "x_hi": 0.8, "y_lo": 0.3, "y_hi": 0.7},
            "protocol": "pseudocode",
        },
        {"perturbation_job_id": None},
    ),
    "confirmation": (
        JobKind.SIMILARITY,
        {
            "n_inputs": 500,
            "repeats": 2,
            "time_budget_s": 60.0,
            "per_input_timeout_s": 2.0,
            "float_tolerance": None,
            "seed": 7,
            "timeout_rule": "paper",
            "single": False,
            "crystal_k": 0,
            "crystal_ignore": {},
            "thresholds": None,
            "protocol": "pseudocode",
            "perturbation_job_id": "job_1",
        },
        {},
    ),
    "calibration": (
        JobKind.CALIBRATE,
        {
            "judge": "llm",
            "condition": "blind",
            "method": "platt",
            "cluster": "problem",
            "bootstrap": 500,
            "seed": 3,
            "folds": 10,
            "refit_of": None,
        },
        {},
    ),
}


def test_every_job_kind_has_one_plan_model() -> None:
    assert set(PLANS) == set(JobKind)
    assert {kind for kind, _, _ in OLD_ROWS.values()} == set(JobKind)  # every kind's old shape is covered below


@pytest.mark.parametrize("case", sorted(OLD_ROWS))
def test_a_plan_the_old_code_stored_reads_back_and_stores_the_same(case: str) -> None:
    kind, old, added = OLD_ROWS[case]
    plan = Job(job_id="job_x", tenant="t", kind=kind, params=old).plan()
    assert isinstance(plan, PLANS[kind])
    assert stored(plan) == {**old, **added}
    assert stored(parse_plan(kind, stored(plan))) == stored(plan)  # and what is stored now reads back the same


def test_a_missing_key_reads_as_the_default_its_old_readers_assumed() -> None:
    # executor/similarity_worker.py's `params.get(key, default)` and the perturb worker's models, before plans.
    pair = parse_plan(JobKind.SIMILARITY, {}, SimilarityPlan)
    assert (pair.n_inputs, pair.repeats, pair.time_budget_s, pair.per_input_timeout_s) == (None, 5, 60.0, 2.0)
    assert (pair.float_tolerance, pair.seed, pair.timeout_rule, pair.single) == (None, 0, "paper", False)
    assert (pair.crystal_ignore, pair.thresholds, pair.protocol) == ({}, None, "local_rq3")
    perturbation = parse_plan(JobKind.PERTURB, {"attempt_ids": ["att_1"]}, PerturbPlan)
    assert (perturbation.operators, perturbation.seed, perturbation.all_sites) == (None, 0, False)
    assert (perturbation.judges, perturbation.conditions, perturbation.repeats) == ([], [Condition.BLIND], 1)
    assert (perturbation.confirm_job_id, perturbation.owner_key_id) == (None, None)
    synthesis = parse_plan(JobKind.SYNTHESIZE, {k: v for k, v in _SYNTHESIS.items() if k not in ("m", "select")})
    assert isinstance(synthesis, SynthesisPlan) and (synthesis.m, synthesis.select) == (2, 90)
    direct = parse_plan(JobKind.EXECUTE_DIRECT, {"language": "c", "source_code": "int main(){}"}, DirectExecutionPlan)
    assert stored(direct)["limits"] == _LIMITS and stored(direct)["checker"] == _CHECKER
    assert (direct.mode, direct.tests, direct.stdin) == ("stdio", None, None)
    assert parse_plan(JobKind.EXECUTE_BATCH, None) == AttemptsPlan()  # a job created without a plan


def test_a_reader_names_the_plan_it_expects() -> None:
    job = Job(job_id="job_x", tenant="t", kind=JobKind.PERTURB, params=OLD_ROWS["perturbation"][1])
    assert job.plan(PerturbPlan).seed == 7
    assert job.plan(JudgingPlan).conditions == [Condition.BLIND]  # a base the judge worker reads
    assert job.plan(OwnedPlan).owner_key_id == "key_1"  # ... and one ratelimit reads
    with pytest.raises(TypeError, match="PerturbPlan, not a SynthesisPlan"):
        job.plan(SynthesisPlan)
    with pytest.raises(ValueError):
        Job(job_id="job_y", tenant="t", kind="no_such_kind", params={}).plan()


def test_a_job_is_created_with_its_own_kind_of_plan() -> None:
    class _Session:
        def add(self, row: Any) -> None:
            self.row = row

    session = _Session()
    job = jobs.create_job(session, tenant="t", kind=JobKind.EXECUTE_BATCH, total=1, plan=AttemptsPlan())  # type: ignore[arg-type]
    assert job.params == {"attempt_ids": []}
    with pytest.raises(TypeError, match="AttemptsPlan"):
        jobs.create_job(session, tenant="t", kind=JobKind.REPORT, total=1, plan=AttemptsPlan())  # type: ignore[arg-type]


def test_the_routes_build_what_the_dict_built_routes_stored() -> None:
    body = PerturbationsIn(attempt_ids=["att_1"], confirm=True, confirm_inputs=500, confirm_repeats=2, seed=7)
    assert stored(confirmation_plan(body, "job_1")) == OLD_ROWS["confirmation"][1]
    slots = plan_slots([1], [4], 2)
    assert [slot.model_dump(mode="json") for slot in slots] == [
        {"slot": "r0:t5:0", "after": []},
        {"slot": "r0:t4:0", "after": ["r0:t5:0"]},
        {"slot": "r0:t4:1", "after": ["r0:t5:0"]},
    ]
    for request in (
        {"language": "python", "source_code": "print(input())", "stdin": "hi\n"},
        {
            "language": "python",
            "source_code": "def f(x):\n    return x\n",
            "mode": "function",
            "entry_point": "f",
            "tests": [{"input": [1], "expected": 1}, {"code": "def check(c):\n    assert c(2) == 2\n"}],
            "checker": {"kind": "float", "abs_tol": 0.01},
            "limits": {"memory_mb": 512},
            "wait": True,
        },
    ):
        execution = ExecutionIn.model_validate(request)
        old = execution.model_dump(mode="json", exclude={"wait"})  # what gateway/routes/executions.py stored
        plan = DirectExecutionPlan.model_validate(execution.model_dump(exclude={"wait"}))
        assert stored(plan) == {**old, "validation": False}  # an execution, not a problem's validation run


def test_the_plans_vocabulary_is_the_libraries() -> None:
    """The values a plan stores for the fuzzing library and the similarity report are theirs (the metrics library
    keeps its own `Protocol`: it imports nothing of the platform)."""
    from typing import get_args

    from metrics.reports.similarity import Protocol
    from services.lib.fuzzing import DEFAULT_REPEATS, TIMEOUT_RULES
    from services.perturb.axiom.selection import PAPER_SELECT_M
    from services.perturb.axiom.synthesis import PAPER_M

    assert get_args(SimilarityProtocol) == get_args(Protocol)
    assert get_args(TimeoutRule) == TIMEOUT_RULES
    assert SimilarityPlan().repeats == DEFAULT_REPEATS
    assert (SynthesisPlan.model_fields["m"].default, SynthesisPlan.model_fields["select"].default) == (
        PAPER_M,
        PAPER_SELECT_M,
    )


async def test_a_plan_stored_by_the_old_code_reads_back_from_the_database(tmp_path: Path) -> None:
    """Rows as the dict-built code wrote them (the column set directly), read back through the ORM as plans."""
    async with migrated_database(tmp_path, None) as url:
        await db.dispose_engine()
        db.init_engine("tests", url)
        try:
            async with db.session_scope() as session:
                for number, (kind, old, _) in enumerate(OLD_ROWS.values()):
                    session.add(Job(job_id=f"job_{number}", tenant="t", kind=kind, params=old))
            async with db.session_scope() as session:
                for number, (case, (kind, old, added)) in enumerate(OLD_ROWS.items()):
                    job = await session.get(Job, f"job_{number}")
                    assert job is not None
                    assert stored(job.plan(PLANS[kind])) == {**old, **added}, case
        finally:
            await db.dispose_engine()


# ---- Job.params is read through Job.plan() only ----------------------------------------------------------------

# `.params` of things that are not jobs: a parsed function's parameters (the fuzzing library's spec derivation, the
# C-family mutation's type environment), a report's own parameters, a request body's, a method of another class.
NOT_A_JOB = {
    "function": "a parsed function's parameters (services fuzzing and mutation)",
    "candidate": "an overload candidate's parameters (services mutation)",
    "f": "an overload's parameters (services mutation)",
    "report": "a Report row's parameters (the report's own, not a job's)",
    "Report": "the report table's parameters column",
    "body": "a request body's `params` field (POST /v1/metrics)",
}
# `row.params` where `row` is a selected report row (gateway/scrape.py).
REVIEWED_ROWS = {
    ("gateway/scrape.py", "row"): "a row of select(Report.report_id, Report.finished_at, Report.params)",
    (
        "gateway/routes/reports.py",
        "row",
    ): "a row of GET /v1/reports' select(Report.report_id, Report.kind, Report.params, ...)",
}
EXEMPT = {"services/kernel/plans.py", "services/kernel/models.py"}


def _params_uses(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, receiver, enclosing class) of every `.params` attribute in a module."""
    found: list[tuple[int, str, str | None]] = []

    def visit(node: ast.AST, owner: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Attribute) and child.attr == "params":
                found.append((child.lineno, ast.unparse(child.value), owner))
            if isinstance(child, ast.Call) and ast.unparse(child.func) in ("getattr", "setattr"):
                if len(child.args) > 1 and isinstance(child.args[1], ast.Constant) and child.args[1].value == "params":
                    found.append((child.lineno, f"{ast.unparse(child.func)}(...)", owner))
            visit(child, owner)

    visit(ast.parse(path.read_text()), None)
    return found


def test_job_params_is_read_through_plan_only() -> None:
    unreviewed = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in EXEMPT:
                continue
            for line, receiver, owner in _params_uses(path):
                if receiver in NOT_A_JOB or (name, receiver) in REVIEWED_ROWS:
                    continue
                if receiver == "self" and owner not in (None, "Job"):
                    continue  # another class's own attribute or method
                unreviewed.append(f"{name}:{line}: {receiver}.params")
    assert not unreviewed, "read a job's plan with Job.plan() (services/kernel/plans.py):\n" + "\n".join(unreviewed)


def test_the_scan_finds_a_job_params_read(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f(job, live):\n    a = job.params\n    live.params = {}\n    return getattr(job, 'params')\n")
    assert [receiver for _, receiver, _ in _params_uses(probe)] == ["job", "live", "getattr(...)"]
