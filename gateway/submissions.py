"""Writing problems and attempts: validation beyond the schema, idempotency by natural key, and views."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from gateway import testcheck, validation
from gateway.calibrated import Served, calibrated_fields, served_calibrations
from gateway.errors import ApiError
from gateway.panel import panels
from gateway.schemas import AttemptIn, ProblemIn
from metrics.panel import DEFINITION, PANEL_REPEAT, PANEL_STATUS, Consensus
from services.kernel import attempts
from services.kernel.contracts import Condition, TestResult
from services.kernel.models import Attempt, Execution, Job, Judgment, Problem


async def put_problem(
    session: AsyncSession, tenant: str, body: ProblemIn, loc: list[str | int], *, checked: bool = False
) -> tuple[Problem, bool]:
    """Store a problem from its API body (see attempts.put_problem), its test code checked first (a 422 naming
    `tests[i].code` that uses a name it never defines; gateway/testcheck) unless the caller `checked` it."""
    if not checked:
        await testcheck.check_tests(body.tests, body.entry_point, loc)
    payload = body.model_dump(mode="json", exclude={"problem_id"})
    problem, created = await attempts.put_problem(session, tenant, body.problem_id, payload, loc)
    if created:
        # Its references' runs, committed with it; POST /v1/problems queues them, the reconciler any other's.
        validation.start(session, problem)
    return problem, created


async def put_attempt(
    session: AsyncSession, tenant: str, body: AttemptIn, job_id: str, loc: list[str | int]
) -> tuple[Attempt, bool]:
    """Store an attempt from its API body, with its problem given inline or by id (see attempts.create_attempt)."""
    if body.problem is not None:
        problem, _ = await put_problem(session, tenant, body.problem, [*loc, "problem"])
    else:
        assert body.problem_id is not None
        found = await attempts.find_problem(session, tenant, body.problem_id)
        if found is None:
            raise attempts.SubmissionError([*loc, "problem_id"], f"no problem {body.problem_id!r}", 404)
        problem = found
    _check_parent(body, await _own_parents(session, tenant, [body]), loc)
    attempt, created = await attempts.create_attempt(session, tenant, problem, _new_attempt(body), job_id, loc)
    if created:
        attempt.parent_attempt_id = body.parent_attempt_id
    return attempt, created


async def _own_parents(session: AsyncSession, tenant: str, bodies: Sequence[AttemptIn]) -> set[str]:
    """Which of the `parent_attempt_id`s the bodies name are the tenant's own attempts, in one read."""
    wanted = sorted({body.parent_attempt_id for body in bodies if body.parent_attempt_id is not None})
    if not wanted:
        return set()
    query = select(Attempt.attempt_id).where(Attempt.attempt_id.in_(wanted), Attempt.tenant == tenant)
    return set((await session.scalars(query)).all())


def _check_parent(body: AttemptIn, own: set[str], loc: list[str | int]) -> None:
    """A `parent_attempt_id` the tenant has no attempt by (another tenant's, or none at all) is a 404 naming the
    field, as every foreign id is."""
    if body.parent_attempt_id is not None and body.parent_attempt_id not in own:
        raise attempts.SubmissionError([*loc, "parent_attempt_id"], f"no attempt {body.parent_attempt_id!r}", 404)


async def put_attempts(
    session: AsyncSession, tenant: str, bodies: Sequence[AttemptIn], job_id: str, loc: list[str | int]
) -> list[tuple[Attempt, bool]]:
    """`put_attempt` for each body of a batch, in order, with the same answers and errors (the first failing
    item's), but one read of the problems named by id, one of the uids and one INSERT (attempts.AttemptBatch)."""
    # Every inline problem's test code is checked before anything is written: a check waits on a jail, and on SQLite a
    # flushed INSERT holds the database's write lock until the commit (one check per distinct problem body).
    checked: set[str] = set()
    for index, body in enumerate(bodies):
        if body.problem is not None:
            key = body.problem.model_dump_json(include={"tests", "entry_point"})
            if key not in checked:
                await testcheck.check_tests(body.problem.tests, body.problem.entry_point, [*loc, index, "problem"])
                checked.add(key)
    batch = attempts.AttemptBatch(session, tenant, job_id)
    await batch.load_uids([body.attempt_uid for body in bodies if body.attempt_uid is not None])
    problems = await attempts.find_problems(session, tenant, [b.problem_id for b in bodies if b.problem_id])
    parents = await _own_parents(session, tenant, bodies)
    stored = []
    for index, body in enumerate(bodies):
        item = [*loc, index]
        if body.problem is not None:
            problem, _ = await put_problem(session, tenant, body.problem, [*item, "problem"], checked=True)
            problems[problem.problem_id] = problem
        else:
            assert body.problem_id is not None
            if body.problem_id not in problems:
                raise attempts.SubmissionError([*item, "problem_id"], f"no problem {body.problem_id!r}", 404)
            problem = problems[body.problem_id]
        _check_parent(body, parents, item)
        attempt, created = batch.add(problem, _new_attempt(body), item)
        if created:
            attempt.parent_attempt_id = body.parent_attempt_id
        stored.append((attempt, created))
    await batch.flush()
    return stored


def _new_attempt(body: AttemptIn) -> attempts.NewAttempt:
    return attempts.NewAttempt(
        language=body.language,
        source_code=body.source_code,
        # The fields that make two submissions of one `attempt_uid` "the same" (a parent only when one is named, so
        # that the content of an attempt without one is what it was before the field existed).
        content=body.model_dump(
            mode="json",
            exclude={"attempt_uid", "problem_id", "problem"}
            | (set() if body.parent_attempt_id else {"parent_attempt_id"}),
        ),
        attempt_uid=body.attempt_uid,
        participant=body.participant,
        turn=body.turn,
        submitted_at=body.submitted_at,
        context=body.context,
        label=body.label.model_dump() if body.label else None,
        judges=body.judges,
        conditions=body.conditions,
        repeats=body.repeats,
    )


# What an attempt view shows of its `mutation` record: how a mutant was made and what verification found. A
# synthesis job's working data (calibration reports, which quote test results, and per-job entries on seeds) is
# served only by the benchmarks routes, which hide what a hidden test printed.
_PUBLIC_MUTATION_KEYS = ("seed", "line", "column", "diff", "verification")
_PUBLIC_AXIOM_KEYS = (
    "kind",
    "target_score",
    "parent_score",
    "rules",
    "skipped",
    "labels",
    "seed",
    "prompt_version",
    "kept",
    "calibration",  # the annotator's recorded score and note
)


def public_mutation(mutation: dict[str, Any] | None) -> dict[str, Any] | None:
    if mutation is None:
        return None
    shown = {key: mutation[key] for key in _PUBLIC_MUTATION_KEYS if key in mutation}
    axiom = mutation.get("axiom")
    if isinstance(axiom, dict):
        shown["axiom"] = {key: axiom[key] for key in _PUBLIC_AXIOM_KEYS if key in axiom}
    return shown


def public_test_result(test: TestResult) -> dict[str, Any]:
    """What an attempt shows of one test: never stdout, stderr or the message, which for a hidden test could quote
    its input or expected value. `time_ms` is CPU time (`cpu_time_ms` says so by name); `wall_time_ms` is elapsed."""
    return {
        "index": test.index,
        "status": test.status,
        "time_ms": test.cpu_time_ms,
        "cpu_time_ms": test.cpu_time_ms,
        "wall_time_ms": test.wall_time_ms,
        "memory_kb": test.memory_kb,
        "public": test.public,
        "wait_time_ms": test.wait_time_ms,
        "stopped_by": test.stopped_by,
        "runs": test.runs,
        "retryable": test.retryable,
    }


def judgment_view(row: Judgment, served: Served | None = None) -> dict[str, Any]:
    """The public JSON of a judgment (api.md), with its calibrated probability where an applied calibration of its
    judge x condition covers it (`served`, gateway/calibrated.py), null otherwise."""
    fields = row.fields or {}
    return {
        "judge": row.judge,
        "condition": row.condition,
        "repeat": row.repeat,
        "status": row.status,
        "p_ac": row.p_ac,
        **calibrated_fields(row, served or {}),
        "s_algo": fields.get("s_algo"),
        "s_robust": fields.get("s_robust"),
        "score": row.score,
        "rationale": fields.get("rationale"),
        "served_model": row.served_model,
        "requested_model": row.requested_model,
        "tries": row.tries,
        "latency_ms": row.latency_ms,
        "error": row.error,
        "rubric": row.rubric,
        "prompt_version": row.prompt_version,
        "provenance": row.provenance,
        "tokens_in": row.tokens_in,
        "tokens_out": row.tokens_out,
        "weighted_p_ac": row.weighted_p_ac,
        "weighted_score": row.weighted_score,
        "score_probs": row.score_probs,
        "weighting": row.weighting,
        "fields": row.fields,
    }


async def attempt_view(session: AsyncSession, attempt: Attempt) -> dict[str, Any]:
    """The public JSON of an attempt (api.md), with per-test results but never hidden test data."""
    return (await attempt_views(session, [attempt]))[0]


# GET /v1/attempts/{id}, which clients poll: the attempt with its problem's id, its execution and whether it has
# any judgment, in one statement built once (its cache key is computed once, not per request).
_ATTEMPT_WITH_EXECUTION = (
    select(
        Attempt,
        Problem.problem_id,
        Execution,
        exists().where(Judgment.attempt_id == Attempt.attempt_id).label("judged"),
    )
    .outerjoin(Problem, Problem.id == Attempt.problem_pk)
    .outerjoin(Execution, and_(Execution.attempt_id == Attempt.attempt_id, Execution.run == 0))
    .where(Attempt.attempt_id == bindparam("attempt_id"))
)
_JUDGMENTS_OF_ATTEMPT = (
    select(Judgment)
    .where(Judgment.attempt_id == bindparam("attempt_id"))
    .order_by(Judgment.judge, Judgment.condition, Judgment.repeat)
)


async def find_attempt_view(session: AsyncSession, tenant: str, attempt_id: str) -> dict[str, Any] | None:
    """`attempt_view` of the tenant's attempt `attempt_id` (None if it has none by that id), in one statement while
    it has no judgment (then one for its judgments, and one for the panel populations if any counts), instead of
    `session.get` and `attempt_view`'s four."""
    found = (await session.execute(_ATTEMPT_WITH_EXECUTION, {"attempt_id": attempt_id})).first()
    if found is None or found[0].tenant != tenant:
        return None
    attempt, problem_id, execution, judged = found
    rows = list(await session.scalars(_JUDGMENTS_OF_ATTEMPT, {"attempt_id": attempt_id})) if judged else []
    by_attempt = await panels(session, [attempt], {attempt_id: rows}) if rows else {}
    served = await served_calibrations(session, tenant, (row.judge for row in rows)) if rows else {}
    return _attempt_json(attempt, problem_id or "", execution, rows, by_attempt.get(attempt_id, {}), served)


async def attempt_views(session: AsyncSession, page: Sequence[Attempt]) -> list[dict[str, Any]]:
    """The public JSON of a page of attempts, in page order, in a bounded number of statements whatever its size:
    one each for their problems, executions and judgments, and one for the panel populations and one for the
    served calibrations (per tenant)."""
    if not page:
        return []
    ids = [attempt.attempt_id for attempt in page]
    problems = select(Problem.id, Problem.problem_id).where(Problem.id.in_({a.problem_pk for a in page}))
    problem_ids: dict[int, str] = dict((await session.execute(problems)).all())
    executions = {
        row.attempt_id: row
        for row in await session.scalars(select(Execution).where(Execution.attempt_id.in_(ids), Execution.run == 0))
    }
    judgments: dict[str, list[Judgment]] = defaultdict(list)
    for row in await session.scalars(
        select(Judgment)
        .where(Judgment.attempt_id.in_(ids))
        .order_by(Judgment.attempt_id, Judgment.judge, Judgment.condition, Judgment.repeat)
    ):
        judgments[row.attempt_id].append(row)
    by_attempt = await panels(session, page, judgments)
    served: dict[str, Served] = {}
    for tenant in sorted({attempt.tenant for attempt in page}):
        names = {row.judge for a in page if a.tenant == tenant for row in judgments.get(a.attempt_id, [])}
        served[tenant] = await served_calibrations(session, tenant, names)
    return [
        _attempt_json(
            attempt,
            problem_ids.get(attempt.problem_pk, ""),
            executions.get(attempt.attempt_id),
            judgments.get(attempt.attempt_id, []),
            by_attempt.get(attempt.attempt_id, {}),
            served[attempt.tenant],
        )
        for attempt in page
    ]


def missing_judges(rows: Sequence[Judgment], condition: str, used: Collection[str]) -> list[dict[str, str]]:
    """The judges with a repeat-0 judgment of the attempt under ``condition`` that the panel did not use, each with
    why: its status (``failed``, ``not_applicable``, ``queued``...), or ``no score`` for an ok row without one."""
    missing: dict[str, str] = {}
    for row in rows:
        if row.condition == condition and row.repeat == PANEL_REPEAT and row.judge not in used:
            missing[row.judge] = "no score" if row.status == PANEL_STATUS else str(row.status)
    return [{"judge": judge, "reason": reason} for judge, reason in sorted(missing.items())]


def panel_view(
    attempt: Attempt, by_condition: Mapping[str, Consensus], rows: Sequence[Judgment] = ()
) -> dict[str, Any] | None:
    """The attempt's `panel`: its first condition's consensus, and every condition's in `by_condition`, each with
    its `definition`, the `used_judges` and the size of each one's `population`, and the `missing_judges` (of
    ``rows``, the attempt's judgments) with why; `unscored_conditions`: the conditions it has judgments under but
    no panel value, each with its missing judges (none is silently dropped); None when no judgment of it counts
    (none is ok yet, or it is a perturbation mutant, which the panel leaves out)."""
    if not by_condition:
        return None
    views = {
        c: {
            "consensus": v.consensus,
            "judges": v.judges,
            "definition": DEFINITION,
            "used_judges": list(v.used),
            "population": dict(v.population),
            "missing_judges": missing_judges(rows, c, v.used),
        }
        for c, v in sorted(by_condition.items())
    }
    primary = (attempt.conditions or [Condition.BLIND])[0]
    unscored = {
        condition: missing_judges(rows, condition, ())
        for condition in sorted({row.condition for row in rows} - set(by_condition))
    }
    unscored = {condition: judges for condition, judges in unscored.items() if judges}
    return {**views.get(primary, {}), "condition": primary, "by_condition": views, "unscored_conditions": unscored}


def _attempt_json(
    attempt: Attempt,
    problem_id: str,
    execution: Execution | None,
    rows: Sequence[Judgment],
    by_condition: Mapping[str, Consensus],
    served: Served | None = None,
) -> dict[str, Any]:
    tests = [public_test_result(TestResult.model_validate(test)) for test in (execution.tests if execution else [])]
    return {
        "attempt_id": attempt.attempt_id,
        "attempt_uid": attempt.attempt_uid,
        "problem_id": problem_id,
        "language": attempt.language,
        "status": attempt.status,
        "verdict": attempt.verdict,
        "passed": attempt.passed,
        "total": attempt.total,
        "compile_output": execution.compile_output if execution else None,
        "tests": tests,
        "judgments": [judgment_view(row, served) for row in rows],
        "panel": panel_view(attempt, by_condition, rows),
        "participant": attempt.participant,
        "turn": attempt.turn,
        "submitted_at": attempt.submitted_at,
        "parent_attempt_id": attempt.parent_attempt_id,
        "operator": attempt.operator,
        "arm": attempt.arm,
        "severity": attempt.severity,
        "guard_context": attempt.guard_context,
        "mutation": public_mutation(attempt.mutation),
        "job_id": attempt.job_id,
        "created_at": attempt.created_at,
        "finished_at": attempt.finished_at,
    }


def problem_view(problem: Problem, *, with_hidden: bool, jobs: Mapping[str, Job] | None = None) -> dict[str, Any]:
    """The public JSON of a problem (api.md). Hidden tests (`public` false) are the ground truth attempts
    are scored on: they are listed only `with_hidden` (admin and author keys); otherwise `tests` holds the
    public tests alone and `hidden_tests` says how many more there are. `validation` is read from `jobs`, its
    validation runs (validation.load_jobs): a failing test is named by index and verdict alone."""
    tests = list(problem.tests or [])
    hidden = sum(1 for test in tests if not test.get("public"))
    return {
        "problem_id": problem.problem_id,
        "title": problem.title,
        "statement": problem.statement,
        "mode": problem.mode,
        "entry_point": problem.entry_point,
        "tests": tests if with_hidden else [test for test in tests if test.get("public")],
        "hidden_tests": hidden,
        "checker": problem.checker,
        "limits": problem.limits,
        "references": problem.references,
        "input_spec": problem.input_spec,
        "validation": validation.view(problem, jobs or {}),
        "created_at": problem.created_at,
    }


def not_found(what: str, ident: str) -> ApiError:
    return ApiError(404, f"no {what} {ident!r}")
