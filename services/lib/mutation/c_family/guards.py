"""Guard context: whether an edit sits in the condition of a branch (the rule is stated in the docstring of
services.lib.mutation)."""

from __future__ import annotations

from tree_sitter import Node

from services.lib.mutation.c_family.tree import field_of

_GUARD_SLOTS = {
    ("if_statement", "condition"),
    ("conditional_expression", "condition"),
    ("ternary_expression", "condition"),
    ("case_statement", "value"),
    ("switch_statement", "condition"),
    ("switch_expression", "condition"),
}
_LOOPS = {"for_statement", "while_statement", "do_statement", "for_range_loop", "enhanced_for_statement"}
_STATEMENT_LEVEL = frozenset(
    (
        "compound_statement block translation_unit program function_definition method_declaration "
        "constructor_declaration expression_statement return_statement declaration local_variable_declaration "
        "field_declaration lambda_expression class_body"
    ).split()
)


def guard_context(node: Node) -> bool:
    """True when `node` sits in the condition of a branch (if/else-if, ternary, switch subject or case label),
    False in a loop header or ordinary computation. The innermost enclosing slot decides."""
    child = node
    parent = node.parent
    while parent is not None:
        slot = (parent.type, field_of(child))
        if slot in _GUARD_SLOTS or parent.type == "switch_label":
            return True
        if parent.type in _LOOPS or parent.type in _STATEMENT_LEVEL:
            return False
        child, parent = parent, parent.parent
    return False
