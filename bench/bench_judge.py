"""Judge pipeline benchmarks against the scripted OpenAI-compatible server, baselines measured in the same run.

    .venv/bin/python bench/bench_judge.py [--quick]

1. Overhead per judgment: request building, the openai client, validation and the row UPSERT into SQLite, with
   a server that answers at once, against the same request sent as a bare HTTP POST (sequential, medians).
2. Throughput with a scripted 1 s provider latency: judgments per second with concurrency 100.
Writes bench/results/judge.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge.request import JudgeInput, build_messages  # noqa: E402
from judge.rubrics import RUBRICS  # noqa: E402
from judge.runner import LLMRunner  # noqa: E402
from judge.worker import _write  # noqa: E402
from services.kernel.db import dispose_engine, init_engine, session_scope  # noqa: E402
from services.kernel.judges import LLMJudge  # noqa: E402
from services.kernel.models import Attempt, Problem  # noqa: E402
from services.launcher.migrate import upgrade_async  # noqa: E402
from services.lib.llm import request_params  # noqa: E402
from tests.fake_llm import Behaviour, ScriptedLLM  # noqa: E402

console = Console()
RESULTS = Path(__file__).parent / "results"
RUBRIC = RUBRICS["cocreation"]


def _judge(server: ScriptedLLM, concurrency: int) -> LLMJudge:
    return LLMJudge(
        name="bench",
        kind="llm",
        base_url=server.base_url,
        model="bench-model",
        concurrency=concurrency,
        requests_per_minute=1_000_000,
        timeout_s=30,
    )


def _messages(index: int) -> list[dict[str, str]]:
    source = f"# attempt {index}\nprint(sum(map(int, input().split())))\n"
    return build_messages(RUBRIC, JudgeInput("p-1", "Print a + b.", "python", source, "", None))


async def _seed_attempts(count: int) -> None:
    async with session_scope() as session:
        problem = Problem(
            tenant="bench",
            problem_id="p-1",
            statement="Print a + b.",
            tests=[],
            checker={},
            limits={},
            references=[],
            content_hash="h",
        )
        session.add(problem)
        await session.flush()
        for index in range(count):
            session.add(
                Attempt(
                    attempt_id=f"att_{index}",
                    tenant="bench",
                    problem_pk=problem.id,
                    language="python",
                    source_code="x",
                    source_hash="h",
                    content_hash="h",
                )
            )


async def bench_overhead(server: ScriptedLLM, count: int) -> dict[str, float]:
    judge = _judge(server, 1)
    runner = LLMRunner(judge)
    raw, piped = [], []
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as client:
        for index in range(count):
            messages = _messages(index)
            body = request_params(judge, RUBRIC.reply_schema, messages)
            started = time.perf_counter()
            (await client.post("/chat/completions", json=body)).raise_for_status()
            raw.append(time.perf_counter() - started)
            started = time.perf_counter()
            outcome = await runner.run(RUBRIC, messages, condition="blind", repeat=0)
            await _write(f"att_{index}", "bench", "blind", 0, RUBRIC.name, RUBRIC.version, None, outcome)
            piped.append(time.perf_counter() - started)
            assert outcome.status == "ok"
    await runner.close()
    raw_ms, piped_ms = statistics.median(raw) * 1000, statistics.median(piped) * 1000
    return {"judgments": count, "bare_post_ms": raw_ms, "pipeline_ms": piped_ms, "overhead_ms": piped_ms - raw_ms}


async def bench_throughput(server: ScriptedLLM, count: int, concurrency: int) -> dict[str, float]:
    server.script = lambda _request, _nth: Behaviour(delay_s=1.0)
    runner = LLMRunner(_judge(server, concurrency))

    async def one(index: int) -> None:
        outcome = await runner.run(RUBRIC, _messages(100_000 + index), condition="blind", repeat=0)
        await _write(f"att_{index}", "bench", "prefix12k", 0, RUBRIC.name, RUBRIC.version, None, outcome)
        assert outcome.status == "ok"

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    elapsed = time.perf_counter() - started
    await runner.close()
    return {
        "judgments": count,
        "concurrency": concurrency,
        "seconds": elapsed,
        "per_second": count / elapsed,
        "ideal_per_second": float(concurrency),
    }


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM() as server:
        url = f"sqlite+aiosqlite:///{tmp}/bench.db"
        await upgrade_async(url)
        init_engine(role="bench", url=url)
        count = 100 if quick else 500
        await _seed_attempts(count)
        console.print("[bold]1/2[/] overhead per judgment ...")
        overhead = await bench_overhead(server, count)
        console.print("[bold]2/2[/] throughput at 1 s provider latency ...")
        throughput = await bench_throughput(server, count, 100)
        await dispose_engine()
    table = Table(title="Judge pipeline")
    for column in ("measure", "baseline", "Tribunal", "result", "target"):
        table.add_column(column)
    table.add_row(
        "overhead per judgment (instant server)",
        f"{overhead['bare_post_ms']:.2f} ms bare POST",
        f"{overhead['pipeline_ms']:.2f} ms",
        f"+{overhead['overhead_ms']:.2f} ms",
        "<= 5 ms",
    )
    table.add_row(
        f"throughput, 1 s latency, concurrency {throughput['concurrency']}",
        f"{throughput['ideal_per_second']:.0f}/s ideal",
        f"{throughput['per_second']:.1f} judgments/s",
        f"{throughput['judgments']} in {throughput['seconds']:.1f} s",
        ">= 50/s",
    )
    console.print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "judge.json").write_text(json.dumps({"overhead": overhead, "throughput": throughput}, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(parser.parse_args().quick))
