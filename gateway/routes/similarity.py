"""Functional similarity (paper 002, LoCaL): score a code pair, or a dataset of pairs, by differential fuzzing
beside the surface and reference-based metrics. The gateway validates, records the pairs and enqueues one task per
pair; the similarity worker (executor/similarity_worker.py) generates the inputs and runs both programs in nsjail.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from sqlalchemy import func, select

from gateway import quotas
from gateway.deps import ReadKey, SessionDep, SubmitKey
from gateway.errors import ApiError, field_error
from gateway.schemas import FROM_QUERY_STRING, SourceCode, _check_source_size, _identifier, _In, json_problem
from gateway.submissions import not_found
from metrics.reports import similarity as similarity_report
from services.kernel import attempts, jobs, queue
from services.kernel.contracts import JobKind, JobStatus, Language, Mode
from services.kernel.models import Job, SimilarityPair
from services.kernel.plans import SimilarityPlan
from services.kernel.registry import Task
from services.kernel.subjects import pair_subject
from services.lib.codesim import trivially_shared_ngrams
from services.lib.fuzzing import DEFAULT_REPEATS, SpecError, TimeoutRule, parse_spec
from services.lib.fuzzing import MAX_INPUTS as MAX_GENERATED_INPUTS

router = APIRouter(prefix="/v1/similarity", tags=["similarity"])

# One request's work is bounded: inputs per repetition, repetitions, time per repetition, pairs per dataset.
MAX_INPUTS = 10_000
MAX_REPEATS = 20
MAX_TIME_BUDGET_S = 600.0
MAX_INPUT_TIMEOUT_S = 10.0
MAX_PAIRS_PER_DATASET = 5_000
MAX_LABELS_BYTES = 4096
PAGE_LIMIT = 500
CRYSTAL_K_DEFAULT = 50  # LoCaL's k for CrystalBLEU (following Naik 2024)
# Fields of a LoCaL record the job reads; any other field is kept as a label and shown beside the scores.
_RECORD_FIELDS = {"id", "golden_code", "generated_code", "language", "mode", "entry_point", "problem_id", "input_spec"}


class ProgramIn(_In):
    language: Language
    source_code: SourceCode

    _size = field_validator("source_code")(_check_source_size)


class FuzzingParams(_In):
    """How Algorithm 1 runs: N inputs, R repetitions, a time budget T per repetition, a seed."""

    n_inputs: int | None = Field(
        default=None, ge=1, le=MAX_INPUTS, description="N; default 2,000 for function pairs, 1,000 for programs."
    )
    repeats: int = Field(default=DEFAULT_REPEATS, ge=1, le=MAX_REPEATS, description="R repetitions.")
    time_budget_s: float = Field(default=60.0, gt=0, le=MAX_TIME_BUDGET_S, description="T per repetition.")
    per_input_timeout_s: float = Field(default=2.0, gt=0, le=MAX_INPUT_TIMEOUT_S)
    float_tolerance: float | None = Field(default=None, ge=0, le=1, description="Floats equal within it.")
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    timeout_rule: TimeoutRule = Field(
        default="paper",
        description="paper: a repetition either program ran out of time on is excluded (Algorithm 1); strict: "
        "only the reference's running out excludes one, the candidate's unanswered inputs count as mismatches.",
    )

    @model_validator(mode="after")
    def _within_generation_cap(self) -> FuzzingParams:
        if self.n_inputs is not None and self.n_inputs * self.repeats > MAX_GENERATED_INPUTS:
            raise ValueError(
                f"n_inputs x repeats is {self.n_inputs * self.repeats}; the limit is {MAX_GENERATED_INPUTS} inputs"
            )
        return self


class MetricParams(_In):
    """How the reference-based metrics are computed."""

    crystal_k: int = Field(default=CRYSTAL_K_DEFAULT, ge=0, le=10_000, description="CrystalBLEU's k.")
    crystal_corpus: list[str] | None = Field(
        default=None,
        max_length=MAX_PAIRS_PER_DATASET * 2,
        description="Programs whose k most frequent n-grams CrystalBLEU ignores; default the pair's or dataset's own.",
    )


class PairIn(FuzzingParams, MetricParams):
    reference: ProgramIn
    candidate: ProgramIn
    mode: Mode | None = Field(default=None, description="function or stdio; default the problem's, else function.")
    entry_point: str | None = Field(default=None, max_length=200)
    problem_id: str | None = Field(default=None, max_length=200)
    input_spec: dict[str, Any] | None = None

    _entry = field_validator("entry_point")(_identifier)


class RecordIn(BaseModel):
    """One line of a LoCaL-style JSONL: `id`, `golden_code`, `generated_code`, and `problem_id` or `input_spec`."""

    model_config = {"extra": "allow"}

    id: str = Field(min_length=1, max_length=200)
    golden_code: SourceCode
    generated_code: SourceCode
    language: Language = Language.PYTHON
    mode: Mode | None = None
    entry_point: str | None = Field(default=None, max_length=200)
    problem_id: str | None = Field(default=None, max_length=200)
    input_spec: dict[str, Any] | None = None

    _size = field_validator("golden_code", "generated_code")(_check_source_size)
    _entry = field_validator("entry_point")(_identifier)

    @model_validator(mode="before")
    @classmethod
    def _json_within_bounds(cls, value: Any) -> Any:
        # The record's own extra fields (its labels) are JSON too: as deep and as finite as any request body.
        if (problem := json_problem(value)) is not None:
            raise ValueError(problem)
        return value

    def labels(self) -> dict[str, Any] | None:
        extra = {k: v for k, v in (self.model_extra or {}).items() if k not in _RECORD_FIELDS}
        if not extra:
            return None
        try:
            size = len(json.dumps(extra, allow_nan=False))
        except ValueError:
            raise ValueError("the record's extra fields hold NaN or Infinity, which JSON does not") from None
        if size > MAX_LABELS_BYTES:
            raise ValueError(f"the record's extra fields are over {MAX_LABELS_BYTES} bytes of JSON")
        return extra


class Thresholds(BaseModel):
    x_lo: float = Field(ge=0, le=1)
    x_hi: float = Field(ge=0, le=1)
    y_lo: float = Field(ge=0, le=1)
    y_hi: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if not (self.x_lo < self.x_hi and self.y_lo < self.y_hi):
            raise ValueError("thresholds need x_lo < x_hi and y_lo < y_hi")
        return self


class DatasetIn(FuzzingParams, MetricParams):
    pairs: list[RecordIn] = Field(min_length=1, max_length=MAX_PAIRS_PER_DATASET)
    thresholds: Thresholds | None = Field(default=None, description="SFD/DFS thresholds; default Algorithm 2.")
    protocol: similarity_report.Protocol = Field(default="local_rq3", description="Algorithm 2's protocol.")


def _spec_or_422(raw: dict[str, Any] | None, loc: list[str | int]) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        return parse_spec(raw).model_dump(mode="json")
    except SpecError as exc:
        raise field_error(loc, str(exc)) from None


async def _crystal_plan(body: MetricParams, programs: dict[str, list[str]]) -> dict[str, Any]:
    """CrystalBLEU ignores the k most frequent n-grams of a corpus, per language (n-grams are a language's tokens):
    the corpus given, else the job's own programs of that language."""
    ignore: dict[str, list[list[str]]] = {}
    for language, own in programs.items():
        corpus = body.crystal_corpus or own
        ngrams = await asyncio.to_thread(trivially_shared_ngrams, corpus, language, body.crystal_k)
        ignore[language] = [list(ngram) for ngram in sorted(ngrams)]
    return {"crystal_k": body.crystal_k, "crystal_ignore": ignore}


def _fuzzing_plan(body: FuzzingParams) -> dict[str, Any]:
    """The plan's fields that say how Algorithm 1 runs (SimilarityPlan)."""
    return {
        "n_inputs": body.n_inputs,
        "repeats": body.repeats,
        "time_budget_s": body.time_budget_s,
        "per_input_timeout_s": body.per_input_timeout_s,
        "float_tolerance": body.float_tolerance,
        "seed": body.seed,
        "timeout_rule": body.timeout_rule,
    }


async def _problem_pk(
    session: SessionDep, tenant: str, problem_id: str | None, loc: list[str | int], cache: dict[str, Any]
) -> tuple[int | None, str | None, str | None]:
    """(problem pk, its mode, its entry point) of a named problem of the tenant's."""
    if problem_id is None:
        return None, None, None
    if problem_id not in cache:
        cache[problem_id] = await attempts.find_problem(session, tenant, problem_id)
    problem = cache[problem_id]
    if problem is None:
        raise field_error(loc, f"unknown problem {problem_id!r}", status=404)
    return problem.id, problem.mode, problem.entry_point


def _check_pair(mode: Mode, entry_point: str | None, languages: tuple[str, str], loc: list[str | int]) -> None:
    if mode == Mode.FUNCTION:
        if any(language != Language.PYTHON for language in languages):
            raise field_error([*loc, "mode"], "function-level pairs are Python; use mode stdio for other languages")
        if entry_point is None:
            raise field_error([*loc, "entry_point"], "a function-level pair needs the function's name (or a problem)")


async def _enqueue_pairs(job_id: str, count: int, tenant: str) -> None:
    try:
        for ordinal in range(count):
            await queue.enqueue(Task.SCORE_PAIR, pair_subject(job_id, ordinal), tenant=tenant)
    except Exception:  # noqa: BLE001 - the reconciler enqueues what the database holds
        pass


@router.post("", status_code=202)
async def score_pair(body: PairIn, principal: SubmitKey, session: SessionDep) -> dict[str, Any]:
    """Score one pair: df_score by differential fuzzing (Algorithm 1), SurfaceSim and the reference-based metrics.
    The job's result (GET /v1/jobs/{id} or GET /v1/similarity/{id}) holds them once scored."""
    problem_pk, problem_mode, problem_entry = await _problem_pk(
        session, principal.tenant, body.problem_id, ["body", "problem_id"], {}
    )
    mode = body.mode or Mode(problem_mode or Mode.FUNCTION)
    entry_point = body.entry_point or problem_entry
    _check_pair(mode, entry_point, (body.reference.language, body.candidate.language), ["body"])
    spec = _spec_or_422(body.input_spec, ["body", "input_spec"])
    await quotas.check_queued_pairs(session, principal, 1)  # before any work, CrystalBLEU's corpus included
    programs: dict[str, list[str]] = {}
    for program in (body.reference, body.candidate):
        programs.setdefault(program.language, []).append(program.source_code)
    crystal = await _crystal_plan(body, programs)
    plan = SimilarityPlan(**_fuzzing_plan(body), **crystal, single=True)
    async with quotas.admission(principal, "queued_pairs"):
        await quotas.check_queued_pairs(session, principal, 1)  # again, counted after the submissions before it
        job = jobs.create_job(session, tenant=principal.tenant, kind=JobKind.SIMILARITY, total=1, plan=plan)
        session.add(
            SimilarityPair(
                job_id=job.job_id,
                ordinal=0,
                pair_key="pair",
                problem_pk=problem_pk,
                mode=mode,
                entry_point=entry_point,
                reference_language=body.reference.language,
                reference_source=body.reference.source_code,
                candidate_language=body.candidate.language,
                candidate_source=body.candidate.source_code,
                input_spec=spec,
            )
        )
        await session.commit()
    await _enqueue_pairs(job.job_id, 1, principal.tenant)
    return {"job_id": job.job_id, "status": job.status}


async def _dataset_body(request: Request) -> DatasetIn:
    """A JSON body (`{"pairs": [...], ...}`), or JSON Lines (one LoCaL record per line) with the parameters in the
    query string."""
    raw = await request.body()
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        if content_type in ("application/x-ndjson", "application/jsonl", "application/json-lines"):
            lines = [line for line in raw.decode("utf-8").splitlines() if line.strip()]
            records = []
            for number, line in enumerate(lines):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise field_error(["body", number], f"line {number + 1} is not JSON: {exc.msg}") from None
                except (ValueError, RecursionError):
                    raise field_error(["body", number], f"line {number + 1} is not JSON this API accepts") from None
            payload: Any = {**dict(request.query_params), "pairs": records}
            context = {FROM_QUERY_STRING: True}  # the parameters are text, to be read as numbers and booleans
        else:
            payload = json.loads(raw)
            context = {}
    except UnicodeDecodeError:
        raise field_error(["body"], "the body is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise field_error(["body"], f"the body is not JSON: {exc.msg}") from None
    except (ValueError, RecursionError):  # a number of thousands of digits, nesting deeper than the parser goes
        raise field_error(["body"], "the body is not JSON this API accepts (a huge number or deep nesting)") from None
    try:
        return DatasetIn.model_validate(payload, context=context)
    except ValidationError as exc:
        errors = [{"loc": ["body", *e["loc"]], "msg": e["msg"]} for e in exc.errors()[:20]]
        first = errors[0]
        raise ApiError(422, f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}", errors) from None


@router.post("/datasets", status_code=202)
async def score_dataset(request: Request, principal: SubmitKey, session: SessionDep) -> dict[str, Any]:
    """Score a dataset of pairs (LoCaL's record shape) into a LoCaL-style table: df_score, SurfaceSim, every
    metric, each pair's SFD/DFS/Control region and each metric's MAE against df_score (GET /v1/similarity/{id})."""
    body = await _dataset_body(request)
    keys = [record.id for record in body.pairs]
    if len(set(keys)) != len(keys):
        duplicate = next(k for k in keys if keys.count(k) > 1)
        raise field_error(["body", "pairs"], f"pair id {duplicate!r} appears more than once")
    problems: dict[str, Any] = {}
    rows = []
    for ordinal, record in enumerate(body.pairs):
        loc: list[str | int] = ["body", "pairs", ordinal]
        problem_pk, problem_mode, problem_entry = await _problem_pk(
            session, principal.tenant, record.problem_id, [*loc, "problem_id"], problems
        )
        mode = record.mode or Mode(problem_mode or Mode.FUNCTION)
        _check_pair(mode, record.entry_point or problem_entry, (record.language, record.language), loc)
        try:
            labels = record.labels()
        except ValueError as exc:
            raise field_error(loc, str(exc)) from None
        rows.append(
            {
                "ordinal": ordinal,
                "pair_key": record.id,
                "problem_pk": problem_pk,
                "mode": mode,
                "entry_point": record.entry_point or problem_entry,
                "reference_language": record.language,
                "reference_source": record.golden_code,
                "candidate_language": record.language,
                "candidate_source": record.generated_code,
                "input_spec": _spec_or_422(record.input_spec, [*loc, "input_spec"]),
                "labels": labels,
            }
        )
    await quotas.check_queued_pairs(session, principal, len(rows))  # before any work, CrystalBLEU's corpus included
    programs: dict[str, list[str]] = {}
    for record in body.pairs:
        programs.setdefault(record.language, []).extend((record.golden_code, record.generated_code))
    crystal = await _crystal_plan(body, programs)
    plan = SimilarityPlan(
        **_fuzzing_plan(body),
        **crystal,
        single=False,
        thresholds=body.thresholds.model_dump() if body.thresholds else None,
        protocol=body.protocol,
    )
    async with quotas.admission(principal, "queued_pairs"):
        await quotas.check_queued_pairs(session, principal, len(rows))  # again, after the submissions before it
        job = jobs.create_job(session, tenant=principal.tenant, kind=JobKind.SIMILARITY, total=len(rows), plan=plan)
        session.add_all(SimilarityPair(job_id=job.job_id, **row) for row in rows)
        await session.commit()
    await _enqueue_pairs(job.job_id, len(rows), principal.tenant)
    return {"job_id": job.job_id, "status": job.status, "pairs": len(rows)}


def pair_row(pair: SimilarityPair, region: str | None = None) -> dict[str, Any]:
    """One pair as the table shows it."""
    result = pair.result or {}
    return {
        "ordinal": pair.ordinal,
        "id": pair.pair_key,
        "status": pair.status,
        "df_score": result.get("df_score"),
        "surface_similarity": result.get("surface_similarity"),
        "cems": result.get("cems"),
        "region": region,
        "labels": pair.labels,
        "error": pair.error,
    }


async def _own_similarity_job(session: SessionDep, job_id: str, tenant: str) -> Job:
    job = await jobs.get_job(session, job_id)
    if job is None or job.tenant != tenant or job.kind != JobKind.SIMILARITY:
        raise not_found("similarity job", job_id)
    return job


@router.get("/{job_id}")
async def get(
    job_id: str,
    principal: ReadKey,
    session: SessionDep,
    offset: Annotated[int, Query(ge=0, le=MAX_PAIRS_PER_DATASET)] = 0,
    limit: Annotated[int, Query(ge=1, le=PAGE_LIMIT)] = 100,
) -> dict[str, Any]:
    """A similarity job: progress, the table of its pairs (paged), and, over every scored pair, each metric's MAE
    against df_score and the SFD/DFS/Control regions (given thresholds, or Algorithm 2 once every pair is in)."""
    job = await _own_similarity_job(session, job_id, principal.tenant)
    total = await session.scalar(select(func.count()).where(SimilarityPair.job_id == job_id)) or 0
    scored = (
        await session.execute(
            select(SimilarityPair.ordinal, SimilarityPair.result)
            .where(SimilarityPair.job_id == job_id, SimilarityPair.status == "scored")
            .order_by(SimilarityPair.ordinal)
        )
    ).all()
    plan = job.plan(SimilarityPlan)
    summary = await asyncio.to_thread(
        similarity_report.dataset_summary,
        {ordinal: result for ordinal, result in scored},  # noqa: C416 - rows, not pairs
        thresholds=plan.thresholds,
        protocol=plan.protocol,
        complete=job.status == JobStatus.SUCCEEDED,
    )
    page = (
        await session.scalars(
            select(SimilarityPair)
            .where(SimilarityPair.job_id == job_id)
            .order_by(SimilarityPair.ordinal)
            .offset(offset)
            .limit(limit)
        )
    ).all()
    regions = summary.pop("regions_by_pair", {})
    following = offset + len(page)
    return {
        **jobs.job_view(job),
        "summary": summary,
        "pairs": [pair_row(p, regions.get(p.ordinal)) for p in page],
        "next_offset": following if following < total else None,
    }


@router.get("/{job_id}/pairs/{ordinal}")
async def get_pair(
    job_id: str, ordinal: Annotated[int, Path(ge=0, le=MAX_PAIRS_PER_DATASET)], principal: ReadKey, session: SessionDep
) -> dict[str, Any]:
    """One pair in full: df_score with every repetition, the input spec used and where it came from,
    counterexamples, SurfaceSim's parts and every metric."""
    await _own_similarity_job(session, job_id, principal.tenant)
    pair = await session.get(SimilarityPair, (job_id, ordinal))
    if pair is None:
        raise not_found("pair", f"{job_id}/{ordinal}")
    return {**pair_row(pair), "mode": pair.mode, "entry_point": pair.entry_point, "result": pair.result}
