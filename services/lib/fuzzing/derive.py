"""Deriving an input spec when a problem has none, from its reference's type hints and its tests' literals.

Nothing is ever executed: the reference and the test code are parsed with `ast`, and only literal arguments are
read (`literals.py`). Hints give the types, literals give the ranges, "mutated around" what was observed
(`observed.py`; docs/input-spec.md, "Derivation"), and in function mode:

- lists observed sorted (at least two lists, one of 3+ elements, all non-decreasing): ``sorted``;
- an int argument equal to the length of another argument in every call (2+ calls, different lengths):
  a ``length_of`` relation.

Stdio inputs: a line template is inferred from the test inputs (`derive_stdin.py`).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from services.kernel.contracts import Mode, TestCase
from services.lib.fuzzing.derive_stdin import derive_stdin
from services.lib.fuzzing.literals import docstring_calls, literal_calls
from services.lib.fuzzing.observed import DerivedSpec, float_range, int_type, len_range, str_type, value_kind
from services.lib.fuzzing.relations import Compare, LengthOf
from services.lib.fuzzing.spec import FunctionSpec
from services.lib.fuzzing.values import (
    Arg,
    BoolType,
    DictType,
    FloatType,
    IntType,
    ListType,
    NoneType,
    OneOfType,
    SetType,
    SpecError,
    StrType,
    TupleType,
    spec_error_from,
)


def derive_spec(
    *, mode: Mode, reference_source: str | None, entry_point: str | None, tests: Sequence[TestCase]
) -> DerivedSpec:
    """An input spec for a problem that has none; `SpecError` saying what to send when nothing is derivable.
    Whatever the reference and the tests hold, nothing else escapes: a spec the derived ranges do not fit, or
    input too large or too complex to read, is a `SpecError` with a message of our own."""
    try:
        if Mode(mode) is Mode.STDIO:
            inputs = [t.input for t in tests if isinstance(t.input, str)]
            if not inputs:
                raise SpecError("cannot derive an input spec: no stdio test input to learn from; send an input_spec")
            return derive_stdin(inputs)
        return _derive_function(reference_source, entry_point, tests)
    except SpecError:
        raise
    except ValidationError as err:
        raise SpecError(f"the derived spec is not valid ({spec_error_from(err)}); send an input_spec") from None
    except (ValueError, TypeError, RecursionError, MemoryError):
        raise SpecError("cannot derive an input spec from this reference and these tests; send an input_spec") from None


# ---- type hints ---------------------------------------------------------------------------------------------------

# A hint is a small tuple: ("int",), ("float",), ("str",), ("bool",), ("none",), ("list", elem), ("set", elem),
# ("dict", key, value), ("tuple", [items]), ("tuple_var", elem), ("one_of", [options]); None where unknown.
Hint = tuple[Any, ...] | None

_SCALAR_HINTS = {"int": ("int",), "float": ("float",), "str": ("str",), "bool": ("bool",), "None": ("none",)}
_LIST_NAMES = {"list", "List", "Sequence", "MutableSequence", "Iterable", "Collection", "Iterator", "Deque", "deque"}
_SET_NAMES = {"set", "Set", "frozenset", "FrozenSet", "AbstractSet", "MutableSet"}
_DICT_NAMES = {"dict", "Dict", "Mapping", "MutableMapping", "OrderedDict", "DefaultDict", "defaultdict"}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def hint_of(node: ast.expr | None, depth: int = 0) -> Hint:
    """The hint an annotation node says, or None."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Constant):
        if node.value is None:
            return ("none",)
        if isinstance(node.value, str):
            try:
                return hint_of(ast.parse(node.value, mode="eval").body, depth + 1)
            except (SyntaxError, ValueError, RecursionError, MemoryError):  # MemoryError: "too complex to parse"
                return None
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _one_of([hint_of(node.left, depth + 1), hint_of(node.right, depth + 1)])
    name = _name(node)
    if name is not None:
        if name in _SCALAR_HINTS:
            return _SCALAR_HINTS[name]
        if name in _LIST_NAMES:
            return ("list", None)
        if name in _SET_NAMES:
            return ("set", None)
        if name in _DICT_NAMES:
            return ("dict", None, None)
        if name in ("tuple", "Tuple"):
            return ("tuple_var", None)
        return None
    if isinstance(node, ast.Subscript):
        outer = _name(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer in _LIST_NAMES:
            return ("list", hint_of(args[0], depth + 1))
        if outer in _SET_NAMES:
            return ("set", hint_of(args[0], depth + 1))
        if outer in _DICT_NAMES and len(args) == 2:
            return ("dict", hint_of(args[0], depth + 1), hint_of(args[1], depth + 1))
        if outer in ("tuple", "Tuple"):
            if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis:
                return ("tuple_var", hint_of(args[0], depth + 1))
            return ("tuple", [hint_of(a, depth + 1) for a in args])
        if outer == "Optional":
            return _one_of([hint_of(args[0], depth + 1), ("none",)])
        if outer == "Union":
            return _one_of([hint_of(a, depth + 1) for a in args])
    return None


def _one_of(options: list[Hint]) -> Hint:
    if any(o is None for o in options):
        return None
    flat: list[Hint] = []
    for o in options:
        assert o is not None
        for x in o[1] if o[0] == "one_of" else [o]:
            if x not in flat:
                flat.append(x)
    return flat[0] if len(flat) == 1 else ("one_of", flat)


@dataclass
class _Function:
    params: list[tuple[str, Hint]]
    required: int
    docstring: str | None


def _find_function(source: str, entry_point: str | None, notes: list[str]) -> _Function | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        notes.append("the reference source does not parse: no type hints used")
        return None
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    chosen = None
    if entry_point:
        chosen = next((f for f in reversed(functions) if f.name == entry_point), None)
        if chosen is None:
            notes.append(f"no top-level function {entry_point!r} in the reference: no type hints used")
            return None
    elif len(functions) == 1:
        chosen = functions[0]
    elif functions:
        chosen = functions[-1]
        notes.append(f"no entry point given: the last function, {chosen.name!r}, taken as the one called")
    if chosen is None:
        return None
    positional = chosen.args.posonlyargs + chosen.args.args
    params = [(a.arg, hint_of(a.annotation)) for a in positional]
    return _Function(params, len(positional) - len(chosen.args.defaults), ast.get_docstring(chosen))


# ---- literal calls ------------------------------------------------------------------------------------------------


def _infer(hint: Hint, values: list[Any], path: str, notes: list[str]) -> Any:
    """The value type of ``hint`` (None: unknown) with ranges from ``values`` (those of a fitting kind)."""
    if hint is None:
        return _from_values(values, path, notes)
    kind = hint[0]
    if kind == "one_of":
        options = hint[1]
        buckets: list[list[Any]] = [[] for _ in options]
        for v in values:
            for i, o in enumerate(options):
                if _fits(o, v):
                    buckets[i].append(v)
                    break
        return OneOfType(options=[_infer(o, b, path, notes) for o, b in zip(options, buckets, strict=True)])
    fitting = [v for v in values if _fits(hint, v)]
    if len(fitting) < len(values):
        notes.append(f"{path}: {len(values) - len(fitting)} observed value(s) do not fit the type hint, ignored")
    if kind == "int":
        return int_type(fitting) if fitting else IntType()
    if kind == "float":
        lo, hi = float_range(fitting) if fitting else (-1000.0, 1000.0)
        return FloatType(min=lo, max=hi)
    if kind == "str":
        return str_type(fitting) if fitting else StrType()
    if kind == "bool":
        return BoolType()
    if kind == "none":
        return NoneType()
    if kind in ("list", "set"):
        elements = [x for v in fitting for x in v]
        elem_t = _infer(hint[1], elements, f"{path}.elements", notes) if (elements or hint[1]) else IntType()
        if not elements and hint[1] is None:
            notes.append(f"{path}: element type unknown (no hint, no element observed): int assumed")
        lo, hi = len_range([len(v) for v in fitting]) if fitting else (0, 20)
        if kind == "set":
            return SetType(elements=elem_t, min_len=0 if not _hashable(elem_t) else lo, max_len=hi)
        return ListType(elements=elem_t, min_len=lo, max_len=hi, sorted=_looks_sorted(fitting, elem_t, path, notes))
    if kind == "dict":
        ks = [k for v in fitting for k in v]
        vs = [x for v in fitting for x in v.values()]
        key_t = _infer(hint[1], ks, f"{path}.keys", notes) if (ks or hint[1]) else StrType(alphabet="lowercase")
        val_t = _infer(hint[2], vs, f"{path}.values", notes) if (vs or hint[2]) else IntType()
        lo, hi = len_range([len(v) for v in fitting]) if fitting else (0, 10)
        return DictType(keys=key_t, values=val_t, min_len=lo, max_len=hi)
    if kind == "tuple":
        items = hint[1]
        return TupleType(
            items=[_infer(h, [v[i] for v in fitting], f"{path}.items[{i}]", notes) for i, h in enumerate(items)]
        )
    if kind == "tuple_var":
        lengths = Counter(len(v) for v in fitting)
        k = lengths.most_common(1)[0][0] if lengths else 2
        notes.append(f"{path}: a variable-length tuple, generated with {k} items")
        same = [v for v in fitting if len(v) == k]
        return TupleType(items=[_infer(hint[1], [v[i] for v in same], f"{path}.items[{i}]", notes) for i in range(k)])
    raise AssertionError(kind)


def _fits(hint: Hint, v: Any) -> bool:
    if hint is None:
        return True
    k, kind = hint[0], value_kind(v)
    if k == "one_of":
        return any(_fits(o, v) for o in hint[1])
    if k == "float":
        return kind in ("int", "float")
    if k == "tuple":
        return kind == "tuple" and len(v) == len(hint[1])
    if k == "tuple_var":
        return kind == "tuple"
    if k == "list":
        return kind in ("list", "tuple")
    return bool(k == kind)


def _hashable(t: Any) -> bool:
    return isinstance(t, IntType | FloatType | StrType | BoolType | NoneType | TupleType)


def _looks_sorted(lists: list[Any], elem_t: Any, path: str, notes: list[str]) -> bool:
    if not isinstance(elem_t, IntType | FloatType | StrType):
        return False
    nontrivial = [v for v in lists if len(v) >= 2]
    if len(nontrivial) < 2 or max(len(v) for v in nontrivial) < 3:
        return False
    try:
        ok = all(all(v[i] <= v[i + 1] for i in range(len(v) - 1)) for v in nontrivial)
    except TypeError:
        return False
    if ok:
        notes.append(f"{path}: every observed list is sorted: generated sorted")
    return ok


def _from_values(values: list[Any], path: str, notes: list[str]) -> Any:
    if not values:
        raise SpecError(f"{path}: no type hint and no observed value; send an input_spec")
    groups: dict[str, list[Any]] = {}
    for v in values:
        groups.setdefault(value_kind(v), []).append(v)
    if "other" in groups:
        notes.append(f"{path}: some observed literals are not plain data, ignored")
        del groups["other"]
    if "int" in groups and "float" in groups:
        groups["float"] = groups.pop("int") + groups["float"]
    hints: dict[str, Hint] = {"int": ("int",), "float": ("float",), "str": ("str",), "bool": ("bool",),
                              "none": ("none",), "list": ("list", None), "set": ("set", None),
                              "dict": ("dict", None, None)}  # fmt: skip
    options = []
    for kind, group in groups.items():
        if kind == "tuple":
            lengths = Counter(len(v) for v in group)
            for k, _ in lengths.most_common(4):
                options.append(_infer(("tuple", [None] * k), [v for v in group if len(v) == k], path, notes))
        else:
            options.append(_infer(hints[kind], group, path, notes))
    if not options:
        raise SpecError(f"{path}: no usable observed value; send an input_spec")
    return options[0] if len(options) == 1 else OneOfType(options=options)


# ---- function mode ------------------------------------------------------------------------------------------------


def _derive_function(reference_source: str | None, entry_point: str | None, tests: Sequence[TestCase]) -> DerivedSpec:
    notes: list[str] = []
    function = _find_function(reference_source, entry_point, notes) if reference_source else None
    callees = {"candidate"} | ({entry_point} if entry_point else set())
    if function is not None and entry_point is None and reference_source:
        callees.add(_find_name(reference_source, function))
    calls: list[list[Any]] = []
    for t in tests:
        if isinstance(t.input, list):
            calls.append(list(t.input))
        if t.code:
            calls.extend(literal_calls(t.code, callees))
    literal_source = "test_literals"
    if not calls and function is not None and function.docstring:
        calls = docstring_calls(function.docstring, entry_point or _find_name(reference_source or "", function))
        literal_source = "docstring_examples"
        if calls:
            notes.append(f"no literal test call: {len(calls)} docstring example(s) used")
    if function is None and not calls:
        raise SpecError(
            "cannot derive an input spec: no reference function with type hints and no literal test call "
            "(candidate(...) or the entry point called with literal arguments); send an input_spec"
        )
    if function is not None:
        arities = Counter(len(c) for c in calls if function.required <= len(c) <= len(function.params))
        n_args = max(arities) if arities else function.required
        params = function.params[:n_args]
    else:
        n_args = Counter(len(c) for c in calls).most_common(1)[0][0]
        params = [(f"arg{i}", None) for i in range(n_args)]
    used = [c for c in calls if len(c) == n_args]
    if len(used) < len(calls):
        notes.append(f"{len(calls) - len(used)} test call(s) with another number of arguments ignored")
    args: list[Arg] = []
    sources: dict[str, str] = {}
    for i, (name, hint) in enumerate(params):
        observed = [c[i] for c in used]
        path = f"args[{i}]"
        try:
            t = _infer(hint, observed, path, notes)
        except SpecError:
            raise SpecError(
                f"cannot derive an input spec: argument {i} ({name!r}) has no type hint and no literal value in "
                "the tests; send an input_spec"
            ) from None
        args.append(Arg(name=name, type=t))
        fitting = [v for v in observed if _fits(hint, v)]
        if hint is not None and fitting:
            sources[path] = f"type_hint+{literal_source}"
        elif hint is not None:
            sources[path] = "type_hint"
        else:
            sources[path] = literal_source
    relations = _length_relations(args, used, sources, notes)
    if used:
        notes.append(f"{len(used)} literal call(s) read")
    try:
        spec = FunctionSpec(args=args, relations=relations)
    except ValueError as err:
        raise SpecError(f"the derived spec is not valid ({err}); send an input_spec") from None
    return DerivedSpec(spec=spec, sources=sources, notes=notes)


def _find_name(source: str, function: _Function) -> str:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return names[-1] if names else ""


def _length_relations(
    args: list[Arg], calls: list[list[Any]], sources: dict[str, str], notes: list[str]
) -> list[LengthOf | Compare]:
    relations: list[LengthOf | Compare] = []
    if len(calls) < 2:
        return relations
    taken: set[int] = set()
    for i, a in enumerate(args):
        if not isinstance(a.type, IntType):
            continue
        for j, b in enumerate(args):
            if j == i or j in taken or not isinstance(b.type, ListType | StrType | DictType | SetType):
                continue
            pairs = [(c[i], c[j]) for c in calls]
            if all(value_kind(n) == "int" and hasattr(x, "__len__") and n == len(x) for n, x in pairs):
                if len({n for n, _ in pairs}) >= 2:
                    relations.append(LengthOf(arg=a.name, of=b.name))
                    args[i] = Arg(name=a.name, type=IntType(min=b.type.min_len, max=b.type.max_len))
                    sources[f"args[{i}]"] = "relation"
                    notes.append(f"args[{i}] ({a.name}) equals len({b.name}) in every call: a length_of relation")
                    taken.add(j)
                    break
    return relations
