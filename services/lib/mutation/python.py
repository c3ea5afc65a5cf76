"""MutPy's operators for Python, and matched controls, found on Python's own parse tree (`ast`).

Semantic: AOR, ROR, COI, LCR, CRP, ZIL, SIR, BCR, RVR. Controls: RENAME_LOCAL, COMMENT_INSERT, DOCSTRING_CHANGE.
An edit replaces the exact span of an `ast` node, or of an operator token between two nodes (found with
`tokenize`, which sees exactly the tokens the parser saw), so comments and formatting outside it are kept.

Controls are checked, not trusted: a control mutant is only returned if its syntax tree is the parent's (comment),
the parent's up to the renamed name (rename), or the parent's up to docstrings (docstring).
"""

from __future__ import annotations

import ast
import bisect
import builtins
import io
import keyword
import math
import token
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from services.lib.mutation.edits import Edit, Site, UnparsableSource, indentation_before, line_starts

COMMENT_TEXT = "tribunal: control comment"
DOCSTRING_NOTE = "Tribunal control edit."
DOCSTRING_ADDED = '"""Tribunal control docstring."""'

_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.Lt: "<",
    ast.Gt: ">",
    ast.LtE: "<=",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}
_AOR = {
    ast.Add: ("-",),
    ast.Sub: ("+",),
    ast.Mult: ("/", "//", "**"),
    ast.Div: ("*", "//"),
    ast.FloorDiv: ("/", "*"),
    ast.Mod: ("*",),
    ast.Pow: ("*",),
}
_ROR = {
    ast.Lt: (">", "<="),
    ast.Gt: ("<", ">="),
    ast.LtE: (">=", "<"),
    ast.GtE: ("<=", ">"),
    ast.Eq: ("!=",),
    ast.NotEq: ("==",),
}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp)
_SCOPES_ALL = (*_SCOPES, ast.GeneratorExp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_INTROSPECTION = frozenset({"locals", "vars", "eval", "exec", "dir"})
_FRAME_ACCESS = frozenset({"_getframe", "currentframe", "f_locals", "getouterframes"})
_DOC_READERS = frozenset({"__doc__", "getdoc", "doctest", "getsource", "getsourcelines", "getcomments"})


@dataclass(frozen=True)
class _Token:
    type: int
    string: str
    start: int
    end: int


class PyProgram:
    """A parsed Python program: its syntax tree, its tokens, parents, and character spans of its nodes."""

    def __init__(self, source: str) -> None:
        self.source = source
        try:
            self.tree = ast.parse(source)
            raw = list(tokenize.generate_tokens(io.StringIO(source, newline="").readline))
        except (SyntaxError, ValueError, tokenize.TokenError) as error:
            raise UnparsableSource(f"the Python program does not parse: {error}") from error
        self.starts = line_starts(source)
        self.tokens = [
            _Token(t.type, t.string, self._at(t.start[0], t.start[1]), self._at(t.end[0], t.end[1]))
            for t in raw
            if t.type not in (token.ENDMARKER,)
        ]
        self._token_starts = [t.start for t in self.tokens]
        self.names = {t.string for t in self.tokens if t.type == token.NAME}
        self._dumps: dict[str, str] = {}
        self.parents: dict[int, tuple[ast.AST, str]] = {}
        for node in ast.walk(self.tree):
            for name, value in ast.iter_fields(node):
                for child in value if isinstance(value, list) else [value]:
                    if isinstance(child, ast.AST):
                        self.parents[id(child)] = (node, name)

    def _at(self, row: int, column: int) -> int:
        return self.starts[row - 1] + column if row - 1 < len(self.starts) else len(self.source)

    def _line(self, lineno: int) -> str:
        start = self.starts[lineno - 1]
        end = self.starts[lineno] if lineno < len(self.starts) else len(self.source)
        return self.source[start:end]

    def offset(self, lineno: int, col_offset: int) -> int:
        """The character offset of an ast position (whose column counts UTF-8 bytes)."""
        line = self._line(lineno)
        column = col_offset if line.isascii() else len(line.encode("utf-8")[:col_offset].decode("utf-8"))
        return self.starts[lineno - 1] + column

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        return self.source[self.start(node) : self.end(node)]

    def replace(self, node: ast.AST, text: str) -> Edit:
        return Edit(self.start(node), self.end(node), text)

    def tokens_between(self, start: int, end: int) -> Iterator[_Token]:
        """The tokens lying wholly within [start, end)."""
        for tok in self.tokens[bisect.bisect_left(self._token_starts, start) :]:
            if tok.start >= end:
                return
            if tok.end <= end:
                yield tok

    def decorator_at(self, decorator: ast.AST) -> int:
        """The offset of the `@` that introduces a decorator expression."""
        start = self.start(decorator)
        ats = [t.start for t in self.tokens if t.type == token.OP and t.string == "@" and t.end <= start]
        return ats[-1] if ats else start

    def token_between(self, start: int, end: int, string: str, kind: int = token.OP) -> _Token | None:
        """The first token spelled `string` in [start, end), e.g. the operator between two operands."""
        for tok in self.tokens_between(start, end):
            if tok.type == kind and tok.string == string:
                return tok
        return None

    def dump(self, *, docstrings: bool = True) -> str:
        """The syntax tree as `ast.dump` writes it (without positions), with or without functions' docstrings."""
        key = "dump" if docstrings else "dump-no-docstrings"
        if key not in self._dumps:
            self._dumps[key] = ast.dump(self.tree) if docstrings else _without_docstrings(ast.parse(self.source))
        return self._dumps[key]

    def parent(self, node: ast.AST) -> tuple[ast.AST | None, str]:
        found = self.parents.get(id(node))
        return (None, "") if found is None else found


def parse(source: str) -> PyProgram:
    """Parse `source`; UnparsableSource on a syntax error."""
    return PyProgram(source)


def guard_context(program: PyProgram, node: ast.AST) -> bool:
    """True when `node` sits in the condition of a branch: an if/elif test, a conditional expression's test, a
    comprehension's `if` filter, or a match case guard. False in a loop header (while test, for iterable) and in
    ordinary computation. The innermost enclosing slot decides."""
    if isinstance(node, ast.stmt):
        return False
    child = node
    while True:
        parent, slot = program.parent(child)
        if parent is None:
            return False
        if isinstance(parent, ast.If | ast.IfExp) and slot == "test":
            return True
        if isinstance(parent, ast.comprehension):
            return slot == "ifs"
        if isinstance(parent, ast.match_case) and slot == "guard":
            return True
        if isinstance(parent, ast.stmt | ast.Lambda):
            return False
        child = parent


def find_sites(program: PyProgram, operators: Iterable[str]) -> dict[str, list[Site]]:
    """Every site of every Python operator named in `operators`."""
    finders = {
        "AOR": _aor,
        "ROR": _ror,
        "COI": _coi,
        "LCR": _lcr,
        "CRP": _crp,
        "ZIL": _zil,
        "SIR": _sir,
        "BCR": _bcr,
        "RVR": _rvr,
        "RENAME_LOCAL": _rename_local,
        "COMMENT_INSERT": _comment_insert,
        "DOCSTRING_CHANGE": _docstring_change,
    }
    return {name: [_separated(program.source, site) for site in finders[name](program)] for name in operators}


def _separated(source: str, site: Site) -> Site:
    """The site with a space added where its text would otherwise run into a neighbouring name or keyword
    (`if(a) and b:` negated must read `if not ((a) and b):`, not `ifnot (...)`)."""
    edits = []
    for edit in site.edits:
        replacement = edit.text
        before = source[edit.start - 1] if edit.start > 0 else ""
        after = source[edit.end] if edit.end < len(source) else ""
        if replacement and _word(replacement[0]) and _word(before):
            replacement = " " + replacement
        if replacement and _word(replacement[-1]) and _word(after):
            replacement += " "
        edits.append(Edit(edit.start, edit.end, replacement))
    return Site(site.operator, tuple(edits), site.guard_context)


def _word(char: str) -> bool:
    return bool(char) and (char.isalnum() or char == "_")


# --- semantic operators ---


def _aor(program: PyProgram) -> Iterator[Site]:
    for node in ast.walk(program.tree):
        if isinstance(node, ast.BinOp) and type(node.op) in _AOR:
            if isinstance(node.op, ast.Mod) and (
                isinstance(node.left, ast.JoinedStr)
                or (isinstance(node.left, ast.Constant) and isinstance(node.left.value, str | bytes))
            ):
                continue  # string formatting, as MutPy leaves it
            found = program.token_between(program.end(node.left), program.start(node.right), _SYMBOLS[type(node.op)])
            if found is None:
                continue
            for replacement in _AOR[type(node.op)]:
                edit = Edit(found.start, found.end, replacement)
                yield Site("AOR", (edit,), guard_context(program, node))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            start = program.start(node)
            symbol = "-" if isinstance(node.op, ast.USub) else "+"
            if program.source[start] == symbol:
                edit = Edit(start, start + 1, "+" if symbol == "-" else "-")
                yield Site("AOR", (edit,), guard_context(program, node))


def _compare_operators(program: PyProgram, node: ast.Compare) -> Iterator[tuple[ast.cmpop, list[_Token]]]:
    """Each operator of a comparison chain with its token(s) (`not in` and `is not` are two)."""
    operands = [node.left, *node.comparators]
    for index, operator in enumerate(node.ops):
        gap = list(program.tokens_between(program.end(operands[index]), program.start(operands[index + 1])))
        if isinstance(operator, ast.NotIn | ast.IsNot):
            names = [t for t in gap if t.type == token.NAME]
            if len(names) == 2:
                yield operator, names
        elif isinstance(operator, ast.In | ast.Is):
            names = [t for t in gap if t.type == token.NAME]
            if len(names) == 1:
                yield operator, names
        else:
            found = [t for t in gap if t.type == token.OP and t.string == _SYMBOLS[type(operator)]]
            if len(found) == 1:
                yield operator, found


def _ror(program: PyProgram) -> Iterator[Site]:
    for node in ast.walk(program.tree):
        if not isinstance(node, ast.Compare):
            continue
        for operator, tokens in _compare_operators(program, node):
            for replacement in _ROR.get(type(operator), ()):
                edit = Edit(tokens[0].start, tokens[-1].end, replacement)
                yield Site("ROR", (edit,), guard_context(program, node))


def _coi(program: PyProgram) -> Iterator[Site]:
    for node in ast.walk(program.tree):
        if isinstance(node, ast.If | ast.While):
            start, end = program.start(node.test), program.end(node.test)
            edits = (Edit(start, start, "not ("), Edit(end, end, ")"))
            yield Site("COI", edits, guard_context(program, node.test))
        elif isinstance(node, ast.Compare):
            for operator, tokens in _compare_operators(program, node):
                if isinstance(operator, ast.In | ast.NotIn):
                    replacement = "not in" if isinstance(operator, ast.In) else "in"
                    edit = Edit(tokens[0].start, tokens[-1].end, replacement)
                    yield Site("COI", (edit,), guard_context(program, node))


def _lcr(program: PyProgram) -> Iterator[Site]:
    for node in ast.walk(program.tree):
        if not isinstance(node, ast.BoolOp):
            continue
        spelled, replacement = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        edits = []
        for left, right in zip(node.values, node.values[1:], strict=False):
            found = program.token_between(program.end(left), program.start(right), spelled, token.NAME)
            if found is None:
                break
            edits.append(Edit(found.start, found.end, replacement))
        else:
            yield Site("LCR", tuple(edits), guard_context(program, node))


def _is_docstring(program: PyProgram, node: ast.AST) -> bool:
    statement, _ = program.parent(node)
    if not isinstance(statement, ast.Expr):
        return False
    owner, slot = program.parent(statement)
    body = getattr(owner, "body", None)
    return (
        isinstance(owner, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and slot == "body"
        and isinstance(body, list)
        and bool(body)
        and body[0] is statement
    )


def _crp(program: PyProgram) -> Iterator[Site]:
    for node in ast.walk(program.tree):
        if not isinstance(node, ast.Constant):
            continue
        parent, _ = program.parent(node)
        if isinstance(parent, ast.JoinedStr | ast.FormattedValue):
            continue
        value = node.value
        guard = guard_context(program, node)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            bumped = value + 1
            if isinstance(bumped, float) and not math.isfinite(bumped):
                continue
            yield Site("CRP", (program.replace(node, repr(bumped)),), guard)
        elif isinstance(value, str) and not _is_docstring(program, node):
            yield Site("CRP", (program.replace(node, repr("python" if value == "mutpy" else "mutpy")),), guard)
            if value:
                yield Site("CRP", (program.replace(node, "''"),), guard)


def _zil(program: PyProgram) -> Iterator[Site]:
    for node in ast.walk(program.tree):
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            first = program.start(node.body[0])
            indent = indentation_before(program.source, program.starts, first)
            inserted = f"break\n{indent}" if indent is not None else "break; "
            yield Site("ZIL", (Edit(first, first, inserted),), False)


def _sir(program: PyProgram) -> Iterator[Site]:
    for node in ast.walk(program.tree):
        if isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper, node.step):
                if bound is not None:
                    yield Site("SIR", (program.replace(bound, ""),), guard_context(program, node))


def _bcr(program: PyProgram) -> Iterator[Site]:
    for node in ast.walk(program.tree):
        if isinstance(node, ast.Break):
            yield Site("BCR", (program.replace(node, "continue"),), False)
        elif isinstance(node, ast.Continue):
            yield Site("BCR", (program.replace(node, "break"),), False)


def _rvr(program: PyProgram) -> Iterator[Site]:
    for node in ast.walk(program.tree):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Constant):
            if value.value is None:
                continue
            if isinstance(value.value, bool):
                replacement = "False" if value.value else "True"
            elif isinstance(value.value, int | float):
                replacement = "0" if value.value != 0 else "1"
            else:
                replacement = "None"
        else:
            replacement = "None"
        yield Site("RVR", (program.replace(value, replacement),), False)


# --- controls ---


def _functions(program: PyProgram) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    found = [node for node in ast.walk(program.tree) if isinstance(node, _FUNCTIONS)]
    return sorted(found, key=lambda f: (f.lineno, f.col_offset))


def _comment_insert(program: PyProgram) -> Iterator[Site]:
    """Before the first statement of the first function body (in file order); before that function's first line
    when its body shares the `def` line; before the first statement of the module when there is no function."""
    inserted = f"# {COMMENT_TEXT}\n"
    functions = _functions(program)
    candidates: list[ast.AST] = []
    if functions:
        first = functions[0]
        head = first.decorator_list[0] if first.decorator_list else first
        candidates = [first.body[0], head]
    elif program.tree.body:
        candidates = [program.tree.body[0]]
    for node in candidates:
        offset = program.start(node)
        if isinstance(node, _FUNCTIONS) and node.decorator_list:
            offset = program.decorator_at(node.decorator_list[0])
        indent = indentation_before(program.source, program.starts, offset)
        if indent is not None:
            yield Site("COMMENT_INSERT", (Edit(offset, offset, inserted + indent),), False)
            return
    yield Site("COMMENT_INSERT", (Edit(0, 0, inserted),), False)


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of a function's body that belong to its own scope (nested scopes are not entered)."""
    stack: list[ast.AST] = list(reversed(function.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES_ALL):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _nested_span(program: PyProgram, node: ast.AST) -> tuple[int, int]:
    start = program.start(node)
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        start = min(start, program.decorator_at(decorators[0]))
    return start, program.end(node)


def _fresh(program: PyProgram, name: str) -> str:
    taken = program.names | set(dir(builtins)) | set(keyword.kwlist) | set(keyword.softkwlist)
    index = 1
    while f"{name}_{index}" in taken:
        index += 1
    return f"{name}_{index}"


def _rename_local(program: PyProgram) -> Iterator[Site]:
    if program.names & _FRAME_ACCESS:
        return
    for function in _functions(program):
        every = list(ast.walk(function))
        if any(isinstance(n, ast.Name) and n.id in _INTROSPECTION for n in every):
            continue  # locals(), eval(), ... can see every local by name
        own = list(_own_nodes(function))
        declared = {name for n in own if isinstance(n, ast.Global | ast.Nonlocal) for name in n.names}
        arguments = function.args
        parameters = {
            a.arg
            for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
            if a is not None
        }
        names = [n for n in own if isinstance(n, ast.Name)]
        stored = {n.id for n in names if isinstance(n.ctx, ast.Store | ast.Del)}
        nested_tokens: set[str] = set()
        formatted: set[str] = set()
        for node in own:
            if isinstance(node, _SCOPES_ALL):
                start, end = _nested_span(program, node)
                nested_tokens |= {t.string for t in program.tokens_between(start, end) if t.type == token.NAME}
            if isinstance(node, ast.JoinedStr):
                start, end = program.start(node), program.end(node)
                formatted |= {t.string for t in program.tokens_between(start, end) if t.type == token.NAME}
                formatted |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        body_start, body_end = program.start(function.body[0]), program.end(function.body[-1])
        body_tokens = [t.string for t in program.tokens_between(body_start, body_end) if t.type == token.NAME]
        for name in sorted(stored - parameters - declared - nested_tokens - formatted):
            if name.startswith("__"):
                continue
            occurrences = [n for n in names if n.id == name]
            # Every token spelled `name` in the body must be one of these occurrences, a keyword argument's name or
            # an attribute: anything else binds it another way (except-as, import, match capture, global).
            others = sum(1 for n in own if isinstance(n, ast.keyword) and n.arg == name)
            others += sum(1 for n in own if isinstance(n, ast.Attribute) and n.attr == name)
            if body_tokens.count(name) != len(occurrences) + others:
                continue
            fresh = _fresh(program, name)
            edits = tuple(sorted(program.replace(n, fresh) for n in occurrences))
            yield Site("RENAME_LOCAL", edits, False)


def _docstring_change(program: PyProgram) -> Iterator[Site]:
    if program.names & _DOC_READERS:
        return  # the program may read its own docstrings
    for function in _functions(program):
        first = function.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            edit = _docstring_edit(program, first.value)
            if edit is not None:
                yield Site("DOCSTRING_CHANGE", (edit,), False)
            continue
        offset = program.start(first)
        indent = indentation_before(program.source, program.starts, offset)
        if indent is not None:
            yield Site("DOCSTRING_CHANGE", (Edit(offset, offset, f"{DOCSTRING_ADDED}\n{indent}"),), False)


def _docstring_edit(program: PyProgram, node: ast.Constant) -> Edit | None:
    """A sentence added to a docstring literal: as a paragraph of its own before the closing quotes when they stand
    on their own line (a blank line first, so a doctest's expected output before it stays as it was), else just
    before the closing quotes."""
    strings = [t for t in program.tokens_between(program.start(node), program.end(node)) if t.type == token.STRING]
    if len(strings) != 1:
        return None  # implicit concatenation: leave it alone
    literal = strings[0]
    body = literal.string.lstrip("rRuU")
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    closing = literal.end - len(quote)
    last_line_start = program.source.rfind("\n", literal.start, closing) + 1
    tail = program.source[last_line_start:closing]
    if len(quote) == 3 and last_line_start > literal.start and tail.strip(" \t") == "":
        return Edit(last_line_start, last_line_start, f"\n{tail}{DOCSTRING_NOTE}\n")
    return Edit(closing, closing, f" {DOCSTRING_NOTE}")


# --- checks ---


def verify(program: PyProgram, site: Site, mutant: str) -> bool:
    """Whether a mutant parses, and a control mutant means exactly what its parent means."""
    try:
        tree = ast.parse(mutant)
    except (SyntaxError, ValueError):
        return False
    if site.operator == "COMMENT_INSERT":
        return ast.dump(tree) == program.dump()
    if site.operator == "RENAME_LOCAL":
        fresh = site.edits[0].text.strip()
        original = program.source[site.edits[0].start : site.edits[0].end]
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == fresh:
                node.id = original
        return ast.dump(tree) == program.dump()
    if site.operator == "DOCSTRING_CHANGE":
        return _without_docstrings(tree) == program.dump(docstrings=False)
    return True


def _without_docstrings(tree: ast.Module) -> str:
    for node in ast.walk(tree):
        if isinstance(node, _FUNCTIONS) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)
