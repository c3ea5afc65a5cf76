"""A real Prometheus scraping a running stack (what `tribunal up --prometheus-port` runs): every process is a
target of its own, every dashboard panel's query and every alert rule's signal returns data after a small workload,
every metric they name exists, and killing a worker kind fires the matching alert expression (issue #13)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from services.kernel.embedded import free_port
from services.kernel.registry import SERVICES
from services.launcher.observability import GATEWAY_JOB, RULES_DIR, job_name
from services.launcher.stack import EmbeddedStack
from tests.conftest import STACK_ENV
from tests.fake_llm import ScriptedLLM
from tests.gateway.test_similarity_api import CANONICAL, EQUIVALENT, SPEC
from tests.helpers import SUM_SOURCES, add_sum_problem, submit, wait_attempt, wait_job

ROOT = Path(__file__).resolve().parents[4]
DASHBOARDS = sorted((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json"))
# Dashboards' built-in variables, as Grafana fills them for a view of the last 10 minutes (the workload's span);
# every template variable is `.*`, as "All" selects.
BUILTINS = {"$__rate_interval": "10m", "$__interval": "15s", "$__range": "10m"}
# An alert expression is `SIGNAL <comparison> THRESHOLD` (deploy/prometheus/rules/tribunal.yml says so).
ALERT_SHAPE = re.compile(r"^(?P<signal>.+?)\s*(==|!=|>=|<=|>|<)\s*-?[0-9.]+(e[+-]?[0-9]+)?\s*$", re.DOTALL)
METRIC_NAME = re.compile(r"\b(tribunal_[a-z0-9_]+)\b")
WAIT_FOR_DATA_S = 60.0

pytestmark = [pytest.mark.stack, pytest.mark.corpus, pytest.mark.timeout(900)]  # its own stack and Prometheus


@pytest.fixture(scope="module")
def priced_judges(tmp_path_factory: pytest.TempPathFactory, scripted_llm: ScriptedLLM) -> Path:
    """Offline judges and one LLM judge with a price table, so the cost panel has something to multiply."""
    path = tmp_path_factory.mktemp("observed-judges") / "judges.toml"
    path.write_text(
        '[[judge]]\nname = "sample_tests"\nkind = "offline"\nmethod = "sample_tests"\n\n'
        f'[[judge]]\nname = "scripted"\nkind = "llm"\nrubric = "cocreation"\nbase_url = "{scripted_llm.base_url}"\n'
        'model = "scripted-model"\nmax_tries = 2\ntimeout_s = 5\nbackoff_s = 0.02\nbackoff_max_s = 0.1\n'
        "price_per_mtok_in = 3.0\nprice_per_mtok_out = 15.0\n"
    )
    return path


def _workload(client: httpx.Client) -> None:
    """Accepted, wrong, crashing and compile-error programs, judged (one judge failing), a direct execution, a
    perturbation job, a judge_quality report and a similarity pair: something for every panel."""
    problem_id = add_sum_problem(client)
    programs = [
        ("python", SUM_SOURCES["python"]),
        ("python", "print(0)\n"),
        ("python", "a, b = map(int, input().split())\nprint(a - b)\n"),
        ("python", "raise SystemExit(3)\n"),
        ("c", "int main( {\n"),
        ("cpp", SUM_SOURCES["cpp"]),
    ]
    ids = []
    for index in range(12):
        language, source = programs[index % len(programs)]
        marker = "# judge-script: low\n" if index % 3 else ""
        if index == 7:
            marker = "# judge-script: truncated\n"  # every try is cut short: a failed judgment, with its reason
        comment = "//" if language in ("c", "cpp") else "#"
        text = f"{comment} {index}\n" + marker.replace("#", comment) + source
        accepted = submit(client, problem_id, language, text, participant=f"u{index % 4}", turn=index)
        ids.append(accepted["attempt_id"])
    direct = client.post("/v1/executions", json={"language": "python", "source_code": "print(1)\n"})
    assert direct.status_code == 202, direct.text
    views = [wait_attempt(client, attempt_id) for attempt_id in ids]
    assert {view["verdict"] for view in views} >= {"AC", "WA", "RE", "CE"}, [v["verdict"] for v in views]
    seed = next(view for view in views if view["verdict"] == "AC" and view["language"] == "python")
    perturbed = client.post("/v1/perturbations", json={"attempt_ids": [seed["attempt_id"]], "judges": ["sample_tests"]})
    assert perturbed.status_code == 202, perturbed.text
    report = client.post("/v1/reports", json={"kind": "judge_quality", "bootstrap": 200, "folds": 3})
    assert report.status_code == 202, report.text
    pair = client.post(
        "/v1/similarity",
        json={
            "reference": {"language": "python", "source_code": CANONICAL},
            "candidate": {"language": "python", "source_code": EQUIVALENT},
            "entry_point": "below_threshold",
            "input_spec": SPEC,
            "n_inputs": 50,
            "repeats": 1,
        },
    )
    assert pair.status_code == 202, pair.text
    assert wait_job(client, pair.json()["job_id"], timeout_s=180)["status"] == "succeeded"
    assert wait_job(client, direct.json()["job_id"])["status"] == "succeeded"
    assert wait_job(client, perturbed.json()["job_id"], timeout_s=300)["status"] == "succeeded"
    assert wait_job(client, report.json()["job_id"])["status"] == "succeeded"


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory, priced_judges: Path) -> Iterator[EmbeddedStack]:
    # Its own Redis and database: the worker heartbeats and queues it measures are only its own. The workload's
    # tenant is the trust tenant, whose judge_quality report feeds the trust gauges.
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    stack = EmbeddedStack(
        tmp_path_factory.mktemp("observed"),
        judges_file=priced_judges,
        extra_env=STACK_ENV | {"TRIBUNAL_WORKER_HEARTBEAT_S": "1", "TRIBUNAL_TRUST_TENANT": tenant},
        prometheus_port=free_port(),
    )
    stack.start()
    try:
        stack.start_worker("executor-1")  # two processes of one kind on one machine: two targets, never one
        admin_key = stack.admin_key_path.read_text().strip()
        with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as admin:
            key = admin.post("/v1/keys", json={"tenant": tenant, "scopes": ["submit", "read"]}).json()["key"]
        with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            _workload(client)
        yield stack
    finally:
        stack.stop()


def _prometheus(stack: EmbeddedStack) -> str:
    assert stack.prometheus is not None
    return stack.prometheus.url


def _query(stack: EmbeddedStack, expr: str) -> list[dict[str, Any]]:
    """An instant query's result vector; a query Prometheus rejects fails the test with its error."""
    response = httpx.get(f"{_prometheus(stack)}/api/v1/query", params={"query": expr}, timeout=30)
    body = response.json()
    assert body["status"] == "success", f"{expr!r}: {body.get('error')}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _all_return_data(stack: EmbeddedStack, queries: dict[str, str]) -> dict[str, str]:
    """The queries (name -> PromQL) still returning no data after WAIT_FOR_DATA_S: rates need two scrapes."""
    waiting = dict(queries)
    deadline = time.monotonic() + WAIT_FOR_DATA_S
    while waiting and time.monotonic() < deadline:
        waiting = {name: expr for name, expr in waiting.items() if not _query(stack, expr)}
        if waiting:
            time.sleep(1)
    return waiting


def _panel_queries() -> dict[str, str]:
    """Every panel target's PromQL in every dashboard, variables filled as a user with 'All' selected would."""
    queries = {}
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        panels = list(dashboard["panels"])
        while panels:
            panel = panels.pop()
            panels.extend(panel.get("panels", []))  # a collapsed row holds its panels
            for target in panel.get("targets", []):
                expr = target["expr"]
                for builtin, value in BUILTINS.items():
                    expr = expr.replace(builtin, value)
                expr = re.sub(r"\$\{\w+(:\w+)?\}|\$\w+", ".*", expr)
                queries[f"{path.name}: {panel['title']} [{target.get('refId', '?')}]"] = expr
    return queries


def _alert_signals() -> dict[str, str]:
    signals = {}
    for path in sorted(RULES_DIR.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    shape = ALERT_SHAPE.match(" ".join(rule["expr"].split()))
                    assert shape, f"{rule['alert']}: not SIGNAL <comparison> THRESHOLD"
                    signals[rule["alert"]] = shape["signal"]
    return signals


def test_every_process_is_its_own_target_and_up(observed: EmbeddedStack) -> None:
    expected = {GATEWAY_JOB: 1} | {job_name(kind): 1 for kind in SERVICES} | {job_name("executor"): 2}
    deadline = time.monotonic() + WAIT_FOR_DATA_S
    while True:
        targets = httpx.get(f"{_prometheus(observed)}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
        up: dict[str, set[str]] = {}
        for target in targets:
            if target["health"] == "up":
                up.setdefault(target["labels"]["job"], set()).add(target["labels"]["instance"])
        if {job: len(instances) for job, instances in up.items()} == expected or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert {job: len(instances) for job, instances in up.items()} == expected, targets
    # The two executors' series stay apart: each exports its own capacity under its own instance.
    capacity = _query(observed, 'tribunal_worker_jobs_capacity{job="tribunal-executor"}')
    assert len({series["metric"]["instance"] for series in capacity}) == 2, capacity


def test_there_are_dashboards_and_every_panel_query_returns_data(observed: EmbeddedStack) -> None:
    queries = _panel_queries()
    assert len(DASHBOARDS) >= 5 and len(queries) >= 40, (DASHBOARDS, len(queries))
    empty = _all_return_data(observed, queries)
    assert not empty, "no data:\n" + "\n".join(f"{name}: {expr}" for name, expr in sorted(empty.items()))


def test_every_alert_signal_returns_data_and_every_rule_evaluates(observed: EmbeddedStack) -> None:
    signals = _alert_signals()
    empty = _all_return_data(observed, signals)
    assert not empty, "no data:\n" + "\n".join(f"{name}: {expr}" for name, expr in sorted(empty.items()))
    loaded = httpx.get(f"{_prometheus(observed)}/api/v1/rules", timeout=10).json()["data"]["groups"]
    rules = {rule["name"]: rule for group in loaded for rule in group["rules"]}
    assert set(signals) <= set(rules), "the local Prometheus loads deploy/prometheus/rules"
    assert all(rule["health"] in ("ok", "unknown") and not rule.get("lastError") for rule in rules.values()), rules


def test_every_metric_the_dashboards_and_rules_name_exists(observed: EmbeddedStack) -> None:
    exported = set(httpx.get(f"{_prometheus(observed)}/api/v1/label/__name__/values", timeout=10).json()["data"])
    expressions = [*_panel_queries().values(), *_alert_signals().values()]
    named = {name for expr in expressions for name in METRIC_NAME.findall(expr)}
    assert named and not named - exported, sorted(named - exported)


def test_killing_a_worker_kind_fires_its_alert_expression(observed: EmbeddedStack) -> None:
    rule = next(
        rule
        for group in yaml.safe_load((RULES_DIR / "tribunal.yml").read_text())["groups"]
        for rule in group["rules"]
        if rule.get("alert") == "TribunalWorkerKindDown"
    )
    assert not [s for s in _query(observed, rule["expr"]) if s["metric"]["kind"] == "similarity"]
    observed.stop_process("similarity-0", sig=signal.SIGKILL)  # killed: no clean shutdown removes its heartbeat
    try:
        deadline = time.monotonic() + WAIT_FOR_DATA_S
        firing: list[dict[str, Any]] = []
        while not firing and time.monotonic() < deadline:
            firing = [s for s in _query(observed, rule["expr"]) if s["metric"]["kind"] == "similarity"]
            time.sleep(1)
        assert firing, "no alert for a worker kind with no live process"
        # Prometheus itself holds the alert (pending for its `for:`, then firing), for that kind only.
        deadline = time.monotonic() + WAIT_FOR_DATA_S
        alerts: list[dict[str, Any]] = []
        while not alerts and time.monotonic() < deadline:
            listed = httpx.get(f"{_prometheus(observed)}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
            alerts = [a for a in listed if a["labels"]["alertname"] == "TribunalWorkerKindDown"]
            time.sleep(1)
        assert {a["labels"]["kind"] for a in alerts} == {"similarity"}, alerts
    finally:
        observed.start_worker("similarity-0")


def test_promtool_accepts_the_rules_and_the_local_configuration(observed: EmbeddedStack) -> None:
    rules = subprocess.run(
        ["promtool", "check", "rules", *map(str, sorted(RULES_DIR.glob("*.yml")))], capture_output=True, text=True
    )
    assert rules.returncode == 0, rules.stdout + rules.stderr
    config = observed.data_dir / "prometheus" / "prometheus.yml"
    checked = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
