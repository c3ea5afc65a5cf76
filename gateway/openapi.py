"""The OpenAPI document, completed in one place: every status code each operation can answer, errors as
`application/problem+json`, the bearer key, and the media types of the responses that are not JSON."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from gateway.errors import PROBLEM_JSON, Problem
from gateway.schemas import DatasetIn

_PROBLEM_REF = "#/components/schemas/Problem"

_ERRORS = {
    400: "Malformed JSON, a body that is not UTF-8 (or nests too deeply to parse), or a cursor this API did not give",
    401: "No bearer key, or an unknown or revoked one",
    403: "The key lacks the scope this operation needs",
    404: "An object of this tenant that does not exist, in the path or referenced from the body (`loc` names it)",
    409: "Conflicts with what is stored, or is not ready yet (see the operation's description)",
    413: "The request body is over TRIBUNAL_MAX_BODY_BYTES (8 MiB by default), whether declared or streamed",
    422: "A field breaks the schema or a limit; `errors[].loc` names each one",
    429: "Over one of the key's quotas; `Retry-After` says when to try again",
}

# Answers that only some operations give, beyond the rules in `_statuses`.
_SPECIFIC: dict[tuple[str, str], dict[int, str]] = {
    ("get", "/v1/exports/attempts"): {
        404: "The tenant has no job `job_id` or no problem `problem_id` (`loc` names it)"
    },
    ("post", "/v1/problems"): {
        200: "A problem with this id and the same content exists (idempotent)",
        409: "A problem with this id and different content exists",
    },
    ("post", "/v1/attempts"): {409: "The attempt_uid was used with different content"},
    ("post", "/v1/attempts:batch"): {409: "An attempt_uid was used with different content"},
    ("get", "/v1/reports/{report_id}/html"): {409: "The report's HTML page is not built yet: retry once it is done"},
    ("get", "/v1/benchmarks/{job_id}/export.jsonl"): {409: "The job has not selected its programs yet"},
    ("get", "/v1/benchmarks/{job_id}/programs/{attempt_id}/calibration"): {
        409: "The report is being prepared, or the program is a 0-point pair or not selected"
    },
    ("put", "/v1/benchmarks/{job_id}/programs/{attempt_id}/calibration"): {
        409: "The program was dropped, or is a 0-point pair or not selected"
    },
    ("get", "/readyz"): {503: "The database or Redis is unreachable (the body says which)"},
    ("post", "/v1/studies"): {
        200: "A study with this name and the same spec exists (idempotent)",
        409: "A study with this name and another spec exists",
    },
    ("post", "/v1/studies/{study_id}/perturbations"): {
        200: "The study's perturbation job, made before (it is made once)",
        409: "The study has no [perturbations], or no accepted reference attempt yet",
    },
    ("post", "/v1/studies/{study_id}/reports"): {200: "The study's report at this index, made before (made once)"},
}

# Successful answers that are not JSON: (method, path) -> (status, media type, schema).
_MEDIA: dict[tuple[str, str], tuple[int, str, dict[str, Any]]] = {
    ("get", "/v1/reports/{report_id}/plots/{name}.png"): (200, "image/png", {"type": "string", "format": "binary"}),
    ("get", "/v1/reports/{report_id}/html"): (200, "text/html", {"type": "string"}),
    ("get", "/v1/benchmarks/{job_id}/export.jsonl"): (200, "application/x-ndjson", {"type": "string"}),
    ("get", "/metrics"): (200, "text/plain", {"type": "string"}),
}


def _authenticated(path: str) -> bool:
    """Every /v1 operation needs a key with some scope (gateway/deps.py), and so does /metrics (unless
    TRIBUNAL_TELEMETRY_PUBLIC is set, when it answers 401 to nobody)."""
    return path.startswith("/v1/") or path == "/metrics"


def _statuses(path: str, method: str, operation: dict[str, Any]) -> dict[int, str]:
    """The error statuses an operation can answer, from what it takes: a key, a body, parameters."""
    statuses: dict[int, str] = {}
    if _authenticated(path):
        statuses |= {401: _ERRORS[401], 403: _ERRORS[403], 429: _ERRORS[429]}
    has_body = "requestBody" in operation
    params = {p["name"]: p["in"] for p in operation.get("parameters", [])}
    if has_body:
        statuses |= {400: _ERRORS[400], 413: _ERRORS[413]}
    if "cursor" in params:
        statuses[400] = _ERRORS[400]
    if has_body or params:
        statuses[422] = _ERRORS[422]
    if has_body or "path" in params.values():
        statuses[404] = _ERRORS[404]
    if (method, path) == ("post", "/v1/keys"):
        statuses.pop(404, None)  # a new key refers to nothing stored
    return statuses | _SPECIFIC.get((method, path), {})


def _complete(document: dict[str, Any]) -> dict[str, Any]:
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem.pop("$defs", {}))
    schemas["Problem"] = problem
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)  # FastAPI's own 422 shape, which this API never sends
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer", "description": "An API key"}}
    _document_dataset_body(document, schemas)
    _document_ndjson_dataset(document)
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            media = _MEDIA.get((method, path))
            if media is not None:
                status, media_type, schema = media
                responses.setdefault(str(status), {"description": "Successful Response"})
                responses[str(status)]["content"] = {media_type: {"schema": schema}}
            statuses = _statuses(path, method, operation)
            if 401 in statuses:
                operation["security"] = [{"bearer": []}]
            successes = sorted(code for code in responses if code.startswith("2"))
            for status, description in sorted(statuses.items()):
                if status < 400:
                    # Another success (200 beside 201): the same body as the documented one.
                    content = responses.get(successes[0], {}).get("content") if successes else None
                    extra = {"content": content} if content else {}
                    responses.setdefault(str(status), {"description": description, **extra})
                    continue
                if (method, path) == ("get", "/readyz"):
                    responses[str(status)] = {"description": description, "content": {"application/json": {}}}
                    continue
                responses[str(status)] = {
                    "description": description,
                    "content": {PROBLEM_JSON: {"schema": {"$ref": _PROBLEM_REF}}},
                }
    return document


def _document_dataset_body(document: dict[str, Any], schemas: dict[str, Any]) -> None:
    """POST /v1/similarity/datasets reads its body itself (JSON, or JSON Lines): say what it reads."""
    operation = document["paths"].get("/v1/similarity/datasets", {}).get("post")
    if operation is None:
        return
    dataset = DatasetIn.model_json_schema(ref_template="#/components/schemas/{model}", mode="validation")
    schemas.update(dataset.pop("$defs", {}))
    schemas["DatasetIn"] = dataset
    operation["requestBody"] = {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/DatasetIn"}},
            "application/x-ndjson": {
                "schema": {"type": "string", "description": "One record per line; parameters in the query"}
            },
        },
    }


def _document_ndjson_dataset(document: dict[str, Any]) -> None:
    """POST /v1/datasets streams its body itself, a line at a time: say what it reads."""
    operation = document["paths"].get("/v1/datasets", {}).get("post")
    if operation is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {
                "application/x-ndjson": {
                    "schema": {"type": "string", "description": "One record of `format` per line (docs/datasets.md)"}
                }
            },
        }


def install(app: FastAPI) -> None:
    """Make `app.openapi()` (and so /openapi.json and /docs) return the completed document."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _complete(plain())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
