"""The C and C++ half of the type environment: declarations, typedefs, numeric macros and function prototypes
collected from the file, and the type of an expression."""

from __future__ import annotations

from tree_sitter import Node

from services.lib.mutation.c_family.env import COMPARISONS, Function, Type, TypeEnv
from services.lib.mutation.c_family.tree import operator_token, text, unparen

_C_NUMERIC_NAMES = frozenset(
    (
        "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t ssize_t ptrdiff_t intmax_t "
        "uintmax_t __int128"
    ).split()
)
_C_NUMERIC_WORDS = {"long", "int", "unsigned", "signed", "short", "char", "double", "float", "bool", "_Bool"}
_CONTAINERS = {"vector", "array", "deque", "valarray"}
_C_NUMERIC_CALLS = frozenset(
    (
        "abs labs llabs fabs sqrt sqrtl cbrt pow powl exp log log2 log10 floor ceil round strlen __gcd gcd "
        "lcm __builtin_popcount __builtin_popcountll __builtin_ctz __builtin_ctzll __builtin_clz "
        "__builtin_clzll popcount"
    ).split()
)
_C_NUMERIC_METHODS = {"size", "length", "count"}


def c_type(env: TypeEnv, node: Node | None) -> Type | None:
    if node is None:
        return None
    kind = node.type
    if kind in ("primitive_type", "sized_type_specifier"):
        words = text(node).split()
        if words == ["void"]:
            return ("other", 0)
        if words == ["bool"] or words == ["_Bool"]:
            return ("bool", 0)
        if "double" in words or "float" in words:
            return ("float", 0)
        if words == ["char"]:
            return ("char", 0)
        return ("long" if "long" in words or "64" in text(node) else "int", 0)
    if kind == "type_identifier":
        name = text(node)
        if name in env.aliases or name in _C_NUMERIC_NAMES:
            return ("int", 0)
        if name == "string" and env.program.cpp:
            return ("str", 0)
        return ("other", 0)
    if kind == "qualified_identifier":
        inner = node.child_by_field_name("name")
        if inner is not None and inner.type == "template_type":
            return c_type(env, inner)
        name = text(inner)
        if name in _C_NUMERIC_NAMES:
            return ("int", 0)
        if name == "string":
            return ("str", 0)
        return ("other", 0)
    if kind == "template_type":
        name = text(node.child_by_field_name("name"))
        arguments = node.child_by_field_name("arguments")
        if name in _CONTAINERS and arguments is not None and arguments.named_child_count:
            first = arguments.named_children[0]
            element = c_type(env, first.child_by_field_name("type") if first.type == "type_descriptor" else first)
            if element is None:
                return None
            return (element[0], element[1] + 1)
        return ("other", 0)
    if kind == "type_descriptor":
        declarator = node.child_by_field_name("declarator")
        if declarator is not None:
            return ("other", 0)
        return c_type(env, node.child_by_field_name("type"))
    if kind == "placeholder_type_specifier":
        return None
    return ("other", 0)


def c_declarator(node: Node | None) -> tuple[Node | None, int, str]:
    """(the declared identifier, array depth, kind) of a declarator; kind is value, pointer, reference, function
    or other."""
    depth = 0
    kind = "value"
    while node is not None:
        if node.type in ("identifier", "field_identifier"):
            return node, depth, kind
        if node.type in ("init_declarator", "parenthesized_declarator"):
            node = node.child_by_field_name("declarator") or (node.named_children[0] if node.named_children else None)
        elif node.type == "array_declarator":
            depth += 1
            node = node.child_by_field_name("declarator")
        elif node.type == "pointer_declarator":
            kind = "pointer"
            node = node.child_by_field_name("declarator")
        elif node.type == "reference_declarator":
            if kind == "value":
                kind = "reference"
            node = node.named_children[0] if node.named_children else None
        elif node.type == "function_declarator":
            return node.child_by_field_name("declarator"), 0, "function"
        else:
            return None, depth, "other"
    return None, depth, "other"


def c_declared_type(base: Type | None, depth: int, kind: str) -> Type | None:
    if kind == "pointer":
        return ("ptr", 0)
    if base is None:
        return None
    return (base[0], base[1] + depth)


def _c_function(env: TypeEnv, type_node: Node | None, declarator: Node, template: bool) -> None:
    """Record a function definition or prototype."""
    returns = c_type(env, type_node)
    name_node: Node | None = declarator
    while name_node is not None and name_node.type in ("pointer_declarator", "reference_declarator"):
        returns = ("ptr", 0) if name_node.type == "pointer_declarator" else returns
        name_node = name_node.child_by_field_name("declarator") or (
            name_node.named_children[-1] if name_node.named_children else None
        )
    if name_node is None or name_node.type != "function_declarator":
        return
    name = name_node.child_by_field_name("declarator")
    if name is None or name.type != "identifier":
        return
    function = Function(returns=returns, params=[], template=template)
    parameters = name_node.child_by_field_name("parameters")
    for parameter in parameters.named_children if parameters is not None else []:
        if parameter.type in ("parameter_declaration", "optional_parameter_declaration"):
            base = c_type(env, parameter.child_by_field_name("type"))
            _, depth, kind = c_declarator(parameter.child_by_field_name("declarator"))
            function.params.append((c_declared_type(base, depth, kind), kind if depth == 0 else "pointer"))
        elif parameter.type == "variadic_parameter" or text(parameter) == "...":
            function.variadic = True
    env.functions.setdefault(text(name), []).append(function)


def collect_c(env: TypeEnv) -> None:
    program = env.program
    for node in program.nodes:  # aliases first: declarations refer to them
        if node.type == "type_definition" and c_numeric(c_type(env, node.child_by_field_name("type"))):
            for declarator in node.children_by_field_name("declarator"):
                if declarator.type == "type_identifier":
                    env.aliases.add(text(declarator))
        elif node.type == "alias_declaration":
            target = c_type(env, node.child_by_field_name("type"))
            if target is not None and target[1] == 0 and target[0] in ("int", "long", "char", "float"):
                env.aliases.add(text(node.child_by_field_name("name")))
        elif node.type == "preproc_def":
            name, value = text(node.child_by_field_name("name")), text(node.child_by_field_name("value")).strip()
            words = value.split()
            if words and all(word in _C_NUMERIC_WORDS for word in words):
                env.aliases.add(name)
            elif _is_number(value):
                env.declare(name, ("int", 0), None)
            else:
                env.declare(name, None, None)
    for node in program.nodes:
        kind = node.type
        if kind in ("declaration", "field_declaration", "parameter_declaration", "optional_parameter_declaration"):
            base = c_type(env, node.child_by_field_name("type"))
            template = node.parent is not None and node.parent.type == "template_declaration"
            for declarator in node.children_by_field_name("declarator"):
                ident, depth, dkind = c_declarator(declarator)
                if dkind == "function" and kind == "declaration" and program.cpp and _inside_body(node):
                    dkind = "value"  # `vector<long long> a(n);` in a body declares a variable, not a function
                elif dkind == "function":
                    if kind == "declaration":
                        _c_function(env, node.child_by_field_name("type"), declarator, template)
                    continue
                if ident is not None:
                    env.declare(
                        text(ident),
                        c_declared_type(base, depth, dkind),
                        ident,
                        is_field=kind == "field_declaration",
                    )
        elif kind == "function_definition":
            function_declarator = node.child_by_field_name("declarator")
            template = node.parent is not None and node.parent.type == "template_declaration"
            if function_declarator is not None:
                _c_function(env, node.child_by_field_name("type"), function_declarator, template)
        elif kind == "for_range_loop":
            base = c_type(env, node.child_by_field_name("type"))
            ident, depth, dkind = c_declarator(node.child_by_field_name("declarator"))
            if ident is not None:
                env.declare(text(ident), c_declared_type(base, depth, dkind), ident)
        elif kind == "enumerator":
            env.declare(text(node.child_by_field_name("name")), ("int", 0), None)
        elif kind == "lambda_expression":
            lambda_declarator = node.child_by_field_name("declarator")
            parameters = lambda_declarator.child_by_field_name("parameters") if lambda_declarator is not None else None
            for parameter in parameters.named_children if parameters is not None else []:
                ident, _, _ = c_declarator(parameter.child_by_field_name("declarator"))
                if ident is not None:
                    env.declare(text(ident), c_type(env, parameter.child_by_field_name("type")), ident)


def _inside_body(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type == "compound_statement":
            return True
        parent = parent.parent
    return False


def _is_number(value: str) -> bool:
    try:
        float(value.rstrip("uUlLfF")) if "." in value or "e" in value.lower() else int(value.rstrip("uUlL"), 0)
    except ValueError:
        return False
    return True


def c_expr_type(env: TypeEnv, node: Node | None) -> Type | None:
    """The type of a C or C++ expression, or None when the environment cannot tell."""
    node = unparen(node)
    if node is None:
        return None
    kind = node.type
    if kind in ("number_literal",):
        return ("float", 0) if any(c in text(node) for c in ".eE") and not text(node).startswith("0x") else ("int", 0)
    if kind == "char_literal":
        return ("char", 0)
    if kind in ("true", "false"):
        return ("bool", 0)
    if kind in ("string_literal", "raw_string_literal", "concatenated_string"):
        return ("str", 0)
    if kind == "identifier":
        return env.lookup(text(node))
    if kind == "binary_expression":
        operator = text(operator_token(node))
        if operator in COMPARISONS:
            return ("bool", 0)
        left = c_expr_type(env, node.child_by_field_name("left"))
        right = c_expr_type(env, node.child_by_field_name("right"))
        if c_numeric(left) and c_numeric(right):
            return ("float", 0) if "float" in (left[0], right[0]) else ("int", 0)  # type: ignore[index]
        return None
    if kind == "unary_expression":
        operator = text(operator_token(node))
        if operator == "!":
            return ("bool", 0)
        inner = c_expr_type(env, node.child_by_field_name("argument"))
        return inner if c_numeric(inner) else None
    if kind == "update_expression":
        return c_expr_type(env, node.child_by_field_name("argument"))
    if kind == "subscript_expression":
        array = c_expr_type(env, node.child_by_field_name("argument"))
        if array is not None and array[1] > 0:
            return (array[0], array[1] - 1)
        return None
    if kind == "field_expression":
        if text(node.child_by_field_name("operator")) in (".", "->"):
            return env.lookup(text(node.child_by_field_name("field")), is_field=True)
        return None
    if kind == "call_expression":
        function = node.child_by_field_name("function")
        if function is None:
            return None
        if function.type == "field_expression":
            return ("int", 0) if text(function.child_by_field_name("field")) in _C_NUMERIC_METHODS else None
        name = text(function.child_by_field_name("name")) if function.type == "qualified_identifier" else text(function)
        if function.type == "identifier" and name in env.functions:
            returns = {f.returns for f in env.functions[name]}
            if len(returns) == 1 and not any(f.template for f in env.functions[name]):
                return next(iter(returns))
            return None
        if name in _C_NUMERIC_CALLS:
            return ("int", 0)
        if name in ("max", "min"):
            arguments = node.child_by_field_name("arguments")
            types = [c_expr_type(env, a) for a in arguments.named_children] if arguments is not None else []
            return ("int", 0) if types and all(c_numeric(t) for t in types) else None
        return None
    if kind == "cast_expression":
        return c_type(env, node.child_by_field_name("type"))
    if kind == "sizeof_expression":
        return ("int", 0)
    if kind == "conditional_expression":
        a = c_expr_type(env, node.child_by_field_name("consequence"))
        b = c_expr_type(env, node.child_by_field_name("alternative"))
        return a if c_numeric(a) and c_numeric(b) else None
    if kind == "assignment_expression":
        return c_expr_type(env, node.child_by_field_name("left"))
    return None


def c_numeric(kind: Type | None) -> bool:
    return kind is not None and kind[1] == 0 and kind[0] in ("int", "long", "char", "float", "bool")
