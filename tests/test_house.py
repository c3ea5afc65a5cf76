"""The house rules a newcomer relies on (docs/architecture.md, issue 21), checked over the product's source:

- a `_private` name stays in its module: no module imports one from another module (`from x import _y`,
  `import x._y`, `from x._m import y`) or reads one off an imported module (`module._name`). Dunders are public.
  A package's `__init__` may import from its own `_private` child modules (the designed public surface over them,
  as in inspect_ai's `scorer/__init__.py`), but not their `_private` names. Third-party internals are not ours to
  rule (services/lib/fuzzing/hypothesis_backend.py is the one place that touches Hypothesis's);
- no product file passes 700 lines, but the in-jail programs, which must stay single files;
- the import graph among the product's modules (grimp's, the one import-linter checks the layers on) has no circle.

Each test lists every violation it finds, not only the first.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("services", "gateway", "executor", "judge", "metrics")
MAX_LINES = 700
# The in-jail harness programs: each is copied into a jail and run as one file, so it cannot be split.
SINGLE_FILE_PROGRAMS = {"executor/harness/function_runner.py", "services/lib/sandbox/zygote.py"}
SINGLE_FILE_FOLDERS = {"judge/harness"}


def _product_files() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_ours(module: str) -> bool:
    return module.split(".")[0] in PACKAGES


def _is_module(dotted: str) -> bool:
    """Whether a dotted name of ours is a module or package (a file in the tree), not a name inside one."""
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an import-from names (relative imports resolved against the importing module)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _owns(module: str, is_package: bool, target: str) -> bool:
    """A package's `__init__` importing from one of its own `_private` child modules (its designed surface)."""
    return is_package and target.rpartition(".")[0] == module


def _private_uses(path: Path) -> list[str]:
    module = _module_of(path)
    is_package = path.name == "__init__.py"
    where = path.relative_to(ROOT)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    modules: dict[str, str] = {}  # a local name -> the module of ours it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _is_ours(alias.name):
                    continue
                if any(_is_private(part) for part in alias.name.split(".")):
                    found.append(f"{where}:{node.lineno}: import {alias.name}")
                if alias.asname:
                    modules[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    modules[top] = top
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, is_package)
            if not _is_ours(target):
                continue
            private_parts = [part for part in target.split(".") if _is_private(part)]
            if private_parts and not (
                _owns(module, is_package, target) and private_parts == [target.rpartition(".")[2]]
            ):
                found.append(f"{where}:{node.lineno}: from {target} import ... (a private module)")
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"{where}:{node.lineno}: from {target} import {alias.name}")
                elif _is_module(f"{target}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{target}.{alias.name}"
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        chain: list[str] = []
        value: ast.expr = node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if not isinstance(value, ast.Name) or value.id not in modules:
            continue
        dotted = ".".join([modules[value.id], *reversed(chain)])
        if _is_module(dotted):
            found.append(f"{where}:{node.lineno}: {dotted}.{node.attr}")
    return found


def test_no_private_name_is_used_across_modules() -> None:
    found = [violation for path in _product_files() for violation in _private_uses(path)]
    assert not found, f"{len(found)} private name(s) used outside their module:\n" + "\n".join(found)


def test_no_product_file_passes_700_lines() -> None:
    found = []
    for path in _product_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative in SINGLE_FILE_PROGRAMS or path.parent.relative_to(ROOT).as_posix() in SINGLE_FILE_FOLDERS:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found.append(f"{relative}: {lines} lines")
    assert not found, f"{len(found)} file(s) over {MAX_LINES} lines (split them by concept):\n" + "\n".join(found)


def _circles(graph: grimp.ImportGraph) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return components


def _one_circle(graph: grimp.ImportGraph, component: set[str]) -> list[str]:
    """A shortest circle through the component's first module: it, what it imports there, and the way back."""
    start = min(component)
    best: list[str] = []
    for child in sorted(graph.find_modules_directly_imported_by(start) & component):
        back = graph.find_shortest_chain(importer=child, imported=start)
        if back is not None and (not best or len(back) + 1 < len(best)):
            best = [start, *back]
    return best


def test_the_import_graph_has_no_circle() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    found = []
    for component in sorted(_circles(graph), key=min):
        details = []
        circle = _one_circle(graph, component)
        for importer, imported in zip(circle, circle[1:], strict=False):
            lines = graph.get_import_details(importer=importer, imported=imported)
            details.append(f"{importer} -> {imported}" + (f" (line {lines[0]['line_number']})" if lines else ""))
        found.append(f"{len(component)} modules: {', '.join(sorted(component))}\n    e.g. " + "\n    ".join(details))
    assert not found, f"{len(found)} import circle(s):\n" + "\n".join(found)
