"""Pure parts of AXIOM: target/test-outcome rule (III-B3), context disruption (III-B4), representative selection
(III-C1), the export record and the normalised score entropy (IV-B), each against a hand computation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from services.kernel.contracts import Arm, Verdict
from services.lib.codesim import normalized_edit_distance
from services.lib.mutation.axiom_rules import load_rules
from services.perturb.axiom.disruption import (
    ProgramRef,
    RequirementPrograms,
    context_disruption,
    cosine_distances,
    sample_disruptors,
    softmax_probabilities,
)
from services.perturb.axiom.selection import (
    ScoredProgram,
    TokenDistance,
    farthest_point_selection,
    select_representatives,
)
from services.perturb.axiom.synthesis import (
    Candidate,
    SyntaxCheck,
    export_record,
    score_entropy,
    target_matches,
    to_jsonl,
    to_new_mutant,
)

# --- III-B3: which test outcomes keep a candidate ----------------------------------------------------------------

KEEP = {
    # target: verdicts that keep it (every other verdict, and None, rejects it)
    5: {Verdict.AC},
    4: {Verdict.AC},
    3: {Verdict.AC},
    2: {Verdict.WA, Verdict.RE, Verdict.TLE, Verdict.MLE, Verdict.OLE},
    1: {Verdict.WA, Verdict.RE, Verdict.TLE, Verdict.MLE, Verdict.OLE},
}


@pytest.mark.parametrize("target", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("verdict", [*Verdict, None])
def test_target_matches_the_test_outcome_table(target: int, verdict: Verdict | None) -> None:
    assert target_matches(target, verdict) == (verdict in KEEP[target])
    if verdict in (Verdict.CE, Verdict.IE, None):
        assert not target_matches(target, verdict)  # not built, or the platform failed: says nothing


def test_target_matches_takes_plain_strings_and_refuses_0_and_6() -> None:
    assert target_matches(4, "AC") and target_matches(2, "WA") and not target_matches(1, "AC")
    for target in (0, 6):
        with pytest.raises(ValueError):
            target_matches(target, "AC")


def _candidate(target: int, rules: tuple[str, ...] = ("alt-standard-library",)) -> Candidate:
    return Candidate(
        code="x = 1\n",
        language="python",
        target_score=target,
        parent_score=5,
        parent_id="att_1",
        rules=rules,
        skipped=(),
        steps=(),
        syntax=SyntaxCheck(True, "python-ast"),
        seed="s",
    )


def test_a_candidate_becomes_a_mutant_whose_arm_makes_verification_say_whether_the_target_matched() -> None:
    rules = load_rules()
    exemplar = to_new_mutant(_candidate(5))
    assert exemplar.operator == f"axiom:{rules.code('alt-standard-library')}" == "axiom:R02"
    assert exemplar.arm == Arm.CONTROL and exemplar.mutation["axiom"]["kind"] == "exemplar"
    assert to_new_mutant(_candidate(3)).arm == Arm.CONTROL  # must pass: a failing test flags it
    sequence = ("read-single-letter-names", "alt-standard-library")
    mutant = to_new_mutant(_candidate(2, sequence), judges=["j"])
    assert mutant.arm == Arm.SEMANTIC and list(mutant.judges) == ["j"]
    # The operator names the sequence by rule codes, in order; the record keeps the ids.
    assert mutant.operator == "axiom:" + "+".join(rules.code(rule_id) for rule_id in sequence)
    assert len(mutant.operator) <= 100  # the attempt's `operator` column
    assert mutant.mutation["axiom"]["rules"] == list(sequence)
    assert (mutant.mutation["axiom"]["target_score"], mutant.mutation["axiom"]["kind"]) == (2, "deteriorative")
    json.dumps(mutant.mutation)  # storable as JSON


# --- III-B4: context disruption ----------------------------------------------------------------------------------


def test_softmax_with_temperature_0_03_on_a_worked_example() -> None:
    # Distances 0.03 apart at tau = 0.03 are logits 1 apart: softmax([30, 31, 32]) = softmax([0, 1, 2])
    # = [1, e, e^2] / (1 + e + e^2) = [0.0900306, 0.2447285, 0.6652410].
    probabilities = softmax_probabilities([0.90, 0.93, 0.96])
    e = math.e
    expected = np.array([1, e, e * e]) / (1 + e + e * e)
    np.testing.assert_allclose(probabilities, expected, rtol=1e-9)
    np.testing.assert_allclose(probabilities, [0.0900306, 0.2447285, 0.6652410], atol=1e-7)
    # A distance 0.3 larger is e^10 = 22026 times as likely: the far requirement all but always wins.
    far, near = softmax_probabilities([1.0, 0.7])
    assert far / near == pytest.approx(math.exp(10), rel=1e-9)


def test_cosine_distance_matrix_is_in_0_2_with_a_zero_diagonal() -> None:
    distances = cosine_distances([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(np.diag(distances), 0.0, atol=1e-12)
    assert distances[0, 1] == pytest.approx(1.0)  # orthogonal
    assert distances[0, 2] == pytest.approx(2.0)  # opposite
    assert distances[0, 3] == pytest.approx(1 - 1 / math.sqrt(2))
    np.testing.assert_allclose(distances, distances.T)


def test_disruptors_are_distinct_never_the_requirement_itself_and_reproducible() -> None:
    distances = cosine_distances(np.eye(6) + 0.1)
    chosen = sample_disruptors(distances, 2, 4, "seed")
    assert len(chosen) == len(set(chosen)) == 4 and 2 not in chosen
    assert sample_disruptors(distances, 2, 4, "seed") == chosen
    assert sample_disruptors(distances, 2, 10, "seed") != [] and len(sample_disruptors(distances, 2, 10, "s")) == 5
    eligible = [True, False, True, True, False, True]
    assert set(sample_disruptors(distances, 0, 5, "seed", eligible=eligible)) == {2, 3, 5}


def test_the_sampling_follows_the_softmax() -> None:
    # Requirement 0; 1 is near (D = 0.1), 2 and 3 far (D = 0.5 and 0.6). With tau = 0.03 the first draw is
    # 3 with probability 1 / (1 + e^(-10/3) + e^(-50/3)) = 0.9657.
    distances = np.array(
        [[0.0, 0.1, 0.5, 0.6], [0.1, 0.0, 0.5, 0.5], [0.5, 0.5, 0.0, 0.5], [0.6, 0.5, 0.5, 0.0]], dtype=float
    )
    first = [sample_disruptors(distances, 0, 1, f"draw-{k}")[0] for k in range(2000)]
    share = first.count(3) / len(first)
    expected = 1 / (1 + math.exp(-10 / 3) + math.exp(-50 / 3))
    assert abs(share - expected) < 0.015
    assert first.count(1) < 3  # p = 5.6e-8 per draw


def test_context_disruption_pairs_each_requirement_with_programs_of_distant_requirements() -> None:
    texts = {"a": [1.0, 0.0, 0.0], "b": [0.9, 0.1, 0.0], "c": [0.0, 1.0, 0.0], "d": [0.0, 0.0, 1.0]}

    def embed(batch: object) -> np.ndarray:
        return np.array([texts[str(text)] for text in batch])  # type: ignore[attr-defined]

    requirements = [
        RequirementPrograms(key, key, [ProgramRef(f"{key}{i}", f"code {key}{i}", "python") for i in range(2)])
        for key in texts
    ]
    requirements[3] = RequirementPrograms("d", "d", [])  # no programs: never a source
    pairs = context_disruption(requirements, embed, 2, "seed")
    assert pairs == context_disruption(requirements, embed, 2, "seed")
    for requirement in "abcd":
        mine = [pair for pair in pairs if pair.requirement_id == requirement]
        assert len(mine) == 2
        assert len({pair.source_requirement_id for pair in mine}) == 2
        assert all(pair.source_requirement_id not in (requirement, "d") for pair in mine)
        assert all(pair.score == 0 and pair.program.program_id[0] == pair.source_requirement_id for pair in mine)


# --- III-C1: farthest-point selection ----------------------------------------------------------------------------


def test_farthest_point_selection_on_a_hand_computed_example() -> None:
    # Points on a line at 0, 1, 5, 6, 10; distance |x_i - x_j|. From x = 5 (index 2):
    #   distances to the set {5}: [5, 4, 0, 1, 5] -> 0 and 4 tie at 5; the lower index, 0, is taken.
    #   min distances to {5, 0}: [-, 1, -, 1, 5] -> 4 (x = 10).
    #   min distances to {5, 0, 10}: [-, 1, -, 1, -] -> tie, 1 (x = 1); then 3.
    x = [0, 1, 5, 6, 10]
    calls: list[tuple[int, int]] = []

    def distance(i: int, j: int) -> float:
        calls.append((i, j))
        return abs(x[i] - x[j])

    assert farthest_point_selection(5, 3, distance, "seed", start=2) == [2, 0, 4]
    assert farthest_point_selection(5, 5, distance, "seed", start=2) == [2, 0, 4, 1, 3]
    assert farthest_point_selection(5, 9, distance, "seed", start=2) == [2, 0, 4, 1, 3]
    # From x = 1: [1, 0, 4, 5, 9] -> 10 (index 4); then mins [1, -, 4, 4, -] -> 5 (index 2, the lower of the tie).
    assert farthest_point_selection(5, 3, distance, "seed", start=1) == [1, 4, 2]
    # The random start is a function of the seed.
    assert farthest_point_selection(5, 2, distance, "s1") == farthest_point_selection(5, 2, distance, "s1")
    assert {farthest_point_selection(5, 1, distance, f"s{k}")[0] for k in range(40)} == set(range(5))
    assert farthest_point_selection(0, 3, distance, "s") == [] == farthest_point_selection(5, 0, distance, "s")


PROGRAMS = [
    "def f(xs):\n    return sum(xs)\n",
    "def f(xs):\n    # total\n    return sum(xs)  # same tokens as the first\n",
    "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n",
    "def f(xs):\n    total = 0\n    for x in xs:\n        total -= x\n    return total\n",
    "import functools\n\ndef f(xs):\n    return functools.reduce(lambda a, b: a + b, xs, 0)\n",
]


def test_token_distance_is_the_code_similarity_librarys_normalised_edit_distance() -> None:
    refs = [ProgramRef(str(i), code, "python") for i, code in enumerate(PROGRAMS)]
    distance = TokenDistance(refs)
    for i in range(len(PROGRAMS)):
        for j in range(len(PROGRAMS)):
            assert distance(i, j) == pytest.approx(normalized_edit_distance(PROGRAMS[i], PROGRAMS[j], "python"))
    assert distance(0, 1) == 0.0  # comments and whitespace are not tokens
    mixed = TokenDistance([ProgramRef("a", "int main(){}", "cpp"), ProgramRef("b", "x = 1", "python")])
    assert mixed(0, 1) == 1.0


def test_select_representatives_groups_by_source_and_score_and_skips_near_duplicates() -> None:
    items = [ScoredProgram(ProgramRef(str(i), code, "python"), 5, "humaneval") for i, code in enumerate(PROGRAMS)]
    items.append(ScoredProgram(ProgramRef("other", PROGRAMS[0], "python"), 2, "humaneval"))
    chosen = select_representatives(items, 4, "seed")
    assert set(chosen) == {("humaneval", 2), ("humaneval", 5)}
    ids = [item.program.program_id for item in chosen[("humaneval", 5)]]
    assert len(ids) == 4
    assert not {"0", "1"} <= set(ids)  # the two token-identical programs are never both chosen
    assert [item.program.program_id for item in chosen[("humaneval", 2)]] == ["other"]


# --- export and entropy ------------------------------------------------------------------------------------------


def test_the_export_record_has_axioms_shape_and_prefers_the_calibrated_score() -> None:
    record = export_record(
        inst="Sum a list.",
        code="def f(xs): return sum(xs)\n",
        lang="python",
        target_score=4,
        rules=["read-magic-numbers"],
        parent="att_1",
        kind="deteriorative",
    )
    assert record.score == 4 and record.calibrated_score is None
    calibrated = export_record(
        inst="Sum a list.",
        code="x",
        lang="python",
        target_score=4,
        rules=[],
        parent=None,
        kind="exemplar",
        calibrated_score=3,
    )
    assert calibrated.score == 3 and calibrated.target_score == 4
    lines = to_jsonl([record, calibrated]).splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert list(first)[:4] == ["inst", "code", "lang", "score"]
    assert {"rules", "parent", "calibrated_score"} <= set(first)
    assert json.loads(to_jsonl([{"inst": "é"}]).strip()) == {"inst": "é"}


def test_normalised_entropy_against_a_hand_computation() -> None:
    assert score_entropy([0, 1, 2, 3, 4, 5] * 3) == pytest.approx(1.0)
    assert score_entropy([5, 5, 5, 5]) == pytest.approx(0.0)
    # Half 0s, half 1s over the six scores 0..5: -2 * 0.5 * log_6(0.5) = ln 2 / ln 6 = 0.3868528.
    assert score_entropy([0, 1, 0, 1]) == pytest.approx(math.log(2) / math.log(6))
    assert score_entropy([0, 1, 0, 1]) == pytest.approx(0.3868528, abs=1e-7)
    # p = (1/2, 1/4, 1/4) over the five scores 1..5 (the Rectifiable subset): 1.5 bits / log2(5) = 0.6460148.
    assert score_entropy([1, 1, 2, 3], scale=(1, 5)) == pytest.approx(1.5 / math.log2(5))
