"""The local judge's speed: judgments through Tribunal's judge path against the same requests sent straight to the
server, in one run, and what the server's prefix reuse of the shared rubric prompt is worth.

The server is the stack's local model server (services/launcher/local_llm.py: llama.cpp via llama-cpp-python,
SmolLM2-135M-Instruct Q4_1), started once. The requests are `local`'s judgments (rubric `accept_reject`,
grammar-constrained JSON, top_logprobs 10) of HumanEval's first N canonical solutions and as many wrong variants.

- `direct`: each request body (exactly what the judge sends: `services.lib.llm.request_params`) POSTed with httpx,
  one at a time (the server computes one at a time);
- `tribunal`: the same judgments through `judge.runner.LLMRunner` (the judge worker's path: the provider layer, its
  pacing and retry policy, validation, the logprob read-out and the row's fields), without the response cache;
- `no-prefix-reuse`: `direct` with a distinct line put before each request's system prompt, so that no request
  shares a prefix with the one before it: what llama.cpp's reuse of the cached prefix (the rubric prompt every
  judgment starts with) saves.

Variants alternate round by round, so that a busy machine weighs on all alike. Reported per variant: the median
over rounds of judgments/s, prompt and completion tokens/s (the server's `usage`), and Tribunal's overhead per
judgment (median of per-round differences with `direct`), with the ratios.

    .venv/bin/python bench/bench_local_llm.py [--problems 12] [--rounds 3]

Prints a table and writes bench/results/local-llm.json.
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
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge.request import JudgeInput, build_messages  # noqa: E402
from judge.rubrics import RUBRICS  # noqa: E402
from judge.runner import LLMRunner  # noqa: E402
from services.kernel.contracts import JudgmentStatus  # noqa: E402
from services.kernel.judges import LLMJudge, parse_judges  # noqa: E402
from services.kernel.settings import Settings  # noqa: E402
from services.launcher.demo import VARIANTS, humaneval_problems  # noqa: E402
from services.launcher.local_llm import LocalModelServer  # noqa: E402
from services.lib.llm import Message, request_params  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def judge_inputs(problems: int) -> list[JudgeInput]:
    wrong = next(v for v in VARIANTS if v.name == "wrong_value")
    inputs = []
    for item in humaneval_problems(problems):
        problem = item["problem"]
        for source in (item["canonical"], wrong.apply(item["canonical"], problem["entry_point"])):
            inputs.append(JudgeInput(problem["problem_id"], problem["statement"], "python", source, "", None))
    return inputs


async def direct(judge: LLMJudge, bodies: list[dict[str, Any]]) -> dict[str, float]:
    tokens_in = tokens_out = 0
    async with httpx.AsyncClient(base_url=judge.base_url, timeout=judge.timeout_s) as client:
        started = time.perf_counter()
        for body in bodies:
            response = await client.post("/chat/completions", json=body)
            response.raise_for_status()
            usage = response.json()["usage"]
            tokens_in += usage["prompt_tokens"]
            tokens_out += usage["completion_tokens"]
        elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "tokens_in": tokens_in, "tokens_out": tokens_out, "ok": len(bodies)}


async def through_tribunal(judge: LLMJudge, messages: list[list[Message]]) -> dict[str, float]:
    rubric = RUBRICS[judge.rubric]
    runner = LLMRunner(judge, cache=None)
    tokens_in = tokens_out = ok = 0
    try:
        started = time.perf_counter()
        for message_list in messages:
            outcome = await runner.run(rubric, message_list, condition="blind", repeat=0)
            tokens_in += outcome.tokens_in or 0
            tokens_out += outcome.tokens_out or 0
            ok += outcome.status == JudgmentStatus.OK
        elapsed = time.perf_counter() - started
    finally:
        await runner.close()
    return {"seconds": elapsed, "tokens_in": tokens_in, "tokens_out": tokens_out, "ok": ok}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=12, help="HumanEval problems (2 judgments each)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    log = Path(tempfile.mkdtemp(prefix="bench-local-llm-")) / "local-llm.log"
    server = LocalModelServer(Settings(), log)
    server.start()
    try:
        (judge,) = parse_judges(server.judge_toml())
        assert isinstance(judge, LLMJudge)
        rubric = RUBRICS[judge.rubric]
        messages = [build_messages(rubric, i) for i in judge_inputs(args.problems)]
        bodies = [request_params(judge, rubric.reply_schema, m) for m in messages]

        # A distinct first line per request and round: no two consecutive requests share a prefix.
        def unshared(round_index: int) -> list[dict[str, Any]]:
            out = []
            for index, body in enumerate(bodies):
                system, *rest = body["messages"]
                nonce = {"role": "system", "content": f"Request {round_index}-{index}.\n" + system["content"]}
                out.append({**body, "messages": [nonce, *rest]})
            return out

        asyncio.run(direct(judge, bodies[:2]))  # warm the server (weights paged in, first prompt cached)
        runs: dict[str, list[dict[str, float]]] = {"direct": [], "tribunal": [], "no-prefix-reuse": []}
        for round_index in range(args.rounds):
            runs["direct"].append(asyncio.run(direct(judge, bodies)))
            runs["tribunal"].append(asyncio.run(through_tribunal(judge, messages)))
            runs["no-prefix-reuse"].append(asyncio.run(direct(judge, unshared(round_index))))
            print(
                f"round {round_index + 1}/{args.rounds}: "
                + ", ".join(f"{k} {v[-1]['seconds']:.1f} s" for k, v in runs.items()),
                flush=True,
            )
    finally:
        server.stop()

    n = len(bodies)
    summary: dict[str, Any] = {"model": server.model, "judgments": n, "rounds": args.rounds, "variants": {}}
    for name, results in runs.items():
        summary["variants"][name] = {
            "judgments_per_s": statistics.median(n / r["seconds"] for r in results),
            "prompt_tokens_per_s": statistics.median(r["tokens_in"] / r["seconds"] for r in results),
            "completion_tokens_per_s": statistics.median(r["tokens_out"] / r["seconds"] for r in results),
            "ms_per_judgment": statistics.median(1000 * r["seconds"] / n for r in results),
            "valid": statistics.median(r["ok"] for r in results),
        }
    overhead = statistics.median(
        1000 * (t["seconds"] - d["seconds"]) / n for t, d in zip(runs["tribunal"], runs["direct"], strict=True)
    )
    variants = summary["variants"]
    summary["tribunal_over_direct"] = variants["tribunal"]["judgments_per_s"] / variants["direct"]["judgments_per_s"]
    summary["tribunal_overhead_ms_per_judgment"] = overhead
    summary["prefix_reuse_speedup"] = (
        variants["direct"]["judgments_per_s"] / variants["no-prefix-reuse"]["judgments_per_s"]
    )
    print(f"\n{n} judgments of {server.model}, median of {args.rounds} rounds")
    print(f"{'variant':<18}{'judgments/s':>12}{'prompt tok/s':>14}{'compl. tok/s':>14}{'ms/judgment':>13}{'valid':>7}")
    for name, v in variants.items():
        print(
            f"{name:<18}{v['judgments_per_s']:>12.2f}{v['prompt_tokens_per_s']:>14.0f}"
            f"{v['completion_tokens_per_s']:>14.1f}{v['ms_per_judgment']:>13.0f}{v['valid']:>7.0f}"
        )
    print(
        f"tribunal / direct: {summary['tribunal_over_direct']:.3f}; Tribunal's overhead: {overhead:.1f} ms a "
        f"judgment; prefix reuse: {summary['prefix_reuse_speedup']:.2f}x the judgments/s without it"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "local-llm.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
