"""reference_metrics: each value is its library's, None with a reason when it cannot be computed, the same in every
process; and SurfaceSim and CrystalBLEU's n-gram set are the same in every process too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from codebleu import calc_codebleu

from services.lib.codesim import (
    REFERENCE_METRICS,
    ReferenceMetrics,
    UnsupportedLanguage,
    chrf_pp,
    crystal_bleu,
    edit_similarity,
    reference_metrics,
    trivially_shared_ngrams,
)

ROOT = Path(__file__).resolve().parents[4]

PAIRS = {
    "python": (
        "def solve(a, b):\n    total = a * a + b\n    if total > b:\n        total = total - b\n    return total\n",
        "def solve(x, y):\n    s = x + y\n    if s > x:\n        s = s * 2\n    print(s)\n    return s\n",
    ),
    "c": (
        "int solve(int n) {\n  int total = 0;\n  for (int i = 0; i < n; i++) total += i * i;\n  return total;\n}\n",
        "int solve(int m) {\n  int acc = 1;\n  int j = 0;\n  while (j < m) { acc = acc + j; j++; }\n  return acc;\n}\n",
    ),
    "cpp": (
        "#include <vector>\nlong solve(std::vector<int> v) {\n  long total = 0;\n"
        "  for (int x : v) total += x * x;\n  return total;\n}\n",
        "#include <vector>\nlong solve(const std::vector<int>& v) {\n  long s = 0;\n"
        "  for (size_t i = 0; i < v.size(); ++i) s += v[i];\n  return s;\n}\n",
    ),
    "java": (
        "class Main {\n  static int solve(int n) {\n    int total = 0;\n"
        "    for (int i = 0; i < n; i++) total += i * i;\n    return total;\n  }\n}\n",
        "class Main {\n  static int solve(int m) {\n    int acc = 0;\n    int j = 0;\n"
        "    while (j < m) { acc = acc + j * j; j = j + 1; }\n    return acc;\n  }\n}\n",
    ),
}


@pytest.mark.parametrize("language", list(PAIRS))
def test_each_value_is_its_librarys(language: str) -> None:
    reference, candidate = PAIRS[language]
    shared = trivially_shared_ngrams(PAIRS[language], language, k=10)
    result = reference_metrics(reference, candidate, language, crystal_ignore=shared)
    assert isinstance(result, ReferenceMetrics)
    assert tuple(result.values) == REFERENCE_METRICS == ("codebleu", "crystalbleu", "chrf", "edit_similarity")
    assert result.errors == {}
    # CodeBLEU: the package's own recipe, equal weights; C included (tree_sitter_c and codebleu's c keywords).
    package = calc_codebleu([reference], [candidate], lang=language, weights=(0.25, 0.25, 0.25, 0.25))
    assert result.values["codebleu"] == package["codebleu"]
    assert result.values["crystalbleu"] == crystal_bleu(reference, candidate, language, shared)
    assert result.values["chrf"] == chrf_pp(reference, candidate, language) / 100
    assert result.values["edit_similarity"] == edit_similarity(reference, candidate, language)
    for value in result.values.values():
        assert value is not None and 0.0 <= value <= 1.0


def test_identical_programs() -> None:
    program = PAIRS["python"][0]
    result = reference_metrics(program, program, "python", crystal_ignore=frozenset())
    assert result.values == {"codebleu": 1.0, "crystalbleu": 1.0, "chrf": 1.0, "edit_similarity": 1.0}


def test_what_cannot_be_computed_is_none_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    reference, candidate = PAIRS["c"]
    result = reference_metrics(reference, candidate, "c", crystal_ignore=None)
    assert result.values["crystalbleu"] is None
    assert "crystal_ignore" in result.errors["crystalbleu"]
    assert result.to_json()["errors"] == {"crystalbleu": result.errors["crystalbleu"]}

    def no_grammar(language: str) -> None:
        raise ImportError(f"Tree-sitter language for {language} not available.")

    monkeypatch.setattr("codebleu.utils.get_tree_sitter_language", no_grammar)
    result = reference_metrics(reference, candidate, "c", crystal_ignore=frozenset())
    assert result.values["codebleu"] is None
    assert result.errors["codebleu"].startswith("no usable tree-sitter grammar for c")
    assert result.values["chrf"] is not None and result.values["crystalbleu"] is not None
    with pytest.raises(UnsupportedLanguage):
        reference_metrics(reference, candidate, "go", crystal_ignore=None)


def test_unparsable_and_empty_candidates_still_give_numbers() -> None:
    reference = PAIRS["python"][0]
    for candidate in ("def solve(:\n", "", "\0"):
        result = reference_metrics(reference, candidate, "python", crystal_ignore=frozenset())
        assert result.errors == {}, candidate
        assert all(value is not None and 0.0 <= value <= 1.0 for value in result.values.values())


_IN_A_FRESH_PROCESS = """
import json, sys
from services.lib.codesim import reference_metrics, surface_similarity, trivially_shared_ngrams
pairs = json.load(sys.stdin)
out = {}
for language, (reference, candidate) in pairs.items():
    shared = trivially_shared_ngrams([reference, candidate], language, k=7)
    out[language] = {
        "shared": sorted(shared),
        "metrics": reference_metrics(reference, candidate, language, crystal_ignore=shared).to_json(),
        "surface": surface_similarity(reference, candidate, language).to_json(),
    }
print(json.dumps(out))
"""


def _run(seed: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _IN_A_FRESH_PROCESS],
        input=json.dumps(PAIRS),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": str(seed)},
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_same_in_every_process() -> None:
    first, second = _run(0), _run(11)
    assert first == second
    # And this process's values.
    language = "java"
    reference, candidate = PAIRS[language]
    shared = trivially_shared_ngrams([reference, candidate], language, k=7)
    ours = reference_metrics(reference, candidate, language, crystal_ignore=shared).to_json()
    assert first[language]["metrics"] == ours  # type: ignore[index]
