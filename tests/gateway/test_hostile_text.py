"""No stored value breaks a read (issue #20, Found 5): hostile text through every stored field, on the real stack,
on SQLite and on PostgreSQL (whose text refuses NUL, and whose json keeps escapes as written), read back through
every endpoint that shows it.

Hostile text: lone surrogates (high, low, a reversed pair), NUL, C1 controls, noncharacters (U+FFFF, U+FFFE), bidi
overrides, a huge line; and, written raw by a program (os.write of bytes), overlong UTF-8, UTF-8-encoded surrogates,
bytes that are no UTF-8 and truncated sequences. Where it enters:

- from a jail: stdio stdout, stderr and verdict messages, function-mode exception, assert and value messages, a
  problem's code test's assert message, compiler output (C `#pragma message` quotes raw bytes; a Java class named
  outside the BMP), similarity counterexamples and load/compile failures, perturbation mutants' runs;
- from an LLM: rationales, raw responses, served model names (the scripted LLM of tests/conftest.py);
- from a request: problem titles, statements and tests, attempt uid, participant and context, dataset labels.

What the API does (docs/api.md, "Text"): text that crossed from a jail or a tool is stored as valid UTF-8 without
NUL, each bad sequence, lone surrogate or NUL replaced by U+FFFD (services/kernel/text.py), and every stored
field is cleaned again by its column type. A request's JSON that spells a lone surrogate (`"\\ud800"`) is refused
with 422 naming the field: it is no text. NUL in a request's text is kept where it is data (a test's input and
expected output, stdin, labels) and stored as U+FFFD in other text (titles, statements, names, context); a NUL in
source code is refused with 422, so that what runs is always what was sent. Every answer is 2xx and valid UTF-8
JSON (or HTML) whatever was stored.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from services.launcher.demo import follow_link
from services.launcher.stack import EmbeddedStack
from tests.conftest import HOSTILE_LLM_TEXT
from tests.helpers import change_rows, wait_attempt, wait_job

pytestmark = pytest.mark.timeout(600)  # the module's world: ~40 runs, two judges each, a perturbation and fuzzing

R = "\ufffd"

# --- hostile text, and what each becomes once stored -------------------------------------------------------------

# Text a program's string (or a JSON escape) can hold, and what the API stores of it (jail text: NUL too is R).
HOSTILE_TEXT = {
    "lone_high": ("\ud800", R),
    "lone_low": ("\udc80", R),
    "reversed_pair": ("\udc80\ud800", R + R),
    "nul": ("\x00", R),
    "c1": ("\x85\x9b\x9f", "\x85\x9b\x9f"),
    "noncharacters": ("\uffff\ufffe", "\uffff\ufffe"),
    "bidi": ("\u202e\u2066", "\u202e\u2066"),
}
MARK = "<" + "|".join(raw for raw, _ in HOSTILE_TEXT.values()) + ">"
MARK_CLEAN = "<" + "|".join(clean for _, clean in HOSTILE_TEXT.values()) + ">"
MARK_PY = ascii(MARK)  # a Python literal spelling MARK with escapes only

# Bytes a program writes raw. Each kind is checked against the standard decoder's replacement of it.
HOSTILE_BYTES = {
    "overlong": b"\xc0\x80\xe0\x80\xaf",
    "encoded_surrogates": b"\xed\xa0\x80\xed\xb2\x80",
    "invalid": b"\xff\xfe\x80",
    "truncated": b"\xe2\x82",
    "nul": b"\x00",
    "valid_hostile": "\x85\uffff\u202e".encode(),
}
RAW = b"<" + b"|".join(HOSTILE_BYTES.values()) + b">"
RAW_CLEAN = RAW.decode("utf-8", "replace").replace("\x00", R)
# Valid text with no surrogates: what a request may hold (NUL kept as data, or stored as R in other text).
VALID_HOSTILE = "<\x00|\x85\x9b|\uffff\ufffe|\u202e\u2066>"
VALID_HOSTILE_STORED = VALID_HOSTILE.replace("\x00", R)
HUGE_LINE = 900_000  # one line of output, under the 1 MiB output limit: stored only as its excerpt

# --- the programs: one per way hostile text leaves a jail ----------------------------------------------------------

STDIO_SINKS: dict[str, tuple[str, str]] = {
    # name: (language, source)
    "stdout_stderr_exit": (
        "python",
        f"import os, sys\nos.write(1, {RAW!r})\nos.write(2, b'\\n' + {RAW!r} + b'\\n')\nsys.exit(3)\n",
    ),
    "stdio_exception": ("python", f"raise ValueError({MARK_PY})\n"),
    "wrong_answer": ("python", f"import os\nos.write(1, {RAW!r} + b'\\n')\n"),
    "huge_line": (
        "python",
        f"import os\nos.write(1, b'x' * {HUGE_LINE} + {RAW!r})\nos.write(2, b'y' * {HUGE_LINE} + {RAW!r})\n"
        "raise SystemExit(1)\n",
    ),
    "c_compile_error": (
        "c",
        '#pragma message "<\\xff|\\xc0\\x80|\\xed\\xa0\\x80|\\xe2\\x82>"\n'
        f"#error {VALID_HOSTILE.replace(chr(0), '')}\n"
        "int main(void) { return 0; }\n",
    ),
    "c_compile_note": (
        "c",
        '#include <unistd.h>\n#pragma message "<\\xff|\\xc0\\x80|\\xed\\xa0\\x80>"\n'
        'int main(void) { write(1, "\\xff\\xc0\\x80\\0\\xed\\xa0\\x80\\n", 9); return 0; }\n',
    ),
    "c_huge_note": ("c", f'#pragma message "\\xff{"x" * 150_000}"\n#error stop\nint main(void) {{ return 0; }}\n'),
    "java_class_name": (
        "java",
        "public class Sol\U0001d49cution {\n    public static void main(String[] args) {\n"
        f'        int x = "{VALID_HOSTILE.replace(chr(0), "")}";\n    }}\n}}\n',
    ),
    "java_raw_output": (
        "java",
        "public class Sol\U0001d49cution {\n    public static void main(String[] args) {\n"
        "        System.out.write(new byte[] {(byte) 0xff, (byte) 0xc0, (byte) 0x80, 0, (byte) 0xed, (byte) 0xa0,"
        " (byte) 0x80, 10}, 0, 8);\n        System.out.flush();\n        System.exit(2);\n    }\n}\n",
    ),
}
FUNCTION_SINKS: dict[str, str] = {
    "function_exception": f"def f(x):\n    raise ValueError({MARK_PY})\n",  # the finding, verbatim in kind
    "function_assert": f"def f(x):\n    assert x < 0, {MARK_PY}\n    return x\n",
    "function_value": f"def f(x):\n    return {MARK_PY}\n",
    "function_raw_output": (
        f"import os\n\ndef f(x):\n    os.write(1, {RAW!r})\n    os.write(2, {RAW!r})\n    raise KeyError({MARK_PY})\n"
    ),
    "code_test_assert": "def f(x):\n    return x\n",  # fails the problem's code test, whose message is hostile
}
# The function problem's code test: its assertion message is the hostile text (written with escapes in JSON).
CHECK = f"def check(candidate):\n    assert candidate(1) == 2, {MARK_PY}\n"
# Sinks whose stored messages must show the hostile text, cleaned as the API says. (A stdio program's traceback and
# a KeyError spell it with backslash escapes themselves: there the message names the exception.)
SHOWS_MARK = {"function_exception", "function_assert", "code_test_assert"}
NAMES_EXCEPTION = {"stdio_exception": "ValueError", "function_raw_output": "KeyError"}
SHOWS_RAW = {"stdout_stderr_exit", "wrong_answer", "huge_line", "function_raw_output"}
COMPILES_NOT = {"c_compile_error", "c_huge_note", "java_class_name"}
# Each attempt asks the scripted LLM judge for one hostile behaviour (tests/conftest.py), in turn.
LLM_BEHAVIOURS = ("hostile_rationale", "hostile_raw", "hostile_model")
SINKS = [*STDIO_SINKS, *FUNCTION_SINKS]

SEED = (
    f"# a comment holding valid hostile text: {VALID_HOSTILE.replace(chr(0), '')}\n"
    "def f(x):\n    y = x + 1\n    if y != x + 1:\n"
    f"        raise ValueError({MARK_PY})\n    return y\n"
)
SPEC = {"kind": "function", "args": [{"name": "x", "type": {"type": "int", "min": -20, "max": 20}}]}
SIMILARITY_CANDIDATES = {
    # name: candidate source against the reference `return x + 1`
    "hostile_values": f"def f(x):\n    if x % 2:\n        raise ValueError({MARK_PY})\n    return {MARK_PY}\n",
    "fails_to_load": f"raise RuntimeError({MARK_PY})\n",
    "syntax_error": f"def f(x) return '{VALID_HOSTILE.replace(chr(0), '')}'\n",
}
FUZZ = {"n_inputs": 30, "repeats": 1, "time_budget_s": 3}


def post_json(client: httpx.Client, path: str, body: Any, **kwargs: Any) -> httpx.Response:
    """POST a body as JSON with every non-ASCII character escaped, as a client in any language may send it: the
    only way to spell a lone surrogate (`"\\ud800"`), which no UTF-8 encoder takes."""
    return client.post(
        path, content=json.dumps(body, ensure_ascii=True), headers={"content-type": "application/json"}, **kwargs
    )


def no_surrogates(value: Any, where: str) -> None:
    """Every string in a parsed answer is encodable as UTF-8 (a `"\\udc80"` escape would parse into one that is
    not)."""
    work = [(value, where)]
    while work:
        item, path = work.pop()
        if isinstance(item, str):
            item.encode("utf-8")  # strict: raises on a lone surrogate
        elif isinstance(item, dict):
            work.extend((k, f"{path}.<key>") for k in item)
            work.extend((v, f"{path}.{k}") for k, v in item.items())
        elif isinstance(item, list):
            work.extend((v, f"{path}[{i}]") for i, v in enumerate(item))


def read(client: httpx.Client, path: str, **kwargs: Any) -> Any:
    """GET `path`: 2xx, a body that is strict UTF-8, JSON without a lone surrogate (or HTML); the parsed body."""
    response = client.get(path, **kwargs)
    return checked(response, f"GET {path}")


def checked(response: httpx.Response, what: str) -> Any:
    assert 200 <= response.status_code < 300, f"{what}: {response.status_code} {response.text[:400]}"
    text = response.content.decode("utf-8")  # strict
    if response.headers["content-type"].startswith("application/json"):
        value = json.loads(text)
        no_surrogates(value, what)
        return value
    return text


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, member in value.items():
            yield str(key)
            yield from strings(member)
    elif isinstance(value, list):
        for member in value:
            yield from strings(member)


# --- the world: every field written once per backend --------------------------------------------------------------


@dataclass
class World:
    client: httpx.Client
    stdio_problem: str
    function_problem: str
    participant: str
    attempts: dict[str, str] = field(default_factory=dict)  # sink -> attempt id
    executions: dict[str, httpx.Response] = field(default_factory=dict)  # sink -> POST /v1/executions (wait)
    echo_attempt: str = ""
    seed_attempt: str = ""


@pytest.fixture(scope="module")
def client(stack: EmbeddedStack, admin_key: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=60) as admin:
        tenant = f"hostile-{uuid.uuid4().hex[:8]}"
        key = admin.post("/v1/keys", json={"tenant": tenant, "scopes": ["submit", "read"]}).json()["key"]
    with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=180) as tenant_client:
        yield tenant_client


@pytest.fixture(scope="module")
def world(client: httpx.Client) -> World:
    suffix = uuid.uuid4().hex[:8]
    stdio_problem = {
        "problem_id": f"hostile-stdio-{suffix}",
        "title": VALID_HOSTILE,
        "statement": "x" * HUGE_LINE + VALID_HOSTILE,
        # NUL is data here: the echo program's attempt is AC only if it reaches the program as NUL.
        "tests": [{"input": f"{VALID_HOSTILE}\n", "expected": f"{VALID_HOSTILE}\n", "public": True}],
        "checker": {"kind": "exact"},
    }
    function_problem = {
        "problem_id": f"hostile-function-{suffix}",
        "title": VALID_HOSTILE,
        "statement": VALID_HOSTILE,
        "mode": "function",
        "entry_point": "f",
        "tests": [{"input": [1], "expected": 2, "public": True}, {"code": CHECK}],
    }
    for problem in (stdio_problem, function_problem):
        response = post_json(client, "/v1/problems", problem)
        assert response.status_code == 201, response.text
    participant = f"p{VALID_HOSTILE}"
    world = World(client, stdio_problem["problem_id"], function_problem["problem_id"], participant)

    def attempt(problem_id: str, language: str, source: str, turn: int, **extra: Any) -> str:
        body = {
            "problem_id": problem_id,
            "language": language,
            "source_code": judged(language, source, turn),
            "attempt_uid": f"uid-{suffix}-{turn}-{VALID_HOSTILE}",
            "participant": participant,
            "turn": turn,
            "context": ("c" * HUGE_LINE if turn == 0 else "") + VALID_HOSTILE,
            **extra,
        }
        response = post_json(client, "/v1/attempts", body)
        assert response.status_code == 202, response.text
        return str(response.json()["attempt_id"])

    # Direct executions with wait: the finding's request (and every other sink), answered when they end. One at a
    # time, as every other piece of work below: the session's stack times a job out after 10 s (tests/conftest.py),
    # queueing included, and this machine is shared.
    # Each with the source its attempt has below, so the attempt finds its build in the cache.
    for turn, sink in enumerate(SINKS):
        if sink in STDIO_SINKS:
            language, source = STDIO_SINKS[sink]
            body: dict[str, Any] = {"language": language, "source_code": judged(language, source, turn)}
            body["stdin"] = VALID_HOSTILE
        else:
            tests = [{"input": [1], "expected": 2}, {"code": CHECK}]
            body = {"language": "python", "source_code": judged("python", FUNCTION_SINKS[sink], turn)}
            body |= {"mode": "function", "entry_point": "f", "tests": tests}
        world.executions[sink] = post_json(client, "/v1/executions", {**body, "wait": True})

    for turn, sink in enumerate(SINKS):
        if sink in STDIO_SINKS:
            language, source = STDIO_SINKS[sink]
            world.attempts[sink] = attempt(world.stdio_problem, language, source, turn)
        else:
            world.attempts[sink] = attempt(world.function_problem, "python", FUNCTION_SINKS[sink], turn)
        wait_attempt(client, world.attempts[sink], timeout_s=240)
    echo = "import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n"
    world.echo_attempt = attempt(world.stdio_problem, "python", echo, len(SINKS))
    wait_attempt(client, world.echo_attempt, timeout_s=240)
    world.seed_attempt = attempt(world.function_problem, "python", SEED, len(SINKS) + 1, judges=[])
    seed_view = wait_attempt(client, world.seed_attempt, timeout_s=240)
    assert seed_view["verdict"] == "AC", seed_view
    return world


def judged(language: str, source: str, turn: int) -> str:
    """The source with the marker that picks the scripted LLM judge's behaviour for it (tests/conftest.py)."""
    comment = "//" if language in ("c", "java") else "#"
    return f"{source}\n{comment} judge-script: {LLM_BEHAVIOURS[turn % len(LLM_BEHAVIOURS)]}\n"


def finished(client: httpx.Client, response: httpx.Response, *, may_fail: bool = False) -> str:
    """The id of the job a 202 answer started, once it ended (succeeded; or failed, if it `may_fail`)."""
    assert response.status_code == 202, response.text
    job = wait_job(client, response.json()["job_id"], timeout_s=300)
    assert job["status"] in ("succeeded", "failed") if may_fail else job["status"] == "succeeded", json.dumps(job)
    return str(job["job_id"])


@pytest.fixture(scope="module")
def similarity_jobs(world: World) -> list[str]:
    """Similarity: single pairs, and a dataset whose records carry hostile ids and labels."""
    client = world.client
    jobs = []
    reference = "def f(x):\n    return x + 1\n"
    for name, candidate in SIMILARITY_CANDIDATES.items():
        body = {
            "reference": {"language": "python", "source_code": reference},
            "candidate": {"language": "python", "source_code": candidate},
            "entry_point": "f",
            "input_spec": SPEC,
            **FUZZ,
        }
        # A single pair whose candidate does not load or compile fails its job, with the reason as the job's error.
        jobs.append(finished(client, post_json(client, "/v1/similarity", body), may_fail=name != "hostile_values"))
    records = [
        {
            "id": f"{name}-{VALID_HOSTILE}",
            "golden_code": reference,
            "generated_code": candidate,
            "entry_point": "f",
            "input_spec": SPEC,
            "note": VALID_HOSTILE,
            VALID_HOSTILE: [VALID_HOSTILE],
        }
        for name, candidate in SIMILARITY_CANDIDATES.items()
    ]
    jobs.append(finished(client, post_json(client, "/v1/similarity/datasets", {"pairs": records, **FUZZ})))
    return jobs


@pytest.fixture(scope="module")
def perturbation_job(world: World) -> str:
    """Mutants of a seed whose every mutant that changes its sum raises the hostile text."""
    body = {"attempt_ids": [world.seed_attempt], "operators": ["AOR", "COMMENT_INSERT"]}
    return finished(world.client, world.client.post("/v1/perturbations", json=body))


@pytest.fixture(scope="module")
def reports(world: World) -> dict[str, str]:
    """Reports over the hostile attempts' judgments and trajectories: kind -> report id."""
    built = {}
    for kind in ("judge_quality", "cocreation"):
        response = world.client.post("/v1/reports", json={"kind": kind, "bootstrap": 50, "folds": 2})
        finished(world.client, response)
        built[kind] = str(response.json()["report_id"])
    return built


# --- reads ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sink", SINKS)
def test_an_execution_with_wait_answers_with_clean_text_and_so_does_its_job(world: World, sink: str) -> None:
    answer = checked(world.executions[sink], f"POST /v1/executions ({sink})")
    assert world.executions[sink].status_code == 200, answer  # it ended within the wait
    job = read(world.client, f"/v1/jobs/{answer['job_id']}")
    assert job["status"] == "succeeded" and job["result"]["verdict"] == answer["verdict"]
    for view in (answer, job["result"]):
        texts = [view["compile_output"]] + [t[k] for t in view["tests"] for k in ("stdout", "stderr", "message")]
        assert all("\x00" not in text for text in texts), "jail text is stored without NUL"
        if sink in SHOWS_MARK:
            assert any(MARK_CLEAN in t["message"] for t in view["tests"]), (sink, view["tests"])
        if sink in NAMES_EXCEPTION:
            assert any(NAMES_EXCEPTION[sink] in t["message"] for t in view["tests"]), (sink, view["tests"])
        if sink in SHOWS_RAW:
            assert any(RAW_CLEAN in t["stdout"] + t["stderr"] for t in view["tests"]), (sink, view["tests"])
        if sink in COMPILES_NOT:
            assert view["verdict"] == "CE" and view["compile_output"], view
        if sink.startswith("c_"):
            assert R in view["compile_output"], "the compiler quoted the raw bytes, replaced"
        if sink == "c_huge_note":
            assert len(view["compile_output"]) <= 64 * 1024 + 100, "the compiler's output stays clipped"
        if sink == "huge_line":
            (test,) = view["tests"]
            assert len(test["stdout"]) <= 64 * 1024 and len(test["stderr"]) <= 40 * 1024, "excerpts stay bounded"
            assert len(test["message"]) <= 300


@pytest.mark.parametrize("sink", SINKS)
def test_an_attempt_reads_back_with_its_judgments(world: World, sink: str) -> None:
    for params in ({}, {"wait_s": 0.5}):
        view = read(world.client, f"/v1/attempts/{world.attempts[sink]}", params=params)
        assert view["status"] == "done" and view["verdict"] not in (None, "IE"), view
        assert view["participant"] == f"p{VALID_HOSTILE_STORED}"
        assert view["attempt_uid"].endswith(VALID_HOSTILE_STORED)
        if sink in COMPILES_NOT:
            assert view["verdict"] == "CE" and view["compile_output"], view
        if sink.startswith("c_"):
            assert R in view["compile_output"], view["compile_output"]
        judges = {j["judge"]: j for j in view["judgments"]}
        assert {"sample_tests", "edit_similarity", "scripted"} <= set(judges), view["judgments"]
        assert all(j["status"] in ("ok", "failed", "not_applicable") for j in judges.values())
        read(world.client, f"/v1/jobs/{view['job_id']}")


@pytest.mark.parametrize("behaviour", LLM_BEHAVIOURS)
def test_hostile_llm_answers_are_stored_clean(world: World, behaviour: str) -> None:
    """The scripted LLM answers with lone surrogates and NUL in a rationale, a raw response and a model name."""
    cleaned = HOSTILE_LLM_TEXT.replace("\x00", R)
    for surrogate in ("\ud800", "\udc80"):
        cleaned = cleaned.replace(surrogate, R)
    judged = [
        j
        for turn, sink in enumerate(SINKS)
        # (c_huge_note is over the judge's source budget: that judgment fails before any request.)
        if LLM_BEHAVIOURS[turn % len(LLM_BEHAVIOURS)] == behaviour and sink != "c_huge_note"
        for j in read(world.client, f"/v1/attempts/{world.attempts[sink]}")["judgments"]
        if j["judge"] == "scripted"
    ]
    assert judged
    for judgment in judged:
        if behaviour == "hostile_rationale":
            assert judgment["status"] == "ok" and judgment["rationale"] == cleaned, judgment
        elif behaviour == "hostile_model":
            assert judgment["status"] == "ok" and judgment["served_model"] == f"scripted{cleaned}", judgment
        else:
            assert judgment["status"] == "failed" and judgment["error"], judgment
        assert all("\x00" not in text for text in strings(judgment))


def test_attempt_lists_read_back_filtered_by_a_hostile_participant(world: World) -> None:
    everything = read(world.client, "/v1/attempts", params={"limit": 500})
    assert set(world.attempts.values()) <= {a["attempt_id"] for a in everything["items"]}
    # The participant as sent, NUL included: it binds as what was stored, so it finds them.
    mine = read(world.client, "/v1/attempts", params={"participant": world.participant, "limit": 500})
    assert set(world.attempts.values()) <= {a["attempt_id"] for a in mine["items"]}
    for problem_id in (world.stdio_problem, world.function_problem):
        read(world.client, "/v1/attempts", params={"problem_id": problem_id, "limit": 5})


def test_nul_in_a_test_is_data_that_reaches_the_program(world: World) -> None:
    view = read(world.client, f"/v1/attempts/{world.echo_attempt}")
    assert view["verdict"] == "AC", view  # the exact checker: NUL went in and came out as NUL
    problem = read(world.client, f"/v1/problems/{world.stdio_problem}")
    assert problem["tests"][0]["input"] == f"{VALID_HOSTILE}\n"  # kept as data (JSON's \u0000)
    assert problem["title"] == VALID_HOSTILE_STORED  # other text stores NUL as U+FFFD
    assert problem["statement"] == "x" * HUGE_LINE + VALID_HOSTILE_STORED
    function = read(world.client, f"/v1/problems/{world.function_problem}")
    assert function["tests"][0] == {**function["tests"][0], "input": [1], "expected": 2}


@pytest.mark.parametrize("kind", ["judge_quality", "cocreation"])
def test_reports_read_back_as_json_html_and_plots(world: World, reports: dict[str, str], kind: str) -> None:
    report = read(world.client, f"/v1/reports/{reports[kind]}")
    assert report["status"] == "succeeded", report
    page = read(world.client, report["html"])
    assert "<html" in page.lower()
    for link in report["plots"].values():
        response = world.client.get(link)
        assert response.status_code == 200 and response.content.startswith(b"\x89PNG")


def test_similarity_jobs_and_pairs_read_back(world: World, similarity_jobs: list[str]) -> None:
    shown: list[Any] = []
    for job_id in similarity_jobs:
        job = read(world.client, f"/v1/similarity/{job_id}")
        shown.append(read(world.client, f"/v1/jobs/{job_id}"))
        for pair in job["pairs"]:
            shown.append(read(world.client, f"/v1/similarity/{job_id}/pairs/{pair['ordinal']}"))
    pairs = [view for view in shown if "ordinal" in view]
    assert len(pairs) == 2 * len(SIMILARITY_CANDIDATES)
    text = "\n".join(strings(shown))
    # The load failure's message: its lone surrogates replaced (the fuzzing harness drops C0 controls, NUL too).
    assert f"<{R}|{R}|{R}{R}|" in text, "the candidates' hostile text reached the stored results, cleaned"
    assert "\x00" not in text.replace(VALID_HOSTILE, "")  # NUL only in the labels, which are data
    labelled = [pair for pair in pairs if pair.get("labels")]
    assert labelled and all(p["labels"]["note"] == VALID_HOSTILE for p in labelled), labelled  # labels are data


def test_a_perturbation_job_and_its_mutants_read_back(world: World, perturbation_job: str) -> None:
    view = read(world.client, f"/v1/perturbations/{perturbation_job}")
    read(world.client, f"/v1/jobs/{perturbation_job}")
    assert view["mutants"], view
    for mutant in view["mutants"]:
        read(world.client, f"/v1/attempts/{mutant['attempt_id']}")
    assert any(m["verdict"] not in (None, "AC") for m in view["mutants"]), "a mutant raised the hostile text"


def test_a_row_stored_before_the_cleaning_reads_back(world: World, stack: EmbeddedStack) -> None:
    """A lone surrogate escape already in the database (as the finding left it) reads back cleaned, not as 500."""
    job_id = world.executions["function_exception"].json()["job_id"]
    stored = json.dumps({"verdict": "RE", "tests": [{"message": "ValueError: \udc80\ud800"}]})
    assert change_rows(
        stack.database_url, "UPDATE job SET result = :result WHERE job_id = :job", result=stored, job=job_id
    )
    job = read(world.client, f"/v1/jobs/{job_id}")
    assert job["result"]["tests"][0]["message"] == f"ValueError: {R}{R}"


# --- what a request may hold ----------------------------------------------------------------------------------

SURROGATE_FIELDS = [
    # (path, body, where the error points)
    ("/v1/problems", {"problem_id": "p", "statement": "s\ud800"}, ["body", "statement"]),
    ("/v1/problems", {"problem_id": "p", "title": "\udc80", "statement": "s"}, ["body", "title"]),
    ("/v1/problems", {"problem_id": "p", "statement": "s", "tests": [{"input": "\udc80\ud800"}]}, ["body", "tests"]),
    ("/v1/problems", {"problem_id": "p", "statement": "s", "tests": [{"expected": "\ud800"}]}, ["body", "tests"]),
    ("/v1/problems", {"problem_id": "p", "statement": "s", "input_spec": {"\ud800": 1}}, ["body", "input_spec"]),
    ("/v1/attempts", {"problem_id": "p", "language": "python", "source_code": "'\ud800'"}, ["body", "source_code"]),
    (
        "/v1/attempts",
        {"problem_id": "p", "language": "python", "source_code": "1", "context": "\udc80"},
        ["body", "context"],
    ),
    (
        "/v1/attempts",
        {"problem_id": "p", "language": "python", "source_code": "1", "participant": "\ud800"},
        ["body", "participant"],
    ),
    (
        "/v1/attempts",
        {"problem_id": "p", "language": "python", "source_code": "1", "attempt_uid": "\ud800"},
        ["body", "attempt_uid"],
    ),
    ("/v1/executions", {"language": "python", "source_code": "1", "stdin": "\udc80"}, ["body", "stdin"]),
    (
        "/v1/similarity/datasets",
        {"pairs": [{"id": "a", "golden_code": "1", "generated_code": "1", "x": "\ud800"}]},
        ["body", "pairs"],
    ),
    ("/v1/reports", {"kind": "cocreation", "filter": {"participants": ["\udc80"]}}, ["body", "filter"]),
    (
        "/v1/attempts:batch",
        {"attempts": [{"problem_id": "p", "language": "python", "source_code": "1", "context": "\ud800"}]},
        ["body", "attempts"],
    ),
    ("/v1/judgments", {"attempt_ids": ["att_\ud800"]}, ["body", "attempt_ids"]),
    ("/v1/perturbations", {"attempt_ids": ["att_1"], "operators": ["AOR\udc80"]}, ["body", "operators"]),
    (
        "/v1/similarity",
        {
            "reference": {"language": "python", "source_code": "1"},
            "candidate": {"language": "python", "source_code": "'\udc80'"},
        },
        ["body", "candidate"],
    ),
    ("/v1/metrics:compute", {"metrics": ["roc_auc\ud800"]}, ["body", "metrics"]),
]


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    SURROGATE_FIELDS,
    ids=[f"{path}:{'.'.join(map(str, loc[1:]))}" for path, _, loc in SURROGATE_FIELDS],
)
def test_a_lone_surrogate_in_a_request_is_refused_naming_the_field(
    client: httpx.Client, path: str, body: dict[str, Any], loc: list[Any]
) -> None:
    answer = post_json(client, path, body)
    assert answer.status_code == 422, answer.text
    error = answer.json()["errors"][0]
    assert error["loc"][: len(loc)] == loc and "lone surrogate" in error["msg"], error


def test_nul_in_source_code_is_refused_naming_the_field(client: httpx.Client) -> None:
    answer = post_json(client, "/v1/executions", {"language": "c", "source_code": "int main(){}\x00"})
    assert answer.status_code == 422 and answer.json()["errors"][0]["loc"] == ["body", "source_code"], answer.text


@pytest.mark.parametrize("kind", ["overlong", "encoded_surrogates", "invalid", "truncated"])
def test_a_body_that_is_not_utf8_is_refused(client: httpx.Client, kind: str) -> None:
    body = b'{"problem_id": "p", "statement": "' + HOSTILE_BYTES[kind] + b'"}'
    answer = client.post("/v1/problems", content=body, headers={"content-type": "application/json"})
    if kind == "encoded_surrogates":
        # Python's JSON reader takes UTF-8-encoded surrogates for the surrogates they spell: refused as those are.
        assert answer.status_code == 422 and answer.json()["errors"][0]["loc"] == ["body", "statement"], answer.text
    else:
        assert answer.status_code == 400 and answer.json()["errors"][0]["loc"] == ["body"], answer.text


@pytest.mark.parametrize(
    "path",
    ["/v1/attempts/a%00b", "/v1/problems/p%00", "/v1/jobs/%00", "/v1/reports/%ED%A0%80", "/v1/similarity/%00%FF"],
)
def test_nul_and_bad_bytes_in_a_path_are_404_not_500(client: httpx.Client, path: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 404, answer.text
    answer.content.decode("utf-8")


@pytest.mark.parametrize("participant", ["\x00", "a\x00b", "%ff", "\u202e"])
def test_nul_in_a_query_lists_nothing_rather_than_failing(client: httpx.Client, participant: str) -> None:
    assert read(client, "/v1/attempts", params={"participant": participant})["items"] == []


# --- report links (issue #20, lesser finding) -------------------------------------------------------------------


@pytest.mark.parametrize("header", ["host", "x-forwarded-host"])
def test_report_links_do_not_name_a_forged_host(world: World, reports: dict[str, str], header: str) -> None:
    report_id = reports["judge_quality"]
    report = read(world.client, f"/v1/reports/{report_id}", headers={header: "attacker.example"})
    links = [report["html"], *report["plots"].values()]
    assert report["plots"] and all(link.startswith(f"/v1/reports/{report_id}/") for link in links), links
    assert not any("attacker" in link for link in links)
    assert follow_link(world.client, report["html"]).status_code == 200


@pytest.mark.parametrize(
    "link",
    [
        "http://attacker.example/v1/reports/rep_1/html",
        "//attacker.example/v1/reports/rep_1/html",
        "https://127.0.0.1/v1/reports/rep_1/html",
        "/v1/reports/../../x",
        "/\\attacker.example/v1",
        "v1/reports/rep_1/html",
        "/v1/reports/rep_1/html?next=http://attacker.example",
    ],
)
def test_the_demo_follows_only_same_origin_links(client: httpx.Client, link: str) -> None:
    """The demo's client holds a key: a link that could leave the API's origin is refused before any request."""
    with pytest.raises(ValueError, match="own origin"):
        follow_link(client, link)
