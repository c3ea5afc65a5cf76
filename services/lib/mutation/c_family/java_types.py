"""The Java half of the type environment: declarations, parameters and methods collected from the file, and the
type of an expression (with Java's boxes and binary numeric promotion)."""

from __future__ import annotations

from tree_sitter import Node

from services.lib.mutation.c_family.env import COMPARISONS, Function, Type, TypeEnv
from services.lib.mutation.c_family.tree import operator_token, text, unparen

JAVA_PRIMITIVES = {"int", "long", "char", "float", "bool"}
_JAVA_NUMERIC = {"int", "long", "char", "float", "Integer", "Long", "Character", "Double"}
JAVA_INT_SAFE = {"int", "char", "Integer", "Character"}
_JAVA_BOXES = {
    "Integer": "Integer",
    "Short": "Integer",
    "Byte": "Integer",
    "Long": "Long",
    "Character": "Character",
    "Double": "Double",
    "Float": "Double",
}
_JAVA_INT_METHODS = frozenset(
    (
        "nextInt parseInt length size indexOf lastIndexOf compareTo compare bitCount signum "
        "numberOfTrailingZeros numberOfLeadingZeros intValue ordinal read"
    ).split()
)
_JAVA_LONG_METHODS = {"nextLong", "parseLong", "longValue", "currentTimeMillis", "nanoTime"}
_JAVA_FLOAT_METHODS = {"nextDouble", "parseDouble", "doubleValue", "sqrt", "pow", "random", "log", "exp", "cbrt"}
JAVA_PROPAGATING_MATH = {"max", "min", "abs"}


def java_type(node: Node | None) -> Type | None:
    if node is None:
        return None
    kind = node.type
    if kind == "integral_type":
        word = text(node)
        return ("long" if word == "long" else "char" if word == "char" else "int", 0)
    if kind == "floating_point_type":
        return ("float", 0)
    if kind == "boolean_type":
        return ("bool", 0)
    if kind == "type_identifier":
        name = text(node)
        if name == "String":
            return ("str", 0)
        return (_JAVA_BOXES.get(name, "other"), 0)
    if kind == "array_type":
        element = java_type(node.child_by_field_name("element"))
        dimensions = node.child_by_field_name("dimensions")
        depth = sum(1 for c in dimensions.children if c.type == "[") if dimensions is not None else 1
        return None if element is None else (element[0], element[1] + depth)
    if kind == "void_type":
        return ("other", 0)
    return ("other", 0) if text(node) != "var" else None


def java_dims(declarator: Node) -> int:
    dimensions = declarator.child_by_field_name("dimensions")
    return sum(1 for c in dimensions.children if c.type == "[") if dimensions is not None else 0


def collect_java(env: TypeEnv) -> None:
    for node in env.program.nodes:
        kind = node.type
        if kind in ("local_variable_declaration", "field_declaration"):
            base = java_type(node.child_by_field_name("type"))
            for declarator in node.children_by_field_name("declarator"):
                name = declarator.child_by_field_name("name")
                if name is not None:
                    depth = java_dims(declarator)
                    env.declare(text(name), None if base is None else (base[0], base[1] + depth), name)
        elif kind in ("formal_parameter", "spread_parameter", "catch_formal_parameter", "resource"):
            base = java_type(node.child_by_field_name("type"))
            name = node.child_by_field_name("name")
            if kind == "spread_parameter":
                spread = next((c for c in node.named_children if c.type == "variable_declarator"), None)
                name = spread.child_by_field_name("name") if spread is not None else None
                base = None if base is None else (base[0], base[1] + 1)
            if name is not None:
                env.declare(text(name), base if kind != "catch_formal_parameter" else ("other", 0), name)
        elif kind == "enhanced_for_statement":
            name = node.child_by_field_name("name")
            if name is not None:
                env.declare(text(name), java_type(node.child_by_field_name("type")), name)
        elif kind == "lambda_expression":
            parameters = node.child_by_field_name("parameters")
            if parameters is not None and parameters.type == "identifier":
                env.declare(text(parameters), None, parameters)
            elif parameters is not None:
                for parameter in parameters.named_children:
                    if parameter.type == "identifier":
                        env.declare(text(parameter), None, parameter)
        elif kind in ("method_declaration", "constructor_declaration"):
            method = text(node.child_by_field_name("name"))
            returns = java_type(node.child_by_field_name("type")) if kind == "method_declaration" else ("other", 0)
            function = Function(returns=returns, params=[])
            parameters = node.child_by_field_name("parameters")
            for parameter in parameters.named_children if parameters is not None else []:
                if parameter.type == "formal_parameter":
                    function.params.append((java_type(parameter.child_by_field_name("type")), "value"))
                elif parameter.type == "spread_parameter":
                    function.variadic = True
            if node.child_by_field_name("type_parameters") is not None:
                function.template = True
            env.functions.setdefault(("new " if kind == "constructor_declaration" else "") + method, []).append(
                function
            )


def java_expr_type(env: TypeEnv, node: Node | None, as_int: frozenset[str] = frozenset()) -> Type | None:
    """The type of a Java expression, or None when the environment cannot tell; names in `as_int` are typed int
    (the variables being narrowed)."""
    node = unparen(node)
    if node is None:
        return None
    kind = node.type
    if kind in ("decimal_integer_literal", "hex_integer_literal", "octal_integer_literal", "binary_integer_literal"):
        return ("long" if text(node)[-1] in "lL" else "int", 0)
    if kind in ("decimal_floating_point_literal", "hex_floating_point_literal"):
        return ("float", 0)
    if kind == "character_literal":
        return ("char", 0)
    if kind in ("string_literal", "text_block"):
        return ("str", 0)
    if kind in ("true", "false"):
        return ("bool", 0)
    if kind == "identifier":
        name = text(node)
        return ("int", 0) if name in as_int else env.lookup(name)
    if kind == "binary_expression":
        operator = text(operator_token(node))
        if operator in COMPARISONS:
            return ("bool", 0)
        left = java_expr_type(env, node.child_by_field_name("left"), as_int)
        right = java_expr_type(env, node.child_by_field_name("right"), as_int)
        if operator == "+" and (left == ("str", 0) or right == ("str", 0)):
            return ("str", 0)
        if operator in ("&", "|", "^") and left == right == ("bool", 0):
            return ("bool", 0)
        if not (java_numeric(left) and java_numeric(right)):
            return None
        if operator in ("<<", ">>", ">>>"):
            return _java_promote(left, left)
        return _java_promote(left, right)
    if kind == "unary_expression":
        operator = text(operator_token(node))
        inner = java_expr_type(env, node.child_by_field_name("operand"), as_int)
        if operator == "!":
            return ("bool", 0)
        return _java_promote(inner, inner) if java_numeric(inner) else None
    if kind == "update_expression":
        return java_expr_type(env, node.named_children[0] if node.named_children else None, as_int)
    if kind == "array_access":
        array = java_expr_type(env, node.child_by_field_name("array"), as_int)
        if array is not None and array[1] > 0:
            return (array[0], array[1] - 1)
        return None
    if kind == "field_access":
        name = text(node.child_by_field_name("field"))
        if name == "length":
            return ("int", 0)
        if text(node.child_by_field_name("object")) == "this":
            return ("int", 0) if name in as_int else env.lookup(name)
        if name in ("MAX_VALUE", "MIN_VALUE"):
            box = text(node.child_by_field_name("object"))
            return {"Integer": ("int", 0), "Long": ("long", 0)}.get(box)
        return None
    if kind == "method_invocation":
        name = text(node.child_by_field_name("name"))
        owner = node.child_by_field_name("object")
        arguments = node.child_by_field_name("arguments")
        args = arguments.named_children if arguments is not None else []
        if owner is None and name in env.functions:
            returns = {f.returns for f in env.functions[name] if len(f.params) == len(args)}
            return next(iter(returns)) if len(returns) == 1 else None
        if owner is not None and text(owner) == "Math" and name in JAVA_PROPAGATING_MATH:
            types = [java_expr_type(env, a, as_int) for a in args]
            if types and all(java_numeric(t) for t in types):
                result = types[0]
                for other in types[1:]:
                    result = _java_promote(result, other)
                return _java_promote(result, result)
            return None
        if name in _JAVA_INT_METHODS:
            return ("int", 0)
        if name == "charAt":
            return ("char", 0)
        if name in _JAVA_LONG_METHODS:
            return ("long", 0)
        if name in _JAVA_FLOAT_METHODS:
            return ("float", 0)
        return None
    if kind == "cast_expression":
        return java_type(node.child_by_field_name("type"))
    if kind == "ternary_expression":
        a = java_expr_type(env, node.child_by_field_name("consequence"), as_int)
        b = java_expr_type(env, node.child_by_field_name("alternative"), as_int)
        if java_numeric(a) and java_numeric(b):
            return _java_promote(a, b)
        return a if a == b else None
    if kind == "assignment_expression":
        return java_expr_type(env, node.child_by_field_name("left"), as_int)
    return None


def java_numeric(kind: Type | None) -> bool:
    return kind is not None and kind[1] == 0 and kind[0] in _JAVA_NUMERIC


def _java_promote(a: Type | None, b: Type | None) -> Type | None:
    """Binary numeric promotion (JLS 5.6.2) of two numeric types."""
    if a is None or b is None:
        return None
    unboxed = {"Integer": "int", "Character": "int", "Long": "long", "Double": "float", "char": "int"}
    bases = {unboxed.get(a[0], a[0]), unboxed.get(b[0], b[0])}
    if "float" in bases:
        return ("float", 0)
    if "long" in bases:
        return ("long", 0)
    return ("int", 0)
