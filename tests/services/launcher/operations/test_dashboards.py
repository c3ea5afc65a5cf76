"""The provisioned Grafana dashboards, statically: each is valid JSON Grafana can provision (a stable uid, no id,
the provisioned data source), every panel says what it shows, and dashboard variables are used only with regex
matchers, so that "All" (`.*`) keeps every query valid. Their queries are run against a live Prometheus in
tests/services/launcher/operations/test_prometheus.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[4]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
VARIABLE = re.compile(r"(?P<before>.{0,3})\$(\{)?(?!__)(?P<name>\w+)")


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    panels, found = list(dashboard["panels"]), []
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels", []))
        found.append(panel)
    return found


def test_dashboards_are_provisionable_and_point_at_the_provisioned_data_source() -> None:
    source = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    [datasource] = source["datasources"]
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "tribunal.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    assert len(DASHBOARDS) >= 5
    uids = set()
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        assert dashboard.get("id") is None and dashboard["uid"] not in uids, path.name
        uids.add(dashboard["uid"])
        for panel in _panels(dashboard):
            if panel["type"] == "row":
                continue
            assert panel.get("description"), f"{path.name}: {panel['title']} has no description"
            assert panel["datasource"]["uid"] == datasource["uid"], f"{path.name}: {panel['title']}"
            assert panel["targets"] and all(target["expr"].strip() for target in panel["targets"])


def test_variables_are_only_used_with_regex_matchers() -> None:
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        defined = {variable["name"] for variable in dashboard.get("templating", {}).get("list", [])}
        for panel in _panels(dashboard):
            for target in panel.get("targets", []):
                for use in VARIABLE.finditer(target["expr"]):
                    assert use["name"] in defined, f"{path.name}: {panel['title']}: ${use['name']} is not defined"
                    assert use["before"].endswith('=~"'), f"{path.name}: {panel['title']}: {target['expr']}"
        for variable in dashboard.get("templating", {}).get("list", []):
            if variable.get("includeAll"):
                assert variable.get("allValue") == ".*", f"{path.name}: ${variable['name']}"
