"""The perturbation operators: controlled defects (semantic arm) and behaviour-preserving edits (control arm) for
measuring judges (paper 001 V-D for C, C++ and Java; MutPy's operators for Python). A pure library: source text
in, mutants out; no database, queue or network. The perturbation service (services/perturb/) makes attempts of
its mutants and the gateway lists its catalogue; docs/perturbation.md ("Operators") documents it.

Edits are made on parse trees (tree-sitter for C, C++ and Java, Python's `ast` for Python) and applied as text
splices at the exact span of a node or of its operator token, so the rest of the file is unchanged and each
mutant's diff is the edit alone. `UnparsableSource` is raised when the parent does not parse.

Site selection (paper 001's protocol). An operator's sites are sorted by position (then by replacement text), and
a site whose mutant equals the parent or repeats an earlier site's mutant is dropped. By default ONE site is then
drawn with `random.Random(f"{seed}:{operator}")`, a generator seeded from the string through SHA-512 (never
`hash()`), so a seed gives the same mutants in every process. The draw for one operator depends only on the
program, the seed and the operator's own sites, not on which other operators were asked for. `all_sites=True`
returns every site instead. Across operators, a mutant whose source another operator already produced is dropped
(the catalogue's order decides which is kept).

Every mutant is parsed again before it is returned, and a Python control must also have its parent's syntax tree
(up to comments, the renamed name, or docstrings). A site that fails this self-check is an operator bug:
`generate` drops it (under the draw, the same generator draws again among the rest) and `rejected_sites` lists
it, for tests. The check re-parses the whole program, so `all_sites` costs one parse per site.

Guard context (paper 001 V-D and VI-B4). A semantic edit has `guard_context=True` when the innermost condition
slot that encloses it is the condition of a branch:

* C, C++, Java: an `if` / `else if` condition, the condition of a ternary `?:`, a `switch` subject, a `case`
  label (Java: any switch label);
* Python: an `if` / `elif` test, the test of a conditional expression `a if c else b`, a comprehension's `if`
  filter, a `match` case guard.

Such an edit changes a boundary check that the problem's constraints may already rule out, so it may never be
reached with a distinguishing value. The edit is NOT a guard (`False`) when the innermost slot is a loop header
(a `for` initialiser, condition or update, a `while` / `do ... while` condition, a range-for or Python `for`
iterable) or when it is not in a condition at all (assignments, returns, arguments, declarations, loop and
branch bodies). `while` conditions count as loop contexts, not guards: they bound an iteration count, the kind of
defect LOOP_SHORTEN makes, and 001 VI-B4 keeps "loop contexts" when it sets the guard mutants aside. A statement-
level edit (Python's ZIL, BCR and RVR, which replace or insert statements) is never a guard; COI, which negates an
`if` test, always is (and is not one on a `while`). Control mutants are always `False`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.kernel.contracts import Arm, Language
from services.lib.mutation import c_family, python
from services.lib.mutation.catalogue import CATALOGUE, Operator, operator_named, operators_for
from services.lib.mutation.edits import Site, UnparsableSource, apply, line_starts, position, unified_diff

__all__ = [
    "CATALOGUE",
    "Mutant",
    "Operator",
    "UnparsableSource",
    "default_filename",
    "generate",
    "operator_named",
    "operators_for",
    "rejected_sites",
]

_Check = Callable[[Site, str], bool]
_FILENAMES = {Language.PYTHON: "main.py", Language.C: "main.c", Language.CPP: "main.cpp", Language.JAVA: "Main.java"}


@dataclass(frozen=True)
class Mutant:
    """One mutant of a parent program: which operator made it, where, and the mutated program with its diff."""

    operator: str
    arm: Arm
    severity: int | None
    line: int  # 1-based line of the edit site (the first edit's start, in the parent)
    column: int  # 1-based column, counting characters
    guard_context: bool
    diff: str  # unified diff parent -> mutant, "a/<name>" -> "b/<name>"
    source: str


def default_filename(language: Language | str) -> str:
    """The file name a mutant's diff uses for `language` (main.c, main.cpp, Main.java, main.py)."""
    return _FILENAMES[Language(language)]


def generate(
    source: str,
    language: Language | str,
    *,
    seed: int = 0,
    operators: Sequence[str] | None = None,
    all_sites: bool = False,
    filename: str | None = None,
) -> list[Mutant]:
    """The mutants of `source`: at most one per operator, drawn reproducibly from `seed` (paper 001's protocol),
    or every site with `all_sites=True`.

    `operators` restricts the run to these operator names (all of the language's by default); a name that is
    unknown or does not apply to the language is a ValueError. `filename` names the file in the diffs (default:
    `default_filename(language)`). Raises UnparsableSource if `source` does not parse. Mutants come in catalogue
    order, then in site order.
    """
    lang = Language(language)
    chosen = _chosen(lang, operators)
    candidates, check = _candidates(source, lang, chosen)
    starts = line_starts(source)
    name = filename or default_filename(lang)
    produced: set[bytes] = {_digest(source)}
    mutants: list[Mutant] = []
    for operator in chosen:
        pool = candidates[operator.name]
        picked: list[tuple[Site, str]] = []
        if all_sites:
            picked = [(site, mutated) for site in pool if check(site, mutated := apply(source, site.edits))]
        else:
            # The draw is over the operator's distinct mutants; only the drawn one is checked (a rejected one is
            # set aside and the same generator draws again), so a large program is not re-parsed once per site.
            rng = random.Random(f"{seed}:{operator.name}")
            pool = list(pool)
            while pool and not picked:
                site = pool.pop(rng.randrange(len(pool)))
                mutated = apply(source, site.edits)
                if check(site, mutated):
                    picked = [(site, mutated)]
        for site, mutated in picked:
            digest = _digest(mutated)
            if digest in produced:
                continue
            produced.add(digest)
            line, column = position(starts, site.edits[0].start)
            mutants.append(
                Mutant(
                    operator=operator.name,
                    arm=operator.arm,
                    severity=operator.severity,
                    line=line,
                    column=column,
                    guard_context=site.guard_context and operator.arm is Arm.SEMANTIC,
                    diff=unified_diff(source, mutated, name),
                    source=mutated,
                )
            )
    return mutants


def rejected_sites(source: str, language: Language | str, operators: Sequence[str] | None = None) -> list[Site]:
    """Sites an operator proposed whose mutant failed the self-check (does not parse again, or a control that
    changes the syntax tree). `generate` drops them; any at all is an operator bug, so tests assert there are
    none."""
    lang = Language(language)
    candidates, check = _candidates(source, lang, _chosen(lang, operators))
    return [site for sites in candidates.values() for site in sites if not check(site, apply(source, site.edits))]


def _chosen(language: Language, operators: Sequence[str] | None) -> tuple[Operator, ...]:
    available = operators_for(language)
    if operators is None:
        return available
    names = {operator.name for operator in available}
    unknown = [name for name in operators if name not in names]
    if unknown:
        raise ValueError(f"operators {unknown} do not apply to {language.value} (have: {sorted(names)})")
    wanted = set(operators)
    return tuple(operator for operator in available if operator.name in wanted)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _candidates(source: str, language: Language, chosen: Sequence[Operator]) -> tuple[dict[str, list[Site]], _Check]:
    """Per operator, its sites in order, less those whose mutant equals the parent or an earlier site's mutant;
    and the self-check for a site's mutant."""
    sites, check = _find_sites(source, language, [operator.name for operator in chosen])
    candidates: dict[str, list[Site]] = {}
    for operator in chosen:
        kept = candidates.setdefault(operator.name, [])
        seen: set[bytes] = {_digest(source)}
        for site in sorted(sites[operator.name], key=lambda s: s.key):
            digest = _digest(apply(source, site.edits))
            if digest not in seen:
                seen.add(digest)
                kept.append(site)
    return candidates, check


def _find_sites(source: str, language: Language, names: list[str]) -> tuple[dict[str, list[Site]], _Check]:
    if language is Language.PYTHON:
        program = python.parse(source)
        return python.find_sites(program, names), lambda site, mutated: python.verify(program, site, mutated)
    parsed = c_family.parse(source, language)

    def check(site: Site, mutated: str) -> bool:
        if not c_family.parses(mutated, language):
            return False
        if site.operator == "COMMENT_INSERT":
            return c_family.leaves_without_comments(mutated, language) == c_family.leaves_without_comments(
                source, language
            )
        return True

    return c_family.find_sites(parsed, names), check
