"""Bad input gets a clear 4xx in problem+json that names the field, and never a 5xx.

Request validation never reaches SQL that differs between the databases: these run once, on the gateway alone in
this process (tests/gateway/conftest.py). What is stored and read back (a date's time zone) runs on the whole stack,
on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.gateway.conftest import InProcessGateway
from tests.helpers import add_sum_problem, change_rows


def _field_locs(response: httpx.Response) -> list[list[str | int]]:
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    body = response.json()
    assert {"type", "title", "status", "detail"} <= set(body)
    return [error["loc"] for error in body.get("errors", [])]


def test_malformed_json_is_400_naming_the_body(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post(
        "/v1/attempts", content=b'{"language": "python",', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert ["body"] in _field_locs(response)


def test_non_utf8_body_is_400(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post(
        "/v1/attempts", content=b'{"source_code": "\xff\xfe"}', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert ["body"] in _field_locs(response)


def test_missing_field_is_named(gateway_tenant: httpx.Client) -> None:
    problem_id = add_sum_problem(gateway_tenant)
    response = gateway_tenant.post("/v1/attempts", json={"problem_id": problem_id, "language": "python"})
    assert response.status_code == 422
    assert ["body", "source_code"] in _field_locs(response)


@pytest.mark.parametrize(
    ("field", "value"),
    [("turn", "second"), ("repeats", 0), ("participant", 7), ("turn", 10**30), ("turn", 2**31), ("turn", True)],
)
def test_wrong_typed_or_out_of_range_field_is_named(gateway_tenant: httpx.Client, field: str, value: object) -> None:
    problem_id = add_sum_problem(gateway_tenant)
    response = gateway_tenant.post(
        "/v1/attempts",
        json={"problem_id": problem_id, "language": "python", "source_code": "print(1)", field: value},
    )
    assert response.status_code == 422
    assert ["body", field] in _field_locs(response)


def test_unknown_language_is_named(gateway_tenant: httpx.Client) -> None:
    problem_id = add_sum_problem(gateway_tenant)
    response = gateway_tenant.post(
        "/v1/attempts", json={"problem_id": problem_id, "language": "cobol", "source_code": "DISPLAY 'HI'."}
    )
    assert response.status_code == 422
    assert ["body", "language"] in _field_locs(response)
    assert "python" in response.json()["errors"][0]["msg"]


def test_oversize_source_is_named(gateway_tenant: httpx.Client) -> None:
    problem_id = add_sum_problem(gateway_tenant)
    response = gateway_tenant.post(
        "/v1/attempts",
        json={"problem_id": problem_id, "language": "python", "source_code": "#" * (300 * 1024)},
    )
    assert response.status_code == 422
    assert ["body", "source_code"] in _field_locs(response)


def test_oversize_body_is_413(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post(
        "/v1/attempts", content=b"x" * (9 * 1024 * 1024), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert ["body"] in _field_locs(response)


def test_too_many_tests_is_named(gateway_tenant: httpx.Client) -> None:
    tests = [{"input": "", "expected": ""}] * 513
    response = gateway_tenant.post("/v1/problems", json={"statement": "many", "tests": tests})
    assert response.status_code == 422
    assert ["body", "tests"] in _field_locs(response)


def test_batch_over_the_limit_is_named(gateway_tenant: httpx.Client) -> None:
    item = {"problem_id": "x", "language": "python", "source_code": "print(1)"}
    response = gateway_tenant.post("/v1/attempts:batch", json={"attempts": [item] * 1001})
    assert response.status_code == 422
    assert ["body", "attempts"] in _field_locs(response)


def test_unknown_problem_is_404_naming_problem_id(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post(
        "/v1/attempts", json={"problem_id": "nope", "language": "python", "source_code": "print(1)"}
    )
    assert response.status_code == 404
    assert ["body", "problem_id"] in _field_locs(response)


def test_function_mode_needs_python_and_an_entry_point(gateway_tenant: httpx.Client) -> None:
    no_entry = gateway_tenant.post(
        "/v1/problems", json={"statement": "f", "mode": "function", "tests": [{"input": [1], "expected": 1}]}
    )
    assert no_entry.status_code == 422
    fn = gateway_tenant.post(
        "/v1/problems",
        json={
            "problem_id": "fn-only-py",
            "statement": "f",
            "mode": "function",
            "entry_point": "f",
            "tests": [{"input": [1], "expected": 1}],
        },
    )
    assert fn.status_code == 201
    response = gateway_tenant.post(
        "/v1/attempts", json={"problem_id": "fn-only-py", "language": "c", "source_code": "int main(){}"}
    )
    assert response.status_code == 422
    assert ["body", "language"] in _field_locs(response)


def test_stdio_tests_must_be_text(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post("/v1/problems", json={"statement": "s", "tests": [{"input": [1, 2], "expected": 3}]})
    assert response.status_code == 422
    assert "stdin must be a string" in response.text


def test_bad_limits_are_named(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post("/v1/problems", json={"statement": "s", "limits": {"memory_mb": -5}})
    assert response.status_code == 422
    assert ["body", "limits", "memory_mb"] in _field_locs(response)


def test_unknown_ids_are_404(gateway_tenant: httpx.Client) -> None:
    assert gateway_tenant.get("/v1/attempts/att_nothing").status_code == 404
    assert gateway_tenant.get("/v1/jobs/job_nothing").status_code == 404
    assert gateway_tenant.get("/v1/problems/none-such").status_code == 404


# ---- errors and bounds (docs/api.md): every number, date and JSON value is bounded, and named when it is not ----


def _nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


def test_deep_input_spec_is_422_naming_it(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post("/v1/problems", json={"statement": "s", "input_spec": {"args": _nested(1000)}})
    assert response.status_code == 422
    assert ["body", "input_spec"] in _field_locs(response)


def test_deep_report_filter_is_422_naming_it(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post("/v1/reports", json={"kind": "similarity", "filter": {"job_id": _nested(1000)}})
    assert response.status_code == 422
    assert ["body", "filter"] in _field_locs(response)


def test_json_too_deep_to_parse_is_400(gateway_tenant: httpx.Client) -> None:
    body = b'{"statement": "s", "input_spec": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    response = gateway_tenant.post("/v1/problems", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert ["body"] in _field_locs(response)


def test_json_at_the_depth_limit_is_accepted(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post("/v1/reports", json={"kind": "similarity", "filter": {"x": _nested(30)}})
    assert response.status_code == 202, response.text


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
def test_date_outside_years_1_to_9999_in_utc_is_named(gateway_tenant: httpx.Client, when: str) -> None:
    problem_id = add_sum_problem(gateway_tenant)
    response = gateway_tenant.post(
        "/v1/attempts",
        json={"problem_id": problem_id, "language": "python", "source_code": "print(1)", "submitted_at": when},
    )
    assert response.status_code == 422
    assert ["body", "submitted_at"] in _field_locs(response)


def test_date_with_offset_is_stored_in_utc(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    response = tenant_client.post(
        "/v1/attempts",
        json={
            "problem_id": problem_id,
            "language": "python",
            "source_code": "print(1)",
            "submitted_at": "2026-01-01T10:00:00+02:00",
        },
    )
    assert response.status_code == 202, response.text
    stored = tenant_client.get(f"/v1/attempts/{response.json()['attempt_id']}").json()["submitted_at"]
    assert stored.startswith("2026-01-01T08:00:00")


def test_oversize_chunked_body_is_413(gateway_tenant: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(9):
            yield b" " * (1024 * 1024)

    response = gateway_tenant.post("/v1/attempts", content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert ["body"] in _field_locs(response)


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN"])
def test_non_finite_numbers_are_named(gateway_tenant: httpx.Client, number: str) -> None:
    checker = '"checker": {"kind": "float", "abs_tol": ' + number + "}"
    body = '{"language": "python", "source_code": "print(1)", ' + checker + "}"
    response = gateway_tenant.post("/v1/executions", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert ["body", "checker"] in _field_locs(response)


@pytest.mark.parametrize("source", ["", "  \n\t"])
def test_blank_source_is_named(gateway_tenant: httpx.Client, source: str) -> None:
    response = gateway_tenant.post("/v1/executions", json={"language": "c", "source_code": source})
    assert response.status_code == 422
    assert ["body", "source_code"] in _field_locs(response)


@pytest.mark.parametrize("seed", [True, "7", -1, 2**64])
def test_seed_must_be_a_bounded_integer(gateway_tenant: httpx.Client, seed: object) -> None:
    response = gateway_tenant.post("/v1/reports", json={"kind": "similarity", "seed": seed})
    assert response.status_code == 422
    assert ["body", "seed"] in _field_locs(response)


def test_report_html_not_built_yet_is_409(gateway: InProcessGateway, gateway_tenant: httpx.Client) -> None:
    created = gateway_tenant.post("/v1/reports", json={"kind": "similarity", "filter": {"job_id": "job_none"}})
    assert created.status_code == 202, created.text
    # An empty report builds in milliseconds, so a twin of it that no worker will ever build stands in for one
    # still queued: same tenant and parameters, no result, no page.
    unbuilt = "rep_unbuilt_" + created.json()["report_id"][-16:]
    change_rows(
        gateway.database_url,
        "INSERT INTO report (report_id, tenant, kind, params, job_id, created_at)"
        " SELECT :unbuilt, tenant, kind, params, job_id, created_at FROM report WHERE report_id = :built",
        unbuilt=unbuilt,
        built=created.json()["report_id"],
    )
    response = gateway_tenant.get(f"/v1/reports/{unbuilt}/html")
    assert response.status_code == 409
    _field_locs(response)
    assert gateway_tenant.get("/v1/reports/rep_none/html").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"mode": "function", "tests": [{"code": "assert candidate(1) == 1"}]}, "entry_point"),
        ({"mode": "function", "entry_point": "f", "stdin": "1"}, "stdin"),
        ({"mode": "function", "entry_point": "f"}, "tests"),
        ({"mode": "function", "entry_point": "f", "tests": [{"input": "1"}]}, "tests"),
        ({"tests": [{"code": "assert True"}]}, "tests"),
        ({"stdin": "", "tests": []}, "stdin"),
        ({"mode": "function", "entry_point": "f", "language": "c", "tests": [{"input": [1]}]}, "mode"),
    ],
)
def test_executions_the_executor_would_refuse_are_422(gateway_tenant: httpx.Client, body: dict, field: str) -> None:
    response = gateway_tenant.post("/v1/executions", json={"language": "python", "source_code": "x = 1", **body})
    assert response.status_code == 422, response.text
    assert ["body", field] in _field_locs(response)


def test_function_problem_without_entry_point_names_it(gateway_tenant: httpx.Client) -> None:
    response = gateway_tenant.post(
        "/v1/problems", json={"statement": "f", "mode": "function", "tests": [{"input": [1], "expected": 1}]}
    )
    assert response.status_code == 422
    assert ["body", "entry_point"] in _field_locs(response)


def test_openapi_documents_every_error_as_problem_json(gateway: InProcessGateway) -> None:
    document = httpx.get(f"{gateway.url}/openapi.json").json()
    problem = {"$ref": "#/components/schemas/Problem"}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            if path.startswith("/v1/"):
                assert {"401", "403", "429"} <= set(responses), (method, path)
            if "requestBody" in operation:
                assert {"400", "413", "422"} <= set(responses), (method, path)
            for status, response in responses.items():
                if status.startswith("4"):
                    assert response["content"] == {"application/problem+json": {"schema": problem}}, (method, path)
    assert "409" in document["paths"]["/v1/reports/{report_id}/html"]["get"]["responses"]
    assert "HTTPValidationError" not in document["components"]["schemas"]
    source = document["components"]["schemas"]["ExecutionIn"]["properties"]["source_code"]
    assert source["minLength"] == 1
