"""What observability costs: the gateway's /metrics (which reads Redis and the database for the platform-wide
gauges) against its /healthz as the baseline, measured in the same run on the embedded stack, idle and while
attempts are submitted; and the scrape durations the local Prometheus itself records for every process.

    .venv/bin/python bench/bench_scrape.py [--requests 200] [--attempts 300]

Prints a table and writes bench/results/scrape.json. /metrics refreshes the platform gauges at most once a second
(gateway/scrape.py), so the "forced" row waits over a second between requests to pay the refresh every time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.kernel.embedded import free_port  # noqa: E402
from services.launcher.stack import EmbeddedStack  # noqa: E402

console = Console()
RESULTS = Path(__file__).parent / "results"
SOURCE = "a, b = map(int, input().split())\nprint(a + b)\n# {n}\n"


def _latencies_ms(client: httpx.Client, path: str, count: int, pause_s: float = 0.0) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
        time.sleep(pause_s)
    return samples


def _submit_in_background(client: httpx.Client, problem_id: str, attempts: int) -> threading.Thread:
    def run() -> None:
        for n in range(attempts):
            body = {"problem_id": problem_id, "language": "python", "source_code": SOURCE.format(n=n), "judges": []}
            client.post("/v1/attempts", json=body).raise_for_status()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--attempts", type=int, default=300)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedStack(Path(tmp), prometheus_port=free_port()) as stack:
        admin_key = stack.admin_key_path.read_text().strip()
        with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as client:
            problem = {
                "problem_id": "sum",
                "statement": "Sum two integers.",
                "tests": [{"input": "1 2\n", "expected": "3\n"}, {"input": "5 5\n", "expected": "10\n"}],
            }
            client.post("/v1/problems", json=problem).raise_for_status()
            for phase in ("idle", "loaded"):
                submitting = _submit_in_background(client, "sum", args.attempts) if phase == "loaded" else None
                # Alternated, so that load changes hit both alike.
                health, metrics = [], []
                for _ in range(args.requests // 10):
                    health += _latencies_ms(client, "/healthz", 10)
                    metrics += _latencies_ms(client, "/metrics", 10)
                rows[f"/healthz ({phase})"] = health
                rows[f"/metrics ({phase})"] = metrics
                if submitting is not None:
                    submitting.join()
            rows["/metrics (forced refresh, idle)"] = _latencies_ms(client, "/metrics", 20, pause_s=1.1)
        assert stack.prometheus is not None
        query = "avg_over_time(scrape_duration_seconds[5m])"
        answer = httpx.get(f"{stack.prometheus.url}/api/v1/query", params={"query": query}, timeout=10).json()
        scrapes = {
            r["metric"]["job"] + " " + r["metric"]["instance"]: float(r["value"][1]) * 1000
            for r in answer["data"]["result"]
        }

    table = Table(title="Observability cost (ms)")
    for column in ("request", "n", "median", "p95"):
        table.add_column(column, justify="right" if column != "request" else "left")
    summary: dict[str, dict[str, float]] = {}
    for name, samples in rows.items():
        ordered = sorted(samples)
        median, p95 = statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]
        summary[name] = {"n": len(ordered), "median_ms": median, "p95_ms": p95}
        table.add_row(name, str(len(ordered)), f"{median:.2f}", f"{p95:.2f}")
    console.print(table)
    for phase in ("idle", "loaded"):
        ratio = summary[f"/metrics ({phase})"]["median_ms"] / summary[f"/healthz ({phase})"]["median_ms"]
        summary[f"ratio ({phase})"] = {"metrics_over_healthz": ratio}
        console.print(f"/metrics / /healthz, {phase}: {ratio:.2f}x (medians)")
    console.print("Prometheus's own scrape durations, mean over the run (ms):")
    for target, ms in sorted(scrapes.items()):
        console.print(f"  {target}: {ms:.2f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scrape.json").write_text(json.dumps({"latency": summary, "scrape_ms": scrapes}, indent=2) + "\n")


if __name__ == "__main__":
    main()
