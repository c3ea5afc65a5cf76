"""A small type environment: enough to tell numbers from strings, and int from long in Java. The C and Java
inferencers (c_types.py, java_types.py) fill it from the file's declarations and type expressions with it."""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

from services.lib.mutation.c_family.tree import Program

Type = tuple[str, int]  # (base, array depth); bases: int long char float bool str ptr other, and Java boxes
ARITHMETIC = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", ">>>"}
COMPARISONS = {"<", "<=", ">", ">=", "==", "!=", "&&", "||", "instanceof"}


@dataclass
class Function:
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
    functions: dict[str, list[Function]] = field(default_factory=dict)
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
