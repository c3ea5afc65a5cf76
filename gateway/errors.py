"""One error format: RFC 9457 problem+json, with `errors: [{loc, msg}]` naming each bad field."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.responses import CleanJSONResponse
from services.kernel.attempts import SubmissionError

PROBLEM_JSON = "application/problem+json"
_FASTAPI_BODY_PARSE_ERROR = "There was an error parsing the body"

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class FieldProblem(BaseModel):
    """One bad field: where it is (`["body", "source_code"]`, `["query", "cursor"]`) and what is wrong."""

    loc: list[str | int]
    msg: str


class Problem(BaseModel):
    """Every error's body (RFC 9457, `application/problem+json`); the OpenAPI document derives its schema here."""

    type: str = Field(description="Always about:blank: the status says what kind of error it is.")
    title: str
    status: int
    detail: str
    errors: list[FieldProblem] | None = Field(default=None, description="The fields at fault, when there are any.")


class ApiError(HTTPException):
    """An error the API reports on purpose, optionally naming fields."""

    def __init__(
        self,
        status: int,
        detail: str,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(status_code=status, detail=detail, headers=headers)
        self.errors = errors or []


class QuotaExceeded(ApiError):
    """429 over one of a key's quotas: `Retry-After` in whole seconds, and the limit named in the body."""

    def __init__(self, limit: str, value: int, retry_after_s: int, scope: str = "tenant") -> None:
        super().__init__(
            429, f"quota {limit} ({value}) reached for the {scope}", headers={"Retry-After": str(retry_after_s)}
        )
        self.extensions = {"limit": limit, "quota": value, "scope": scope, "retry_after_s": retry_after_s}


def field_error(loc: list[str | int], msg: str, status: int = 422) -> ApiError:
    """An error about one field, e.g. `field_error(["body", "problem_id"], "unknown problem")`."""
    return ApiError(status, f"{'.'.join(str(p) for p in loc)}: {msg}", [{"loc": loc, "msg": msg}])


def problem_response(
    status: int,
    detail: str,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
    extensions: dict[str, Any] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = errors
    if extensions:
        body.update({k: v for k, v in extensions.items() if k not in body})
    # Clean: a detail may quote a request's path or a stored name.
    return CleanJSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _validation_errors(exc: RequestValidationError) -> tuple[int, list[dict[str, Any]]]:
    errors: list[dict[str, Any]] = []
    status = 422
    for err in exc.errors():
        loc = [p for p in err.get("loc", ()) if isinstance(p, str | int)]
        msg = str(err.get("msg", "invalid"))
        if err.get("type") == "json_invalid":
            # Malformed JSON or text that is not UTF-8: the body itself is the bad field.
            status = 400
            loc = ["body"]
            msg = f"body is not valid JSON: {err.get('ctx', {}).get('error', msg)}"
        errors.append({"loc": loc, "msg": msg})
    return status, errors


def install(app: FastAPI) -> None:
    """Route every error through problem+json."""

    @app.exception_handler(RequestValidationError)
    async def _on_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        status, errors = _validation_errors(exc)
        named = ", ".join(".".join(str(p) for p in e["loc"]) for e in errors[:5])
        return problem_response(status, f"invalid request: {named}", errors)

    @app.exception_handler(ApiError)
    async def _on_api_error(_: Request, exc: ApiError) -> JSONResponse:
        return problem_response(exc.status_code, str(exc.detail), exc.errors, dict(exc.headers or {}))

    @app.exception_handler(QuotaExceeded)
    async def _on_quota(_: Request, exc: QuotaExceeded) -> JSONResponse:
        return problem_response(429, str(exc.detail), None, dict(exc.headers or {}), exc.extensions)

    @app.exception_handler(SubmissionError)
    async def _on_submission_error(_: Request, exc: SubmissionError) -> JSONResponse:
        error = field_error(exc.loc, exc.message, exc.status)
        return problem_response(error.status_code, str(error.detail), error.errors)

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == _FASTAPI_BODY_PARSE_ERROR:
            # FastAPI's words for a body it could not decode at all (e.g. bytes that are not UTF-8).
            # Also JSON nested too deeply for the parser (a RecursionError).
            msg = "not UTF-8 JSON, or nested too deeply to parse"
            return problem_response(400, f"body is {msg}", [{"loc": ["body"], "msg": msg}])
        return problem_response(exc.status_code, str(exc.detail), None, getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _on_crash(_: Request, exc: Exception) -> JSONResponse:
        return problem_response(500, f"internal error: {type(exc).__name__}")
