"""Bad input gets a clear 4xx in problem+json that names the field, and never a 5xx."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import add_sum_problem


def _field_locs(response: httpx.Response) -> list[list[str | int]]:
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    body = response.json()
    assert {"type", "title", "status", "detail"} <= set(body)
    return [error["loc"] for error in body.get("errors", [])]


def test_malformed_json_is_400_naming_the_body(tenant_client: httpx.Client) -> None:
    response = tenant_client.post(
        "/v1/attempts", content=b'{"language": "python",', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert ["body"] in _field_locs(response)


def test_non_utf8_body_is_400(tenant_client: httpx.Client) -> None:
    response = tenant_client.post(
        "/v1/attempts", content=b'{"source_code": "\xff\xfe"}', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert ["body"] in _field_locs(response)


def test_missing_field_is_named(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    response = tenant_client.post("/v1/attempts", json={"problem_id": problem_id, "language": "python"})
    assert response.status_code == 422
    assert ["body", "source_code"] in _field_locs(response)


@pytest.mark.parametrize(("field", "value"), [("turn", "second"), ("repeats", 0), ("participant", 7)])
def test_wrong_typed_field_is_named(tenant_client: httpx.Client, field: str, value: object) -> None:
    problem_id = add_sum_problem(tenant_client)
    response = tenant_client.post(
        "/v1/attempts",
        json={"problem_id": problem_id, "language": "python", "source_code": "print(1)", field: value},
    )
    assert response.status_code == 422
    assert ["body", field] in _field_locs(response)


def test_unknown_language_is_named(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    response = tenant_client.post(
        "/v1/attempts", json={"problem_id": problem_id, "language": "cobol", "source_code": "DISPLAY 'HI'."}
    )
    assert response.status_code == 422
    assert ["body", "language"] in _field_locs(response)
    assert "python" in response.json()["errors"][0]["msg"]


def test_oversize_source_is_named(tenant_client: httpx.Client) -> None:
    problem_id = add_sum_problem(tenant_client)
    response = tenant_client.post(
        "/v1/attempts",
        json={"problem_id": problem_id, "language": "python", "source_code": "#" * (300 * 1024)},
    )
    assert response.status_code == 422
    assert ["body", "source_code"] in _field_locs(response)


def test_oversize_body_is_413(tenant_client: httpx.Client) -> None:
    response = tenant_client.post(
        "/v1/attempts", content=b"x" * (9 * 1024 * 1024), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert ["body"] in _field_locs(response)


def test_too_many_tests_is_named(tenant_client: httpx.Client) -> None:
    tests = [{"input": "", "expected": ""}] * 513
    response = tenant_client.post("/v1/problems", json={"statement": "many", "tests": tests})
    assert response.status_code == 422
    assert ["body", "tests"] in _field_locs(response)


def test_batch_over_the_limit_is_named(tenant_client: httpx.Client) -> None:
    item = {"problem_id": "x", "language": "python", "source_code": "print(1)"}
    response = tenant_client.post("/v1/attempts:batch", json={"attempts": [item] * 1001})
    assert response.status_code == 422
    assert ["body", "attempts"] in _field_locs(response)


def test_unknown_problem_is_404_naming_problem_id(tenant_client: httpx.Client) -> None:
    response = tenant_client.post(
        "/v1/attempts", json={"problem_id": "nope", "language": "python", "source_code": "print(1)"}
    )
    assert response.status_code == 404
    assert ["body", "problem_id"] in _field_locs(response)


def test_function_mode_needs_python_and_an_entry_point(tenant_client: httpx.Client) -> None:
    no_entry = tenant_client.post(
        "/v1/problems", json={"statement": "f", "mode": "function", "tests": [{"input": [1], "expected": 1}]}
    )
    assert no_entry.status_code == 422
    fn = tenant_client.post(
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
    response = tenant_client.post(
        "/v1/attempts", json={"problem_id": "fn-only-py", "language": "c", "source_code": "int main(){}"}
    )
    assert response.status_code == 422
    assert ["body", "language"] in _field_locs(response)


def test_stdio_tests_must_be_text(tenant_client: httpx.Client) -> None:
    response = tenant_client.post("/v1/problems", json={"statement": "s", "tests": [{"input": [1, 2], "expected": 3}]})
    assert response.status_code == 422
    assert "stdin must be a string" in response.text


def test_bad_limits_are_named(tenant_client: httpx.Client) -> None:
    response = tenant_client.post("/v1/problems", json={"statement": "s", "limits": {"memory_mb": -5}})
    assert response.status_code == 422
    assert ["body", "limits", "memory_mb"] in _field_locs(response)


def test_unknown_ids_are_404(tenant_client: httpx.Client) -> None:
    assert tenant_client.get("/v1/attempts/att_nothing").status_code == 404
    assert tenant_client.get("/v1/jobs/job_nothing").status_code == 404
    assert tenant_client.get("/v1/problems/none-such").status_code == 404
