"""The rule catalogue (paper 000, III-B1 and Table I): the data file, its validation and its listing."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import ValidationError

from services.lib.mutation.axiom_rules import (
    CATEGORY_CEILING,
    TABLE_I_COUNTS,
    Category,
    catalogue,
    load_rules,
    parse_rules,
    post_perturbation_score,
)


def test_the_rule_file_has_at_least_45_rules_in_all_five_categories_of_table_i() -> None:
    rules = load_rules()
    assert len(rules.rules) >= 45
    counts = Counter(rule.category for rule in rules.rules)
    assert set(counts) == set(Category)
    # The paper's own split (Table I): 5, 10, 9, 11, 10.
    assert counts == TABLE_I_COUNTS
    assert sum(TABLE_I_COUNTS.values()) == 45


def test_every_ceiling_is_its_categorys_and_every_id_unique() -> None:
    rules = load_rules()
    assert CATEGORY_CEILING == {
        Category.ALTERNATIVES: 5,
        Category.READABILITY: 4,
        Category.DESIGN: 3,
        Category.MINOR_BUGS: 2,
        Category.MAJOR_DEFECTS: 1,
    }
    for rule in rules.rules:
        assert rule.ceiling == CATEGORY_CEILING[rule.category]
        assert 1 <= rule.ceiling <= 5
        assert rule.functional == (rule.ceiling <= 2)
    assert len({rule.id for rule in rules.rules}) == len(rules.rules)
    for ceiling in range(1, 6):
        assert rules.with_ceiling(ceiling)
        assert all(rule.ceiling >= ceiling for rule in rules.at_least(ceiling))


def test_table_is_own_examples_are_in_the_set() -> None:
    rules = load_rules()
    paper = {rule.id for rule in rules.rules if rule.source == "table-1"}
    # Three examples per ceiling in Table I.
    assert Counter(rules.get(rule_id).ceiling for rule_id in paper) == {5: 3, 4: 3, 3: 3, 2: 3, 1: 3}
    assert "recursion" in rules.get("defect-remove-base-case").instruction


def _toml(*rules: str, version: int = 1) -> str:
    return f"version = {version}\n" + "\n".join(rules)


def _rule(rule_id: str, category: str, ceiling: int) -> str:
    return (
        f'[[rule]]\nid = "{rule_id}"\ncategory = "{category}"\nceiling = {ceiling}\n'
        'instruction = "Do something well defined to the program, as described."\n'
    )


def _valid_rules() -> list[str]:
    rules = []
    for category, ceiling in CATEGORY_CEILING.items():
        rules += [_rule(f"{category.value.replace('_', '-')}-{i}", category.value, ceiling) for i in range(9)]
    return rules


def test_validation_refuses_a_wrong_ceiling_a_duplicate_a_missing_category_and_too_few_rules() -> None:
    assert len(parse_rules(_toml(*_valid_rules())).rules) == 45
    with pytest.raises(ValidationError, match="has ceiling 2, not 3"):
        parse_rules(_toml(*_valid_rules(), _rule("bad-ceiling", "minor_bugs", 3)))
    with pytest.raises(ValidationError, match="duplicate rule ids"):
        parse_rules(_toml(*_valid_rules(), _rule("design-0", "design", 3)))
    without_design = [rule for rule in _valid_rules() if '"design"' not in rule]
    with pytest.raises(ValidationError, match="no rule in categories: design"):
        parse_rules(_toml(*without_design, *[_rule(f"extra-{i}", "readability", 4) for i in range(9)]))
    with pytest.raises(ValidationError, match="at least 45"):
        parse_rules(_toml(*_valid_rules()[:-1]))
    with pytest.raises(ValidationError):
        parse_rules(_toml(*_valid_rules(), _rule("no-such-category", "style", 4)))


def test_the_catalogue_lists_every_rule_with_its_ceiling_highest_first() -> None:
    listed = catalogue()
    assert len(listed) == len(load_rules().rules)
    assert [item["ceiling"] for item in listed] == sorted((item["ceiling"] for item in listed), reverse=True)
    first = listed[0]
    assert set(first) >= {"name", "kind", "category", "ceiling", "instruction", "functional", "source"}
    assert first["kind"] == "axiom_rule"
    # Ceilings 1-2 break behaviour (the semantic arm), 3-5 keep it (control), as to_new_mutant assigns arms.
    assert {item["arm"] for item in listed if item["ceiling"] <= 2} == {"semantic"}
    assert {item["arm"] for item in listed if item["ceiling"] >= 3} == {"control"}


def test_every_rule_has_a_short_code_and_a_sequence_fits_the_operator_column() -> None:
    rules = load_rules()
    codes = [rules.code(rule.id) for rule in rules.rules]
    assert codes == [f"R{i:02d}" for i in range(1, len(rules.rules) + 1)]
    assert {item["code"] for item in catalogue()} == set(codes)
    longest = sorted(rules.rules, key=lambda rule: -len(rule.id))[:3]
    assert rules.operator([rule.id for rule in longest]) == "axiom:" + "+".join(rules.code(r.id) for r in longest)
    assert len(rules.operator([rule.id for rule in rules.rules[:3]])) <= 100
    with pytest.raises(KeyError):
        rules.code("no-such-rule")


def test_the_post_perturbation_score_is_the_minimum_of_the_parent_and_every_ceiling() -> None:
    assert post_perturbation_score(5, [2]) == 2  # III-B1's example
    assert post_perturbation_score(5, [4, 3, 5]) == 3
    assert post_perturbation_score(3, [4]) == 3
    assert post_perturbation_score(5, []) == 5
    with pytest.raises(ValueError):
        post_perturbation_score(6, [1])
