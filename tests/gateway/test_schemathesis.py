"""The live API against its own OpenAPI document: schemathesis generates requests from /openapi.json for every
operation and checks that no answer is a server error, and that each answer's status, content type and body are
the ones the document lists for it."""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import checks
from schemathesis.specs.openapi import checks as openapi_checks

from services.launcher.stack import EmbeddedStack

EXAMPLES_PER_OPERATION = 20


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_ctx: object, value: object) -> bytes:
    """POST /v1/datasets' body, a JSON Lines text: the generated string as it is (any text is a body it must
    answer without a 5xx: its bad lines are named)."""
    return value.encode() if isinstance(value, str) else (json.dumps(value) + "\n").encode()


CHECKS = [
    checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]


@pytest.mark.corpus  # every operation, many examples each
@pytest.mark.timeout(400)
@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)  # the schema is the same on both databases
def test_every_operation_conforms_to_the_openapi_document(stack: EmbeddedStack, admin_key: str) -> None:
    schema = schemathesis.openapi.from_url(f"{stack.url}/openapi.json")
    headers = {"Authorization": f"Bearer {admin_key}"}
    failures: dict[str, str] = {}
    operations = 0
    calls: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def conforms(case: schemathesis.Case) -> None:
            calls.append(case.operation.label)
            case.call_and_validate(base_url=stack.url, headers=headers, checks=CHECKS, timeout=90)

        try:
            conforms()
        except (Exception, BaseExceptionGroup) as exc:  # every operation's failure is reported, not the first only
            failures[operation.label] = f"{type(exc).__name__}: {str(exc)[:3000]}"
    assert operations >= 30, f"only {operations} operations in /openapi.json"
    # Hypothesis stops early for an operation with few distinct requests (no parameters): most have many.
    assert len(calls) >= operations * EXAMPLES_PER_OPERATION // 2, f"only {len(calls)} requests were made"
    print(f"schemathesis: {len(calls)} requests over {operations} operations")
    assert not failures, "\n\n".join(f"{label}\n{text}" for label, text in failures.items())
