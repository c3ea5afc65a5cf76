"""The attempt lifecycle, in one place: create (single, batch, mutant), claim a stage, finish a stage, fail.

An attempt is `queued`, then `running` while any stage of its pipeline is left, then `done`, `failed` or
`cancelled`. Its `pipeline` (which stages, in order) is data chosen at creation (`pipeline_for`): execute -> judge
for a judged attempt, execute alone otherwise. `stage` says where it is; the registry says which service and task
run a stage, so the gateway, the workers and the reconciler all move attempts through these functions and none of
them knows what comes next.

Like services/kernel/jobs.py, every transition is a conditional UPDATE on (status, stage): a retried or
duplicated task can never move an attempt twice, and only the write that ends an attempt counts toward its job.
Callers commit; enqueueing the next stage (`enqueue_stage`) happens after the commit, and if Redis loses it the
reconciler finds the attempt at its stage (registry.pending_attempts).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Select, bindparam, case, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from services.kernel import jobs, queue
from services.kernel.contracts import (
    LIVE_ATTEMPT_STATUSES,
    LIVE_JOB_STATUSES,
    Arm,
    AttemptStatus,
    Condition,
    JobKind,
    JobStatus,
    Language,
    Mode,
    Stage,
    Verdict,
)
from services.kernel.judges import configured_judges
from services.kernel.models import Attempt, Job, Problem, new_id, utcnow
from services.kernel.registry import QUEUE_OF, STAGE_TASK
from services.kernel.settings import get_settings

Loc = list[str | int]

# Mutants' attempt_uids start with this; a client's may not (it could otherwise stand in for a mutant).
MUTANT_UID_PREFIX = "mutant:"


class SubmissionError(ValueError):
    """A submission that cannot be stored as given: `loc` names the field, `status` is the HTTP status the
    gateway answers with (404 unknown problem, 409 conflicting content, 422 otherwise)."""

    def __init__(self, loc: Loc, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message
        self.status = status


def content_hash(payload: Any) -> str:
    """SHA-256 of canonical JSON: what "the same content" means for idempotent submissions."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def source_hash(source_code: str) -> str:
    return hashlib.sha256(source_code.encode("utf-8", "surrogatepass")).hexdigest()


# ---- problems ---------------------------------------------------------------------------------------------


async def find_problem(session: AsyncSession, tenant: str, problem_id: str) -> Problem | None:
    return await session.scalar(select(Problem).where(Problem.tenant == tenant, Problem.problem_id == problem_id))


async def put_problem(
    session: AsyncSession, tenant: str, problem_id: str | None, payload: dict[str, Any], loc: Loc
) -> tuple[Problem, bool]:
    """Store a problem (`payload`: the API's problem fields as JSON data, without the id), or return the stored
    one with the same id and content (False). The same id with a different content is a 409."""
    digest = content_hash(payload)
    problem_id = problem_id or f"p_{digest[:16]}"
    existing = await find_problem(session, tenant, problem_id)
    if existing is not None:
        if existing.content_hash != digest:
            raise SubmissionError([*loc, "problem_id"], f"problem {problem_id!r} exists with different content", 409)
        return existing, False
    problem = Problem(
        tenant=tenant,
        problem_id=problem_id,
        content_hash=digest,
        title=payload["title"],
        statement=payload["statement"],
        mode=payload["mode"],
        entry_point=payload["entry_point"],
        tests=payload["tests"],
        checker=payload["checker"],
        limits=payload["limits"],
        references=payload["references"],
        input_spec=payload["input_spec"],
    )
    session.add(problem)
    await session.flush()
    return problem, True


# ---- creating attempts ------------------------------------------------------------------------------------


def pipeline_for(judges: Sequence[str], *, mutant: bool = False) -> list[Stage]:
    """The stages of a new attempt: it is executed, a mutant's execution is verified against its arm, and then
    it is judged if any judge is due."""
    stages = [Stage.EXECUTE, Stage.VERIFY] if mutant else [Stage.EXECUTE]
    return [*stages, Stage.JUDGE] if judges else stages


def resolve_judging(
    judges: Sequence[str] | None, conditions: Sequence[str] | None, loc: Loc
) -> tuple[list[str], list[str]]:
    """The judges (default: every enabled configured judge) and conditions (default: settings) for an attempt."""
    settings = get_settings()
    configured = {j.name: j for j in configured_judges(str(settings.judges_file) if settings.judges_file else None)}
    if judges is None:
        chosen = [name for name, judge in configured.items() if judge.enabled]
    else:
        unknown = [name for name in judges if name not in configured or not configured[name].enabled]
        if unknown:
            raise SubmissionError(loc, f"unknown or disabled judge(s): {', '.join(unknown)}; see GET /v1/judges")
        chosen = list(dict.fromkeys(judges))
    return chosen, [Condition(c) for c in dict.fromkeys(conditions or settings.default_conditions)]


@dataclass(frozen=True)
class NewAttempt:
    """A submitted program, as the gateway validated it. `content` is what makes two submissions with one
    `attempt_uid` "the same" (hashed with the problem's identity)."""

    language: Language
    source_code: str
    content: dict[str, Any]
    attempt_uid: str | None = None
    participant: str | None = None
    turn: int | None = None
    submitted_at: datetime | None = None
    context: str | None = None
    label: dict[str, Any] | None = None
    judges: Sequence[str] | None = None
    conditions: Sequence[str] | None = None
    repeats: int = 1


def _checked(problem: Problem, spec: NewAttempt, loc: Loc) -> tuple[list[str], list[str], str]:
    """The checks of a new attempt that need no database: its judges, conditions and content hash."""
    if problem.mode == Mode.FUNCTION and spec.language != Language.PYTHON:
        raise SubmissionError([*loc, "language"], "function-mode problems accept Python only")
    if spec.attempt_uid is not None and spec.attempt_uid.startswith(MUTANT_UID_PREFIX):
        raise SubmissionError([*loc, "attempt_uid"], f"the prefix {MUTANT_UID_PREFIX!r} is reserved for mutants")
    judges, conditions = resolve_judging(spec.judges, spec.conditions, [*loc, "judges"])
    return judges, conditions, content_hash({**spec.content, "problem": [problem.problem_id, problem.content_hash]})


def _same_or_conflict(existing: Attempt, digest: str, spec: NewAttempt, loc: Loc) -> tuple[Attempt, bool]:
    if existing.content_hash != digest:
        raise SubmissionError(
            [*loc, "attempt_uid"], f"attempt_uid {spec.attempt_uid!r} was submitted with different content", 409
        )
    return existing, False


def _new_attempt(
    tenant: str, problem: Problem, spec: NewAttempt, job_id: str, judges: list[str], conditions: list[str], digest: str
) -> Attempt:
    pipeline = pipeline_for(judges)
    return Attempt(
        attempt_id=new_id("att"),
        attempt_uid=spec.attempt_uid,
        tenant=tenant,
        problem_pk=problem.id,
        language=spec.language,
        source_code=spec.source_code,
        source_hash=source_hash(spec.source_code),
        content_hash=digest,
        participant=spec.participant,
        turn=spec.turn,
        submitted_at=spec.submitted_at,
        context=spec.context,
        label=spec.label,
        judges=judges,
        conditions=conditions,
        repeats=spec.repeats,
        job_id=job_id,
        status=AttemptStatus.QUEUED,
        pipeline=pipeline,
        stage=pipeline[0],
    )


async def create_attempt(
    session: AsyncSession, tenant: str, problem: Problem, spec: NewAttempt, job_id: str, loc: Loc
) -> tuple[Attempt, bool]:
    """Store an attempt (flush, no commit), queued at the first stage of its pipeline. The same `attempt_uid`
    with the same content returns the stored one (False); with another content it is a 409."""
    judges, conditions, digest = _checked(problem, spec, loc)
    if spec.attempt_uid is not None:
        existing = await session.scalar(
            select(Attempt).where(Attempt.tenant == tenant, Attempt.attempt_uid == spec.attempt_uid)
        )
        if existing is not None:
            return _same_or_conflict(existing, digest, spec, loc)
    attempt = _new_attempt(tenant, problem, spec, job_id, judges, conditions, digest)
    session.add(attempt)
    await session.flush()
    return attempt, True


class AttemptBatch:
    """The attempts of one batch submission, stored together: `add` makes the checks and answers of
    `create_attempt` item by item (the same errors, in the same order; an `attempt_uid` stored before or earlier
    in the batch is the same attempt, or a 409), with one read of the batch's uids (`load_uids`) and one INSERT
    of the new attempts (`flush`), instead of three statements per attempt."""

    def __init__(self, session: AsyncSession, tenant: str, job_id: str) -> None:
        self.session = session
        self.tenant = tenant
        self.job_id = job_id
        self._known: dict[str, Attempt] = {}
        self._new: list[Attempt] = []

    async def load_uids(self, uids: Sequence[str]) -> None:
        """Read the tenant's stored attempts named by `uids` (before `add`ing them)."""
        wanted = sorted(set(uids) - set(self._known))
        for chunk in (wanted[i : i + 500] for i in range(0, len(wanted), 500)):
            query = select(Attempt).where(Attempt.tenant == self.tenant, Attempt.attempt_uid.in_(chunk))
            self._known.update((a.attempt_uid, a) for a in await self.session.scalars(query) if a.attempt_uid)

    def add(self, problem: Problem, spec: NewAttempt, loc: Loc) -> tuple[Attempt, bool]:
        """`create_attempt` without the database: the attempt, and whether it is new (stored at `flush`). Its uid
        must have been given to `load_uids`."""
        judges, conditions, digest = _checked(problem, spec, loc)
        if spec.attempt_uid is not None and spec.attempt_uid in self._known:
            return _same_or_conflict(self._known[spec.attempt_uid], digest, spec, loc)
        attempt = _new_attempt(self.tenant, problem, spec, self.job_id, judges, conditions, digest)
        if spec.attempt_uid is not None:
            self._known[spec.attempt_uid] = attempt
        self._new.append(attempt)
        return attempt, True

    async def flush(self) -> None:
        """Store the new attempts (flush, no commit)."""
        self.session.add_all(self._new)
        self._new = []
        await self.session.flush()


async def find_problems(session: AsyncSession, tenant: str, problem_ids: Sequence[str]) -> dict[str, Problem]:
    """The tenant's problems named by `problem_ids`, by problem_id (the unknown ones left out)."""
    wanted = sorted(set(problem_ids))
    found: dict[str, Problem] = {}
    for chunk in (wanted[i : i + 500] for i in range(0, len(wanted), 500)):
        query = select(Problem).where(Problem.tenant == tenant, Problem.problem_id.in_(chunk))
        found.update((problem.problem_id, problem) for problem in await session.scalars(query))
    return found


@dataclass(frozen=True)
class NewMutant:
    """A program derived from a parent attempt by one operator (paper 001, V-D): the defect or control arm,
    the operator's severity (semantic arm only), and whether the edit sits in a guard the problem's
    constraints may never reach. `mutation` is what else the generator records (site, diff, seed), stored in
    the attempt's `mutation` column; verification adds its findings there."""

    source_code: str
    operator: str
    arm: Arm
    severity: float | None = None
    guard_context: bool | None = None
    judges: Sequence[str] = ()
    conditions: Sequence[str] = (Condition.BLIND,)
    mutation: dict[str, Any] = field(default_factory=dict)


async def create_mutant(session: AsyncSession, parent: Attempt, spec: NewMutant, job_id: str) -> tuple[Attempt, bool]:
    """Store a mutant of `parent` (flush, no commit): an attempt on the same problem and language, linked to its
    parent, with no participant (it is synthetic, so no participant's history or panel counts it). Within one
    job, the same operator producing the same source for the same parent returns the stored mutant (False), so a
    retried generation creates nothing twice; another job gets mutants of its own."""
    digest = source_hash(spec.source_code)
    uid = f"{MUTANT_UID_PREFIX}{job_id}:{parent.attempt_id}:{spec.operator}:{digest[:24]}"
    existing = await session.scalar(
        select(Attempt).where(
            Attempt.tenant == parent.tenant,
            Attempt.attempt_uid == uid,
            Attempt.parent_attempt_id == parent.attempt_id,
            Attempt.job_id == job_id,
        )
    )
    if existing is not None:
        return existing, False
    judges = list(dict.fromkeys(spec.judges))
    pipeline = pipeline_for(judges, mutant=True)
    mutant = Attempt(
        attempt_id=new_id("att"),
        attempt_uid=uid,
        tenant=parent.tenant,
        problem_pk=parent.problem_pk,
        language=parent.language,
        source_code=spec.source_code,
        source_hash=digest,
        content_hash=content_hash({"parent": parent.attempt_id, "operator": spec.operator, "source": digest}),
        mutation=dict(spec.mutation),
        judges=judges,
        conditions=[Condition(c) for c in dict.fromkeys(spec.conditions)],
        repeats=1,
        parent_attempt_id=parent.attempt_id,
        operator=spec.operator,
        arm=spec.arm,
        severity=spec.severity,
        guard_context=spec.guard_context,
        job_id=job_id,
        status=AttemptStatus.QUEUED,
        pipeline=pipeline,
        stage=pipeline[0],
    )
    session.add(mutant)
    await session.flush()
    return mutant, True


async def accepted_seeds(session: AsyncSession, tenant: str, attempt_ids: Sequence[str], loc: Loc) -> list[Attempt]:
    """The tenant's attempts named by `attempt_ids`, in order, each an accepted program (done, verdict AC): what a
    perturbation or a synthesis starts from. Unknown: 404 naming `loc[i]`; not accepted: 422 naming it."""
    found = {
        a.attempt_id: a
        for a in (
            await session.scalars(select(Attempt).where(Attempt.attempt_id.in_(attempt_ids), Attempt.tenant == tenant))
        ).all()
    }
    seeds = []
    for index, attempt_id in enumerate(attempt_ids):
        seed = found.get(attempt_id)
        if seed is None:
            raise SubmissionError([*loc, index], f"no attempt {attempt_id!r}", 404)
        if seed.status != AttemptStatus.DONE or seed.verdict != Verdict.AC:
            raise SubmissionError(
                [*loc, index],
                f"attempt {attempt_id!r} is not an accepted program (status {seed.status}, verdict "
                f"{seed.verdict}); a seed must have finished with verdict AC",
            )
        seeds.append(seed)
    return seeds


# ---- moving through the pipeline --------------------------------------------------------------------------


async def enqueue_stage(attempt_id: str, stage: str, *, tenant: str, wake: bool = True) -> bool:
    """Put the task that runs `stage` of an attempt on its queue (after the commit that moved it there), as the
    work of the attempt's tenant."""
    return await queue.enqueue(STAGE_TASK[Stage(stage)], attempt_id, tenant=tenant, wake=wake)


async def after_stage(attempt_id: str, moved: bool, following: Stage | None, *, tenant: str) -> None:
    """After the commit that ended a stage of an attempt (`finish_stage`, `finish_many`): enqueue its next stage
    (the attempt's `tenant`'s work), or, if this write ended the attempt, announce that (to readers waiting on it)."""
    if following is not None:
        await enqueue_stage(attempt_id, following, tenant=tenant)
    elif moved:
        await queue.announce_ended([attempt_id])


# A batch wakes its queues' workers after its first attempt and then once per this many, not once per attempt.
_WAKE_EVERY = 32


async def enqueue_first_stages(attempts: Sequence[Attempt]) -> None:
    """Enqueue new attempts at their first stage. Their rows are committed: if Redis is down now, the
    reconciler enqueues them later, so a failure here is not the client's."""
    unannounced: set[str] = set()
    try:
        for index, attempt in enumerate(attempts):
            if attempt.stage is not None:
                wake = index % _WAKE_EVERY == 0
                if (
                    await enqueue_stage(attempt.attempt_id, attempt.stage, tenant=attempt.tenant, wake=wake)
                    and not wake
                ):
                    unannounced.add(QUEUE_OF[STAGE_TASK[Stage(attempt.stage)]])
        for queue_name in sorted(unannounced):
            await queue.notify(queue_name)
    except Exception:  # noqa: BLE001 - the database holds the work; the reconciler retries
        pass


async def _job_cancelled(session: AsyncSession, job_id: str | None) -> bool:
    status = await session.scalar(select(Job.status).where(Job.job_id == job_id)) if job_id else None
    return status == JobStatus.CANCELLED


async def _end_cancelled(session: AsyncSession, attempt_id: str, stage: str) -> None:
    """A live attempt of a cancelled job ends `cancelled` where it stands, rather than wait for a stage nobody
    will run (the reconciler leaves cancelled jobs alone). What it already did (its execution) is kept."""
    await session.execute(
        update(Attempt)
        .where(Attempt.attempt_id == attempt_id, Attempt.status.in_(LIVE_ATTEMPT_STATUSES), Attempt.stage == stage)
        .values(status=AttemptStatus.CANCELLED, stage=None, finished_at=utcnow())
    )


async def give_up(session: AsyncSession, attempt_id: str, reason: str) -> bool:
    """End a live attempt `failed` because the task running its stage gave up (its last try raised). Its job, if
    it was the attempt's own, fails with the reason; a batch's job counts it as done (so the batch still ends) and
    keeps the first such reason as its error. True if this call ended it."""
    ended = (
        await session.execute(
            update(Attempt)
            .where(Attempt.attempt_id == attempt_id, Attempt.status.in_(LIVE_ATTEMPT_STATUSES))
            .values(status=AttemptStatus.FAILED, stage=None, finished_at=utcnow())
            .returning(Attempt.job_id)
        )
    ).first()
    if ended is None:
        return False
    if ended.job_id:
        kind = await session.scalar(select(Job.kind).where(Job.job_id == ended.job_id))
        if kind == JobKind.EXECUTE_ATTEMPT:
            await jobs.finish(session, ended.job_id, JobStatus.FAILED, error=reason)
        else:
            await session.execute(
                update(Job).where(Job.job_id == ended.job_id, Job.error.is_(None)).values(error=reason)
            )
            await jobs.add_progress(session, ended.job_id)
    return True


async def claim(session: AsyncSession, attempt_id: str, stage: Stage) -> Attempt | None:
    """Start `stage` of a live attempt: it becomes `running`, and its job too. None if the attempt is not at
    that stage (already past it: a duplicate task) or has ended; an attempt of a cancelled job is ended
    (`cancelled`) instead. A retried task claims a stage it already claimed: the work is redone, its result
    written idempotently."""
    attempt = await session.get(Attempt, attempt_id)
    if attempt is None or attempt.status not in LIVE_ATTEMPT_STATUSES or attempt.stage != stage:
        return None
    job = await session.get(Job, attempt.job_id) if attempt.job_id else None
    if job is not None and job.status == JobStatus.CANCELLED:
        await _end_cancelled(session, attempt_id, stage)
        return None
    # Conditional, so a cancel that landed since the read wins. Lock order everywhere: attempt, then job.
    claimed = await session.execute(
        update(Attempt)
        .where(Attempt.attempt_id == attempt_id, Attempt.status.in_(LIVE_ATTEMPT_STATUSES), Attempt.stage == stage)
        .values(status=AttemptStatus.RUNNING)
    )
    if not claimed.rowcount:  # type: ignore[attr-defined]
        return None
    if job is not None and job.status in LIVE_JOB_STATUSES:
        await jobs.mark_running(session, job.job_id)
    await session.refresh(attempt)
    return attempt


def next_stage(pipeline: Sequence[str], stage: str) -> Stage | None:
    """The stage after `stage` in a pipeline; None when it was the last (or, for a row whose pipeline does not
    name it, the only one we know of: the attempt ends rather than loop)."""
    stages = list(pipeline)
    if stage not in stages:
        return None
    position = stages.index(stage)
    return Stage(stages[position + 1]) if position + 1 < len(stages) else None


async def finish_stage(
    session: AsyncSession, attempt_id: str, stage: Stage, *, last: bool = False, **values: Any
) -> tuple[bool, Stage | None]:
    """End `stage` of an attempt, storing `values` (e.g. the verdict) on it. Returns (moved, next): `moved` is
    False when the attempt was no longer at that stage (a duplicate or a cancel won); `next` is the stage to
    enqueue, None when the attempt is done. Only the write that ends the attempt counts toward its job. An
    attempt whose job was cancelled meanwhile keeps `values` and ends `cancelled` instead of moving on. `last`
    ends the pipeline here (a mutant that does not compile is not judged)."""
    attempt = await session.get(Attempt, attempt_id)
    if attempt is None:
        return False, None
    following = None if last else next_stage(attempt.pipeline or [stage], stage)
    at_stage = (Attempt.attempt_id == attempt_id, Attempt.status.in_(LIVE_ATTEMPT_STATUSES), Attempt.stage == stage)
    if following is not None:
        moved = await session.execute(update(Attempt).where(*at_stage).values(stage=following, **values))
        if moved.rowcount and await _job_cancelled(session, attempt.job_id):  # type: ignore[attr-defined]
            await _end_cancelled(session, attempt_id, following)
            return True, None
        return bool(moved.rowcount), following  # type: ignore[attr-defined]
    moved = await session.execute(
        update(Attempt).where(*at_stage).values(status=AttemptStatus.DONE, stage=None, finished_at=utcnow(), **values)
    )
    if moved.rowcount and attempt.job_id:  # type: ignore[attr-defined]
        await jobs.add_progress(session, attempt.job_id)
    return bool(moved.rowcount), None  # type: ignore[attr-defined]


async def cancel_live(session: AsyncSession, job_id: str) -> list[str]:
    """End every live attempt of a job that is being cancelled `cancelled`, queued or running (a running stage's
    task is stopped by the cancel's message, services/kernel/cancel.py, and writes nothing after it: its attempt
    is no longer live). What earlier stages did (an execution) is kept. The ids it ended, in attempt_id order."""
    where = [Attempt.job_id == job_id, Attempt.status.in_(LIVE_ATTEMPT_STATUSES)]
    if _row_locks(session):
        # Locked first in attempt_id order, as batched claims lock them: two writers of many attempts then never
        # deadlock. A subquery, not a list of ids: a job may have more live attempts than a statement has
        # parameters.
        where.append(Attempt.attempt_id.in_(_locked(select(Attempt.attempt_id).where(*where), session)))
    result = await session.execute(
        update(Attempt)
        .where(*where)
        .values(status=AttemptStatus.CANCELLED, stage=None, finished_at=utcnow())
        .returning(Attempt.attempt_id)
        .execution_options(synchronize_session=False)
    )
    return sorted(result.scalars())


async def end_cancelled(session: AsyncSession, attempt_ids: Sequence[str]) -> list[str]:
    """End these attempts `cancelled` if they are still live: a worker whose stage was stopped by a cancel says so
    (the cancel's own write normally got there first). The ids it ended."""
    if not attempt_ids:
        return []
    result = await session.execute(
        update(Attempt)
        .where(Attempt.attempt_id.in_(sorted(set(attempt_ids))), Attempt.status.in_(LIVE_ATTEMPT_STATUSES))
        .values(status=AttemptStatus.CANCELLED, stage=None, finished_at=utcnow())
        .returning(Attempt.attempt_id)
        .execution_options(synchronize_session=False)
    )
    return sorted(result.scalars())


# ---- batches: the same transitions for many attempts in one transaction -------------------------------------
#
# A worker running many tasks at once claims their attempts and stores their results in shared transactions
# (services/kernel/batching.py). Each function below does, for every attempt it is given, exactly what its
# one-attempt counterpart does, with the same conditional UPDATEs (WHERE live AND at that stage), run over the
# whole set and told apart by RETURNING, so what the database says decides and nothing moves twice. The same attempt
# named twice in one batch (a duplicate delivery) gets what two calls in a row would have got. On PostgreSQL the
# attempts are locked first, in attempt_id order (as cancel_live does), then their jobs: attempt, then job.


def _row_locks(session: AsyncSession) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def _locked(query: Select[Any], session: AsyncSession) -> Select[Any]:
    """`query` over attempts, in attempt_id order, with its rows locked on PostgreSQL (SQLite locks the whole
    database at the first write)."""
    query = query.order_by(Attempt.attempt_id)
    return query.with_for_update() if _row_locks(session) else query


async def claim_many(session: AsyncSession, attempt_ids: Sequence[str], stage: Stage) -> list[Attempt | None]:
    """`claim` for each of `attempt_ids`, in one go: the claimed attempt (running) or None, in order."""
    unique = sorted(set(attempt_ids))
    if not unique:
        return []
    if _row_locks(session):
        await session.execute(_locked(select(Attempt.attempt_id).where(Attempt.attempt_id.in_(unique)), session))
    live_at_stage = (Attempt.status.in_(LIVE_ATTEMPT_STATUSES), Attempt.stage == stage)
    job_cancelled = select(Job.job_id).where(Job.job_id == Attempt.job_id, Job.status == JobStatus.CANCELLED).exists()
    result = await session.execute(
        update(Attempt)
        .where(Attempt.attempt_id.in_(unique), *live_at_stage, ~job_cancelled)
        .values(status=AttemptStatus.RUNNING)
        .returning(Attempt)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    claimed = {attempt.attempt_id: attempt for attempt in result.scalars()}
    if len(claimed) < len(unique):
        # Those of a cancelled job end where they stand (the others are past this stage, ended, or unknown).
        await session.execute(
            update(Attempt)
            .where(Attempt.attempt_id.in_(set(unique) - set(claimed)), *live_at_stage, job_cancelled)
            .values(status=AttemptStatus.CANCELLED, stage=None, finished_at=utcnow())
            .execution_options(synchronize_session=False)
        )
    # Each claim counts a try of its job, as one claim at a time would (a job no longer live is left as it is).
    named = Counter(attempt_ids)
    tries: Counter[str] = Counter()
    for attempt in claimed.values():
        if attempt.job_id:
            tries[attempt.job_id] += named[attempt.attempt_id]
    for job_id in sorted(tries):
        await jobs.mark_running(session, job_id, tries=tries[job_id])
    return [claimed.get(attempt_id) for attempt_id in attempt_ids]


def _per_attempt(column: Any, ids: Sequence[str], by_attempt: dict[str, Any]) -> Any:
    """An UPDATE's value for `column` over attempts `ids`, each set to its value in `by_attempt` or left as it is:
    one value if they all agree, else CASE WHEN attempt_id = ... THEN ... ELSE the column END."""
    values = list(by_attempt.values())
    if len(by_attempt) == len(ids) and all(type(v) is type(values[0]) and v == values[0] for v in values):
        return values[0]
    return case(
        *(
            (Attempt.attempt_id == attempt_id, bindparam(None, value, type_=column.type))
            for attempt_id, value in by_attempt.items()
        ),
        else_=column,
    )


async def _move_returning(
    session: AsyncSession, stage: Stage, ids: list[str], values: dict[str, dict[str, Any]], fixed: dict[str, Any]
) -> set[str]:
    """For attempts `ids` still live at `stage`: set `fixed` and each one's own `values`; the ids it moved."""
    assignments: dict[str, Any] = dict(fixed)
    for name in sorted({name for attempt_id in ids for name in values[attempt_id]}):
        given = {attempt_id: values[attempt_id][name] for attempt_id in ids if name in values[attempt_id]}
        assignments[name] = _per_attempt(getattr(Attempt, name), ids, given)
    result = await session.execute(
        update(Attempt)
        .where(Attempt.attempt_id.in_(ids), Attempt.status.in_(LIVE_ATTEMPT_STATUSES), Attempt.stage == stage)
        .values(**assignments)
        .returning(Attempt.attempt_id)
        .execution_options(synchronize_session=False)
    )
    return set(result.scalars())


async def finish_many(
    session: AsyncSession, stage: Stage, items: Sequence[tuple[str, dict[str, Any]]], *, last: bool = False
) -> list[tuple[bool, Stage | None]]:
    """`finish_stage` for each (attempt_id, values) of `items`, in one go: (moved, next) for each, in order. Of
    several items for one attempt, the first is the one that may move it (as if it had committed first)."""
    unique = sorted({attempt_id for attempt_id, _ in items})
    if not unique:
        return []
    query = select(Attempt.attempt_id, Attempt.pipeline, Attempt.job_id).where(Attempt.attempt_id.in_(unique))
    rows = {row.attempt_id: row for row in (await session.execute(_locked(query, session))).all()}
    first: dict[str, dict[str, Any]] = {}
    for attempt_id, values in items:
        if attempt_id in rows:
            first.setdefault(attempt_id, values)
    following = {
        attempt_id: None if last else next_stage(rows[attempt_id].pipeline or [stage], stage) for attempt_id in first
    }
    moved: set[str] = set()
    # Attempts with a next stage move there; the others are done. Grouped by where they go.
    for target in sorted({s for s in following.values() if s is not None}):
        ids = [attempt_id for attempt_id in first if following[attempt_id] == target]
        moved |= await _move_returning(session, stage, ids, first, {"stage": target})
    ending = [attempt_id for attempt_id in first if following[attempt_id] is None]
    if ending:
        done = {"status": AttemptStatus.DONE, "stage": None, "finished_at": utcnow()}
        moved |= await _move_returning(session, stage, ending, first, done)
    # An attempt that moved on, of a job cancelled meanwhile, ends where it now stands.
    ended: set[str] = set()
    went_on = [attempt_id for attempt_id in sorted(moved) if following[attempt_id] is not None]
    job_ids = sorted({rows[attempt_id].job_id for attempt_id in went_on if rows[attempt_id].job_id})
    if job_ids:
        cancelled_jobs = set(
            await session.scalars(select(Job.job_id).where(Job.job_id.in_(job_ids), Job.status == JobStatus.CANCELLED))
        )
        for attempt_id in went_on:
            if rows[attempt_id].job_id in cancelled_jobs:
                await _end_cancelled(session, attempt_id, str(following[attempt_id]))
                ended.add(attempt_id)
    # Only the write that ends an attempt counts toward its job.
    progress = Counter(
        rows[attempt_id].job_id for attempt_id in moved if following[attempt_id] is None and rows[attempt_id].job_id
    )
    for job_id in sorted(progress):
        await jobs.add_progress(session, job_id, progress[job_id])
    outcomes: list[tuple[bool, Stage | None]] = []
    answered: set[str] = set()
    for attempt_id, _ in items:
        if attempt_id not in rows:
            outcomes.append((False, None))
        elif attempt_id in answered or attempt_id not in moved:
            outcomes.append((False, following[attempt_id]))
        else:
            answered.add(attempt_id)
            outcomes.append((True, None if attempt_id in ended else following[attempt_id]))
    return outcomes
