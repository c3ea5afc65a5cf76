"""Deriving an input spec when a problem has none, from its reference's type hints and its tests' literals.

Nothing is ever executed: the reference and the test code are parsed with `ast`, and only literal arguments are
read (``ast.literal_eval`` on single argument nodes). Hints give the types, literals give the ranges, "mutated
around" what was observed (docs/input-spec.md, "Derivation"):

- ints observed in [a, b]: [a - m, b + m] with m = max(3, (b - a) // 2), never below 0 when a >= 0;
- floats observed in [a, b]: [a - m, b + m] with m = max(1.0, (b - a) / 2), never below 0.0 when a >= 0;
- lengths observed in [a, b]: [max(0, a - 1), b + max(2, (b - a) // 2)];
- characters: the observed ones, plus the whole lowercase / uppercase / digit class when at least 3 of its members
  were observed; no character observed: lowercase letters;
- lists observed sorted (at least two lists, one of 3+ elements, all non-decreasing): ``sorted``;
- an int argument equal to the length of another argument in every call (2+ calls, different lengths):
  a ``length_of`` relation.

Stdio inputs: a line template is inferred from the test inputs (see `_StdinInference`).
"""

from __future__ import annotations

import ast
import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from services.kernel.contracts import Mode, TestCase
from services.lib.fuzzing.spec import (
    FLOAT_BOUND,
    INT_BOUND,
    MAX_DECIMALS,
    MAX_INPUT_BYTES,
    MAX_LEN,
    MAX_LINES,
    MAX_TOKENS,
    STDIN_FLOAT_BOUND,
    Arg,
    Block,
    BoolType,
    Chars,
    Compare,
    DictType,
    FloatToken,
    FloatType,
    FunctionSpec,
    IntToken,
    IntType,
    LengthOf,
    Line,
    ListType,
    NoneType,
    OneOfType,
    SetType,
    SpecError,
    StdinSpec,
    StrToken,
    StrType,
    TupleType,
    _from_validation_error,
)

MAX_LITERAL_CALLS = 500  # calls read from test code
MAX_INT_MARGIN = 10**6
# Stdio inference: int tokens named as possible counts (each line is matched against every name, so the names
# bound its cost), and the digits of a word read as an int (Python refuses to convert more than 4300).
MAX_COUNT_NAMES = 64
MAX_INT_WORD_DIGITS = 40


class DerivedSpec(BaseModel):
    """A derived spec, where each part came from (``sources``: ``args[i]`` or ``lines`` -> ``type_hint``,
    ``test_literals``, ``docstring_examples``, ``type_hint+test_literals``, ``stdio_tests``, ``relation``), and
    notes for a human."""

    model_config = ConfigDict(frozen=True)

    spec: FunctionSpec | StdinSpec
    sources: dict[str, str]
    notes: list[str]


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
            return _derive_stdin(inputs)
        return _derive_function(reference_source, entry_point, tests)
    except SpecError:
        raise
    except ValidationError as err:
        raise SpecError(f"the derived spec is not valid ({_from_validation_error(err)}); send an input_spec") from None
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


def _literal_calls(code: str, callees: set[str]) -> list[list[Any]]:
    """The literal positional arguments of calls to ``callees`` in ``code`` (calls with any other argument are
    skipped)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[list[Any]] = []
    for node in ast.walk(tree):
        if len(out) >= MAX_LITERAL_CALLS:
            break
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in callees):
            continue
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        try:
            out.append([ast.literal_eval(a) for a in node.args])
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue
    return out


def _docstring_calls(docstring: str, name: str) -> list[list[Any]]:
    lines = [ln.strip()[4:] for ln in docstring.splitlines() if ln.strip().startswith(">>> ")]
    return _literal_calls("\n".join(lines), {name})


# ---- values -> types ----------------------------------------------------------------------------------------------


def _kind(v: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "none", list: "list", tuple: "tuple",
            dict: "dict", set: "set", frozenset: "set"}.get(type(v), "other")  # fmt: skip


def _int_type(values: list[int], nonneg_floor: bool = True) -> IntType:
    a, b = min(values), max(values)
    m = min(MAX_INT_MARGIN, max(3, (b - a) // 2))
    lo, hi = a - m, b + m
    if a >= 0 and nonneg_floor:
        lo = max(lo, 0)
    # Both ends within the cap, even when every observed value is beyond it.
    return IntType(min=min(INT_BOUND, max(-INT_BOUND, lo)), max=max(-INT_BOUND, min(INT_BOUND, hi)))


def _float_range(values: list[float]) -> tuple[float, float]:
    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        return -1000.0, 1000.0
    a, b = min(finite), max(finite)
    m = max(1.0, (b - a) / 2)  # inf when b - a overflows: the clamps below still hold
    lo, hi = a - m, b + m
    if a >= 0:
        lo = max(lo, 0.0)
    return min(FLOAT_BOUND, max(-FLOAT_BOUND, lo)), max(-FLOAT_BOUND, min(FLOAT_BOUND, hi))


def _len_range(lengths: list[int]) -> tuple[int, int]:
    a, b = min(lengths), max(lengths)
    return min(MAX_LEN, max(0, a - 1)), min(MAX_LEN, b + max(2, (b - a) // 2))


_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)


def _alphabet(observed: set[str]) -> str:
    chars = set(observed)
    for cls in _CLASSES:
        if len(chars & set(cls)) >= 3:
            chars |= set(cls)
    return "".join(sorted(chars)) if chars else string.ascii_lowercase


def _str_type(values: list[str]) -> StrType:
    lo, hi = _len_range([len(v) for v in values])
    chars = _alphabet({c for v in values for c in v})
    return StrType(min_len=lo, max_len=hi, alphabet=Chars(chars=chars[:1024]))


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
        return _int_type(fitting) if fitting else IntType()
    if kind == "float":
        lo, hi = _float_range(fitting) if fitting else (-1000.0, 1000.0)
        return FloatType(min=lo, max=hi)
    if kind == "str":
        return _str_type(fitting) if fitting else StrType()
    if kind == "bool":
        return BoolType()
    if kind == "none":
        return NoneType()
    if kind in ("list", "set"):
        elements = [x for v in fitting for x in v]
        elem_t = _infer(hint[1], elements, f"{path}.elements", notes) if (elements or hint[1]) else IntType()
        if not elements and hint[1] is None:
            notes.append(f"{path}: element type unknown (no hint, no element observed): int assumed")
        lo, hi = _len_range([len(v) for v in fitting]) if fitting else (0, 20)
        if kind == "set":
            return SetType(elements=elem_t, min_len=0 if not _hashable(elem_t) else lo, max_len=hi)
        return ListType(elements=elem_t, min_len=lo, max_len=hi, sorted=_looks_sorted(fitting, elem_t, path, notes))
    if kind == "dict":
        ks = [k for v in fitting for k in v]
        vs = [x for v in fitting for x in v.values()]
        key_t = _infer(hint[1], ks, f"{path}.keys", notes) if (ks or hint[1]) else StrType(alphabet="lowercase")
        val_t = _infer(hint[2], vs, f"{path}.values", notes) if (vs or hint[2]) else IntType()
        lo, hi = _len_range([len(v) for v in fitting]) if fitting else (0, 10)
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
    k, kind = hint[0], _kind(v)
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
        groups.setdefault(_kind(v), []).append(v)
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
            calls.extend(_literal_calls(t.code, callees))
    literal_source = "test_literals"
    if not calls and function is not None and function.docstring:
        calls = _docstring_calls(function.docstring, entry_point or _find_name(reference_source or "", function))
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
            if all(_kind(n) == "int" and hasattr(x, "__len__") and n == len(x) for n, x in pairs):
                if len({n for n, _ in pairs}) >= 2:
                    relations.append(LengthOf(arg=a.name, of=b.name))
                    args[i] = Arg(name=a.name, type=IntType(min=b.type.min_len, max=b.type.max_len))
                    sources[f"args[{i}]"] = "relation"
                    notes.append(f"args[{i}] ({a.name}) equals len({b.name}) in every call: a length_of relation")
                    taken.add(j)
                    break
    return relations


# ---- stdio mode ---------------------------------------------------------------------------------------------------

_INT_WORD = re.compile(r"-?[0-9]+")
_FIXED_WORD = re.compile(r"-?[0-9]+\.([0-9]+)")


@dataclass
class _Slot:
    """One token template and every word observed in it."""

    words: list[str] = field(default_factory=list)
    count: int | str = 1
    name: str | None = None
    used_as_count: bool = False


@dataclass
class _LineT:
    slots: list[_Slot]
    count: int | str = 1


@dataclass
class _BlockT:
    items: list[Any]
    count: str


class _StdinInference:
    """Infers a line template from sample inputs (each a list of lines of whitespace-separated words), line by
    line: at each point, if the lines left in every sample are a multiple k of an earlier count's value, they are
    that count's repetitions (k = 1: a repeated line, k > 1: a block of k lines); otherwise the next line is a
    fixed line, whose words are a count's number of values, or a fixed number of tokens, or a count followed by
    that many values. Every int token whose values could be counts is named; unused names are dropped."""

    def __init__(self) -> None:
        self.slots_by_name: dict[str, _Slot] = {}

    def fresh(self) -> str:
        return f"n{len(self.slots_by_name) + 1}"

    def items(self, samples: list[list[list[str]]], envs: list[dict[str, int]]) -> list[Any]:
        cursors = [0] * len(samples)
        out: list[Any] = []
        while True:
            remaining = [len(s) - c for s, c in zip(samples, cursors, strict=True)]
            if all(r == 0 for r in remaining):
                return out
            repeat = self._repetition(remaining, envs)
            if repeat is not None:
                name, k = repeat
                self.slots_by_name[name].used_as_count = True
                sub_samples, sub_envs = [], []
                for s, c, env in zip(samples, cursors, envs, strict=True):
                    rest = s[c:]
                    for start in range(0, len(rest), k):
                        sub_samples.append(rest[start : start + k])
                        sub_envs.append(dict(env))
                if k == 1:
                    out.append(self.line([(sub[0], env) for sub, env in zip(sub_samples, sub_envs, strict=True)], name))
                else:
                    out.append(_BlockT(self.items(sub_samples, sub_envs), name))
                return out
            if any(r == 0 for r in remaining):
                raise SpecError("the stdio test inputs have different numbers of lines that no count explains")
            if len(out) >= MAX_LINES:  # a template has at most MAX_LINES items: stop before reading every line
                raise SpecError(
                    f"cannot infer a stdin template: more than {MAX_LINES} lines that no count explains; "
                    "send an input_spec"
                )
            out.append(self.line([(s[c], env) for s, c, env in zip(samples, cursors, envs, strict=True)], 1))
            cursors = [c + 1 for c in cursors]

    def _repetition(self, remaining: list[int], envs: list[dict[str, int]]) -> tuple[str, int] | None:
        common = [n for n in envs[0] if all(n in e for e in envs)]
        for name in reversed(common):
            values = [e[name] for e in envs]
            if max(values) < 2 and len(set(remaining)) == 1:
                continue  # a count that is always 0 or 1 explains nothing
            ks = set()
            ok = True
            for r, v in zip(remaining, values, strict=True):
                if v == 0:
                    ok = ok and r == 0
                elif r % v:
                    ok = False
                else:
                    ks.add(r // v)
            if ok and len(ks) == 1 and min(ks) >= 1:
                return name, ks.pop()
        return None

    def line(self, instances: list[tuple[list[str], dict[str, int]]], count: int | str) -> _LineT:
        lengths = [len(w) for w, _ in instances]
        common = [n for n in instances[0][1] if all(n in e for _, e in instances)]
        for name in reversed(common):
            if all(len(w) == e[name] for w, e in instances) and (max(lengths) >= 2 or len(set(lengths)) > 1):
                self.slots_by_name[name].used_as_count = True
                return _LineT([_Slot([x for w, _ in instances for x in w], count=name)], count)
        if len(set(lengths)) == 1:
            if lengths[0] > MAX_TOKENS:
                raise SpecError(
                    f"cannot infer a stdin template: a line of more than {MAX_TOKENS} tokens that no count "
                    "explains; send an input_spec"
                )
            slots = [_Slot([w[i] for w, _ in instances]) for i in range(lengths[0])]
            for i, slot in enumerate(slots):
                if len(self.slots_by_name) >= MAX_COUNT_NAMES:
                    break  # every later line is matched against every name: their number bounds the work
                if all(_count_word(x) for x in slot.words):
                    slot.name = self.fresh()
                    self.slots_by_name[slot.name] = slot
                    for w, env in instances:
                        env[slot.name] = int(w[i])
            return _LineT(slots, count)
        if all(w and _count_word(w[0]) and int(w[0]) == len(w) - 1 for w, _ in instances):
            if len(self.slots_by_name) >= MAX_COUNT_NAMES:
                raise SpecError("cannot infer a stdin template: too many counts; send an input_spec")
            head = _Slot([w[0] for w, _ in instances], name=self.fresh(), used_as_count=True)
            self.slots_by_name[str(head.name)] = head
            return _LineT([head, _Slot([x for w, _ in instances for x in w[1:]], count=str(head.name))], count)
        raise SpecError(
            "cannot infer a stdin template: a line has a varying number of tokens that no count explains; "
            "send an input_spec"
        )


def _count_word(word: str) -> bool:
    """Whether a word is an int that could be a count, in [0, MAX_LEN]."""
    return len(word) <= len(str(MAX_LEN)) and _INT_WORD.fullmatch(word) is not None and 0 <= int(word) <= MAX_LEN


def _word_int(word: str) -> int:
    """An int word's value; one of more than MAX_INT_WORD_DIGITS digits (far beyond INT_BOUND, which clamps it)
    as +-10**MAX_INT_WORD_DIGITS, never converted (Python refuses more than 4300 digits)."""
    digits = word.lstrip("-")
    if len(digits) > MAX_INT_WORD_DIGITS:
        return -(10**MAX_INT_WORD_DIGITS) if word.startswith("-") else 10**MAX_INT_WORD_DIGITS
    return int(word)


def _token(slot: _Slot) -> IntToken | FloatToken | StrToken:
    words = slot.words
    name = slot.name if slot.used_as_count else None
    if not words or all(_INT_WORD.fullmatch(w) for w in words):
        values = [_word_int(w) for w in words] or [0, 10]
        if slot.used_as_count:
            a, b = min(values), max(values)
            m = max(3, (b - a) // 2)
            lo = 0 if a <= 0 else max(1, a - m)
            return IntToken(name=name, min=lo, max=min(MAX_LEN, b + m), count=slot.count)
        t = _int_type(values)
        return IntToken(name=name, min=t.min, max=t.max, count=slot.count)
    fixed = [_FIXED_WORD.fullmatch(w) or _INT_WORD.fullmatch(w) for w in words]
    if all(fixed):
        decimals = min(MAX_DECIMALS, max((len(m.group(1)) if m and m.groups() else 0) for m in fixed))
        flo, fhi = _float_range([float(w) for w in words])
        bound = min(STDIN_FLOAT_BOUND, FLOAT_BOUND)
        flo, fhi = min(bound, max(-bound, flo)), max(-bound, min(bound, fhi))
        return FloatToken(min=flo, max=fhi, decimals=decimals, count=slot.count)
    lo_len, hi_len = _len_range([len(w) for w in words])
    chars = _alphabet({c for w in words for c in w if not c.isspace()})
    return StrToken(
        min_len=max(1, lo_len), max_len=max(1, hi_len), alphabet=Chars(chars=chars[:1024]), count=slot.count
    )


def _to_items(items: list[Any]) -> list[Line | Block]:
    out: list[Line | Block] = []
    for item in items:
        if isinstance(item, _BlockT):
            out.append(Block(count=item.count, lines=_to_items(item.items)))
        else:
            out.append(Line(tokens=[_token(s) for s in item.slots], count=item.count))
    return out


def _count_tokens(items: list[Line | Block]) -> list[tuple[list[Any], int, int]]:
    """(container, line index, token index) of every named int token, for shrinking."""
    found: list[tuple[list[Any], int, int]] = []
    for i, item in enumerate(items):
        if isinstance(item, Block):
            found.extend(_count_tokens(item.lines))
        else:
            for j, tok in enumerate(item.tokens):
                if isinstance(tok, IntToken) and tok.name is not None:
                    found.append((items, i, j))
    return found


def _derive_stdin(inputs: list[str]) -> DerivedSpec:
    notes: list[str] = []
    samples = [[ln.split() for ln in text.replace("\r\n", "\n").rstrip("\n").split("\n")] for text in inputs]
    samples = [[] if s == [[]] else s for s in samples]
    if any("  " in text or "\t" in text for text in inputs):
        notes.append("runs of spaces in the test inputs are rendered as single spaces")
    inference = _StdinInference()
    items = _to_items(inference.items(samples, [{} for _ in samples]))
    for _ in range(60):
        try:
            spec = StdinSpec(lines=items)
            break
        except ValueError as err:
            if "the cap is" not in str(err):
                shown = _from_validation_error(err) if isinstance(err, ValidationError) else err
                raise SpecError(f"the derived stdin template is not valid ({shown}); send an input_spec") from None
            counts = _count_tokens(items)
            container, i, j = max(counts, key=lambda c: c[0][c[1]].tokens[c[2]].max)  # type: ignore[union-attr]
            line = container[i]
            tok = line.tokens[j]
            if tok.max <= max(1, tok.min):
                shown = _from_validation_error(err) if isinstance(err, ValidationError) else err
                raise SpecError(f"the derived stdin template is too large ({shown}); send an input_spec") from None
            new_tok = tok.model_copy(update={"max": max(tok.min, 1, tok.max // 2)})
            container[i] = line.model_copy(update={"tokens": [*line.tokens[:j], new_tok, *line.tokens[j + 1 :]]})
            notes.append(f"count {tok.name} capped at {new_tok.max} to keep one input under {MAX_INPUT_BYTES:,} bytes")
    else:
        raise SpecError("the derived stdin template is too large; send an input_spec")
    notes.append(f"line template inferred from {len(inputs)} stdio test input(s)")
    return DerivedSpec(spec=spec, sources={"lines": "stdio_tests"}, notes=notes)
