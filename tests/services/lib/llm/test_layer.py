"""services/lib/llm is a library layer: it imports the kernel and third-party packages, never a service; and its
a judge's endpoint settings are an `Endpoint`, the one model every caller configures."""

from __future__ import annotations

import ast
from pathlib import Path

from services.kernel.judges import LLMJudge
from services.lib.llm import Endpoint

LAYER = Path(__file__).resolve().parents[4] / "services" / "lib" / "llm"
SERVICES = {"judge", "gateway", "executor", "metrics", "migrations", "bench", "tests"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names.add(node.module or "")
    return names


def test_the_layer_imports_no_service() -> None:
    modules = sorted(LAYER.glob("*.py"))
    assert {p.name for p in modules} >= {"__init__.py", "cache.py", "provider.py", "runner.py", "validate.py"}
    for path in modules:
        for name in _imports(path):
            root = name.split(".")[0]
            assert root not in SERVICES, f"services/lib/llm/{path.name} imports {name}"
            if root == "services":
                assert name.startswith(("services.kernel", "services.lib.llm")), (
                    f"services/lib/llm/{path.name} imports {name}"
                )


def test_a_judge_is_an_endpoint_defined_once() -> None:
    """The judges file's LLM judge and any other caller's endpoint are one model: a judge adds only what makes it
    a judge (kind, rubric, enabled)."""
    assert issubclass(LLMJudge, Endpoint)
    assert set(LLMJudge.model_fields) - set(Endpoint.model_fields) == {"kind", "rubric", "enabled"}
