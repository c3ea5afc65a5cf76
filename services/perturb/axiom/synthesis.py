"""AXIOM's quality-constrained semantic perturbation (paper 000, III-B1 to III-B3).

Pure functions, or async functions whose only dependency is injected (an LLM `Runner`): no database, no queue. The
perturb service's synthesis job (services/perturb/synthesis.py) plugs them in; docs/axiom.md describes the protocol
and every constant. Context disruption (III-B4) is `disruption.py`'s, representative selection (III-C1)
`selection.py`'s.

- Rule sequences (III-B1): `sample_rule_sequence` draws u_1..u_N with min_i c(u_i) = the target score, from a
  seed string through `random.Random` (never `hash()`), so a draw is the same in every process.
- Perturbation (III-B1, Algorithm 1): `perturb` asks an LLM, under strict reply schemas, whether each rule applies
  to the current program and then to apply it; `synthesize` samples and perturbs; `augment_exemplar` (III-B2)
  does it with the ceiling-5 rules. The result is a `Candidate` (code passed through as the LLM wrote it, with a
  syntax label; compiling and testing are the executor's) or a `Rejection` of a fixed `FailureKind`.
- Keeping a candidate (III-B3): `target_matches(target, verdict)`: 3-5 must pass every test, 1-2 fail one.
- Export (IV-B): `score_entropy` (normalised Shannon entropy); the record shape (`AxiomRecord`, `to_jsonl`) is in
  `services/lib/mutation/axiom_records.py`, where the gateway serves the export from, and is re-exported here.
"""

from __future__ import annotations

import ast
import importlib
import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from functools import cache
from typing import Any

from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict, Field

from metrics.agreement import normalised_entropy
from services.kernel.attempts import NewMutant
from services.kernel.contracts import Arm, Condition, Language, Verdict
from services.lib.llm import Answer, Failure, LLMRequest, Message, ReplySchema, Runner
from services.lib.mutation.axiom_records import AxiomRecord, export_record, to_jsonl  # noqa: F401
from services.lib.mutation.axiom_rules import Rule, RuleSet, load_rules, post_perturbation_score
from services.perturb.axiom.sequences import DEFAULT_MAX_RULES, derive_seed, sample_rule_sequence

# --- constants (paper 000) ---------------------------------------------------------------------------------------

PROMPT_VERSION = "axiom-1"  # part of every LLM request's cache scope; bump when a prompt changes
PAPER_M = 2  # IV-A: programs per target score per requirement (and the 5-point pool size)
PAPER_LLM_TEMPERATURE = 0.3  # IV-A: sampling temperature of the perturbation LLMs
PAPER_MAX_OUTPUT_TOKENS = 8192  # IV-A: output token limit of the perturbation LLMs
PASSING_TARGETS = frozenset({3, 4, 5})  # III-B3 (and III-B2 for 5): must pass every test
FAILING_TARGETS = frozenset({1, 2})  # III-B3: must fail at least one test
# Verdicts that mean "ran and failed a test": a build failure or a platform error says nothing about behaviour.
FAILING_VERDICTS = frozenset({Verdict.WA, Verdict.RE, Verdict.TLE, Verdict.MLE, Verdict.OLE})
KIND_EXEMPLAR = "exemplar"  # III-B2: a 5-point rewrite (`mutation["axiom"]["kind"]`)
KIND_DETERIORATIVE = "deteriorative"  # III-B3: a 1- to 4-point program
KIND_CONTEXT = "context_disruption"  # III-B4: a program paired with an unrelated requirement (0 points)


# --- the LLM steps ------------------------------------------------------------------------------------------------


class ApplicabilityReply(BaseModel):
    """Step 1 of a rule: does it apply to this program (III-B1: "validates if a rule is applicable")?"""

    model_config = ConfigDict(extra="forbid")

    applicable: bool
    reason: str = Field(description="One sentence: what in the program the rule would act on, or what is missing.")


class RewriteReply(BaseModel):
    """Step 2: the program with the rule applied."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="The complete transformed program, without Markdown fences.")
    summary: str = Field(description="One sentence on what was changed.")


APPLICABILITY_SCHEMA = ReplySchema.from_model("axiom_applicability", ApplicabilityReply)
REWRITE_SCHEMA = ReplySchema.from_model("axiom_rewrite", RewriteReply)


class FailureKind(StrEnum):
    """Why a perturbation produced no candidate (a fixed vocabulary, stored and counted as is)."""

    PROVIDER = "provider"  # no reply within the runner's bounds: HTTP errors (a 429 storm), timeouts, connections
    MALFORMED = "malformed"  # a reply that is not the schema's JSON (unparseable, wrong shape, out of range)
    REFUSAL = "refusal"  # the model declined (refusal text, or no content: strict mode's refusal has none)
    IGNORED_RULE = "ignored_rule"  # "applied" the rule, yet returned the program unchanged
    TARGET_UNREACHED = "target_unreached"  # no rule of the target's ceiling applied: min c(u) != target


_REFUSAL = re.compile(
    r"^\W*(i['’]?m sorry|i am sorry|sorry\b|i can(?:no|['’])t\b|i cannot\b|i won['’]?t\b|i will not\b|"
    r"i['’]?m (?:not able|unable)|i am (?:not able|unable)|as an ai\b|i must decline|i do not feel comfortable)",
    re.IGNORECASE,
)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+#.-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)


def looks_like_refusal(text: str | None) -> bool:
    """Whether a reply (or a `code` field) reads as a refusal rather than an answer."""
    return bool(text) and _REFUSAL.search(text or "") is not None


def classify_failure(failure: Failure) -> FailureKind:
    """The kind of a runner `Failure`: provider errors, malformed replies, or refusals."""
    if failure.kind in ("unparseable", "schema", "range"):
        return FailureKind.REFUSAL if looks_like_refusal(failure.content) else FailureKind.MALFORMED
    if failure.kind == "empty":
        return FailureKind.REFUSAL
    return FailureKind.PROVIDER


def extract_code(text: str) -> str:
    """The program in a `code` field: the body of its first Markdown fence if the model fenced it anyway, else
    the text; trailing whitespace dropped, one final newline."""
    fenced = _FENCE.search(text)
    body = fenced.group(2) if fenced is not None else text
    body = body.replace("\r\n", "\n").strip("\n")
    return body.rstrip() + "\n" if body.strip() else ""


def same_program(before: str, after: str) -> bool:
    """Identical up to line endings, trailing spaces and surrounding blank lines (the "ignored the rule" test)."""

    def norm(code: str) -> str:
        return "\n".join(line.rstrip() for line in code.replace("\r\n", "\n").split("\n")).strip("\n")

    return norm(before) == norm(after)


@dataclass(frozen=True)
class SyntaxCheck:
    """A cheap parse of a candidate, as a label only: the executor's build is what decides (a C++ file
    tree-sitter cannot parse may still compile, and one it parses may not). `ok` is None when unchecked."""

    ok: bool | None
    tool: str
    detail: str = ""


@cache
def _tree_sitter_parser(language: str) -> Any:
    from tree_sitter import Language as Grammar
    from tree_sitter import Parser

    module = {Language.C: "tree_sitter_c", Language.CPP: "tree_sitter_cpp", Language.JAVA: "tree_sitter_java"}
    grammar = importlib.import_module(module[Language(language)])
    return Parser(Grammar(grammar.language()))


def syntax_check(code: str, language: str) -> SyntaxCheck:
    """Parse without building or running: Python's `ast`, tree-sitter for C, C++ and Java."""
    if language == Language.PYTHON:
        try:
            ast.parse(code)
        except SyntaxError as exc:
            return SyntaxCheck(False, "python-ast", f"line {exc.lineno}: {exc.msg}")
        except (ValueError, RecursionError, MemoryError) as exc:
            return SyntaxCheck(False, "python-ast", type(exc).__name__)
        return SyntaxCheck(True, "python-ast")
    if language in (Language.C, Language.CPP, Language.JAVA):
        tree = _tree_sitter_parser(language).parse(code.encode("utf-8", "surrogatepass"))
        if tree.root_node.has_error:
            return SyntaxCheck(False, "tree-sitter", "the parse tree has ERROR or MISSING nodes")
        return SyntaxCheck(True, "tree-sitter")
    return SyntaxCheck(None, "none", f"no parser for {language}")


@dataclass(frozen=True)
class SeedProgram:
    """A program to perturb: its requirement r, its code p, its language and its score s(p) (5 for a reference
    program or an exemplar)."""

    requirement: str
    code: str
    language: str
    score: int = 5
    program_id: str | None = None


@dataclass(frozen=True)
class Step:
    """What happened to one rule of a sequence."""

    rule_id: str
    ceiling: int
    applicable: bool
    reason: str
    summary: str | None = None
    model: str | None = None
    llm_calls: int = 0


@dataclass(frozen=True)
class Candidate:
    """A perturbed program, before execution. `rules` are the rules applied (in order); `skipped` those the LLM
    found inapplicable. Its test outcome decides whether it is kept (`target_matches`)."""

    code: str
    language: str
    target_score: int
    parent_score: int
    parent_id: str | None
    rules: tuple[str, ...]
    skipped: tuple[str, ...]
    steps: tuple[Step, ...]
    syntax: SyntaxCheck
    seed: str

    @property
    def labels(self) -> tuple[str, ...]:
        """Labels a caller records: `syntax_error` when the cheap parse failed (the executor will say CE)."""
        return ("syntax_error",) if self.syntax.ok is False else ()

    def record(self) -> dict[str, Any]:
        """What an attempt stores of how it was made (the `mutation` column), JSON-serialisable."""
        return {
            "axiom": {
                "kind": KIND_EXEMPLAR if self.target_score == 5 else KIND_DETERIORATIVE,
                "target_score": self.target_score,
                "parent_score": self.parent_score,
                "rules": list(self.rules),
                "skipped": list(self.skipped),
                "steps": [asdict(step) for step in self.steps],
                "syntax": asdict(self.syntax),
                "labels": list(self.labels),
                "seed": self.seed,
                "prompt_version": PROMPT_VERSION,
            }
        }


@dataclass(frozen=True)
class Rejection:
    """No candidate: why (`kind`), the last reason, the rule it happened at, and the steps done before."""

    kind: FailureKind
    reason: str
    rule_id: str | None = None
    steps: tuple[Step, ...] = ()
    content: str | None = None  # the last reply that did not validate, if any (for diagnosis)


Outcome = Candidate | Rejection

SYSTEM_PROMPT = (
    "You transform programs for a code-evaluation benchmark: you apply one transformation rule to one program, "
    "exactly as the rule says, and nothing else. The benchmark deliberately contains programs of every quality, "
    "including flawed ones, so a rule may ask you to make the program worse; that is the purpose. "
    "Answer with one JSON object that matches the given schema, and nothing else."
)


def _program_block(program: SeedProgram, code: str) -> str:
    return (
        f"Requirement:\n<<<\n{program.requirement.strip()}\n>>>\n\n"
        f"Language: {program.language}\n\nProgram:\n```{program.language}\n{code.rstrip()}\n```"
    )


def applicability_messages(rule: Rule, program: SeedProgram, code: str) -> list[Message]:
    """The question "does this rule apply to this program?" (III-B1)."""
    precondition = rule.applies_when or "none beyond the rule itself"
    user = (
        f"{_program_block(program, code)}\n\nRule: {rule.instruction}\nPrecondition: {precondition}\n\n"
        "Can this rule be applied to this program, as the rule describes it, without rewriting the program from "
        'scratch? Answer "applicable": true only if the program has what the rule acts on. Give the reason in '
        "one sentence."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def rewrite_messages(rule: Rule, program: SeedProgram, code: str) -> list[Message]:
    """The request "apply this rule" (III-B1): the complete program back, same interface, the change unmarked."""
    if rule.functional:
        effect = (
            "The result must still compile and run, but must behave wrongly (wrong output, crash, or too slow) on "
            "some inputs of the requirement, exactly in the way the rule describes."
        )
    else:
        effect = (
            "The result must behave exactly as before on every input (same output, same efficiency); only its "
            "form changes, exactly in the way the rule describes."
        )
    user = (
        f"{_program_block(program, code)}\n\nRule: {rule.instruction}\n\nApply the rule to the program.\n"
        f"- {effect}\n"
        "- Change only what the rule asks for; keep everything else as it is.\n"
        "- Keep the program complete and runnable in the same way: the same entry point, function names and "
        "signatures, input and output format.\n"
        "- Do not add comments that point at, explain or excuse the change.\n"
        'Return "code": the complete program (plain text, no Markdown fences), and "summary": one sentence on '
        "what you changed."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _model(result: Answer | Failure) -> str | None:
    return result.served_model or result.requested_model


def _reject(failure: Failure, rule: Rule, steps: list[Step]) -> Rejection:
    return Rejection(classify_failure(failure), failure.reason, rule.id, tuple(steps), failure.content)


async def perturb(
    runners: Sequence[Runner],
    program: SeedProgram,
    sequence: Sequence[Rule],
    target_score: int,
    seed: str,
) -> Outcome:
    """Apply a rule sequence to a program with LLMs (III-B1, Algorithm 1), one LLM sampled per step.

    For each rule in order: ask whether it applies to the current program; if not, skip it; if so, ask for the
    rewrite and continue from it. A step that fails ends the perturbation with a `Rejection` (provider failure,
    malformed output, refusal, or `ignored_rule` when the rewrite is the program unchanged). Afterwards the
    program's score is min(s(p), c(u)) over the rules applied; if that is not `target_score` (the rule of the
    target's ceiling was skipped) the result is `target_unreached`. Otherwise a `Candidate`, whose code is passed
    through as written (syntax-labelled, never compiled here). Intermediate programs are not verified (III-B3).
    A sequence none of whose rules applied is `target_unreached` too (an exemplar must differ from its parent).
    """
    if not runners:
        raise ValueError("perturb needs at least one LLM runner")
    rng = random.Random(derive_seed("axiom-llm", seed))
    code = program.code
    steps: list[Step] = []
    applied: list[Rule] = []
    skipped: list[str] = []
    for index, rule in enumerate(sequence):
        runner = runners[rng.randrange(len(runners))]
        scope = ("axiom", PROMPT_VERSION, seed, index, rule.id)
        asked = await runner.run(
            LLMRequest(applicability_messages(rule, program, code), APPLICABILITY_SCHEMA, (*scope, "applies"))
        )
        if isinstance(asked, Failure):
            return _reject(asked, rule, steps)
        if not asked.fields["applicable"]:
            steps.append(Step(rule.id, rule.ceiling, False, asked.fields["reason"], model=_model(asked), llm_calls=1))
            skipped.append(rule.id)
            continue
        rewritten = await runner.run(LLMRequest(rewrite_messages(rule, program, code), REWRITE_SCHEMA, scope))
        if isinstance(rewritten, Failure):
            return _reject(rewritten, rule, steps)
        new_code = extract_code(rewritten.fields["code"])
        step = Step(
            rule.id,
            rule.ceiling,
            True,
            asked.fields["reason"],
            rewritten.fields["summary"],
            _model(rewritten),
            llm_calls=2,
        )
        if not new_code.strip() or looks_like_refusal(new_code):
            return Rejection(
                FailureKind.REFUSAL, "the rewrite holds no program", rule.id, (*steps, step), rewritten.content
            )
        if same_program(code, new_code):
            return Rejection(
                FailureKind.IGNORED_RULE,
                "the rewrite is the program unchanged",
                rule.id,
                (*steps, step),
                rewritten.content,
            )
        steps.append(step)
        applied.append(rule)
        code = new_code
    if not applied:
        return Rejection(FailureKind.TARGET_UNREACHED, "no rule of the sequence applied", None, tuple(steps))
    reached = post_perturbation_score(program.score, [rule.ceiling for rule in applied])
    if reached != target_score:
        applied_ids = ", ".join(rule.id for rule in applied) or "none"
        return Rejection(
            FailureKind.TARGET_UNREACHED,
            f"the rules applied ({applied_ids}) give score {reached}, not {target_score}",
            None,
            tuple(steps),
        )
    return Candidate(
        code=code,
        language=program.language,
        target_score=target_score,
        parent_score=program.score,
        parent_id=program.program_id,
        rules=tuple(rule.id for rule in applied),
        skipped=tuple(skipped),
        steps=tuple(steps),
        syntax=syntax_check(code, program.language),
        seed=seed,
    )


async def synthesize(
    runners: Sequence[Runner],
    program: SeedProgram,
    target_score: int,
    rules: RuleSet,
    seed: str,
    *,
    max_rules: int = DEFAULT_MAX_RULES,
) -> Outcome:
    """Deteriorative perturbation (III-B3) of one 5-point program toward `target_score` in 1..4 (or 5: III-B2):
    sample a rule sequence for the target from `seed`, then `perturb`. A caller repeats with new seeds (e.g.
    `derive_seed(job, requirement, target, draw)`) until M candidates pass `target_matches`."""
    if program.score < target_score:
        raise ValueError(f"a program of score {program.score} cannot be perturbed up to {target_score}")
    sequence = sample_rule_sequence(rules, target_score, seed, max_rules=max_rules)
    return await perturb(runners, program, sequence, target_score, seed)


def pick_parent(pool: Sequence[SeedProgram], seed: str) -> SeedProgram:
    """A random program of the 5-point pool (III-B2/III-B3: "a random existing program"), reproducibly."""
    if not pool:
        raise ValueError("the 5-point pool is empty")
    return pool[random.Random(derive_seed("axiom-parent", seed)).randrange(len(pool))]


def exemplars_needed(pool_size: int, m: int = PAPER_M) -> int:
    """III-B2: new 5-point programs to add until the pool holds M."""
    return max(0, m - pool_size)


async def augment_exemplar(
    runners: Sequence[Runner],
    pool: Sequence[SeedProgram],
    rules: RuleSet,
    seed: str,
    *,
    max_rules: int = DEFAULT_MAX_RULES,
) -> Outcome:
    """Exemplar augmentation (III-B2): rewrite a random program of the 5-point pool with ceiling-5 rules (U_5)
    only. The candidate joins the pool if it passes every test (`target_matches(5, verdict)`)."""
    parent = pick_parent(pool, seed)
    return await synthesize(runners, parent, 5, rules, seed, max_rules=max_rules)


def target_matches(target_score: int, verdict: str | None) -> bool:
    """Whether a candidate's test outcome matches its target score (III-B2, III-B3).

    3, 4 and 5 must pass every test (verdict AC); 1 and 2 must fail at least one test, having run (WA, RE, TLE,
    MLE, OLE). A build failure (CE), an internal error (IE) or no execution (None) matches no target.

    Raises:
        ValueError: a target outside 1..5 (0-point pairs are not tested: III-B4 makes their score absolute).
    """
    if target_score in PASSING_TARGETS:
        return verdict == Verdict.AC
    if target_score in FAILING_TARGETS:
        return verdict in FAILING_VERDICTS
    raise ValueError(f"target scores 1..5 are checked by tests, got {target_score}")


def to_new_mutant(
    candidate: Candidate,
    *,
    judges: Sequence[str] = (),
    conditions: Sequence[str] = (Condition.BLIND,),
    rules: RuleSet | None = None,
) -> NewMutant:
    """The kernel's mutant spec for a candidate (`attempts.create_mutant`). Its `operator` names the rules applied
    by their codes (`axiom:R12+R03`, `RuleSet.operator`; the record keeps their ids). Targets 3-5 keep behaviour,
    so they are the control arm (a failing test flags them); 1-2 break it, the semantic arm (passing every test
    flags them as equivalent suspects): the verify stage's findings then say exactly whether `target_matches`."""
    rule_set = rules if rules is not None else load_rules()
    arm = Arm.CONTROL if candidate.target_score in PASSING_TARGETS else Arm.SEMANTIC
    return NewMutant(
        source_code=candidate.code,
        operator=rule_set.operator(candidate.rules),
        arm=arm,
        severity=None,
        guard_context=None,
        judges=tuple(judges),
        conditions=tuple(conditions),
        mutation=candidate.record(),
    )


# --- export and entropy (IV-B) -----------------------------------------------------------------------------------


# `AxiomRecord`, `export_record` and `to_jsonl` live in services/lib/mutation/axiom_records.py (the gateway serves the
# export) and are re-exported here.


def score_entropy(scores: Sequence[int] | ArrayLike, scale: tuple[int, int] = (0, 5)) -> float:
    """Normalised Shannon entropy S = -sum_k p_k log_N p_k of the scores over the N possible scores of `scale`
    (IV-B; `metrics.agreement.normalised_entropy`). 1 = every score equally frequent. Use scale (1, 5) for the
    Rectifiable subset (no 0-point programs)."""
    return normalised_entropy(scores, list(scale), "score")
