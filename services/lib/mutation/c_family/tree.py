"""The parse tree of a C, C++ or Java program (tree-sitter), and the node helpers every analysis uses."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import tree_sitter_c
import tree_sitter_cpp
import tree_sitter_java
from tree_sitter import Language as Grammar
from tree_sitter import Node, Parser

from services.kernel.contracts import Language
from services.lib.mutation.edits import Edit, UnparsableSource, line_starts

COMMENT_TEXT = "tribunal: control comment"
COMMENTS = frozenset({"comment", "line_comment", "block_comment"})

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
        self.nodes: list[Node] = list(preorder(self.root))
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


def preorder(root: Node) -> Iterator[Node]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def text(node: Node | None) -> str:
    return "" if node is None or node.text is None else node.text.decode("utf-8")


def field_of(node: Node) -> str | None:
    """The field name under which `node` hangs from its parent."""
    parent = node.parent
    if parent is None:
        return None
    for index, child in enumerate(parent.children):
        if child == node:
            return parent.field_name_for_child(index)
    return None


def same_node(node: Node | None, other: Node | None) -> bool:
    return node is not None and other is not None and node == other


def operator_token(node: Node) -> Node | None:
    """The operator token of a binary expression."""
    found = node.child_by_field_name("operator")
    if found is not None:
        return found
    for child in node.children:  # Java's grammar gives no field to some operators
        if not child.is_named:
            return child
    return None


def unparen(node: Node | None) -> Node | None:
    while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def leaves_without_comments(source: str, language: Language) -> list[tuple[str, str]]:
    """The program's tokens, comments left out: a comment insertion must leave them unchanged."""
    program = Program(source, language)
    return [(node.type, text(node)) for node in program.nodes if node.child_count == 0 and node.type not in COMMENTS]
