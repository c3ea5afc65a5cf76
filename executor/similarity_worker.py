"""The similarity worker: scores the code pairs of similarity jobs (POST /v1/similarity).

One task per pair (`score_pair`, subject `<ordinal>@<job>`): take the pair's input spec (given, the problem's, or
derived from the reference's type hints and the problem's tests), generate R x N inputs, run both programs on them
in nsjail (executor/differential: Algorithm 1 of paper 002), and compute SurfaceSim and the reference-based
metrics. The pair's result is written and its unit counted in one transaction, so a retried or duplicated task
never counts a pair twice; the job succeeds when its last pair is counted.

A pair's cost is bounded across all its tries (`pair_budget_s`: its repetitions' budgets plus what building,
loading and measuring may take, at most one try's task limit): the time each try takes is kept in Redis, a try gets
what is left, and a pair that runs out is failed, not tried again. A cancel of its job stops a running pair (its
jails killed: services/kernel/cancel.py), and a queued pair of a job this process heard was cancelled is skipped
without reading the database.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from arq.worker import Retry
from redis.exceptions import RedisError
from sqlalchemy import update

from executor.builds import COMPILE_WALL_S
from executor.differential import LOAD_TIMEOUT_S, DifferentialRequest, fuzz_pair
from executor.engine import Engine
from services.kernel import cancel, jobs, queue, telemetry, worker
from services.kernel.contracts import LIVE_JOB_STATUSES, Checker, JobStatus, Limits, Mode, PairStatus, TestCase
from services.kernel.db import session_scope
from services.kernel.models import Job, Problem, SimilarityPair, utcnow
from services.kernel.plans import SimilarityPlan
from services.kernel.registry import Task
from services.kernel.settings import get_settings
from services.kernel.subjects import pair_unit, parse_pair_subject
from services.lib.codesim import reference_metrics, surface_similarity
from services.lib.fuzzing import (
    DEFAULT_INPUTS_FUNCTION,
    DEFAULT_INPUTS_PROGRAM,
    SpecError,
    derive_spec,
    generate_repetitions,
    inputs_of_tests,
    mix_tests,
    parse_spec,
)

log = logging.getLogger("tribunal.similarity")

MESSAGE_CAP = 500
# A try that failed is run again this much later (arq's Retry: a plain exception would end the task for good,
# leaving the pair queued until the reconciler's next look at an expired result).
RETRY_DELAY_S = 1.0


def _is_last_try(ctx: dict[str, Any]) -> bool:
    return int(ctx.get("job_try", 1)) >= get_settings().job_max_tries


def _deadline_s() -> float:
    """How long one try may take: the queue's task limit (TRIBUNAL_JOB_TIMEOUT_S) less a margin to record the end."""
    limit = float(get_settings().job_timeout_s)
    return max(1.0, limit - min(10.0, limit * 0.2))


# What a pair may take beyond its repetitions' budgets (R x (T + 1 s), the jails' own wall limit): loading both
# programs (the harness's deadline), two builds at the compiler's wall limit, and deriving the spec, generating the
# inputs and computing the metrics.
PAIR_OVERHEAD_S = LOAD_TIMEOUT_S + 2 * COMPILE_WALL_S + 15.0
# Seconds a pair's tries have taken so far (`<prefix><subject>`), so that its budget holds across them.
PAIR_SPENT_PREFIX = "tribunal:pair-spent:"
PAIR_SPENT_TTL_S = 24 * 3600


def pair_budget_s(plan: SimilarityPlan) -> float:
    """The most one pair may take, all its tries together: its repetitions' budgets (R x (T + 1 s)) plus
    PAIR_OVERHEAD_S, and never more than one try's task limit (_deadline_s), so that no pair holds a similarity
    worker for the queue's time limit times its tries."""
    per_repetition = plan.time_budget_s + 1.0
    return min(_deadline_s(), plan.repeats * per_repetition + PAIR_OVERHEAD_S)


async def _spent_s(ctx: dict[str, Any], subject: str) -> float:
    """Seconds this pair's earlier tries took (0 if unknown: Redis lost it, or this is the first try)."""
    redis = ctx.get("redis")
    if redis is None:
        return 0.0
    try:
        value = await redis.get(PAIR_SPENT_PREFIX + subject)
    except (RedisError, OSError):
        return 0.0
    return float(value) if value else 0.0


async def _charge(ctx: dict[str, Any], subject: str, seconds: float) -> None:
    """Add a try's seconds to the pair's spent time (best effort: at worst a retry gets the whole budget again)."""
    redis = ctx.get("redis")
    if redis is None:
        return
    key = PAIR_SPENT_PREFIX + subject
    try:
        async with redis.pipeline(transaction=True) as pipe:
            pipe.incrbyfloat(key, round(seconds, 3))
            pipe.expire(key, PAIR_SPENT_TTL_S)
            await pipe.execute()
    except (RedisError, OSError) as exc:
        log.warning("could not record the time pair %s took (%s)", subject, exc)


def _input_spec(pair: SimilarityPair, problem: Problem | None, tests: list[TestCase]) -> dict[str, Any]:
    """The spec the pair is fuzzed with, and where it came from: the request's, the problem's, or derived."""
    if pair.input_spec is not None:
        return {"spec": pair.input_spec, "origin": "request", "sources": {}, "notes": []}
    if problem is not None and problem.input_spec is not None:
        spec = parse_spec(problem.input_spec)  # stored unchecked by older versions: checked here
        return {"spec": spec.model_dump(mode="json"), "origin": "problem", "sources": {}, "notes": []}
    derived = derive_spec(
        mode=Mode(pair.mode), reference_source=pair.reference_source, entry_point=pair.entry_point, tests=tests
    )
    return {
        "spec": derived.spec.model_dump(mode="json"),
        "origin": "derived",
        "sources": dict(derived.sources),
        "notes": list(derived.notes),
    }


def _surface_and_metrics(pair: SimilarityPair, crystal_ignore: list[tuple[str, ...]]) -> dict[str, Any]:
    """SurfaceSim (LoCaL Eq. 1) and the reference-based metrics, when both programs are in one language."""
    if pair.reference_language != pair.candidate_language:
        reason = "the two programs' languages differ"
        return {"surface_similarity": None, "cems": None, "metric_errors": {"*": reason}}
    language = pair.reference_language
    surface = surface_similarity(pair.reference_source, pair.candidate_source, language)
    cems = reference_metrics(pair.reference_source, pair.candidate_source, language, crystal_ignore=crystal_ignore)
    return {"surface_similarity": surface.to_json(), "cems": cems.values, "metric_errors": cems.errors}


async def _end_pair(job_id: str, ordinal: int, status: PairStatus, message: str, single: bool) -> None:
    """A pair not yet scored ends `failed` (counted; a single pair's job fails with it) or `cancelled` (its job's
    cancel wrote that already, and counts nothing)."""
    async with session_scope() as session:
        moved = await session.execute(
            update(SimilarityPair)
            .where(
                SimilarityPair.job_id == job_id,
                SimilarityPair.ordinal == ordinal,
                SimilarityPair.status == PairStatus.QUEUED,
            )
            .values(status=status, error=message[:MESSAGE_CAP], finished_at=utcnow())
        )
        if not moved.rowcount or status == PairStatus.CANCELLED:  # type: ignore[attr-defined]
            return
        if single:
            await jobs.finish(session, job_id, JobStatus.FAILED, error=message[:MESSAGE_CAP])
        await jobs.count_unit_once(session, job_id, pair_unit(ordinal))


async def _fail_pair(job_id: str, ordinal: int, message: str, single: bool) -> None:
    await _end_pair(job_id, ordinal, PairStatus.FAILED, message, single)


class _Unscorable(Exception):
    """The pair's answer is that it cannot be scored as given (no input spec): no retry."""


@dataclass(frozen=True)
class _Loaded:
    """What a try of a pair read from the database."""

    pair: SimilarityPair
    problem: Problem | None
    tests: list[TestCase]
    checker: Checker
    limits: Limits
    plan: SimilarityPlan
    tenant: str


async def _score(ctx: dict[str, Any], loaded: _Loaded, deadline_s: float) -> dict[str, Any]:
    """Fuzz the pair and measure it, within `deadline_s`: the pair's result (its `status` key says ok or not)."""
    pair, plan = loaded.pair, loaded.plan
    mode = Mode(pair.mode)
    started = time.perf_counter()
    async with asyncio.timeout(deadline_s):
        try:
            spec_used = await asyncio.to_thread(_input_spec, pair, loaded.problem, loaded.tests)
        except SpecError as exc:
            raise _Unscorable(f"no input spec: {exc}") from None
        spec = parse_spec(spec_used["spec"])
        n_inputs = plan.n_inputs or (DEFAULT_INPUTS_FUNCTION if mode == Mode.FUNCTION else DEFAULT_INPUTS_PROGRAM)
        repeats, seed = plan.repeats, plan.seed
        repetitions = await asyncio.to_thread(generate_repetitions, spec, n_inputs, repeats, seed)
        # The problem's own tests join every repetition (services/lib/fuzzing/mix.py): a program that told its tests'
        # inputs from generated ones, and answered them differently, is compared on them too.
        tests = inputs_of_tests(mode, pair.entry_point, loaded.tests)
        repetitions, positions = mix_tests(repetitions, tests, seed)
        engine: Engine = ctx["engine"]
        request = DifferentialRequest(
            tenant=loaded.tenant,
            reference_language=pair.reference_language,
            reference_source=pair.reference_source,
            candidate_language=pair.candidate_language,
            candidate_source=pair.candidate_source,
            mode=mode,
            entry_point=pair.entry_point,
            repetitions=repetitions,
            time_budget_s=plan.time_budget_s,
            per_input_timeout_s=plan.per_input_timeout_s,
            float_tolerance=plan.float_tolerance,
            timeout_rule=plan.timeout_rule,
            checker=loaded.checker,
            limits=loaded.limits,
            test_positions=positions,
        )
        outcome = await fuzz_pair(engine, request)
        crystal_ignore = [tuple(ngram) for ngram in plan.crystal_ignore.get(pair.candidate_language, [])]
        surface = await asyncio.to_thread(_surface_and_metrics, pair, crystal_ignore)
    fuzzing = outcome.to_json()
    return {
        "df_score": fuzzing.pop("df_score"),
        **fuzzing,
        **surface,
        "n_inputs": n_inputs,
        "test_inputs": len(tests),
        "repeats": repeats,
        "seed": seed,
        "timeout_rule": plan.timeout_rule,
        "input_spec": spec_used,
        "duration_s": round(time.perf_counter() - started, 3),
    }


@queue.task(Task.SCORE_PAIR)
async def score_pair(ctx: dict[str, Any], subject: str) -> None:
    """Score one pair of a similarity job, once, within its budget across every try (pair_budget_s). A cancel of
    its job stops it (its jails killed) and leaves it `cancelled`."""
    job_id, ordinal = parse_pair_subject(subject)
    watch = cancel.watch_of(ctx)
    if watch.known_cancelled(job_id):
        return  # a pair of a job cancelled while it was queued: skipped without a look at the database
    async with session_scope() as session:
        job = await session.get(Job, job_id)
        pair = await session.get(SimilarityPair, (job_id, ordinal))
        if job is None or pair is None or job.status not in LIVE_JOB_STATUSES or pair.status != PairStatus.QUEUED:
            return
        await jobs.mark_running(session, job_id)
        problem = await session.get(Problem, pair.problem_pk) if pair.problem_pk is not None else None
        loaded = _Loaded(
            pair=pair,
            problem=problem,
            tests=[TestCase.model_validate(t) for t in (problem.tests if problem else [])],
            checker=Checker.model_validate(problem.checker) if problem else Checker(),
            limits=Limits.model_validate(problem.limits) if problem else Limits(),
            plan=job.plan(SimilarityPlan),
            tenant=job.tenant,
        )
        session.expunge(pair)
    single = loaded.plan.single
    budget = pair_budget_s(loaded.plan)
    remaining = budget - await _spent_s(ctx, subject)
    if remaining <= 0:
        await _fail_pair(job_id, ordinal, f"scoring the pair used its budget ({budget:g} s) on earlier tries", single)
        return
    started = time.perf_counter()
    try:
        # Within the pair's budget, so that this try, not the queue, says how a pair that ran too long ends.
        result = await watch.run(job_id, _score(ctx, loaded, min(_deadline_s(), remaining)))
    except (_Unscorable, ValueError) as exc:
        # A request the executor cannot run as given (e.g. no such function): the pair's answer, not a retry.
        await _fail_pair(job_id, ordinal, str(exc), single)
        return
    except TimeoutError:
        # Not tried again: the same inputs would take as long, and the budget holds across tries.
        await _fail_pair(
            job_id,
            ordinal,
            f"scoring the pair ran past its budget ({budget:g} s: R x (T + 1 s) plus {PAIR_OVERHEAD_S:g} s to build, "
            f"load and measure, at most the task limit of {get_settings().job_timeout_s} s): lower R x T",
            single,
        )
        return
    except Exception as exc:
        if not _is_last_try(ctx):
            log.warning("pair %s failed on try %s, tried again", subject, ctx.get("job_try", 1), exc_info=True)
            raise Retry(defer=RETRY_DELAY_S) from None
        log.exception("pair %s failed on its last try", subject)
        await _fail_pair(job_id, ordinal, f"internal error ({type(exc).__name__})", single)
        return
    finally:
        await _charge(ctx, subject, time.perf_counter() - started)
    if isinstance(result, cancel.Stopped):
        await _end_pair(job_id, ordinal, PairStatus.CANCELLED, "its job was cancelled", single)
        telemetry.similarity_pairs.labels(PairStatus.CANCELLED).inc()
        return
    message = str(result.get("message") or "")
    failed = result["status"] != "ok"
    async with session_scope() as session:
        moved = await session.execute(
            update(SimilarityPair)
            .where(
                SimilarityPair.job_id == job_id,
                SimilarityPair.ordinal == ordinal,
                SimilarityPair.status == PairStatus.QUEUED,
            )
            .values(
                status=PairStatus.FAILED if failed else PairStatus.SCORED,
                result=json.loads(json.dumps(result, allow_nan=False, default=str)),
                error=(message or result["status"])[:MESSAGE_CAP] if failed else None,
                finished_at=utcnow(),
            )
        )
        if not moved.rowcount:  # type: ignore[attr-defined]
            return  # a duplicate delivery got here first, or the job was cancelled
        if single:
            if failed:
                await jobs.finish(session, job_id, JobStatus.FAILED, error=(message or result["status"]))
            else:
                await session.execute(
                    update(Job).where(Job.job_id == job_id, Job.status.in_(LIVE_JOB_STATUSES)).values(result=result)
                )
        await jobs.count_unit_once(session, job_id, pair_unit(ordinal))
    telemetry.similarity_pairs.labels(PairStatus.FAILED if failed else PairStatus.SCORED).inc()


def _warm_up() -> None:
    """Import and initialise the metric libraries (CodeBLEU's grammars, nltk, tree-sitter, Pygments) once, so that
    the first pair does not pay seconds of imports inside its task time."""
    program = "def f(x):\n    return x + 1\n"
    surface_similarity(program, program, "python")
    reference_metrics(program, program, "python", crystal_ignore=[])


async def _startup(ctx: dict[str, Any]) -> None:
    settings = get_settings()
    telemetry.start_similarity_series()
    await asyncio.to_thread(_warm_up)
    ctx["engine"] = Engine(
        settings.data_dir / "similarity",
        slots=settings.executor_slots,
        nsjail_path=settings.nsjail_path,
        sandbox_uid=settings.sandbox_uid,
    )


def run_worker() -> None:
    """Run the similarity worker until SIGTERM/SIGINT."""
    worker.run(worker.build_worker("similarity", functions=[score_pair], on_startup=_startup))
