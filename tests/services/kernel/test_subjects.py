"""Task subjects and job-unit names (services/kernel/subjects.py): each is built and parsed by one function, and no
other product module spells one (an AST scan, like tests/test_tool_output_paths.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from services.kernel import subjects
from services.kernel.subjects import Subject

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("executor", "judge", "gateway", "services", "metrics")
HOME = "services/kernel/subjects.py"
UNIT_PREFIXES = ("perturb:", "seed:", "pair:", "axiom:", "report:", "draw:")
# Strings that begin like a unit but are another vocabulary, reviewed: the `operator` of AXIOM's programs.
NOT_UNITS = {
    "axiom:": "the operator prefix of AXIOM's synthesised programs (Attempt.operator, metrics' perturbation report)",
    "axiom:context": "the operator of a 0-point pair (III-B4)",
}
_SPLITTERS = {"partition", "rpartition", "split", "rsplit"}
_PREFIX_METHODS = {"startswith", "removeprefix", "endswith", "removesuffix"}


def test_a_subject_is_written_and_read_by_one_pair_of_functions() -> None:
    assert str(Subject("att_1", "job_1")) == "att_1@job_1"
    assert Subject.parse("att_1@job_1") == Subject("att_1", "job_1")
    assert Subject.parse("att_1") is None  # a bare id: an attempt's stage, a job's own step, a report
    assert subjects.job_subject("att_1", "job_1") == "att_1@job_1"
    assert subjects.pair_subject("job_1", 3) == "3@job_1"
    assert subjects.parse_pair_subject("3@job_1") == ("job_1", 3)
    assert subjects.draw_subject("r0:t4:1", 2, "job_1") == "r0:t4:1:2@job_1"
    assert subjects.parse_draw_subject("r0:t4:1:2@job_1") == ("r0:t4:1", 2, "job_1")
    with pytest.raises(ValueError):
        subjects.parse_pair_subject("3")
    with pytest.raises(ValueError):
        subjects.parse_draw_subject("r0:t4:1:2")


def test_the_unit_names_are_the_ones_rows_already_hold() -> None:
    assert subjects.judged_unit("att_1") == "att_1"
    assert subjects.perturbed_unit("att_1") == "perturb:att_1"
    assert subjects.confirmation_seed_unit("att_1") == "seed:att_1"
    assert subjects.pair_unit(4) == "pair:4"
    assert subjects.slot_unit("r0:t4:1") == "axiom:r0:t4:1"
    assert subjects.SYNTHESIS_FINAL == "axiom:final"
    assert subjects.report_unit("att_1") == "report:att_1"
    assert subjects.draw_unit("r0:t4:1", 2, "kept") == "draw:r0:t4:1:2:kept"
    assert subjects.parse_draw_unit("draw:r0:t4:1:2:kept") == ("r0:t4:1", 2, "kept")
    assert subjects.parse_draw_unit("axiom:r0:t4:1") is None
    assert subjects.synthesis_slot(12, 3, 1) == "r12:t3:1"
    assert subjects.parse_synthesis_slot("r12:t3:1") == (12, 3, 1)
    with pytest.raises(ValueError):
        subjects.parse_synthesis_slot("x12:t3:1")


def _constant(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def spellings(source: str) -> list[tuple[int, str]]:
    """(line, what) of every subject or unit built or taken apart in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            first = _constant(node.args[0])
            if node.func.attr in _SPLITTERS and first is not None and "@" in first:
                found.append((node.lineno, f".{node.func.attr}({first!r})"))
            if node.func.attr in _PREFIX_METHODS and first is not None and first.startswith(UNIT_PREFIXES):
                found.append((node.lineno, f".{node.func.attr}({first!r})"))
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            for index, part in enumerate(parts):
                text = _constant(part)
                if text is None:
                    continue
                before = index > 0 and isinstance(parts[index - 1], ast.FormattedValue)
                after = index + 1 < len(parts) and isinstance(parts[index + 1], ast.FormattedValue)
                if (before and text.startswith("@")) or (after and text.endswith("@")):
                    found.append((node.lineno, "an f-string joining a subject's item and job"))
                if index == 0 and text.startswith(UNIT_PREFIXES):
                    found.append((node.lineno, f"an f-string starting {text!r}"))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            for side in (node.left, node.right):
                text = _constant(side)
                if text is not None and (text.startswith("@") or text.endswith("@")):
                    found.append((node.lineno, f"{text!r} joined with +"))
        text = _constant(node)
        if text is not None and text.startswith(UNIT_PREFIXES) and text not in NOT_UNITS:
            found.append((getattr(node, "lineno", 0), f"the unit-like string {text!r}"))
    return found


def test_no_other_module_spells_a_subject_or_a_unit() -> None:
    spelled = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name == HOME:
                continue
            spelled += [f"{name}:{line}: {what}" for line, what in spellings(path.read_text())]
    assert not spelled, f"build and parse subjects and units with {HOME}:\n" + "\n".join(spelled)


def test_the_scan_finds_every_way_of_spelling_one() -> None:
    probe = """
a = f"{attempt_id}@{job_id}"
b = subject.partition("@")
c = subject.rsplit("@", 1)
d = f"perturb:{attempt_id}"
e = row.startswith("draw:")
f = attempt_id + "@" + job_id
g = "axiom:final"
h = f"Success@Turn {k}"
i = "axiom:context"
"""
    assert {line for line, _ in spellings(probe)} == {2, 3, 4, 5, 6, 7, 8}
