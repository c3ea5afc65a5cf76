"""The operators' site finders: ROR_BOUNDARY, LOOP_SHORTEN and ARITH_FLIP, the two controls
(POST_TO_PRE_INCREMENT, COMMENT_INSERT), and `find_sites`, which runs them (TYPE_NARROW is in narrowing.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tree_sitter import Node

from services.lib.mutation.c_family.c_types import c_expr_type, c_numeric, collect_c
from services.lib.mutation.c_family.env import TypeEnv
from services.lib.mutation.c_family.guards import guard_context
from services.lib.mutation.c_family.java_types import collect_java, java_expr_type, java_numeric
from services.lib.mutation.c_family.narrowing import type_narrow
from services.lib.mutation.c_family.tree import COMMENT_TEXT, COMMENTS, Program, operator_token, preorder, text, unparen
from services.lib.mutation.edits import Edit, Site, indentation_before


def find_sites(program: Program, operators: Iterable[str]) -> dict[str, list[Site]]:
    """Every site of every operator named in `operators` (which must apply to C, C++ or Java)."""
    env = build_env(program)
    finders = {
        "TYPE_NARROW": type_narrow,
        "ROR_BOUNDARY": _ror_boundary,
        "LOOP_SHORTEN": _loop_shorten,
        "ARITH_FLIP": _arith_flip,
        "POST_TO_PRE_INCREMENT": _post_to_pre,
        "COMMENT_INSERT": _comment_insert,
    }
    return {name: list(finders[name](program, env)) for name in operators}


def build_env(program: Program) -> TypeEnv:
    env = TypeEnv(program)
    if program.java:
        collect_java(env)
    else:
        collect_c(env)
    return env


# --- ROR_BOUNDARY, LOOP_SHORTEN, ARITH_FLIP ---

_BOUNDARY = {"<=": "<", "<": "<=", ">=": ">", ">": ">="}


def _ror_boundary(program: Program, env: TypeEnv) -> Iterator[Site]:
    for node in program.nodes:
        if node.type != "binary_expression":
            continue
        operator = operator_token(node)
        if operator is None or text(operator) not in _BOUNDARY:
            continue
        yield Site("ROR_BOUNDARY", (program.replace(operator, _BOUNDARY[text(operator)]),), guard_context(node))


_SIMPLE_BOUNDS = frozenset(
    (
        "identifier number_literal char_literal call_expression subscript_expression field_expression "
        "parenthesized_expression qualified_identifier sizeof_expression method_invocation field_access "
        "array_access decimal_integer_literal hex_integer_literal character_literal"
    ).split()
)


def _loop_shorten(program: Program, env: TypeEnv) -> Iterator[Site]:
    for node in program.nodes:
        if node.type != "for_statement":
            continue
        counters = _loop_counters(node)
        condition = unparen(node.child_by_field_name("condition"))
        if condition is None or not counters:
            continue
        for bound in _conjuncts(condition):
            operator = text(operator_token(bound))
            left, right = bound.child_by_field_name("left"), bound.child_by_field_name("right")
            if left is None or right is None:
                continue
            if operator in ("<", "<=") and _mentions(left, counters) and not _mentions(right, counters):
                target = right
            elif operator in (">", ">=") and _mentions(right, counters) and not _mentions(left, counters):
                target = left
            else:
                continue
            if _simple_bound(target):
                edits: tuple[Edit, ...] = (Edit(program.end(target), program.end(target), " - 1"),)
            else:
                edits = (Edit(program.start(target), program.start(target), "("),)
                edits += (Edit(program.end(target), program.end(target), ") - 1"),)
            yield Site("LOOP_SHORTEN", edits, guard_context(bound))


def _simple_bound(node: Node) -> bool:
    if node.type in _SIMPLE_BOUNDS:
        return True
    return node.type == "binary_expression" and text(operator_token(node)) in ("+", "-", "*", "/", "%")


def _conjuncts(condition: Node) -> Iterator[Node]:
    if condition.type != "binary_expression":
        return
    operator = text(operator_token(condition))
    if operator == "&&":
        for side in ("left", "right"):
            inner = unparen(condition.child_by_field_name(side))
            if inner is not None:
                yield from _conjuncts(inner)
    elif operator in ("<", "<=", ">", ">="):
        yield condition


def _loop_counters(loop: Node) -> set[str]:
    """The variables a for-loop's update clause steps."""
    counters: set[str] = set()
    updates = loop.children_by_field_name("update")
    stack = list(updates)
    while stack:
        node = stack.pop()
        if node.type == "update_expression":
            argument = node.child_by_field_name("argument") or (node.named_children[0] if node.named_children else None)
            if argument is not None and argument.type == "identifier":
                counters.add(text(argument))
        elif node.type == "assignment_expression":
            left = node.child_by_field_name("left")
            if left is not None and left.type == "identifier":
                counters.add(text(left))
        elif node.type in ("comma_expression", "parenthesized_expression"):
            stack.extend(node.named_children)
    return counters


def _mentions(node: Node, names: set[str]) -> bool:
    return any(n.type == "identifier" and text(n) in names for n in preorder(node))


def _arith_flip(program: Program, env: TypeEnv) -> Iterator[Site]:
    for node in program.nodes:
        if node.type != "binary_expression":
            continue
        operator = operator_token(node)
        if operator is None or text(operator) != "+":
            continue
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if program.java:
            numeric = java_numeric(java_expr_type(env, left)) and java_numeric(java_expr_type(env, right))
        else:
            numeric = c_numeric(c_expr_type(env, left)) and c_numeric(c_expr_type(env, right))
        if numeric:
            yield Site("ARITH_FLIP", (program.replace(operator, "-"),), guard_context(node))


# --- controls ---


def _post_to_pre(program: Program, env: TypeEnv) -> Iterator[Site]:
    for node in program.nodes:
        if node.type != "for_statement":
            continue
        stack = list(node.children_by_field_name("update"))
        while stack:
            update = stack.pop()
            if update.type == "comma_expression":
                stack.extend(update.named_children)
            elif update.type == "update_expression" and update.children and update.children[0].is_named:
                argument, operator = update.children[0], update.children[-1]
                if text(operator) in ("++", "--"):
                    edit = program.replace(update, text(operator) + text(argument))
                    yield Site("POST_TO_PRE_INCREMENT", (edit,), False)


def _comment_insert(program: Program, env: TypeEnv) -> Iterator[Site]:
    """Before the first statement of the first function body (in file order); at the top of the file if no
    function has a statement."""
    bodies = ("function_definition",) if not program.java else ("method_declaration", "constructor_declaration")
    for node in program.nodes:
        if node.type not in bodies:
            continue
        body = node.child_by_field_name("body")
        statements = [c for c in body.named_children if c.type not in COMMENTS] if body is not None else []
        if not statements:
            continue
        first = program.start(statements[0])
        indent = indentation_before(program.source, program.starts, first)
        if indent is not None:
            inserted = f"// {COMMENT_TEXT}\n{indent}"
        else:
            inserted = f"/* {COMMENT_TEXT} */ "
        yield Site("COMMENT_INSERT", (Edit(first, first, inserted),), False)
        return
    yield Site("COMMENT_INSERT", (Edit(0, 0, f"// {COMMENT_TEXT}\n"),), False)
