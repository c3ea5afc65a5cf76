"""Red-team tests of the similarity endpoints (gateway/routes/similarity.py) on the real stack: hostile bodies and
parameters must get a 4xx naming what is wrong, never a 5xx. Each test once failed with a 500."""

from __future__ import annotations

import json
from typing import Any

import httpx

PROGRAM = {"language": "python", "source_code": "def f(a, b):\n    return a + b\n"}
SPEC = {
    "kind": "function",
    "args": [{"name": "a", "type": {"type": "int"}}, {"name": "b", "type": {"type": "int"}}],
}
SMALL: dict[str, Any] = {"n_inputs": 5, "repeats": 1, "time_budget_s": 10}


def record(**extra: Any) -> dict[str, Any]:
    return {"id": "r1", "golden_code": PROGRAM["source_code"], "generated_code": PROGRAM["source_code"],
            "entry_point": "f", "input_spec": SPEC, **extra}  # fmt: skip


def is_4xx(response: httpx.Response) -> bool:
    return 400 <= response.status_code < 500


def a_job(client: httpx.Client) -> str:
    body = {"reference": PROGRAM, "candidate": PROGRAM, "entry_point": "f", "input_spec": SPEC, **SMALL}
    response = client.post("/v1/similarity", json=body)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["job_id"]
    return job_id


def test_hostile_bodies_get_4xx(tenant_client: httpx.Client) -> None:
    deep_spec = {"kind": "function", "args": []}
    node: dict[str, Any] = deep_spec
    for _ in range(500):
        node["x"] = {}
        node = node["x"]
    cases: dict[str, tuple[str, Any, dict[str, str]]] = {
        "pair: input_spec nested 500 deep": (
            "/v1/similarity",
            json.dumps({"reference": PROGRAM, "candidate": PROGRAM, "input_spec": deep_spec, **SMALL}),
            {"content-type": "application/json"},
        ),
        "pair: NaN tolerance": (
            "/v1/similarity",
            json.dumps({"reference": PROGRAM, "candidate": PROGRAM, "float_tolerance": float("nan")}),
            {"content-type": "application/json"},
        ),
        "pair: seed beyond int64": (
            "/v1/similarity",
            json.dumps({"reference": PROGRAM, "candidate": PROGRAM, "seed": 2**64}),
            {"content-type": "application/json"},
        ),
        "pair: entry point not an identifier": (
            "/v1/similarity",
            json.dumps({"reference": PROGRAM, "candidate": PROGRAM, "entry_point": "os.system('x')"}),
            {"content-type": "application/json"},
        ),
        "dataset: a JSON array": ("/v1/similarity/datasets", "[1, 2]", {"content-type": "application/json"}),
        "dataset: pairs not a list": (
            "/v1/similarity/datasets",
            json.dumps({"pairs": "x"}),
            {"content-type": "application/json"},
        ),
        "dataset jsonl: a line that is a number": (
            "/v1/similarity/datasets",
            "5\n",
            {"content-type": "application/x-ndjson"},
        ),
        "dataset jsonl: bad query parameter": (
            "/v1/similarity/datasets?n_inputs=lots",
            json.dumps(record()) + "\n",
            {"content-type": "application/x-ndjson"},
        ),
        "dataset: labels too large": (
            "/v1/similarity/datasets",
            json.dumps({"pairs": [record(note="x" * 10_000)], **SMALL}),
            {"content-type": "application/json"},
        ),
    }
    for name, (url, content, headers) in cases.items():
        response = tenant_client.post(url, content=content, headers=headers)
        assert is_4xx(response), (name, response.status_code, response.text)


def test_dataset_body_nested_too_deeply_is_4xx(tenant_client: httpx.Client) -> None:
    # _dataset_body calls json.loads itself: RecursionError was a 500.
    deep = "[" * 100_000 + "]" * 100_000
    for content_type, body in (("application/json", deep), ("application/x-ndjson", deep + "\n")):
        response = tenant_client.post("/v1/similarity/datasets", content=body, headers={"content-type": content_type})
        assert is_4xx(response), (content_type, response.status_code, response.text)


def test_dataset_body_with_a_5000_digit_number_is_4xx(tenant_client: httpx.Client) -> None:
    # json.loads raises a plain ValueError (not JSONDecodeError) for an int over 4300 digits: was a 500.
    body = '{"pairs": [], "seed": ' + "9" * 5000 + "}"
    response = tenant_client.post("/v1/similarity/datasets", content=body, headers={"content-type": "application/json"})
    assert is_4xx(response), (response.status_code, response.text)


def test_dataset_labels_with_nan_are_refused_or_stored(tenant_client: httpx.Client, request: Any) -> None:
    # json.loads accepts NaN; a label carrying it went to a JSON column, which PostgreSQL's json type refuses
    # (DBAPIError: 500). Refused with a 422 on both backends.
    body = '{"pairs": [' + json.dumps(record())[:-1] + ', "weight": NaN}], "n_inputs": 5, "repeats": 1}'
    response = tenant_client.post("/v1/similarity/datasets", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422 and "NaN" in response.text, (response.status_code, response.text)


def test_out_of_range_path_and_query_numbers_are_4xx_or_empty(tenant_client: httpx.Client) -> None:
    # The pair's ordinal (a path int with no bound) reached the database: OverflowError on SQLite beyond int64,
    # DBAPIError on PostgreSQL beyond int32 (the column is INTEGER); likewise offset beyond int64. Now bounded.
    job_id = a_job(tenant_client)
    failures = []
    for url in (
        f"/v1/similarity/{job_id}/pairs/{2**40}",
        f"/v1/similarity/{job_id}/pairs/{10**30}",
        f"/v1/similarity/{job_id}/pairs/-1",
        f"/v1/similarity/{job_id}?offset={2**63}",
        f"/v1/similarity/{job_id}?offset={10**30}",
        f"/v1/similarity/{job_id}?limit=0",
        "/v1/similarity/" + "x" * 5000,
        f"/v1/similarity/{job_id}/pairs/1.5",
    ):
        # A fresh connection each time: after an unhandled error the server closes the one it answered on.
        response = tenant_client.get(url, headers={"connection": "close"})
        if response.status_code >= 500:
            failures.append((url.replace(job_id, "{job}"), response.status_code, response.json().get("detail")))
    assert not failures, failures
