"""Paper 001 V-D's operators for C, C++ and Java, found on tree-sitter parse trees.

Semantic: TYPE_NARROW, ROR_BOUNDARY, LOOP_SHORTEN, ARITH_FLIP. Controls: POST_TO_PRE_INCREMENT, COMMENT_INSERT.
Every site is a node of the parse tree and every edit replaces that node's (or its operator token's) exact span.

Two operators can turn a compiling program into one that does not, and each only proposes a site where a small
static analysis of the file shows that it will still compile:

* ARITH_FLIP needs both operands of the `+` to be numbers: `-` is not defined on Java or C++ strings, and
  `1 + p` on a pointer has no `1 - p`. A lightweight type environment (declarations, parameters, fields, typedefs,
  numeric macros, known library calls) types the operands; an operand of unknown type is not flipped.
* TYPE_NARROW must not break what the wider type made legal. C++: no template deduction mixing the narrowed
  variable with a 64-bit value (`max(ans, x)`), no reference or pointer binding, no `auto` copy, no brace
  initialiser. Java: every value assigned to the variable must already be an `int`, and it must not flow into a
  `Long` (boxing, collections, a `Long` return). In every language, a variable whose address is taken is left
  alone: `scanf("%lld", &x)` into an `int` is a memory error, not the overflow 001 means. Names are matched
  file-wide, which only ever makes the analysis more careful (another variable of the same name counts too).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import tree_sitter_c
import tree_sitter_cpp
import tree_sitter_java
from tree_sitter import Language as Grammar
from tree_sitter import Node, Parser

from services.kernel.contracts import Language
from services.mutation.edits import Edit, Site, UnparsableSource, indentation_before, line_starts

COMMENT_TEXT = "tribunal: control comment"
_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})

_GRAMMARS = {Language.C: tree_sitter_c, Language.CPP: tree_sitter_cpp, Language.JAVA: tree_sitter_java}


@functools.cache
def _parser(language: Language) -> Parser:
    return Parser(Grammar(_GRAMMARS[language].language()))


class Program:
    """A parsed C, C++ or Java program: its tree, and character spans of its nodes."""

    def __init__(self, source: str, language: Language) -> None:
        self.source = source
        self.language = language
        self.data = source.encode("utf-8")
        tree = _parser(language).parse(self.data)
        if tree.root_node.has_error:
            raise UnparsableSource(f"the {language.display_name} program does not parse")
        self.root = tree.root_node
        self.starts = line_starts(source)
        self._ascii = len(self.data) == len(source)
        self.nodes: list[Node] = list(_preorder(self.root))
        self._identifiers: dict[str, list[Node]] | None = None

    @property
    def java(self) -> bool:
        return self.language is Language.JAVA

    @property
    def cpp(self) -> bool:
        return self.language is Language.CPP

    def offset(self, byte: int) -> int:
        """The character offset of a byte offset."""
        return byte if self._ascii else len(self.data[:byte].decode("utf-8"))

    def start(self, node: Node) -> int:
        return self.offset(node.start_byte)

    def end(self, node: Node) -> int:
        return self.offset(node.end_byte)

    def replace(self, node: Node, text: str) -> Edit:
        return Edit(self.start(node), self.end(node), text)

    def identifiers(self, name: str) -> list[Node]:
        """Every identifier node spelled `name`."""
        if self._identifiers is None:
            self._identifiers = {}
            for node in self.nodes:
                if node.type == "identifier":
                    self._identifiers.setdefault(text(node), []).append(node)
        return self._identifiers.get(name, [])


def parse(source: str, language: Language) -> Program:
    """Parse `source`; UnparsableSource if tree-sitter finds an error or a missing node."""
    return Program(source, language)


def parses(source: str, language: Language) -> bool:
    """Whether `source` parses without error (every mutant is re-parsed before it is returned)."""
    return not _parser(language).parse(source.encode("utf-8")).root_node.has_error


def _preorder(root: Node) -> Iterator[Node]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def text(node: Node | None) -> str:
    return "" if node is None or node.text is None else node.text.decode("utf-8")


def _field_of(node: Node) -> str | None:
    """The field name under which `node` hangs from its parent."""
    parent = node.parent
    if parent is None:
        return None
    for index, child in enumerate(parent.children):
        if child == node:
            return parent.field_name_for_child(index)
    return None


def _is(node: Node | None, other: Node | None) -> bool:
    return node is not None and other is not None and node == other


def _operator(node: Node) -> Node | None:
    """The operator token of a binary expression."""
    found = node.child_by_field_name("operator")
    if found is not None:
        return found
    for child in node.children:  # Java's grammar gives no field to some operators
        if not child.is_named:
            return child
    return None


def _unparen(node: Node | None) -> Node | None:
    while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


# ---------------------------------------------------------------------------------------------------------------
# Guard context (module docstring of services.mutation states the rule)

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
        slot = (parent.type, _field_of(child))
        if slot in _GUARD_SLOTS or parent.type == "switch_label":
            return True
        if parent.type in _LOOPS or parent.type in _STATEMENT_LEVEL:
            return False
        child, parent = parent, parent.parent
    return False


# ---------------------------------------------------------------------------------------------------------------
# A small type environment: enough to tell numbers from strings, and int from long in Java.

Type = tuple[str, int]  # (base, array depth); bases: int long char float bool str ptr other, and Java boxes
_UNKNOWN: Type | None = None

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

_JAVA_PRIMITIVES = {"int", "long", "char", "float", "bool"}
_JAVA_NUMERIC = {"int", "long", "char", "float", "Integer", "Long", "Character", "Double"}
_JAVA_INT_SAFE = {"int", "char", "Integer", "Character"}
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
_JAVA_PROPAGATING_MATH = {"max", "min", "abs"}
# Methods whose parameter is a type variable a collection binds to `Long`: an int argument will not box to it.
_JAVA_BOXING_METHODS = frozenset(
    (
        "add addFirst addLast offer offerFirst offerLast push put putIfAbsent set merge compute "
        "computeIfAbsent computeIfPresent replace getOrDefault of asList fill addAll"
    ).split()
)
_ARITHMETIC = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", ">>>"}
_COMPARISONS = {"<", "<=", ">", ">=", "==", "!=", "&&", "||", "instanceof"}


@dataclass
class _Function:
    returns: Type | None
    params: list[tuple[Type | None, str]]  # (type, declarator kind: value | pointer | reference | other)
    template: bool = False
    variadic: bool = False


@dataclass
class TypeEnv:
    """What the file declares: variables (file-wide, by name), struct fields, functions, numeric aliases."""

    program: Program
    variables: dict[str, set[Type | None]] = field(default_factory=dict)
    fields: dict[str, set[Type | None]] = field(default_factory=dict)
    functions: dict[str, list[_Function]] = field(default_factory=dict)
    aliases: set[str] = field(default_factory=set)
    declarations: dict[str, list[Node]] = field(default_factory=dict)  # name -> declaring identifier nodes

    def declare(self, name: str, kind: Type | None, node: Node | None, *, is_field: bool = False) -> None:
        (self.fields if is_field else self.variables).setdefault(name, set()).add(kind)
        if node is not None and not is_field:
            self.declarations.setdefault(name, []).append(node)

    def lookup(self, name: str, *, is_field: bool = False) -> Type | None:
        kinds = (self.fields if is_field else self.variables).get(name)
        if not kinds or len(kinds) != 1:
            return None
        return next(iter(kinds))


def build_env(program: Program) -> TypeEnv:
    env = TypeEnv(program)
    if program.java:
        _collect_java(env)
    else:
        _collect_c(env)
    return env


# --- C and C++ ---


def _c_type(env: TypeEnv, node: Node | None) -> Type | None:
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
            return _c_type(env, inner)
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
            element = _c_type(env, first.child_by_field_name("type") if first.type == "type_descriptor" else first)
            if element is None:
                return None
            return (element[0], element[1] + 1)
        return ("other", 0)
    if kind == "type_descriptor":
        declarator = node.child_by_field_name("declarator")
        if declarator is not None:
            return ("other", 0)
        return _c_type(env, node.child_by_field_name("type"))
    if kind == "placeholder_type_specifier":
        return None
    return ("other", 0)


def _c_declarator(node: Node | None) -> tuple[Node | None, int, str]:
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


def _c_declared_type(base: Type | None, depth: int, kind: str) -> Type | None:
    if kind == "pointer":
        return ("ptr", 0)
    if base is None:
        return None
    return (base[0], base[1] + depth)


def _c_function(env: TypeEnv, type_node: Node | None, declarator: Node, template: bool) -> None:
    """Record a function definition or prototype."""
    returns = _c_type(env, type_node)
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
    function = _Function(returns=returns, params=[], template=template)
    parameters = name_node.child_by_field_name("parameters")
    for parameter in parameters.named_children if parameters is not None else []:
        if parameter.type in ("parameter_declaration", "optional_parameter_declaration"):
            base = _c_type(env, parameter.child_by_field_name("type"))
            _, depth, kind = _c_declarator(parameter.child_by_field_name("declarator"))
            function.params.append((_c_declared_type(base, depth, kind), kind if depth == 0 else "pointer"))
        elif parameter.type == "variadic_parameter" or text(parameter) == "...":
            function.variadic = True
    env.functions.setdefault(text(name), []).append(function)


def _collect_c(env: TypeEnv) -> None:
    program = env.program
    for node in program.nodes:  # aliases first: declarations refer to them
        if node.type == "type_definition" and _c_numeric(_c_type(env, node.child_by_field_name("type"))):
            for declarator in node.children_by_field_name("declarator"):
                if declarator.type == "type_identifier":
                    env.aliases.add(text(declarator))
        elif node.type == "alias_declaration":
            target = _c_type(env, node.child_by_field_name("type"))
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
            base = _c_type(env, node.child_by_field_name("type"))
            template = node.parent is not None and node.parent.type == "template_declaration"
            for declarator in node.children_by_field_name("declarator"):
                ident, depth, dkind = _c_declarator(declarator)
                if dkind == "function" and kind == "declaration" and program.cpp and _inside_body(node):
                    dkind = "value"  # `vector<long long> a(n);` in a body declares a variable, not a function
                elif dkind == "function":
                    if kind == "declaration":
                        _c_function(env, node.child_by_field_name("type"), declarator, template)
                    continue
                if ident is not None:
                    env.declare(
                        text(ident),
                        _c_declared_type(base, depth, dkind),
                        ident,
                        is_field=kind == "field_declaration",
                    )
        elif kind == "function_definition":
            function_declarator = node.child_by_field_name("declarator")
            template = node.parent is not None and node.parent.type == "template_declaration"
            if function_declarator is not None:
                _c_function(env, node.child_by_field_name("type"), function_declarator, template)
        elif kind == "for_range_loop":
            base = _c_type(env, node.child_by_field_name("type"))
            ident, depth, dkind = _c_declarator(node.child_by_field_name("declarator"))
            if ident is not None:
                env.declare(text(ident), _c_declared_type(base, depth, dkind), ident)
        elif kind == "enumerator":
            env.declare(text(node.child_by_field_name("name")), ("int", 0), None)
        elif kind == "lambda_expression":
            lambda_declarator = node.child_by_field_name("declarator")
            parameters = lambda_declarator.child_by_field_name("parameters") if lambda_declarator is not None else None
            for parameter in parameters.named_children if parameters is not None else []:
                ident, _, _ = _c_declarator(parameter.child_by_field_name("declarator"))
                if ident is not None:
                    env.declare(text(ident), _c_type(env, parameter.child_by_field_name("type")), ident)


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
    node = _unparen(node)
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
        operator = text(_operator(node))
        if operator in _COMPARISONS:
            return ("bool", 0)
        left = c_expr_type(env, node.child_by_field_name("left"))
        right = c_expr_type(env, node.child_by_field_name("right"))
        if _c_numeric(left) and _c_numeric(right):
            return ("float", 0) if "float" in (left[0], right[0]) else ("int", 0)  # type: ignore[index]
        return None
    if kind == "unary_expression":
        operator = text(_operator(node))
        if operator == "!":
            return ("bool", 0)
        inner = c_expr_type(env, node.child_by_field_name("argument"))
        return inner if _c_numeric(inner) else None
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
            return ("int", 0) if types and all(_c_numeric(t) for t in types) else None
        return None
    if kind == "cast_expression":
        return _c_type(env, node.child_by_field_name("type"))
    if kind == "sizeof_expression":
        return ("int", 0)
    if kind == "conditional_expression":
        a = c_expr_type(env, node.child_by_field_name("consequence"))
        b = c_expr_type(env, node.child_by_field_name("alternative"))
        return a if _c_numeric(a) and _c_numeric(b) else None
    if kind == "assignment_expression":
        return c_expr_type(env, node.child_by_field_name("left"))
    return None


def _c_numeric(kind: Type | None) -> bool:
    return kind is not None and kind[1] == 0 and kind[0] in ("int", "long", "char", "float", "bool")


# --- Java ---


def _java_type(node: Node | None) -> Type | None:
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
        element = _java_type(node.child_by_field_name("element"))
        dimensions = node.child_by_field_name("dimensions")
        depth = sum(1 for c in dimensions.children if c.type == "[") if dimensions is not None else 1
        return None if element is None else (element[0], element[1] + depth)
    if kind == "void_type":
        return ("other", 0)
    return ("other", 0) if text(node) != "var" else None


def _java_dims(declarator: Node) -> int:
    dimensions = declarator.child_by_field_name("dimensions")
    return sum(1 for c in dimensions.children if c.type == "[") if dimensions is not None else 0


def _collect_java(env: TypeEnv) -> None:
    for node in env.program.nodes:
        kind = node.type
        if kind in ("local_variable_declaration", "field_declaration"):
            base = _java_type(node.child_by_field_name("type"))
            for declarator in node.children_by_field_name("declarator"):
                name = declarator.child_by_field_name("name")
                if name is not None:
                    depth = _java_dims(declarator)
                    env.declare(text(name), None if base is None else (base[0], base[1] + depth), name)
        elif kind in ("formal_parameter", "spread_parameter", "catch_formal_parameter", "resource"):
            base = _java_type(node.child_by_field_name("type"))
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
                env.declare(text(name), _java_type(node.child_by_field_name("type")), name)
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
            returns = _java_type(node.child_by_field_name("type")) if kind == "method_declaration" else ("other", 0)
            function = _Function(returns=returns, params=[])
            parameters = node.child_by_field_name("parameters")
            for parameter in parameters.named_children if parameters is not None else []:
                if parameter.type == "formal_parameter":
                    function.params.append((_java_type(parameter.child_by_field_name("type")), "value"))
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
    node = _unparen(node)
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
        operator = text(_operator(node))
        if operator in _COMPARISONS:
            return ("bool", 0)
        left = java_expr_type(env, node.child_by_field_name("left"), as_int)
        right = java_expr_type(env, node.child_by_field_name("right"), as_int)
        if operator == "+" and (left == ("str", 0) or right == ("str", 0)):
            return ("str", 0)
        if operator in ("&", "|", "^") and left == right == ("bool", 0):
            return ("bool", 0)
        if not (_java_numeric(left) and _java_numeric(right)):
            return None
        if operator in ("<<", ">>", ">>>"):
            return _java_promote(left, left)
        return _java_promote(left, right)
    if kind == "unary_expression":
        operator = text(_operator(node))
        inner = java_expr_type(env, node.child_by_field_name("operand"), as_int)
        if operator == "!":
            return ("bool", 0)
        return _java_promote(inner, inner) if _java_numeric(inner) else None
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
        if owner is not None and text(owner) == "Math" and name in _JAVA_PROPAGATING_MATH:
            types = [java_expr_type(env, a, as_int) for a in args]
            if types and all(_java_numeric(t) for t in types):
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
        return _java_type(node.child_by_field_name("type"))
    if kind == "ternary_expression":
        a = java_expr_type(env, node.child_by_field_name("consequence"), as_int)
        b = java_expr_type(env, node.child_by_field_name("alternative"), as_int)
        if _java_numeric(a) and _java_numeric(b):
            return _java_promote(a, b)
        return a if a == b else None
    if kind == "assignment_expression":
        return java_expr_type(env, node.child_by_field_name("left"), as_int)
    return None


def _java_numeric(kind: Type | None) -> bool:
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


# ---------------------------------------------------------------------------------------------------------------
# The operators


def find_sites(program: Program, operators: Iterable[str]) -> dict[str, list[Site]]:
    """Every site of every operator named in `operators` (which must apply to C, C++ or Java)."""
    env = build_env(program)
    finders = {
        "TYPE_NARROW": _type_narrow,
        "ROR_BOUNDARY": _ror_boundary,
        "LOOP_SHORTEN": _loop_shorten,
        "ARITH_FLIP": _arith_flip,
        "POST_TO_PRE_INCREMENT": _post_to_pre,
        "COMMENT_INSERT": _comment_insert,
    }
    return {name: list(finders[name](program, env)) for name in operators}


# --- TYPE_NARROW ---

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


def _type_narrow(program: Program, env: TypeEnv) -> Iterator[Site]:
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
        ident, depth, kind = _c_declarator(declarator)
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
            or not _is(parent.child_by_field_name("argument"), node)
        ):
            return False
        node = parent
    while True:
        parent = node.parent
        if parent is None:
            return True
        kind = parent.type
        slot = _field_of(node)
        if kind == "parenthesized_expression":
            node = parent
            continue
        if kind == "binary_expression":
            operator = text(_operator(parent))
            if operator in ("<<", ">>"):
                if slot == "left":
                    node = parent
                    continue
                return True  # `cin >> x`, `cout << x`, `1 << x`
            if operator in _ARITHMETIC:
                node = parent
                continue
            return True
        if kind == "unary_expression":
            if text(_operator(parent)) in ("-", "+", "~"):
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
        if name is None or _java_dims(declarator):
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
        left = _unparen(node.child_by_field_name("left"))
        target = left
        if left is not None and left.type == "field_access" and text(left.child_by_field_name("object")) == "this":
            target = left.child_by_field_name("field")
        if target is None or target.type != "identifier" or text(target) not in as_int:
            continue
        if text(_operator(node)) == "=" and not _java_int_safe(env, node.child_by_field_name("right"), as_int):
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
    return kind is not None and kind[1] == 0 and kind[0] in _JAVA_INT_SAFE


def _java_use_safe(program: Program, env: TypeEnv, use: Node, as_int: frozenset[str]) -> bool:
    """Whether this use of a narrowed Java variable still compiles: it must not flow into a Long."""
    node = use
    parent = node.parent
    if parent is not None and parent.type == "field_access" and _is(parent.child_by_field_name("field"), node):
        if text(parent.child_by_field_name("object")) != "this":
            return False  # another object's field of the same name: not ours to reason about
        node = parent
    while True:
        parent = node.parent
        if parent is None:
            return True
        kind = parent.type
        slot = _field_of(node)
        if kind == "parenthesized_expression":
            node = parent
            continue
        if kind == "binary_expression":
            operator = text(_operator(parent))
            if operator == "+" and java_expr_type(env, parent, as_int) == ("str", 0):
                return True
            if operator in ("<<", ">>", ">>>") and slot == "right":
                return True
            if operator in _ARITHMETIC:
                node = parent
                continue
            return True
        if kind == "unary_expression":
            if text(_operator(parent)) in ("-", "+", "~"):
                node = parent
                continue
            return True
        if kind == "ternary_expression":
            if slot == "condition":
                return True
            node = parent
            continue
        if kind == "cast_expression":
            cast = _java_type(parent.child_by_field_name("type"))
            return cast is not None and cast[1] == 0 and cast[0] in _JAVA_PRIMITIVES
        if kind == "variable_declarator":
            if slot != "value":
                return True
            declared = _java_type(parent.parent.child_by_field_name("type")) if parent.parent is not None else None
            return declared is not None and declared[1] == 0 and declared[0] in _JAVA_PRIMITIVES
        if kind == "assignment_expression":
            if slot != "right" or text(_operator(parent)) != "=":
                return True
            target = java_expr_type(env, parent.child_by_field_name("left"), as_int)
            return target is not None and target[1] == 0 and target[0] in _JAVA_PRIMITIVES
        if kind == "argument_list":
            call = parent.parent
            if call is None:
                return False
            if call.type == "method_invocation":
                name = text(call.child_by_field_name("name"))
                owner = call.child_by_field_name("object")
                if owner is not None and text(owner) == "Math" and name in _JAVA_PROPAGATING_MATH:
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
            returns = _java_type(method.child_by_field_name("type"))
            return returns is not None and returns[1] == 0 and returns[0] in _JAVA_PRIMITIVES
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
        if kind is None or kind[1] != 0 or kind[0] not in _JAVA_PRIMITIVES:
            return False
    return True


# --- ROR_BOUNDARY, LOOP_SHORTEN, ARITH_FLIP ---

_BOUNDARY = {"<=": "<", "<": "<=", ">=": ">", ">": ">="}


def _ror_boundary(program: Program, env: TypeEnv) -> Iterator[Site]:
    for node in program.nodes:
        if node.type != "binary_expression":
            continue
        operator = _operator(node)
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
        condition = _unparen(node.child_by_field_name("condition"))
        if condition is None or not counters:
            continue
        for bound in _conjuncts(condition):
            operator = text(_operator(bound))
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
    return node.type == "binary_expression" and text(_operator(node)) in ("+", "-", "*", "/", "%")


def _conjuncts(condition: Node) -> Iterator[Node]:
    if condition.type != "binary_expression":
        return
    operator = text(_operator(condition))
    if operator == "&&":
        for side in ("left", "right"):
            inner = _unparen(condition.child_by_field_name(side))
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
    return any(n.type == "identifier" and text(n) in names for n in _preorder(node))


def _arith_flip(program: Program, env: TypeEnv) -> Iterator[Site]:
    for node in program.nodes:
        if node.type != "binary_expression":
            continue
        operator = _operator(node)
        if operator is None or text(operator) != "+":
            continue
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if program.java:
            numeric = _java_numeric(java_expr_type(env, left)) and _java_numeric(java_expr_type(env, right))
        else:
            numeric = _c_numeric(c_expr_type(env, left)) and _c_numeric(c_expr_type(env, right))
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
        statements = [c for c in body.named_children if c.type not in _COMMENTS] if body is not None else []
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


def leaves_without_comments(source: str, language: Language) -> list[tuple[str, str]]:
    """The program's tokens, comments left out: a comment insertion must leave them unchanged."""
    program = Program(source, language)
    return [(node.type, text(node)) for node in program.nodes if node.child_count == 0 and node.type not in _COMMENTS]
