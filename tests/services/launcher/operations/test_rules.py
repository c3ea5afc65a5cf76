"""The alert rules, checked and unit-tested by Prometheus's own promtool (scripts/setup.sh installs it): the rules
parse, and fed series make exactly the expected alerts fire at the expected times
(deploy/prometheus/tests/tribunal_test.yml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[4]
PROMETHEUS = ROOT / "deploy" / "prometheus"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool, "scripts/setup.sh installs Debian's prometheus package, which has promtool"
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_promtool_checks_the_rules() -> None:
    rules = sorted(str(path) for path in (PROMETHEUS / "rules").glob("*.yml"))
    assert rules
    checked = _promtool("check", "rules", *rules)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_alerts_fire_when_and_only_when_they_should() -> None:
    tested = _promtool("test", "rules", str(PROMETHEUS / "tests" / "tribunal_test.yml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_unit_test_and_an_entry_in_the_docs() -> None:
    alerts = {
        rule["alert"]
        for path in (PROMETHEUS / "rules").glob("*.yml")
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    unit_tested = {
        case["alertname"]
        for test in yaml.safe_load((PROMETHEUS / "tests" / "tribunal_test.yml").read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    documented = (ROOT / "docs" / "operations.md").read_text()
    assert not {alert for alert in alerts if f"`{alert}`" not in documented}
    assert alerts and not alerts - unit_tested, sorted(alerts - unit_tested)
