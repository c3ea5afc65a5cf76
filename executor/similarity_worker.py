"""The similarity worker: scores the code pairs of similarity jobs (POST /v1/similarity).

One task per pair (`score_pair`, subject `<ordinal>@<job>`): take the pair's input spec (given, the problem's, or
derived from the reference's type hints and the problem's tests), generate R x N inputs, run both programs on them
in nsjail (Executor.differential: Algorithm 1 of paper 002), and compute SurfaceSim and the reference-based
metrics. The pair's result is written and its unit counted in one transaction, so a retried or duplicated task
never counts a pair twice; the job succeeds when its last pair is counted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from arq.worker import Retry
from sqlalchemy import update

from executor.run import Executor
from services.codesim import reference_metrics, surface_similarity
from services.fuzzing import (
    DEFAULT_INPUTS_FUNCTION,
    DEFAULT_INPUTS_PROGRAM,
    SpecError,
    derive_spec,
    generate_repetitions,
    parse_spec,
)
from services.kernel import jobs, queue, telemetry, worker
from services.kernel.contracts import LIVE_JOB_STATUSES, Checker, JobStatus, Limits, Mode, TestCase
from services.kernel.db import session_scope
from services.kernel.models import Job, Problem, SimilarityPair, utcnow
from services.kernel.registry import Task, pair_unit
from services.kernel.settings import get_settings

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


def _parse_subject(subject: str) -> tuple[str, int]:
    ordinal, job_id = subject.split("@", 1)
    return job_id, int(ordinal)


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


async def _fail_pair(job_id: str, ordinal: int, message: str, single: bool) -> None:
    async with session_scope() as session:
        moved = await session.execute(
            update(SimilarityPair)
            .where(
                SimilarityPair.job_id == job_id, SimilarityPair.ordinal == ordinal, SimilarityPair.status == "queued"
            )
            .values(status="failed", error=message[:MESSAGE_CAP], finished_at=utcnow())
        )
        if not moved.rowcount:  # type: ignore[attr-defined]
            return
        if single:
            await jobs.finish(session, job_id, JobStatus.FAILED, error=message[:MESSAGE_CAP])
        await jobs.count_unit_once(session, job_id, pair_unit(ordinal))


@queue.task(Task.SCORE_PAIR)
async def score_pair(ctx: dict[str, Any], subject: str) -> None:
    """Score one pair of a similarity job, once."""
    job_id, ordinal = _parse_subject(subject)
    async with session_scope() as session:
        job = await session.get(Job, job_id)
        pair = await session.get(SimilarityPair, (job_id, ordinal))
        if job is None or pair is None or job.status not in LIVE_JOB_STATUSES or pair.status != "queued":
            return
        await jobs.mark_running(session, job_id)
        params = dict(job.params or {})
        tenant = job.tenant
        problem = await session.get(Problem, pair.problem_pk) if pair.problem_pk is not None else None
        tests = [TestCase.model_validate(t) for t in (problem.tests if problem else [])]
        checker = Checker.model_validate(problem.checker) if problem else Checker()
        limits = Limits.model_validate(problem.limits) if problem else Limits()
        session.expunge(pair)
    single = bool(params.get("single"))
    mode = Mode(pair.mode)
    started = time.perf_counter()
    try:
        # Within the queue's task limit, so that this try, not the queue, says how a pair that ran too long ends.
        async with asyncio.timeout(_deadline_s()):
            try:
                spec_used = await asyncio.to_thread(_input_spec, pair, problem, tests)
            except SpecError as exc:
                await _fail_pair(job_id, ordinal, f"no input spec: {exc}", single)
                return
            spec = parse_spec(spec_used["spec"])
            n_inputs = params.get("n_inputs") or (
                DEFAULT_INPUTS_FUNCTION if mode == Mode.FUNCTION else DEFAULT_INPUTS_PROGRAM
            )
            repeats, seed = int(params.get("repeats", 5)), int(params.get("seed", 0))
            repetitions = await asyncio.to_thread(generate_repetitions, spec, n_inputs, repeats, seed)
            executor: Executor = ctx["executor"]
            outcome = await executor.differential(
                tenant=tenant,
                reference_language=pair.reference_language,
                reference_source=pair.reference_source,
                candidate_language=pair.candidate_language,
                candidate_source=pair.candidate_source,
                mode=mode,
                entry_point=pair.entry_point,
                repetitions=repetitions,
                time_budget_s=float(params.get("time_budget_s", 60.0)),
                per_input_timeout_s=float(params.get("per_input_timeout_s", 2.0)),
                float_tolerance=params.get("float_tolerance"),
                timeout_rule=params.get("timeout_rule", "paper"),
                checker=checker,
                limits=limits,
            )
            by_language = params.get("crystal_ignore") or {}
            crystal_ignore = [tuple(ngram) for ngram in by_language.get(pair.candidate_language, [])]
            surface = await asyncio.to_thread(_surface_and_metrics, pair, crystal_ignore)
    except ValueError as exc:
        # A request the executor cannot run as given (e.g. no such function): the pair's answer, not a retry.
        await _fail_pair(job_id, ordinal, str(exc), single)
        return
    except TimeoutError:
        if not _is_last_try(ctx):
            raise Retry(defer=RETRY_DELAY_S) from None
        limit = get_settings().job_timeout_s
        await _fail_pair(job_id, ordinal, f"scoring the pair ran past the task limit ({limit} s): lower R x T", single)
        return
    except Exception as exc:
        if not _is_last_try(ctx):
            log.warning("pair %s failed on try %s, tried again", subject, ctx.get("job_try", 1), exc_info=True)
            raise Retry(defer=RETRY_DELAY_S) from None
        log.exception("pair %s failed on its last try", subject)
        await _fail_pair(job_id, ordinal, f"internal error ({type(exc).__name__})", single)
        return
    fuzzing = outcome.to_json()
    result = {
        "df_score": fuzzing.pop("df_score"),
        **fuzzing,
        **surface,
        "n_inputs": n_inputs,
        "repeats": repeats,
        "seed": seed,
        "timeout_rule": params.get("timeout_rule", "paper"),
        "input_spec": spec_used,
        "duration_s": round(time.perf_counter() - started, 3),
    }
    failed = outcome.status != "ok"
    async with session_scope() as session:
        moved = await session.execute(
            update(SimilarityPair)
            .where(
                SimilarityPair.job_id == job_id, SimilarityPair.ordinal == ordinal, SimilarityPair.status == "queued"
            )
            .values(
                status="failed" if failed else "scored",
                result=json.loads(json.dumps(result, allow_nan=False, default=str)),
                error=(outcome.message or outcome.status)[:MESSAGE_CAP] if failed else None,
                finished_at=utcnow(),
            )
        )
        if not moved.rowcount:  # type: ignore[attr-defined]
            return  # a duplicate delivery got here first
        if single:
            if failed:
                await jobs.finish(session, job_id, JobStatus.FAILED, error=(outcome.message or outcome.status))
            else:
                await session.execute(update(Job).where(Job.job_id == job_id).values(result=result))
        await jobs.count_unit_once(session, job_id, pair_unit(ordinal))
    telemetry.similarity_pairs.labels("failed" if failed else "scored").inc()


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
    ctx["executor"] = Executor(
        settings.data_dir / "similarity",
        slots=settings.executor_slots,
        nsjail_path=settings.nsjail_path,
        sandbox_uid=settings.sandbox_uid,
    )


def run_worker() -> None:
    """Run the similarity worker until SIGTERM/SIGINT."""
    worker.run(worker.build_worker("similarity", functions=[score_pair], on_startup=_startup))
