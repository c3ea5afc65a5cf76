"""`POST /v1/datasets?format=F` against the real process stack: a JSON Lines body streamed through its loader, bad
lines named by number and field with the good ones imported, a second post creating nothing, a line too long
skipped without being held, and a 100,000-line body answered in one pass."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

FIXTURES = Path(__file__).parents[1] / "services" / "lib" / "datasets" / "fixtures"
NDJSON = {"content-type": "application/x-ndjson"}


def _ended(client: httpx.Client, problem_id: str, count: int) -> list[dict[str, object]]:
    deadline = time.monotonic() + 90
    while True:
        items = client.get("/v1/attempts", params={"problem_id": problem_id}).json()["items"]
        if len(items) >= count and all(i["status"] in ("done", "failed", "cancelled") for i in items):
            return list(items)
        assert time.monotonic() < deadline, items
        time.sleep(0.5)


def test_bad_lines_are_named_the_good_ones_imported_and_a_second_post_creates_nothing(
    tenant_client: httpx.Client,
) -> None:
    lines = (FIXTURES / "tribunal.jsonl").read_text().splitlines()
    body = "\n".join(
        [
            *lines,
            '{"problem_id": "sum-three", "tests": [',  # line 4: not JSON
            json.dumps({"problem_id": "sum-two", "language": "python", "source_code": 7}),  # 5: the loader's check
            json.dumps({"problem_id": "nowhere", "language": "python", "source_code": "print(1)\n"}),  # 6: a 404
            json.dumps({"problem_id": "sum-two", "language": "cobol", "source_code": "x"}),  # 7: the loader's check
            "",
        ]
    )
    first = tenant_client.post("/v1/datasets", params={"format": "tribunal"}, content=body, headers=NDJSON)
    assert first.status_code == 200, first.text
    answer = first.json()
    assert (answer["lines"], answer["problems_created"], answer["attempts_created"], answer["bad_lines"]) == (
        7,
        1,
        2,
        4,
    )
    by_line = {error["line"]: error for error in answer["errors"]}
    assert by_line[4]["field"] == "json"
    assert by_line[5]["field"] == "source_code" and "expected a string" in by_line[5]["message"]
    assert by_line[6]["field"] == "problem_id" and "(404)" in by_line[6]["message"]
    assert by_line[7]["field"] == "language"
    assert answer["job_ids"]  # the batch with line 6 was refused whole, then sent one attempt at a time
    verdicts = sorted(str(item["verdict"]) for item in _ended(tenant_client, "sum-two", 2))
    assert verdicts == ["AC", "WA"]

    again = tenant_client.post("/v1/datasets", params={"format": "tribunal"}, content=body, headers=NDJSON).json()
    assert (again["problems_created"], again["problems_existing"]) == (0, 1)
    assert (again["attempts_created"], again["attempts_existing"], again["job_ids"]) == (0, 2, [])


def test_an_unknown_format_is_422_naming_it(tenant_client: httpx.Client) -> None:
    response = tenant_client.post("/v1/datasets", params={"format": "csv"}, content="{}\n", headers=NDJSON)
    assert response.status_code == 422 and response.json()["errors"][0]["loc"] == ["query", "format"]
    # The loaders that parse the records' code run client-side only: the gateway never parses tenant code unjailed.
    for format in ("humaneval", "mbpp"):
        refused = tenant_client.post("/v1/datasets", params={"format": format}, content="{}\n", headers=NDJSON)
        assert refused.status_code == 422 and refused.json()["errors"][0]["loc"] == ["query", "format"]
        assert "tribunal import" in refused.json()["errors"][0]["msg"]


def test_hostile_lines_are_bad_lines_not_server_errors(tenant_client: httpx.Client) -> None:
    body = b"[" * 100_000 + b"\n" + json.dumps({"problem_id": "x" * 5000, "tests": []}).encode() + b"\n"
    answer = tenant_client.post("/v1/datasets", params={"format": "tribunal"}, content=body, headers=NDJSON)
    assert answer.status_code == 200, answer.text
    errors = answer.json()["errors"]
    assert errors[0] == {"line": 1, "field": "json", "message": "nested too deeply"}
    assert errors[1]["line"] == 2 and len(errors[1]["message"]) <= 300


def test_a_long_body_streams_and_a_line_too_long_is_skipped(tenant_client: httpx.Client) -> None:
    def body() -> Iterator[bytes]:
        yield b'{"task_id": "' + b"y" * (9 * 1024 * 1024) + b'"}\n'  # over the 8 MiB a line may hold
        for _ in range(100):
            yield b"[1, 2]\n" * 1000  # 100,000 lines that are not objects

    answer = tenant_client.post(
        "/v1/datasets", params={"format": "human-eval-samples"}, content=body(), headers=NDJSON, timeout=300
    ).json()
    assert answer["lines"] == 100_001 and answer["bad_lines"] == 100_001
    assert answer["errors_listed"] == 1000 and len(answer["errors"]) == 1000
    assert answer["errors"][0] == {"line": 1, "field": "record", "message": "longer than 8388608 bytes"}
    assert answer["errors"][1]["line"] == 2 and "expected a JSON object" in answer["errors"][1]["message"]
