"""One telemetry vocabulary: every metric follows the `tribunal_` scheme of services/kernel/telemetry.py, its labels
are bounded, and docs/operations.md documents exactly the metrics there are, with their types and labels."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from services.kernel import telemetry

ROOT = Path(__file__).resolve().parents[4]
AREAS = (
    "http",
    "queue",
    "worker",
    "platform",
    "task",
    "jobs",
    "executions",
    "sandbox",
    "build_cache",
    "judge",
    "judgments",
    "mutants",
    "similarity",
    "report",
    "quota",
)
NAME = re.compile(rf"^tribunal_({'|'.join(AREAS)})(_[a-z0-9]+)*$")
UNITS = ("_seconds", "_bytes", "_dollars_per_token", "_tries")
# Label names whose values come from a fixed set (enums, route templates, the judges file): never a tenant or an id.
BOUNDED_LABELS = {
    "method",
    "route",
    "status",
    "queue",
    "kind",
    "task",
    "outcome",
    "language",
    "verdict",
    "origin",
    "phase",
    "judge",
    "condition",
    "reason",
    "direction",
    "estimate",
    "trust",
    "use",  # a trust card's use: one of five (metrics/reports/trust.py USES)
    "arm",
    "limit",
    "source",
}


def _metrics() -> dict[str, MetricWrapperBase]:
    """Exposed name -> metric, for every metric telemetry.py defines (a counter is exposed with `_total`)."""
    found = {}
    for value in vars(telemetry).values():
        if isinstance(value, MetricWrapperBase):
            name = value._name + ("_total" if value._type == "counter" else "")
            found[name] = value
    return found


def _documented() -> dict[str, tuple[str, set[str]]]:
    """The table in docs/operations.md: | `name` | type | `label`, ... | meaning |."""
    rows = {}
    for line in (ROOT / "docs" / "operations.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("`tribunal_"):
            labels = set(re.findall(r"`(\w+)`", cells[2]))
            rows[cells[0].strip("`")] = (cells[1], labels)
    return rows


def test_every_metric_follows_the_scheme() -> None:
    metrics = _metrics()
    assert len(metrics) >= 40
    for name, metric in metrics.items():
        assert NAME.match(name), f"{name}: not tribunal_<area>_..."
        assert name.endswith("_total") == (metric._type == "counter"), f"{name}: counters and only they end in _total"
        if metric._type == "histogram":
            assert name.endswith(UNITS), f"{name}: a histogram names its unit"
        assert "_milliseconds" not in name and "_ms" not in name, f"{name}: base units only"
        assert set(metric._labelnames) <= BOUNDED_LABELS, f"{name}: unbounded label {metric._labelnames}"


def test_docs_table_is_the_vocabulary() -> None:
    metrics, documented = _metrics(), _documented()
    assert set(documented) == set(metrics), (
        f"undocumented: {sorted(set(metrics) - set(documented))}; gone: {sorted(set(documented) - set(metrics))}"
    )
    for name, (kind, labels) in documented.items():
        assert kind == metrics[name]._type, f"{name}: documented as {kind}, is {metrics[name]._type}"
        assert labels == set(metrics[name]._labelnames), f"{name}: documented labels {labels}"


def test_the_dashboards_and_rules_name_only_metrics_of_the_vocabulary() -> None:
    """Statically, without Prometheus (tests/services/launcher/operations/test_prometheus.py checks them against a
    live one)."""
    exposed = set(_metrics())
    histograms = {name for name, metric in _metrics().items() if metric._type == "histogram"}
    series = exposed | {f"{name}{suffix}" for name in histograms for suffix in ("_bucket", "_sum", "_count")}
    dashboards = (ROOT / "deploy" / "grafana" / "dashboards").glob("*.json")
    files = [*dashboards, *(ROOT / "deploy" / "prometheus" / "rules").glob("*.yml")]
    named = {name for path in files for name in re.findall(r"\b(tribunal_[a-z0-9_]+)\b", path.read_text())}
    assert named, "no dashboards or rules found"
    assert not named - series, sorted(named - series)
