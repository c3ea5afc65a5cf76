"""The offline judges with the real tools (sacrebleu, codebleu + tree-sitter, Pygments, pylint, cppcheck)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from sacrebleu import sentence_chrf

from judge.offline import (
    OfflineNotApplicable,
    OfflineScore,
    OfflineUnavailable,
    chrf,
    code_tokens,
    codebleu,
    edit_similarity,
    lint,
    sample_tests,
    score_offline,
    tools,
)
from judge.rubrics import CocreationOutput
from judge.tooljail import ToolJail


def run(index: int, status: str, public: bool = True) -> dict[str, Any]:
    return {"index": index, "status": status, "public": public, "time_ms": 12, "memory_kb": 4096}


def results(*statuses: str) -> list[dict[str, Any]]:
    """Public test results with these statuses, indexed in order."""
    return [run(index, status) for index, status in enumerate(statuses)]


# --- sample_tests --------------------------------------------------------------------------------------------------


def test_hidden_tests_never_reach_the_judge() -> None:
    public = results("AC", "AC", "WA")
    alone = sample_tests(public)
    with_hidden = sample_tests([*public, run(3, "WA", public=False), run(4, "TLE", public=False)])
    all_hidden_pass = sample_tests([*public, run(3, "AC", public=False)])
    assert alone == with_hidden == all_hidden_pass
    assert alone.p_ac == pytest.approx(3 / 5)
    assert "#3" not in alone.rationale and "#4" not in with_hidden.rationale


@pytest.mark.parametrize(
    ("statuses", "p_ac"),
    [
        (("AC", "AC", "AC", "WA"), 4 / 6),  # 3 of 4 passed
        (("WA", "RE", "TLE"), 1 / 5),  # nothing passed: still above 0
        (("AC",) * 5, 6 / 7),  # everything passed: still below 1
        (("AC",), 2 / 3),
    ],
)
def test_p_ac_is_laplaces_rule_of_succession(statuses: tuple[str, ...], p_ac: float) -> None:
    result = sample_tests(results(*statuses))
    assert result.p_ac == pytest.approx(p_ac)
    assert result.fields["p_ac"] == pytest.approx(p_ac)
    assert result.p_ac is not None and 0 < result.p_ac < 1
    assert result.score == round(5 * p_ac + 1e-9)  # no exact halves among these


@pytest.mark.parametrize(
    ("statuses", "s_algo", "s_robust"),
    [
        (("AC",) * 4, 5, 5),
        # logic 2/4 -> 1 + 4 * 0.5 = 3; resource 1/4 -> 1 + 4 * 0.75 = 4
        (("AC", "WA", "RE", "MLE"), 3, 4),
        # logic 3/8 -> 1 + round(2.5) = 4 (half up); resource 0 -> 5
        (("AC",) * 5 + ("RE", "RE", "WA"), 4, 5),
        # resource 4/4 -> 1; no logic failure -> 5
        (("TLE", "MLE", "OLE", "TLE"), 5, 1),
        (("WA", "WA"), 1, 5),
    ],
)
def test_s_algo_counts_logic_failures_and_s_robust_resource_failures(
    statuses: tuple[str, ...], s_algo: int, s_robust: int
) -> None:
    fields = sample_tests(results(*statuses)).fields
    assert (fields["s_algo"], fields["s_robust"]) == (s_algo, s_robust)


def test_sample_tests_fills_the_cocreation_rubric_and_says_what_failed() -> None:
    result = sample_tests(results("AC", "WA", "AC", "TLE"))
    assert CocreationOutput.model_validate(result.fields)  # exactly the rubric's fields, in range
    assert result.fields["rationale"] == result.rationale
    assert "2 of 4 public tests passed" in result.rationale
    assert "#1 WA" in result.rationale and "#3 TLE" in result.rationale
    assert result.score == 3  # round(5 * 3/6) = round(2.5), half up


def _only_unavailable(info: pytest.ExceptionInfo[OfflineUnavailable]) -> None:
    """A failure of this worker or of the platform, which a re-judge may mend: never "does not apply"."""
    assert not isinstance(info.value, OfflineNotApplicable), info.value


def test_no_public_tests_does_not_apply() -> None:
    with pytest.raises(OfflineNotApplicable, match="^no public tests$"):
        sample_tests([])
    with pytest.raises(OfflineNotApplicable, match="^no public tests$"):
        sample_tests([run(0, "AC", public=False), run(1, "WA", public=False)])
    # The problem has public tests, but the execution produced no per-test results (e.g. an internal error).
    with pytest.raises(OfflineUnavailable, match="^no results for the problem's 2 public tests$") as info:
        sample_tests([], public_total=2)
    _only_unavailable(info)


def test_compile_error_passes_nothing() -> None:
    result = sample_tests([], compile_error=True, public_total=3)
    assert result.p_ac == pytest.approx(1 / 5)
    assert (result.fields["s_algo"], result.fields["s_robust"]) == (1, 1)
    assert "compile error" in result.rationale.lower()
    with pytest.raises(OfflineNotApplicable, match="^no public tests$"):
        sample_tests([], compile_error=True, public_total=0)
    with pytest.raises(OfflineNotApplicable, match="^no public tests$"):
        sample_tests([], compile_error=True)


def test_internal_errors_are_not_held_against_the_program() -> None:
    assert sample_tests(results("AC", "IE")).p_ac == pytest.approx(2 / 3)
    with pytest.raises(OfflineUnavailable, match="internal error") as info:
        sample_tests(results("IE", "IE"))
    _only_unavailable(info)


def test_unknown_status_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown status"):
        sample_tests(results("AC", "PASSED"))


# --- tokens, chrF++, edit similarity -------------------------------------------------------------------------------

PY_ADD = "def add(a, b):\n    return a+b  # sum\n"
PY_ADD_TOKENS = "def add ( a , b ) : return a + b"
PY_ADD_NAMES = "def add(x, y):\n    total = x + y\n    return total\n"
PY_ADD_NAMES_TOKENS = "def add ( x , y ) : total = x + y return total"

C_SUM = """#include <stdio.h>
int main(void) {
    int a, b;
    if (scanf("%d %d", &a, &b) != 2) return 1;
    printf("%d\\n", a + b);
    return 0;
}
"""
C_SUM_COMMENTED = """#include <stdio.h>   // I/O
/* Read two numbers
   and print their sum. */
int main(void)
{
    int a, b;   /* operands */
    if (scanf("%d %d", &a, &b) != 2)
        return 1;  // bad input
    printf("%d\\n",   a + b);
    return 0;
}
"""


def test_tokens_drop_whitespace_and_comments_but_keep_preprocessor_directives() -> None:
    assert code_tokens(PY_ADD, "python") == PY_ADD_TOKENS.split()
    assert code_tokens(C_SUM, "c") == code_tokens(C_SUM_COMMENTED, "c")
    assert code_tokens("#include <stdio.h>\n", "c") == ["#", "include", "<stdio.h>"]


def test_chrf_is_sacrebleus_sentence_chrf_plus_plus_on_the_token_strings() -> None:
    expected = sentence_chrf(PY_ADD_TOKENS, [PY_ADD_NAMES_TOKENS], word_order=2).score
    result = chrf(PY_ADD, PY_ADD_NAMES, "python")
    assert 0 < expected < 100
    assert result.fields["chrf"] == pytest.approx(expected)
    assert result.fields["raw"] == pytest.approx(expected / 100)
    assert result.score == round(5 * expected / 100)


def test_chrf_of_identical_code_is_100() -> None:
    result = chrf(C_SUM, C_SUM, "c")
    assert result.fields["chrf"] == pytest.approx(100)
    assert (result.fields["raw"], result.score, result.p_ac) == (1.0, 5, 1.0)


def test_chrf_ignores_comments_and_layout() -> None:
    other = C_SUM.replace("a + b", "a - b")
    assert chrf(C_SUM_COMMENTED, other, "c").fields["raw"] == chrf(C_SUM, other, "c").fields["raw"]
    assert chrf(C_SUM_COMMENTED, C_SUM, "c").fields["raw"] == 1.0


def test_edit_similarity_worked_examples() -> None:
    # [x = a + 1] vs [x = b + 1]: one substitution over 5 tokens.
    one_sub = edit_similarity("x = a + 1\n", "x = b + 1\n", "python")
    assert (one_sub.fields["distance"], one_sub.fields["raw"], one_sub.score) == (1, pytest.approx(0.8), 4)
    # [y = a] vs [x = a + 1]: substitute y->x, insert + and 1: d = 3 over max(3, 5) tokens.
    three = edit_similarity("y = a\n", "x = a + 1\n", "python")
    assert three.fields["distance"] == 3
    assert three.fields["raw"] == pytest.approx(1 - 3 / 5)
    assert three.score == 2
    # [f ( )] vs [f]: two deletions over 3 tokens.
    assert edit_similarity("f()\n", "f\n", "python").fields["raw"] == pytest.approx(1 / 3)
    # [a b] vs [a c]: d = 1 over 2 tokens, raw 0.5, and 5 * 0.5 = 2.5 rounds half up to 3.
    assert edit_similarity("a\nb\n", "a\nc\n", "python").score == 3


def test_edit_similarity_identical_and_comment_only_changes_are_1() -> None:
    assert edit_similarity(C_SUM, C_SUM, "c").fields["raw"] == 1.0
    assert edit_similarity(C_SUM_COMMENTED, C_SUM, "cpp").fields["raw"] == 1.0
    assert edit_similarity(PY_ADD, PY_ADD.replace("# sum", "# the sum of both"), "python").fields["raw"] == 1.0
    assert edit_similarity("# only a comment\n", "", "python").fields["raw"] == 1.0  # both empty


def test_edit_similarity_of_disjoint_programs_is_low() -> None:
    disjoint = edit_similarity("print(1)\n", "while True: pass\n", "python")
    assert disjoint.fields["raw"] == 0.0
    assert disjoint.score == 0
    assert edit_similarity(C_SUM, PY_ADD, "c").fields["raw"] < 0.2


def test_different_include_is_a_difference() -> None:
    assert edit_similarity("#include <stdio.h>\n", "#include <stdlib.h>\n", "c").fields["raw"] < 1.0


# --- CodeBLEU ------------------------------------------------------------------------------------------------------

PROGRAMS = {
    "python": (
        "def solve(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n",
        "import sys\nprint(sys.stdin.read().upper())\n",
    ),
    "c": (
        "int solve(int n) {\n  int total = 0;\n  for (int i = 0; i < n; i++) total += i * i;\n  return total;\n}\n",
        '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n',
    ),
    "cpp": (
        "#include <vector>\nlong solve(std::vector<int> v) {\n  long total = 0;\n"
        "  for (int x : v) total += x * x;\n  return total;\n}\n",
        '#include <iostream>\nint main() { std::cout << "hello" << std::endl; return 0; }\n',
    ),
    "java": (
        "class Main {\n  static int solve(int n) {\n    int total = 0;\n"
        "    for (int i = 0; i < n; i++) total += i * i;\n    return total;\n  }\n}\n",
        'class Main {\n  public static void main(String[] args) {\n    System.out.println("hello");\n  }\n}\n',
    ),
}


@pytest.mark.parametrize("language", list(PROGRAMS))
def test_codebleu_runs_in_every_language(language: str) -> None:
    program, other = PROGRAMS[language]
    same = codebleu(program, program, language)
    different = codebleu(other, program, language)
    assert same.fields["raw"] == pytest.approx(1.0, abs=0.01)
    assert same.score == 5
    assert different.fields["raw"] < same.fields["raw"] - 0.3
    assert same.fields["dataflow_match"] == pytest.approx(1.0)  # the grammar really parsed the program


def test_codebleu_ignores_comments() -> None:
    program = PROGRAMS["python"][0]
    commented = "# sum of squares\n" + program.replace("return total", "return total  # done")
    assert codebleu(commented, program, "python").fields["raw"] == pytest.approx(1.0, abs=0.01)


def test_codebleu_counts_an_unmatched_data_flow_as_zero(caplog: pytest.LogCaptureFixture) -> None:
    # The package would score the data-flow component 1 here (`dataflow or 1`).
    result = codebleu("print(7)\n", PROGRAMS["python"][0], "python")
    fields = result.fields
    assert fields["dataflow_match"] == 0.0
    parts = (fields["ngram_match"], fields["weighted_ngram_match"], fields["syntax_match"], 0.0)
    assert fields["raw"] == pytest.approx(sum(parts) / 4)
    assert fields["raw"] < fields["codebleu_package"]
    # A reference without data flow: the component is left out, and the package's warning is not logged.
    degenerate = codebleu("print(1)\n", "print(1)\n", "python")
    assert degenerate.fields["dataflow_match"] is None
    assert degenerate.fields["raw"] == pytest.approx(1.0, abs=0.05)
    assert not any("data-flows" in record.getMessage() for record in caplog.records)


# --- lint ----------------------------------------------------------------------------------------------------------
# The tools run in the real jail (tests/judge/conftest.py): Debian 12's pylint 2.16 for /usr/bin/python3 and
# Debian's cppcheck 2.10. Exfiltration attempts and the jail's view of the host: tests/judge/test_lint_jail.py.

CLEAN_PY = '''"""Print the sum of two integers read from standard input."""

import sys


def add(left: int, right: int) -> int:
    """Return the sum of both operands."""
    return left + right


def main() -> None:
    """Read two integers and print their sum."""
    first, second = map(int, sys.stdin.read().split())
    print(add(first, second))


if __name__ == "__main__":
    main()
'''

MESSY_PY = """import os, sys, re
from math import *
def F( A,B ):
  X=A+B
  l = []
  if X == None:
      return 0
  else:
      return X
  eval("1")
print(F(1,2))
"""


def test_clean_python_lints_higher_than_messy_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool_jail: ToolJail
) -> None:
    # A host configuration that silences pylint must not reach the judge (empty environment, explicit rcfile).
    rc = tmp_path / "silence.rc"
    rc.write_text("[MAIN]\ndisable=all\n")
    monkeypatch.setenv("PYLINTRC", str(rc))
    clean, messy = lint(CLEAN_PY, "python", jail=tool_jail), lint(MESSY_PY, "python", jail=tool_jail)
    assert clean.fields["raw"] == 1.0 and clean.score == 5
    assert messy.fields["raw"] < 0.5 and messy.score < clean.score
    assert messy.fields["tool"] == "pylint"
    assert messy.fields["message_counts"]["warning"] >= 2
    assert "unused-import" in {m["symbol"] for m in messy.fields["messages"]}
    assert messy.p_ac == messy.fields["raw"] == pytest.approx(messy.fields["pylint_score"] / 10)


def test_a_python_syntax_error_lints_zero(tool_jail: ToolJail) -> None:
    result = lint("def broken(:\n    pass\n", "python", jail=tool_jail)
    assert (result.fields["raw"], result.score) == (0.0, 0)
    assert "syntax-error" in result.rationale


def test_a_file_without_statements_lints_ten(tool_jail: ToolJail) -> None:
    # As pylint's json2 report scores it (Debian's pylint 2.16 would say "no score"; the driver computes it).
    result = lint('"""Only a docstring."""\n', "python", jail=tool_jail)
    assert (result.fields["pylint_score"], result.score) == (10.0, 5)


def test_an_attempt_cannot_switch_its_linter_off(tool_jail: ToolJail) -> None:
    messy = lint("# plain comment\n" + MESSY_PY, "python", jail=tool_jail)
    silenced = lint(
        "# pylint: disable=all\n" + MESSY_PY.replace("eval", "eval  # pylint: disable=eval-used"),
        "python",
        jail=tool_jail,
    )
    assert silenced.fields["pragmas_neutralised"] == 2
    assert silenced.fields["raw"] == messy.fields["raw"] < 0.5


def test_lint_never_runs_the_program(tmp_path: Path, tool_jail: ToolJail) -> None:
    marker = tmp_path / "ran"
    python = f"""import os, pathlib, subprocess
pathlib.Path({str(marker)!r}).write_text("imported")
os.system("touch {marker}")
if __name__ == "__main__":
    pathlib.Path({str(marker)!r}).write_text("main")
"""
    lint(python, "python", jail=tool_jail)
    c = f'#include <stdlib.h>\nint main(void) {{ return system("touch {marker}"); }}\n'
    lint(c, "c", jail=tool_jail)
    assert not marker.exists()


def test_cppcheck_finds_an_out_of_bounds_write(tool_jail: ToolJail) -> None:
    program = "int main(void) {\n    int a[10];\n    a[10] = 1;\n    return a[0];\n}\n"
    result = lint(program, "c", jail=tool_jail)
    assert [f["id"] for f in result.fields["findings"]] == ["arrayIndexOutOfBounds"]
    assert result.fields["findings"][0]["line"] == 3
    assert result.fields["raw"] == pytest.approx(0.5)  # one error weighs 5 tenths
    assert result.score == 3


def test_cppcheck_clean_and_cpp_findings(tool_jail: ToolJail) -> None:
    clean = lint(C_SUM, "c", jail=tool_jail)
    assert (clean.fields["raw"], clean.score, clean.fields["finding_count"]) == (1.0, 5, 0)
    cpp = (
        "#include <string>\n"
        "static int size(std::string s) { return (int)s.size(); }\n"
        'int main() { return size("a"); }\n'
    )
    result = lint(cpp, "cpp", jail=tool_jail)
    assert [f["id"] for f in result.fields["findings"]] == ["passedByValue"]
    assert result.fields["raw"] == pytest.approx(0.9)


def test_lint_is_bounded_in_time_and_memory(monkeypatch: pytest.MonkeyPatch, tool_jail: ToolJail) -> None:
    monkeypatch.setattr(tools, "LINT_WALL_S", 0.05)  # pylint cannot even start in 50 ms
    with pytest.raises(OfflineUnavailable, match=r"^lint: pylint timed out \(20 s CPU, 0.05 s wall\)$") as info:
        lint(CLEAN_PY, "python", jail=tool_jail)
    _only_unavailable(info)
    monkeypatch.undo()
    monkeypatch.setattr(tools, "LINT_MEMORY_MB", 16)  # too little for the interpreter and pylint
    with pytest.raises(OfflineUnavailable, match=r"^lint: pylint ran out of memory \(16 MiB\)$"):
        lint(CLEAN_PY, "python", jail=tool_jail)


def test_lint_not_applicable_and_unavailable_cases(tool_jail: ToolJail) -> None:
    with pytest.raises(OfflineNotApplicable, match="^lint: no linter for java$"):
        lint("class Main {}", "java", jail=tool_jail)
    with pytest.raises(OfflineNotApplicable, match="empty source"):
        lint("  \n", "python", jail=tool_jail)
    with pytest.raises(OfflineNotApplicable, match="unsupported language"):
        lint("puts 1", "ruby", jail=tool_jail)
    with pytest.raises(OfflineNotApplicable, match="^lint: source larger than 1024 KiB$"):
        lint("x = 1\n" * 200_000, "python", jail=tool_jail)
    # Without a jail a linter never runs (it would read the attempt's source as the worker's user).
    # That is this worker's failure, not the attempt's: a worker with a jail lints it.
    with pytest.raises(OfflineUnavailable, match="^lint: no sandbox for the linter on this worker$") as info:
        lint(CLEAN_PY, "python")
    _only_unavailable(info)
    with pytest.raises(OfflineUnavailable, match="^lint: no sandbox for the linter on this worker$") as info:
        score_offline("lint", source=C_SUM, language="c", references=[], execution_tests=[])
    _only_unavailable(info)


# --- dispatcher ----------------------------------------------------------------------------------------------------

REFERENCES = [
    {"language": "cpp", "source_code": "int main() { return 0; }\n"},
    {"language": "python", "source_code": PY_ADD},
    {"language": "python", "source_code": PY_ADD_NAMES},
]


def dispatch(method: str, **overrides: Any) -> OfflineScore:
    arguments: dict[str, Any] = {
        "source": PY_ADD,
        "language": "python",
        "references": REFERENCES,
        "execution_tests": results("AC", "WA"),
    }
    return score_offline(method, **(arguments | overrides))


@pytest.mark.parametrize("method", ["chrf", "codebleu", "edit_similarity"])
def test_dispatcher_uses_the_first_reference_in_the_attempts_language(method: str) -> None:
    assert dispatch(method).fields["raw"] == pytest.approx(1.0, abs=0.01)
    assert dispatch(method, source=PY_ADD_NAMES).fields["raw"] < 0.9
    with pytest.raises(OfflineNotApplicable, match="^no reference solution in java$"):
        dispatch(method, language="java", source="class Main {}")
    with pytest.raises(OfflineNotApplicable, match="^no reference solution in python$"):
        dispatch(method, references=[])


def test_every_method_stores_json_and_a_0_to_5_score(tool_jail: ToolJail) -> None:
    for method in ("sample_tests", "chrf", "codebleu", "edit_similarity", "lint"):
        result = dispatch(method, source=MESSY_PY, lint_jail=tool_jail)
        assert json.loads(json.dumps(result.fields)) == result.fields
        assert result.score in {0.0, 1.0, 2.0, 3.0, 4.0, 5.0}
        assert result.p_ac is not None and 0 <= result.p_ac <= 1
        assert result.fields["rationale"] == result.rationale
        if method != "sample_tests":
            assert result.fields["score"] == result.score
            assert math.isclose(result.fields["raw"], result.p_ac)


def test_dispatcher_routes_tests_and_compile_errors() -> None:
    assert dispatch("sample_tests").p_ac == pytest.approx(2 / 4)
    assert dispatch("sample_tests", execution_tests=[], compile_error=True, public_total=2).p_ac == pytest.approx(1 / 4)
    with pytest.raises(OfflineNotApplicable, match="^no public tests$"):
        dispatch("sample_tests", execution_tests=[run(0, "AC", public=False)])
    with pytest.raises(ValueError, match="unknown offline method"):
        dispatch("bleu")
    with pytest.raises(OfflineNotApplicable, match="unsupported language"):
        dispatch("edit_similarity", language="ruby")
