"""The operator catalogue: every perturbation operator, its arm, severity, languages and a before/after example.

This is data, read by `generate` (which operators apply to a language) and by the API's operator listing. The
severities are paper 001 V-D's ordinal scale (1 = least visible defect, 4 = wrong on almost every input) for its
four semantic operators. The MutPy operators have no severity (None): 001's severity gradient is defined over its
own four operators only, and MutPy orders none of its operators by how visible the defect is (its ROR, for one,
mixes a boundary off-by-one `<` -> `<=` with a full inversion `<` -> `>`). Controls have no severity either.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.kernel.contracts import Arm, Language

C_FAMILY: tuple[Language, ...] = (Language.C, Language.CPP, Language.JAVA)
PYTHON: tuple[Language, ...] = (Language.PYTHON,)

PAPER_001 = "paper 001 V-D"
MUTPY = "MutPy"
TRIBUNAL = "Tribunal"  # operators of our own, built after the papers' design (docs/perturbation.md says how)


@dataclass(frozen=True)
class Operator:
    """One perturbation operator. `severity` is 001's ordinal defect severity (semantic arm) or None."""

    name: str
    arm: Arm
    severity: int | None
    languages: tuple[Language, ...]
    description: str
    example_before: str
    example_after: str
    source: str


CATALOGUE: tuple[Operator, ...] = (
    # Paper 001 V-D: four semantic operators and two controls, for C, C++ and Java.
    Operator(
        name="TYPE_NARROW",
        arm=Arm.SEMANTIC,
        severity=1,
        languages=C_FAMILY,
        description=(
            "A 64-bit variable declaration is narrowed to 32 bits: C/C++ `long long`, `long long int`, `long`, "
            "`long int`, `signed long long`, `int64_t` (also `std::int64_t`) become `int`; `unsigned long long`, "
            "`unsigned long`, `uint64_t` become `unsigned int`; Java `long` becomes `int`. Only plain variable "
            "declarations (not parameters, return types, struct fields, typedefs or template arguments), and only "
            "where the narrowed program is sure to compile and the defect is the overflow, not a format or "
            'aliasing error: a variable whose address is taken (`scanf("%lld", &x)`) is left alone.'
        ),
        example_before="long long sum = 0;",
        example_after="int sum = 0;",
        source=PAPER_001,
    ),
    Operator(
        name="ROR_BOUNDARY",
        arm=Arm.SEMANTIC,
        severity=2,
        languages=C_FAMILY,
        description="A relational operator at a boundary check is tightened or loosened: `<=` <-> `<`, `>=` <-> `>`.",
        example_before="if (x <= limit)",
        example_after="if (x < limit)",
        source=PAPER_001,
    ),
    Operator(
        name="LOOP_SHORTEN",
        arm=Arm.SEMANTIC,
        severity=3,
        languages=C_FAMILY,
        description=(
            "The bound of a counting for-loop loses one: `i < n` -> `i < n - 1`, `i <= n` -> `i <= n - 1` (and the "
            "mirrored `n > i` -> `n - 1 > i`), where the counter is the variable the loop's update clause steps."
        ),
        example_before="for (int i = 0; i < n; i++)",
        example_after="for (int i = 0; i < n - 1; i++)",
        source=PAPER_001,
    ),
    Operator(
        name="ARITH_FLIP",
        arm=Arm.SEMANTIC,
        severity=4,
        languages=C_FAMILY,
        description=(
            "A binary addition becomes a subtraction, `a + b` -> `a - b`, where both operands are known to be "
            "numbers (never a string concatenation, an iterator or pointer offset, or an operand of unknown type)."
        ),
        example_before="int c = a + b;",
        example_after="int c = a - b;",
        source=PAPER_001,
    ),
    Operator(
        name="POST_TO_PRE_INCREMENT",
        arm=Arm.CONTROL,
        severity=None,
        languages=C_FAMILY,
        description=(
            "A post-increment or post-decrement in a for-loop's update clause becomes the prefix form "
            "(`i++` -> `++i`, `i--` -> `--i`); the value of that expression is discarded, so behaviour is identical."
        ),
        example_before="for (int i = 0; i < n; i++)",
        example_after="for (int i = 0; i < n; ++i)",
        source=PAPER_001,
    ),
    Operator(
        name="COMMENT_INSERT",
        arm=Arm.CONTROL,
        severity=None,
        languages=(*C_FAMILY, *PYTHON),
        description=(
            "A comment line is inserted at a fixed point: before the first statement of the first function body "
            "(`// tribunal: control comment`, `# tribunal: control comment` in Python)."
        ),
        example_before="int main() {\n    int n;",
        example_after="int main() {\n    // tribunal: control comment\n    int n;",
        source=PAPER_001,
    ),
    # Python: MutPy's operators (semantic) and matched controls.
    Operator(
        name="AOR",
        arm=Arm.SEMANTIC,
        severity=None,
        languages=PYTHON,
        description=(
            "Arithmetic operator replacement, as MutPy: `+` <-> `-`, `*` -> `/` `//` `**`, `/` -> `*` `//`, "
            "`//` -> `/` `*`, `%` -> `*` (not string formatting), `**` -> `*`, unary `-` <-> `+`."
        ),
        example_before="return a + b",
        example_after="return a - b",
        source=MUTPY,
    ),
    Operator(
        name="ROR",
        arm=Arm.SEMANTIC,
        severity=None,
        languages=PYTHON,
        description=(
            "Relational operator replacement, as MutPy: `<` -> `>` `<=`, `>` -> `<` `>=`, `<=` -> `>=` `<`, "
            "`>=` -> `<=` `>`, `==` <-> `!=`."
        ),
        example_before="if x < y:",
        example_after="if x <= y:",
        source=MUTPY,
    ),
    Operator(
        name="COI",
        arm=Arm.SEMANTIC,
        severity=None,
        languages=PYTHON,
        description=(
            "Conditional operator insertion, as MutPy: an `if`/`elif`/`while` condition is negated "
            "(`c` -> `not (c)`), and `in` <-> `not in`."
        ),
        example_before="if c:",
        example_after="if not (c):",
        source=MUTPY,
    ),
    Operator(
        name="LCR",
        arm=Arm.SEMANTIC,
        severity=None,
        languages=PYTHON,
        description="Logical connector replacement, as MutPy: `and` <-> `or` (every connector of one boolean chain).",
        example_before="if a and b:",
        example_after="if a or b:",
        source=MUTPY,
    ),
    Operator(
        name="CRP",
        arm=Arm.SEMANTIC,
        severity=None,
        languages=PYTHON,
        description=(
            "Constant replacement, as MutPy: a number c -> c + 1; a string -> 'mutpy' ('python' if it was 'mutpy'), "
            "or a non-empty string -> ''. Docstrings, f-string parts, bytes and booleans are left alone."
        ),
        example_before="count = 0",
        example_after="count = 1",
        source=MUTPY,
    ),
    Operator(
        name="ZIL",
        arm=Arm.SEMANTIC,
        severity=None,
        languages=PYTHON,
        description=(
            "Zero-iteration loop: a `for`/`while` body starts with `break`, so the loop body never runs "
            "(MutPy replaces the body with `break`; inserting it keeps the diff minimal and means the same)."
        ),
        example_before="for x in xs:\n    total += x",
        example_after="for x in xs:\n    break\n    total += x",
        source=MUTPY,
    ),
    Operator(
        name="SIR",
        arm=Arm.SEMANTIC,
        severity=None,
        languages=PYTHON,
        description="Slice index removal, as MutPy: the lower bound, upper bound or step of a slice is removed.",
        example_before="rest = xs[1:]",
        example_after="rest = xs[:]",
        source=MUTPY,
    ),
    Operator(
        name="BCR",
        arm=Arm.SEMANTIC,
        severity=None,
        languages=PYTHON,
        description="Break/continue replacement, as MutPy: `break` <-> `continue`.",
        example_before="if x < 0:\n    break",
        example_after="if x < 0:\n    continue",
        source=MUTPY,
    ),
    Operator(
        name="RVR",
        arm=Arm.SEMANTIC,
        severity=None,
        languages=PYTHON,
        description=(
            "Return value replacement (not in MutPy's set; in its style, as PIT and mutmut do it): a returned "
            "number becomes 0 (or 1 if it was 0), `True` <-> `False`, anything else becomes `None`."
        ),
        example_before="return total",
        example_after="return None",
        source=TRIBUNAL,
    ),
    Operator(
        name="RENAME_LOCAL",
        arm=Arm.CONTROL,
        severity=None,
        languages=PYTHON,
        description=(
            "A local variable of a function is renamed consistently to a name used nowhere in the file. Skipped "
            "where a rename could change behaviour: parameters, global/nonlocal names, names used by a nested "
            "scope or an f-string, and functions that call locals()/vars()/eval()/exec()/dir()."
        ),
        example_before="total = 0\nfor x in xs:\n    total += x\nreturn total",
        example_after="total_1 = 0\nfor x in xs:\n    total_1 += x\nreturn total_1",
        source=TRIBUNAL,
    ),
    Operator(
        name="DOCSTRING_CHANGE",
        arm=Arm.CONTROL,
        severity=None,
        languages=PYTHON,
        description=(
            "A function's docstring gets a sentence, or a docstring is added where there is none (not in files that "
            "read `__doc__` or use doctest/inspect)."
        ),
        example_before='def f(x):\n    """Return x."""',
        example_after='def f(x):\n    """Return x. Tribunal control edit."""',
        source=TRIBUNAL,
    ),
)

_BY_NAME = {operator.name: operator for operator in CATALOGUE}


def operator_named(name: str) -> Operator:
    """The operator called `name`; KeyError if there is none."""
    return _BY_NAME[name]


def operators_for(language: Language | str) -> tuple[Operator, ...]:
    """The operators that apply to `language`, in catalogue order. ValueError for an unknown language."""
    lang = Language(language)
    return tuple(operator for operator in CATALOGUE if lang in operator.languages)
