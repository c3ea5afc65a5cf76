"""TYPE_NARROW: a 64-bit variable declared 32-bit, proposed only where a static analysis of the file shows that the
program still compiles and means the same thing apart from width (the package docstring gives the rules)."""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from services.lib.mutation.c_family.c_types import c_declarator
from services.lib.mutation.c_family.env import ARITHMETIC, TypeEnv
from services.lib.mutation.c_family.guards import guard_context
from services.lib.mutation.c_family.java_types import (
    JAVA_INT_SAFE,
    JAVA_PRIMITIVES,
    JAVA_PROPAGATING_MATH,
    java_dims,
    java_expr_type,
    java_type,
)
from services.lib.mutation.c_family.tree import Program, field_of, operator_token, same_node, text, unparen
from services.lib.mutation.edits import Site

_C_MIXED_SAFE_CALLS = {  # library functions that take a narrowed int where they took a long long
    "printf",
    "fprintf",
    "sprintf",
    "snprintf",
    "putchar",
    "abs",
    "labs",
    "llabs",
    "fabs",
    "sqrt",
    "sqrtl",
    "cbrt",
    "pow",
    "powl",
    "exp",
    "log",
    "log2",
    "log10",
    "floor",
    "ceil",
    "round",
    "to_string",
    "malloc",
    "calloc",
    "memset",
    "exit",
    "__builtin_popcount",
    "__builtin_popcountll",
    "__builtin_ctz",
    "__builtin_ctzll",
    "__builtin_clz",
    "__builtin_clzll",
}
# Methods whose parameter is a type variable a collection binds to `Long`: an int argument will not box to it.
_JAVA_BOXING_METHODS = frozenset(
    (
        "add addFirst addLast offer offerFirst offerLast push put putIfAbsent set merge compute "
        "computeIfAbsent computeIfPresent replace getOrDefault of asList fill addAll"
    ).split()
)

_NARROW_C = {
    ("long",): "int",
    ("long", "int"): "int",
    ("long", "long"): "int",
    ("long", "long", "int"): "int",
    ("signed", "long"): "int",
    ("signed", "long", "int"): "int",
    ("signed", "long", "long"): "int",
    ("signed", "long", "long", "int"): "int",
    ("unsigned", "long"): "unsigned int",
    ("unsigned", "long", "int"): "unsigned int",
    ("unsigned", "long", "long"): "unsigned int",
    ("unsigned", "long", "long", "int"): "unsigned int",
    ("int64_t",): "int",
    ("uint64_t",): "unsigned int",
    ("std::int64_t",): "int",
    ("std::uint64_t",): "unsigned int",
}


def _narrowed_c_type(type_node: Node | None) -> str | None:
    if type_node is None or type_node.type not in ("sized_type_specifier", "primitive_type", "qualified_identifier"):
        return None
    spelled = text(type_node)
    key = (spelled.replace(" ", ""),) if type_node.type == "qualified_identifier" else tuple(spelled.split())
    return _NARROW_C.get(key)


def type_narrow(program: Program, env: TypeEnv) -> Iterator[Site]:
    for node in program.nodes:
        if program.java:
            if node.type not in ("local_variable_declaration", "field_declaration"):
                continue
            type_node = node.child_by_field_name("type")
            if type_node is None or type_node.type != "integral_type" or text(type_node) != "long":
                continue
            if _java_narrow_safe(program, env, node):
                yield Site("TYPE_NARROW", (program.replace(type_node, "int"),), guard_context(type_node))
        else:
            if node.type != "declaration":
                continue
            type_node = node.child_by_field_name("type")
            target = _narrowed_c_type(type_node)
            if target is None or type_node is None:
                continue
            if _c_narrow_safe(program, env, node):
                yield Site("TYPE_NARROW", (program.replace(type_node, target),), guard_context(type_node))


def _c_narrow_safe(program: Program, env: TypeEnv, declaration: Node) -> bool:
    if any(child.type == "storage_class_specifier" and text(child) == "extern" for child in declaration.children):
        return False
    declarators = declaration.children_by_field_name("declarator")
    if not declarators:
        return False
    for declarator in declarators:
        ident, depth, kind = c_declarator(declarator)
        if ident is None or kind != "value":
            return False
        if declarator.type == "init_declarator":
            value = declarator.child_by_field_name("value")
            if program.cpp and value is not None and value.type == "initializer_list" and depth == 0:
                return False  # brace initialisation rejects narrowing conversions
        # Declarations of the same name elsewhere keep their own type: they are not uses.
        declaring = {n.start_byte for n in env.declarations.get(text(ident), [])} | {ident.start_byte}
        for use in program.identifiers(text(ident)):
            if use.start_byte in declaring:
                continue
            if not _c_use_safe(program, env, use, depth):
                return False
    return True


def _c_use_safe(program: Program, env: TypeEnv, use: Node, depth: int) -> bool:
    """Whether this use of a narrowed C/C++ variable still compiles and means the same thing apart from width."""
    node = use
    for _ in range(depth):  # an array: only its elements may be used, never the array itself
        parent = node.parent
        if (
            parent is None
            or parent.type != "subscript_expression"
            or not same_node(parent.child_by_field_name("argument"), node)
        ):
            return False
        node = parent
    while True:
        parent = node.parent
        if parent is None:
            return True
        kind = parent.type
        slot = field_of(node)
        if kind == "parenthesized_expression":
            node = parent
            continue
        if kind == "binary_expression":
            operator = text(operator_token(parent))
            if operator in ("<<", ">>"):
                if slot == "left":
                    node = parent
                    continue
                return True  # `cin >> x`, `cout << x`, `1 << x`
            if operator in ARITHMETIC:
                node = parent
                continue
            return True
        if kind == "unary_expression":
            if text(operator_token(parent)) in ("-", "+", "~"):
                node = parent
                continue
            return True
        if kind == "conditional_expression":
            if slot == "condition":
                return True
            node = parent
            continue
        if kind == "comma_expression":
            if slot == "right":
                node = parent
                continue
            return True
        if kind == "initializer_list" and program.cpp:
            node = parent  # `min({a, x})` deduces one type from the whole list, as `max(a, x)` does
            continue
        if kind == "pointer_expression":
            return False  # &x: scanf into a narrowed variable is a memory error, a pointer type a mismatch
        if kind == "argument_list":
            return _c_call_accepts(program, env, parent, node)
        if kind == "init_declarator":
            declarator = parent.child_by_field_name("declarator")
            if declarator is not None and declarator.type == "reference_declarator":
                return False
            declaration = parent.parent
            type_node = declaration.child_by_field_name("type") if declaration is not None else None
            return not (program.cpp and type_node is not None and type_node.type == "placeholder_type_specifier")
        if kind == "return_statement":
            return not (program.cpp and _inside(parent, "lambda_expression", stop="function_definition"))
        if kind in ("decltype", "template_argument_list", "reference_declarator"):
            return False
        return True


def _inside(node: Node, kind: str, stop: str) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type == kind:
            return True
        if parent.type == stop:
            return False
        parent = parent.parent
    return False


def _c_call_accepts(program: Program, env: TypeEnv, arguments: Node, argument: Node) -> bool:
    """Whether a call still compiles with a narrowed int in place of a 64-bit argument (C: always, by prototype
    conversion; C++: not for templates that deduce one type from two arguments, or references)."""
    if not program.cpp:
        return True
    call = arguments.parent
    if call is None or call.type != "call_expression":
        return False  # a constructor call or an initialiser: conversions are not certain
    function = call.child_by_field_name("function")
    if function is None:
        return False
    if function.type == "field_expression":
        return text(function.child_by_field_name("field")) != "swap"
    if function.type == "qualified_identifier":
        return text(function.child_by_field_name("name")) in _C_MIXED_SAFE_CALLS
    if function.type != "identifier":
        return False
    name = text(function)
    if name in env.functions:
        index = [i for i, child in enumerate(arguments.named_children) if child == argument]
        if not index:
            return False
        for candidate in env.functions[name]:
            if candidate.template:
                return False
            if index[0] >= len(candidate.params):
                return False
            _, kind = candidate.params[index[0]]
            if kind != "value":
                return False
        return True
    return name in _C_MIXED_SAFE_CALLS


def _java_narrow_safe(program: Program, env: TypeEnv, declaration: Node) -> bool:
    declarators = declaration.children_by_field_name("declarator")
    names: list[Node] = []
    for declarator in declarators:
        name = declarator.child_by_field_name("name")
        if name is None or java_dims(declarator):
            return False
        names.append(name)
    as_int = frozenset(text(n) for n in names)
    for name in names:  # the variable must be declared nowhere else: its uses are then its own
        if len(env.declarations.get(text(name), [])) != 1:
            return False
    for declarator in declarators:
        value = declarator.child_by_field_name("value")
        if value is not None and not _java_int_safe(env, value, as_int):
            return False
    for node in program.nodes:
        if node.type != "assignment_expression":
            continue
        left = unparen(node.child_by_field_name("left"))
        target = left
        if left is not None and left.type == "field_access" and text(left.child_by_field_name("object")) == "this":
            target = left.child_by_field_name("field")
        if target is None or target.type != "identifier" or text(target) not in as_int:
            continue
        if text(operator_token(node)) == "=" and not _java_int_safe(env, node.child_by_field_name("right"), as_int):
            return False
    for narrowed in as_int:
        for use in program.identifiers(narrowed):
            if any(use == n for n in names):
                continue
            if not _java_use_safe(program, env, use, as_int):
                return False
    return True


def _java_int_safe(env: TypeEnv, node: Node | None, as_int: frozenset[str]) -> bool:
    kind = java_expr_type(env, node, as_int)
    return kind is not None and kind[1] == 0 and kind[0] in JAVA_INT_SAFE


def _java_use_safe(program: Program, env: TypeEnv, use: Node, as_int: frozenset[str]) -> bool:
    """Whether this use of a narrowed Java variable still compiles: it must not flow into a Long."""
    node = use
    parent = node.parent
    if parent is not None and parent.type == "field_access" and same_node(parent.child_by_field_name("field"), node):
        if text(parent.child_by_field_name("object")) != "this":
            return False  # another object's field of the same name: not ours to reason about
        node = parent
    while True:
        parent = node.parent
        if parent is None:
            return True
        kind = parent.type
        slot = field_of(node)
        if kind == "parenthesized_expression":
            node = parent
            continue
        if kind == "binary_expression":
            operator = text(operator_token(parent))
            if operator == "+" and java_expr_type(env, parent, as_int) == ("str", 0):
                return True
            if operator in ("<<", ">>", ">>>") and slot == "right":
                return True
            if operator in ARITHMETIC:
                node = parent
                continue
            return True
        if kind == "unary_expression":
            if text(operator_token(parent)) in ("-", "+", "~"):
                node = parent
                continue
            return True
        if kind == "ternary_expression":
            if slot == "condition":
                return True
            node = parent
            continue
        if kind == "cast_expression":
            cast = java_type(parent.child_by_field_name("type"))
            return cast is not None and cast[1] == 0 and cast[0] in JAVA_PRIMITIVES
        if kind == "variable_declarator":
            if slot != "value":
                return True
            declared = java_type(parent.parent.child_by_field_name("type")) if parent.parent is not None else None
            return declared is not None and declared[1] == 0 and declared[0] in JAVA_PRIMITIVES
        if kind == "assignment_expression":
            if slot != "right" or text(operator_token(parent)) != "=":
                return True
            target = java_expr_type(env, parent.child_by_field_name("left"), as_int)
            return target is not None and target[1] == 0 and target[0] in JAVA_PRIMITIVES
        if kind == "argument_list":
            call = parent.parent
            if call is None:
                return False
            if call.type == "method_invocation":
                name = text(call.child_by_field_name("name"))
                owner = call.child_by_field_name("object")
                if owner is not None and text(owner) == "Math" and name in JAVA_PROPAGATING_MATH:
                    node = call
                    continue
                if name in _JAVA_BOXING_METHODS:
                    return False
                if owner is None or text(owner) == "this":
                    return _java_params_primitive(env, name, parent, node)
                return True
            if call.type == "object_creation_expression":
                return _java_params_primitive(env, "new " + text(call.child_by_field_name("type")), parent, node)
            return False
        if kind == "return_statement":
            method = parent.parent
            while method is not None and method.type not in ("method_declaration", "lambda_expression"):
                method = method.parent
            if method is None or method.type != "method_declaration":
                return False
            returns = java_type(method.child_by_field_name("type"))
            return returns is not None and returns[1] == 0 and returns[0] in JAVA_PRIMITIVES
        if kind in ("array_initializer", "lambda_expression", "explicit_constructor_invocation"):
            return False
        return True


def _java_params_primitive(env: TypeEnv, name: str, arguments: Node, argument: Node) -> bool:
    """Whether every method or constructor `name` of the file takes a primitive at this argument's position (a
    method not declared in the file is a library method, which boxes nothing we know of)."""
    candidates = env.functions.get(name)
    if candidates is None:
        return not name.startswith("new ")
    index = next((i for i, child in enumerate(arguments.named_children) if child == argument), None)
    if index is None:
        return False
    for candidate in candidates:
        if candidate.template or candidate.variadic or len(candidate.params) != arguments.named_child_count:
            continue
        kind, _ = candidate.params[index]
        if kind is None or kind[1] != 0 or kind[0] not in JAVA_PRIMITIVES:
            return False
    return True
