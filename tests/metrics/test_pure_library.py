"""The metrics library is pure: importing every module of `metrics/` loads nothing of the platform, not even the
kernel's contracts (an enumerated value, e.g. a mutant's arm, is its string value here), and nothing of storage or
queues (the reports worker, which does, lives in `services/reports/`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = (
    "services",
    "gateway",
    "executor",
    "judge",
    "migrations",
    "sqlalchemy",
    "arq",
    "redis",
    "asyncpg",
    "aiosqlite",
)

PROBE = f"""
import importlib, pkgutil, sys
import metrics
names = ["metrics"] + [m.name for m in pkgutil.walk_packages(metrics.__path__, "metrics.")]
for name in names:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {FORBIDDEN!r})
print(len(names))
print(",".join(loaded))
"""


def test_importing_every_metrics_module_loads_no_platform_module() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    count, loaded = (result.stdout + "\n").split("\n")[:2]
    assert int(count) > 20  # metrics.reports.* included
    assert loaded == "", f"the metrics library imports {loaded}"
