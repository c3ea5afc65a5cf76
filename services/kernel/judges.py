"""Which judges a deployment runs: the TOML judges file, validated at start, shared by gateway and judge workers.

```toml
[[judge]]
name = "gpt"                 # unique
kind = "llm"                 # llm | offline
rubric = "cocreation"        # a built-in (cocreation | refinement_effort | fault_report | accept_reject) or one of
base_url = "http://127.0.0.1:9000/v1"  # the file's own [[rubric]] definitions (services/kernel/rubrics.py)
model = "gpt-5.2-2025-12-11"
api_key_env = "OPENAI_API_KEY"
```

With no file, the embedded default is the offline judges (`DEFAULT_OFFLINE_JUDGES`), which need no network.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.kernel.contracts import OfflineMethod, Rubric
from services.kernel.rubrics import RUBRIC_NAME, SCALE_TAGS, RubricDefinition, check_rubrics, error_lines

# How a reply's JSON is asked for: `json_schema` is OpenAI's strict structured output (vLLM and llama.cpp's
# llama-server accept it too); `json_object_schema` is `{"type": "json_object", "schema": ...}`, the form of
# llama-cpp-python's server (and Anyscale, Together), grammar-constrained; `json_object` asks for any JSON object;
# `none` asks for nothing, and the prompt alone says what to answer. Every reply is validated either way.
ResponseFormat = Literal["json_schema", "json_object_schema", "json_object", "none"]
_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"

JUDGES_KEY = "tribunal:judges"


class Endpoint(BaseModel):
    """One OpenAI-compatible chat-completions endpoint, its model and its bounds: what the provider layer
    (services/lib/llm) needs to send a request. A judge's endpoint is one; any other caller (the perturbation
    generator's LLM rules) configures one the same way."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=_NAME)
    base_url: str = Field(pattern=r"^https?://")
    model: str = Field(min_length=1)
    api_key_env: str | None = Field(default=None, description="The variable holding the key, never the key.")
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=1024, ge=16, le=65536)
    timeout_s: float = Field(default=60.0, gt=0, le=3600, description="Bound on one request.")
    max_tries: int = Field(default=4, ge=1, le=20, description="The identical request is sent at most this often.")
    deadline_s: float = Field(default=900.0, gt=0, description="Bound on one call, retries and waits included.")
    backoff_s: float = Field(default=0.5, gt=0, le=60, description="First retry waits up to this (full jitter).")
    backoff_max_s: float = Field(default=30.0, gt=0, le=600)
    concurrency: int = Field(default=16, ge=1, le=1024, description="Requests in flight, per process.")
    requests_per_minute: float = Field(default=600.0, gt=0)
    response_format: ResponseFormat = "json_schema"
    top_logprobs: int = Field(
        default=0,
        ge=0,
        le=20,
        description="Alternatives to ask for at each token (0: no logprobs); a judge reads each allowed score's "
        "probability from them.",
    )
    seed: int | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Provider-specific request fields.")
    # What its tokens cost, in dollars per million (the judges dashboard's cost panel); unset: no cost is shown.
    price_per_mtok_in: float | None = Field(default=None, ge=0, le=1_000_000)
    price_per_mtok_out: float | None = Field(default=None, ge=0, le=1_000_000)


class LLMJudge(Endpoint):
    """A judge behind any OpenAI-compatible chat-completions endpoint."""

    kind: Literal["llm"]
    enabled: bool = True
    rubric: str = Field(default=Rubric.COCREATION, pattern=RUBRIC_NAME, description="A built-in or defined rubric.")

    @property
    def provider(self) -> str:
        return "openai-compatible"


class _Judge(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=_NAME)
    enabled: bool = True


class OfflineJudge(_Judge):
    """A judge that needs no network: public tests, reference similarity, or static analysis."""

    kind: Literal["offline"]
    method: OfflineMethod

    @property
    def rubric(self) -> Rubric:
        return Rubric.COCREATION if self.method == OfflineMethod.SAMPLE_TESTS else Rubric.REFINEMENT_EFFORT

    @property
    def provider(self) -> str:
        return "offline"

    @property
    def model(self) -> str:
        return self.method


JudgeConfig = Annotated[LLMJudge | OfflineJudge, Field(discriminator="kind")]


class JudgesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    judge: list[JudgeConfig] = Field(min_length=1)
    rubric: list[RubricDefinition] = Field(default_factory=list)

    @field_validator("judge")
    @classmethod
    def _unique_names(cls, judges: list[LLMJudge | OfflineJudge]) -> list[LLMJudge | OfflineJudge]:
        seen: set[str] = set()
        for judge in judges:
            if judge.name in seen:
                raise ValueError(f"judge name {judge.name!r} is used twice")
            seen.add(judge.name)
        return judges


DEFAULT_OFFLINE_JUDGES: tuple[OfflineJudge, ...] = tuple(
    OfflineJudge(name=method, kind="offline", method=method) for method in OfflineMethod
)


class JudgesFileError(ValueError):
    """The judges file is missing, not TOML, or names a key wrongly; the message says where."""


def _problems(parsed: JudgesFile) -> list[str]:
    """What field checks cannot see: the rubrics' own problems, and a judge naming a rubric nobody defines."""
    problems = check_rubrics(parsed.rubric, builtin=False)
    known = set(Rubric) | {r.name for r in parsed.rubric}
    for index, judge in enumerate(parsed.judge):
        if isinstance(judge, LLMJudge) and judge.rubric not in known:
            problems.append(f"judge[{index}].rubric: unknown rubric {judge.rubric!r} (not built in, not defined here)")
    return problems


def parse_judges_file(text: str, source: str = "judges file") -> JudgesFile:
    """The whole judges file: its judges and the rubrics it defines."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise JudgesFileError(f"{source}: not valid TOML: {exc}") from exc
    try:
        parsed = JudgesFile.model_validate(data)
    except ValidationError as exc:
        raise JudgesFileError(f"{source}: {'; '.join(error_lines(exc, _TAGS))}") from exc
    problems = _problems(parsed)
    if problems:
        raise JudgesFileError(f"{source}: {'; '.join(problems)}")
    return parsed


_TAGS = SCALE_TAGS | {"llm", "offline"}
_DEFAULT_FILE = JudgesFile(judge=list(DEFAULT_OFFLINE_JUDGES))


def parse_judges(text: str, source: str = "judges file") -> list[LLMJudge | OfflineJudge]:
    return list(parse_judges_file(text, source).judge)


def load_judges_file(path: Path | None) -> JudgesFile:
    """The judges file as parsed, or the offline defaults (and no rubric of its own) when no file is named."""
    if path is None:
        return _DEFAULT_FILE
    try:
        text = path.read_text()
    except OSError as exc:
        raise JudgesFileError(f"{path}: cannot read the judges file: {exc.strerror}") from exc
    return parse_judges_file(text, str(path))


def load_judges(path: Path | None) -> list[LLMJudge | OfflineJudge]:
    """The configured judges: the file's, or the offline defaults when no file is named."""
    return list(load_judges_file(path).judge)


@lru_cache
def configured_file(path: str | None) -> JudgesFile:
    return load_judges_file(Path(path) if path else None)


def configured_judges(path: str | None) -> tuple[LLMJudge | OfflineJudge, ...]:
    return tuple(configured_file(path).judge)


def configured_rubrics(path: str | None) -> tuple[RubricDefinition, ...]:
    """The rubrics the judges file defines (the built-in ones are judge/rubrics')."""
    return tuple(configured_file(path).rubric)


def public_view(judge: LLMJudge | OfflineJudge) -> dict[str, Any]:
    """What GET /v1/judges shows: never the key or its variable's value."""
    return {
        "name": judge.name,
        "kind": judge.kind,
        "rubric": judge.rubric,
        "provider": judge.provider,
        "model": judge.model,
        "enabled": judge.enabled,
        # What a study's plan reads (services/launcher/study.py): the request budget and the prices, if any.
        "max_tokens": getattr(judge, "max_tokens", None),
        "price_per_mtok_in": getattr(judge, "price_per_mtok_in", None),
        "price_per_mtok_out": getattr(judge, "price_per_mtok_out", None),
    }
