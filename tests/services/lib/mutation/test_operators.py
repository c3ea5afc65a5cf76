"""The operators library on hand-written programs: sites, edits, guard context, selection, diffs, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.kernel.contracts import Arm, Language
from services.lib.mutation import (
    CATALOGUE,
    Mutant,
    UnparsableSource,
    generate,
    operator_named,
    operators_for,
    rejected_sites,
)

ROOT = Path(__file__).resolve().parents[4]
PROGRAMS = Path(__file__).parent / "programs"
PROBLEMS = sorted(folder for folder in PROGRAMS.iterdir() if folder.is_dir())
FILES = {"c": "main.c", "cpp": "main.cpp", "java": "Main.java"}

C_SOURCE = """#include <stdio.h>

long long total;  /* a global */

int main(void) {
    int n, k;
    long long limit = 10;
    scanf("%d %d", &n, &k);
    for (int i = 0; i < n; i++) {
        if (i <= k) total = total + i;
    }
    printf("%lld %d\\n", total, n + k > limit ? 1 : 0);
    return 0;
}
"""

PY_SOURCE = '''def total(xs, cap):
    """Sum of xs, at most cap."""
    s = 0
    for x in xs[1:]:
        if x > 0 and s < cap:
            s = s + x * 2
        else:
            continue
    return s
'''


def edits_of(source: str, language: str, operator: str) -> list[tuple[str, str]]:
    """(removed, added) line pairs of every mutant of one operator, for readable assertions."""
    pairs = []
    for mutant in generate(source, language, operators=[operator], all_sites=True):
        removed = [line[1:].strip() for line in mutant.diff.splitlines() if line.startswith("-") and line[1:2] != "-"]
        added = [line[1:].strip() for line in mutant.diff.splitlines() if line.startswith("+") and line[1:2] != "+"]
        pairs.append(("\n".join(removed), "\n".join(added)))
    return pairs


# --- the catalogue ---


def test_catalogue_names_arms_and_severities() -> None:
    names = [operator.name for operator in CATALOGUE]
    assert len(names) == len(set(names))
    severities = {operator.name: operator.severity for operator in CATALOGUE if operator.source == "paper 001 V-D"}
    assert severities == {
        "TYPE_NARROW": 1,
        "ROR_BOUNDARY": 2,
        "LOOP_SHORTEN": 3,
        "ARITH_FLIP": 4,
        "POST_TO_PRE_INCREMENT": None,
        "COMMENT_INSERT": None,
    }
    for operator in CATALOGUE:
        assert operator.arm in (Arm.SEMANTIC, Arm.CONTROL)
        assert operator.example_before != operator.example_after
        if operator.arm is Arm.CONTROL:
            assert operator.severity is None
    assert {o.name for o in operators_for("python")} == {
        "AOR", "ROR", "COI", "LCR", "CRP", "ZIL", "SIR", "BCR", "RVR", "RENAME_LOCAL", "COMMENT_INSERT",
        "DOCSTRING_CHANGE",
    }  # fmt: skip
    for language in ("c", "cpp", "java"):
        assert [o.name for o in operators_for(language)] == [
            "TYPE_NARROW", "ROR_BOUNDARY", "LOOP_SHORTEN", "ARITH_FLIP", "POST_TO_PRE_INCREMENT", "COMMENT_INSERT",
        ]  # fmt: skip


# A program containing each operator's documented `example_before` (C++ for the C family).
EXAMPLE_PROGRAMS = {
    "TYPE_NARROW": "int main() {\n    long long sum = 0;\n    sum = sum + 1;\n    return (int)sum;\n}\n",
    "ROR_BOUNDARY": "int main() {\n    int x = 1, limit = 2;\n    if (x <= limit) x = 0;\n    return x;\n}\n",
    "LOOP_SHORTEN": "int main() {\n    int n = 3, s = 0;\n    for (int i = 0; i < n; i++) s++;\n    return s;\n}\n",
    "ARITH_FLIP": "int main() {\n    int a = 1, b = 2;\n    int c = a + b;\n    return c;\n}\n",
    "POST_TO_PRE_INCREMENT": "int main() {\n    int n = 3, s = 0;\n    for (int i = 0; i < n; i++) s++;\n}\n",
    "COMMENT_INSERT": "int main() {\n    int n;\n    return 0;\n}\n",
    "AOR": "def f(a, b):\n    return a + b\n",
    "ROR": "def f(x, y):\n    if x < y:\n        return 1\n    return 0\n",
    "COI": "def f(c):\n    if c:\n        return 1\n",
    "LCR": "def f(a, b):\n    if a and b:\n        return 1\n",
    "CRP": "def f():\n    count = 0\n    return count\n",
    "ZIL": "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n",
    "SIR": "def f(xs):\n    rest = xs[1:]\n    return rest\n",
    "BCR": "def f(xs):\n    for x in xs:\n        if x < 0:\n            break\n",
    "RVR": "def f(total):\n    return total\n",
    "RENAME_LOCAL": "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n",
    "DOCSTRING_CHANGE": 'def f(x):\n    """Return x."""\n    return x\n',
}


def squeeze(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name", [o.name for o in CATALOGUE])
def test_each_catalogue_example_is_what_the_operator_does(name: str) -> None:
    """The documented before/after example is real: the operator turns `before` into `after`."""
    operator = operator_named(name)
    program = EXAMPLE_PROGRAMS[name]
    assert squeeze(operator.example_before) in squeeze(program)
    language = "python" if operator.languages == (Language.PYTHON,) else "cpp"
    mutants = generate(program, language, operators=[name], all_sites=True)
    assert any(squeeze(operator.example_after) in squeeze(m.source) for m in mutants), [m.diff for m in mutants]


# --- TYPE_NARROW ---


@pytest.mark.parametrize(
    ("declared", "narrowed"),
    [
        ("long long", "int"),
        ("long long int", "int"),
        ("long", "int"),
        ("long int", "int"),
        ("signed long long", "int"),
        ("unsigned long long", "unsigned int"),
        ("unsigned long", "unsigned int"),
        ("int64_t", "int"),
        ("uint64_t", "unsigned int"),
    ],
)
def test_type_narrow_forms_in_c(declared: str, narrowed: str) -> None:
    source = f"#include <stdint.h>\nint main(void) {{\n    {declared} s = 0;\n    s = s + 1;\n    return (int)s;\n}}\n"
    assert edits_of(source, "c", "TYPE_NARROW") == [(f"{declared} s = 0;", f"{narrowed} s = 0;")]


def test_type_narrow_leaves_other_types_and_unsafe_variables_alone() -> None:
    source = """#include <bits/stdc++.h>
using namespace std;
long long f(long long p);
struct S { long long field; };
int main() {
    long long a, b;
    cin >> a >> b;
    long long best = max(a, b);
    long long *p = &a;
    long long &r = b;
    long long braced{a};
    vector<long long> v(3);
    double d = 0.5;
    long double e = 1;
    long long ok = 0;
    ok += a;
    cout << f(ok) << best << *p << r << braced << d << e << v[0];
}
"""
    narrowed = edits_of(source, "cpp", "TYPE_NARROW")
    # a and b flow into max(a, b) (one template type from two arguments); p, r, braced, the struct field, the
    # prototype's return and parameter, vector<long long>, double and long double are not narrowed. `best` may be:
    # a long long converts to an int on copy-initialisation.
    assert narrowed == [
        ("long long best = max(a, b);", "int best = max(a, b);"),
        ("long long ok = 0;", "int ok = 0;"),
    ]


def test_type_narrow_skips_a_variable_whose_address_is_taken() -> None:
    source = '#include <stdio.h>\nint main(void) {\n    long long x, y = 0;\n    scanf("%lld", &x);\n    y += x;\n'
    source += '    printf("%lld\\n", y);\n    return 0;\n}\n'
    assert edits_of(source, "c", "TYPE_NARROW") == []  # x and y share one declaration


def test_type_narrow_in_java_only_where_every_assignment_is_an_int() -> None:
    source = """import java.util.*;
public class Main {
    static long counter = 0;
    public static void main(String[] args) {
        Scanner sc = new Scanner(System.in);
        long read = sc.nextLong();
        long sum = 0;
        long boxed = 5;
        long returned = 7;
        List<Long> list = new ArrayList<>();
        for (int i = 0; i < 3; i++) sum += i;
        list.add(boxed);
        counter = counter + 1;
        System.out.println(read + sum + list.size() + counter + twice(returned));
    }
    static Long twice(long v) { long w = v; return w * 2; }
}
"""
    assert edits_of(source, "java", "TYPE_NARROW") == [
        ("static long counter = 0;", "static int counter = 0;"),
        ("long sum = 0;", "int sum = 0;"),
        ("long returned = 7;", "int returned = 7;"),
    ]


# --- ROR_BOUNDARY, LOOP_SHORTEN, ARITH_FLIP ---


def test_ror_boundary_swaps_each_relational_operator() -> None:
    assert sorted(edits_of(C_SOURCE, "c", "ROR_BOUNDARY")) == sorted(
        [
            ("for (int i = 0; i < n; i++) {", "for (int i = 0; i <= n; i++) {"),
            ("if (i <= k) total = total + i;", "if (i < k) total = total + i;"),
            (
                'printf("%lld %d\\n", total, n + k > limit ? 1 : 0);',
                'printf("%lld %d\\n", total, n + k >= limit ? 1 : 0);',
            ),
        ]
    )


def test_loop_shorten_counts_the_counter_the_update_steps() -> None:
    source = """int main() {
    int n = 5, m = 3, s = 0;
    for (int i = 0; i < n; i++) s++;
    for (int i = 1; i <= n + m; ++i) s++;
    for (int j = 0; m > j && j < n << 1; j += 2) s++;
    for (int i = n; i > 0; i--) s++;
    for (int i = 0; i < n; ) { i++; }
    return s;
}
"""
    assert edits_of(source, "cpp", "LOOP_SHORTEN") == [
        ("for (int i = 0; i < n; i++) s++;", "for (int i = 0; i < n - 1; i++) s++;"),
        ("for (int i = 1; i <= n + m; ++i) s++;", "for (int i = 1; i <= n + m - 1; ++i) s++;"),
        ("for (int j = 0; m > j && j < n << 1; j += 2) s++;", "for (int j = 0; m - 1 > j && j < n << 1; j += 2) s++;"),
        (
            "for (int j = 0; m > j && j < n << 1; j += 2) s++;",
            "for (int j = 0; m > j && j < (n << 1) - 1; j += 2) s++;",
        ),
    ]


def test_arith_flip_never_touches_string_concatenation_in_java() -> None:
    source = """public class Main {
    public static void main(String[] args) {
        int a = 1, b = 2;
        String s = "x";
        String t = s + a + "y" + (a + b);
        char c = 'a';
        System.out.println(t + (c + 1) + args.length + s.length());
    }
}
"""
    assert edits_of(source, "java", "ARITH_FLIP") == [
        ('String t = s + a + "y" + (a + b);', 'String t = s + a + "y" + (a - b);'),
        (
            "System.out.println(t + (c + 1) + args.length + s.length());",
            "System.out.println(t + (c - 1) + args.length + s.length());",
        ),
    ]


def test_arith_flip_needs_numbers_in_cpp() -> None:
    source = """#include <bits/stdc++.h>
using namespace std;
int main() {
    string s = "a", u = s + "b";
    vector<int> v = {1, 2};
    auto it = v.begin() + 1;
    int k = v[0] + v[1];
    cout << u + s << *it << k + (int)s.size() << endl;
}
"""
    assert edits_of(source, "cpp", "ARITH_FLIP") == [
        ("int k = v[0] + v[1];", "int k = v[0] - v[1];"),
        ("cout << u + s << *it << k + (int)s.size() << endl;", "cout << u + s << *it << k - (int)s.size() << endl;"),
    ]


# --- controls ---


def test_post_to_pre_increment_only_in_for_headers() -> None:
    source = "int main() {\n    int s = 0, j = 9;\n    for (int i = 0; i < 3; i++, j--) s++;\n    return s;\n}\n"
    assert edits_of(source, "c", "POST_TO_PRE_INCREMENT") == [
        ("for (int i = 0; i < 3; i++, j--) s++;", "for (int i = 0; i < 3; ++i, j--) s++;"),
        ("for (int i = 0; i < 3; i++, j--) s++;", "for (int i = 0; i < 3; i++, --j) s++;"),
    ]


def test_comment_insert_before_the_first_statement_of_the_first_function() -> None:
    java = "public class Main {\n    static int f() { return 1; }\n    public static void main(String[] a) {\n"
    java += "        System.out.println(f());\n    }\n}\n"
    (mutant,) = generate(java, "java", operators=["COMMENT_INSERT"])
    assert "static int f() { /* tribunal: control comment */ return 1; }" in mutant.source
    (mutant,) = generate(C_SOURCE, "c", operators=["COMMENT_INSERT"])
    assert "int main(void) {\n    // tribunal: control comment\n    int n, k;" in mutant.source
    (mutant,) = generate(PY_SOURCE, "python", operators=["COMMENT_INSERT"])
    assert mutant.source.startswith('def total(xs, cap):\n    # tribunal: control comment\n    """Sum')
    (mutant,) = generate("x = 1\nprint(x)\n", "python", operators=["COMMENT_INSERT"])
    assert mutant.source == "# tribunal: control comment\nx = 1\nprint(x)\n"


def test_rename_local_renames_consistently_to_a_fresh_name() -> None:
    source = "def f(xs):\n    s_1 = 0\n    s = 0\n    for x in xs:\n        s += x\n    return s + s_1\n"
    renamed = {m.source for m in generate(source, "python", operators=["RENAME_LOCAL"], all_sites=True)}
    assert "def f(xs):\n    s_1 = 0\n    s_2 = 0\n    for x in xs:\n        s_2 += x\n    return s_2 + s_1\n" in renamed
    assert "def f(xs):\n    s_1_1 = 0\n    s = 0\n    for x in xs:\n        s += x\n    return s + s_1_1\n" in renamed
    assert len(renamed) == 3  # s, s_1 and the loop variable x; never the parameter xs


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    x = 1\n    return locals()['x']\n",
        "def f():\n    x = 1\n    return eval('x')\n",
        "def f():\n    global x\n    x = 1\n    return x\n",
        "def f():\n    x = 1\n    return [x + y for y in range(3)]\n",
        "def f():\n    x = 1\n    def g():\n        return x\n    return g()\n",
        "def f():\n    x = 1\n    return f'{x}'\n",
        "def f():\n    try:\n        x = 1\n    except ValueError as x:\n        pass\n    return x\n",
        "def f():\n    import os as x\n    x = 1\n    return x\n",
        "import sys\ndef f():\n    x = 1\n    return sys._getframe().f_locals\n",
    ],
)
def test_rename_local_skips_names_it_cannot_rename_safely(source: str) -> None:
    assert generate(source, "python", operators=["RENAME_LOCAL"], all_sites=True) == []


def test_docstring_change_edits_or_adds_and_skips_programs_that_read_docstrings() -> None:
    source = 'def f(x):\n    """Return x.\n\n    >>> f(1)\n    1\n    """\n    return x\n\ndef g(): return 1\n'
    source += "def h(y):\n    return y\n"
    changed = [m.source for m in generate(source, "python", operators=["DOCSTRING_CHANGE"], all_sites=True)]
    assert changed == [
        source.replace('    1\n    """\n', '    1\n\n    Tribunal control edit.\n    """\n'),
        source.replace("def h(y):\n", 'def h(y):\n    """Tribunal control docstring."""\n'),
    ]
    reader = source + "print(f.__doc__)\n"
    assert generate(reader, "python", operators=["DOCSTRING_CHANGE"], all_sites=True) == []


# --- Python semantic operators ---


def test_python_semantic_operators() -> None:
    assert sorted(edits_of(PY_SOURCE, "python", "AOR")) == sorted(
        [
            ("s = s + x * 2", "s = s - x * 2"),
            ("s = s + x * 2", "s = s + x / 2"),
            ("s = s + x * 2", "s = s + x // 2"),
            ("s = s + x * 2", "s = s + x ** 2"),
        ]
    )
    assert edits_of(PY_SOURCE, "python", "COI") == [("if x > 0 and s < cap:", "if not (x > 0 and s < cap):")]
    assert edits_of(PY_SOURCE, "python", "LCR") == [("if x > 0 and s < cap:", "if x > 0 or s < cap:")]
    assert edits_of(PY_SOURCE, "python", "SIR") == [("for x in xs[1:]:", "for x in xs[:]:")]
    assert edits_of(PY_SOURCE, "python", "BCR") == [("continue", "break")]
    assert edits_of(PY_SOURCE, "python", "RVR") == [("return s", "return None")]
    assert edits_of(PY_SOURCE, "python", "ZIL") == [("", "break")]
    crp = edits_of(PY_SOURCE, "python", "CRP")
    assert ("s = 0", "s = 1") in crp and ("s = s + x * 2", "s = s + x * 3") in crp
    assert all("Sum of xs" not in removed for removed, _ in crp)  # never the docstring
    ror = edits_of(PY_SOURCE, "python", "ROR")
    assert ("if x > 0 and s < cap:", "if x >= 0 and s < cap:") in ror and len(ror) == 4


def test_rvr_turns_numbers_into_zero_or_one_and_flips_booleans() -> None:
    source = "def f(a):\n    if a:\n        return 0\n    if a > 1:\n        return 5\n    return True\n"
    assert edits_of(source, "python", "RVR") == [
        ("return 0", "return 1"),
        ("return 5", "return 0"),
        ("return True", "return False"),
    ]


# --- guard context ---


@pytest.mark.parametrize(
    ("language", "source", "operator", "guard"),
    [
        ("c", "int main(){int x=0,n=3;\n if (x <= n) x++;\n return x;}\n", "ROR_BOUNDARY", True),
        ("c", "int main(){int s=0,n=3;\n for (int i = 0; i <= n; i++) s++;\n return s;}\n", "ROR_BOUNDARY", False),
        ("c", "int main(){int s=0,n=3;\n while (s <= n) s++;\n return s;}\n", "ROR_BOUNDARY", False),
        ("c", "int main(){int s=0,n=3;\n s = s <= n ? 1 : 2;\n return s;}\n", "ROR_BOUNDARY", True),
        ("c", "int main(){int s=0,n=3;\n s = (s <= n);\n return s;}\n", "ROR_BOUNDARY", False),
        ("c", "int main(){int s=0,n=3;\n if (s) { s = s + n; }\n return s;}\n", "ARITH_FLIP", False),
        ("c", "int main(){int s=0,n=3;\n if (s + n > 2) s = 1;\n return s;}\n", "ARITH_FLIP", True),
        ("c", "int main(){int s=0;\n switch (s) { case 1 + 1: s = 2; }\n return s;}\n", "ARITH_FLIP", True),
        ("cpp", "int main(){int s=0,n=3;\n if (int k = 2; k <= n) s = k;\n return s;}\n", "ROR_BOUNDARY", True),
        ("java", "class Main{void f(int x,int n){ if (x >= n) x++; }}", "ROR_BOUNDARY", True),
        ("java", "class Main{void f(int x,int n){ for (int i=0;i>=n;i++) x++; }}", "ROR_BOUNDARY", False),
        ("java", "class Main{int f(int x,int n){ return x >= n ? 1 : 0; }}", "ROR_BOUNDARY", True),
        ("python", "def f(x, n):\n    if x <= n:\n        return 1\n", "ROR", True),
        ("python", "def f(x, n):\n    while x <= n:\n        x += 1\n", "ROR", False),
        ("python", "def f(x, n):\n    return [y for y in x if y <= n]\n", "ROR", True),
        ("python", "def f(x, n):\n    return 1 if x <= n else 2\n", "ROR", True),
        ("python", "def f(x, n):\n    return x <= n\n", "ROR", False),
        ("python", "def f(x, n):\n    if x:\n        return x + n\n", "AOR", False),
        ("python", "def f(x, n):\n    if x:\n        return x\n", "COI", True),
    ],
)
def test_guard_context(language: str, source: str, operator: str, guard: bool) -> None:
    mutants = generate(source, language, operators=[operator], all_sites=True)
    assert mutants
    assert {m.guard_context for m in mutants} == {guard}


def test_controls_are_never_guards() -> None:
    for language, source in (("c", C_SOURCE), ("python", PY_SOURCE)):
        for mutant in generate(source, language, all_sites=True):
            if mutant.arm is Arm.CONTROL:
                assert mutant.guard_context is False


# --- protocol: selection, dedup, diffs, positions ---


def test_one_mutant_per_operator_drawn_from_all_sites() -> None:
    everything = generate(C_SOURCE, "c", all_sites=True)
    by_operator: dict[str, set[str]] = {}
    for mutant in everything:
        by_operator.setdefault(mutant.operator, set()).add(mutant.source)
    for seed in range(5):
        chosen = generate(C_SOURCE, "c", seed=seed)
        assert [m.operator for m in chosen] == list(by_operator)  # one each, in catalogue order
        for mutant in chosen:
            assert mutant.source in by_operator[mutant.operator]
    draws = {generate(C_SOURCE, "c", seed=seed, operators=["ROR_BOUNDARY"])[0].source for seed in range(30)}
    assert draws == by_operator["ROR_BOUNDARY"]  # seeds reach every site


def test_the_draw_for_an_operator_does_not_depend_on_the_others_asked_for() -> None:
    alone = generate(C_SOURCE, "c", seed=3, operators=["LOOP_SHORTEN"])
    together = [m for m in generate(C_SOURCE, "c", seed=3) if m.operator == "LOOP_SHORTEN"]
    assert alone == together


def test_no_mutant_equals_its_parent_and_none_repeats() -> None:
    source = "def f(a):\n    x = a[0:0]\n    return a[1:1] + x\n"  # SIR on [0:0] and [1:1] repeats itself
    for language, program in (("c", C_SOURCE), ("python", PY_SOURCE), ("python", source)):
        mutants = generate(program, language, all_sites=True)
        sources = [m.source for m in mutants]
        assert program not in sources
        assert len(sources) == len(set(sources))


def apply_unified_diff(parent: str, diff: str) -> str:
    """Apply a unified diff written by `generate` to `parent` (an independent reader of the format)."""
    lines = parent.splitlines(keepends=True)
    out: list[str] = []
    cursor = 0
    diff_lines = diff.splitlines(keepends=True)
    assert diff_lines[0].startswith("--- a/") and diff_lines[1].startswith("+++ b/")
    index = 2
    while index < len(diff_lines):
        header = diff_lines[index]
        assert header.startswith("@@ -"), header
        old_start = int(header.split()[1][1:].split(",")[0])
        out.extend(lines[cursor : old_start - 1])
        cursor = old_start - 1
        index += 1
        while index < len(diff_lines) and not diff_lines[index].startswith("@@"):
            line = diff_lines[index]
            tag, body = line[0], line[1:]
            nxt = diff_lines[index + 1] if index + 1 < len(diff_lines) else ""
            if nxt.startswith("\\ No newline"):
                body = body.rstrip("\n")
                index += 1
            if tag == " ":
                assert lines[cursor] == body
                out.append(body)
                cursor += 1
            elif tag == "-":
                assert lines[cursor] == body
                cursor += 1
            elif tag == "+":
                out.append(body)
            index += 1
    out.extend(lines[cursor:])
    return "".join(out)


def first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def offset_of(source: str, line: int, column: int) -> int:
    return sum(len(text) for text in source.splitlines(keepends=True)[: line - 1]) + column - 1


def all_hand_written() -> list[tuple[str, str]]:
    programs = [("c", C_SOURCE), ("python", PY_SOURCE)]
    programs += [(language, (d / name).read_text()) for d in PROBLEMS for language, name in FILES.items()]
    return programs


def test_diffs_reproduce_the_mutant_and_positions_point_at_the_edit() -> None:
    checked = 0
    for language, parent in [*all_hand_written(), ("python", "def f(a):\n    return a + 1")]:  # no final newline
        for mutant in generate(parent, language, all_sites=True):
            assert apply_unified_diff(parent, mutant.diff) == mutant.source
            assert mutant.diff.startswith(
                f"--- a/{'Main.java' if language == 'java' else 'main.' + ('py' if language == 'python' else language)}"
            )
            offset = offset_of(parent, mutant.line, mutant.column)
            difference = first_difference(parent, mutant.source)
            # The first changed character is at the reported position or within the token that starts there.
            assert offset <= difference <= offset + 16, (mutant.operator, mutant.line, mutant.column, mutant.diff)
            changed_line = parent[:difference].count("\n") + 1
            assert changed_line == mutant.line
            checked += 1
    assert checked > 200


def test_positions_count_characters_not_bytes() -> None:
    source = 'def f(s):\n    t = "héllo"; return s + 1\n'
    (mutant,) = generate(source, "python", operators=["AOR"])
    assert (mutant.line, mutant.column) == (2, source.splitlines()[1].index("+") + 1)
    assert mutant.source == source.replace("s + 1", "s - 1")


def test_unparsable_source() -> None:
    with pytest.raises(UnparsableSource):
        generate("int main( { return 0; }\n", "c")
    with pytest.raises(UnparsableSource):
        generate("public class Main { void f() { int x = ; } }", "java")
    with pytest.raises(UnparsableSource):
        generate("def f(:\n    pass\n", "python")
    with pytest.raises(UnparsableSource):
        generate("int main() { if (a < ) return 1; }", "cpp")


def test_unknown_operators_and_languages_are_errors() -> None:
    with pytest.raises(ValueError):
        generate(C_SOURCE, "c", operators=["AOR"])
    with pytest.raises(ValueError):
        generate(C_SOURCE, "cobol")


def test_no_operator_proposes_a_site_its_own_check_rejects() -> None:
    """Every site's mutant parses again (and a control keeps its parent's syntax tree); a rejected site is an
    operator bug, hidden from users by `generate` but not from this test."""
    for language, source in all_hand_written():
        assert rejected_sites(source, language) == [], language


def test_mutant_fields() -> None:
    for mutant in generate(C_SOURCE, "c"):
        assert isinstance(mutant, Mutant)
        operator = operator_named(mutant.operator)
        assert (mutant.arm, mutant.severity) == (operator.arm, operator.severity)


# --- determinism across processes ---

_SCRIPT = """
import json, sys
from pathlib import Path
from services.lib.mutation import generate
out = []
for language, path in json.loads(sys.argv[1]):
    for seed in (0, 1, 7):
        mutants = generate(Path(path).read_text(), language, seed=seed)
        out.append([[m.operator, m.line, m.column, m.source] for m in mutants])
print(json.dumps(out))
"""


def test_same_seed_same_mutants_in_processes_with_different_hash_seeds() -> None:
    inputs = [[language, str(d / name)] for d in PROBLEMS[:4] for language, name in FILES.items()]
    outputs = []
    for hash_seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, json.dumps(inputs)], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert any(len({json.dumps(run) for run in outputs[0][i : i + 3]}) > 1 for i in range(0, len(outputs[0]), 3))
