"""Hypothesis strategies of random input specs (JSON-like dicts), for the property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

ints = st.integers(-(10**6), 10**6)
lengths = st.integers(0, 6)


@st.composite
def int_type(draw: Any) -> dict[str, Any]:
    a, b = sorted([draw(ints), draw(ints)])
    return {"type": "int", "min": a, "max": b}


@st.composite
def float_type(draw: Any) -> dict[str, Any]:
    a, b = sorted([draw(st.floats(-1e6, 1e6)), draw(st.floats(-1e6, 1e6))])
    return {"type": "float", "min": a, "max": b, "allow_nan": draw(st.booleans()),
            "allow_infinity": draw(st.booleans())}  # fmt: skip


@st.composite
def str_type(draw: Any) -> dict[str, Any]:
    a, b = sorted([draw(lengths), draw(lengths)])
    alphabet = draw(
        st.sampled_from(["lowercase", "digits", "binary", "printable", "letters"])
        | st.text(st.characters(codec="utf-8"), min_size=1, max_size=5).map(lambda c: {"chars": c})
    )
    return {"type": "str", "min_len": a, "max_len": b, "alphabet": alphabet}


scalars = st.one_of(int_type(), float_type(), str_type(), st.just({"type": "bool"}), st.just({"type": "none"}))
hashable_scalars = st.one_of(int_type(), str_type(), st.just({"type": "bool"}), st.just({"type": "none"}))


def _containers(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def list_type(draw: Any) -> dict[str, Any]:
        a, b = sorted([draw(lengths), draw(lengths)])
        if draw(st.booleans()):  # sorted, over orderable scalars
            elements = draw(st.one_of(int_type(), str_type()))
            return {"type": "list", "elements": elements, "min_len": a, "max_len": b, "sorted": True}
        return {"type": "list", "elements": draw(children), "min_len": a, "max_len": b}

    @st.composite
    def unique_list(draw: Any) -> dict[str, Any]:
        return {"type": "list", "elements": draw(int_type()), "min_len": 0, "max_len": draw(lengths), "unique": True}

    @st.composite
    def set_type(draw: Any) -> dict[str, Any]:
        return {"type": "set", "elements": draw(hashable_scalars), "min_len": 0, "max_len": draw(lengths)}

    @st.composite
    def dict_type(draw: Any) -> dict[str, Any]:
        return {"type": "dict", "keys": draw(hashable_scalars), "values": draw(children), "max_len": draw(lengths)}

    tuples = st.lists(children, min_size=0, max_size=3).map(lambda items: {"type": "tuple", "items": items})
    one_of = st.lists(children, min_size=1, max_size=3).map(lambda options: {"type": "one_of", "options": options})
    return st.one_of(list_type(), unique_list(), set_type(), dict_type(), tuples, one_of)


value_types = st.recursive(scalars, _containers, max_leaves=6)


@st.composite
def function_specs(draw: Any) -> dict[str, Any]:
    """Random function specs, some with length_of and le/lt relations."""
    types = draw(st.lists(value_types, min_size=0, max_size=4))
    args = [{"name": f"a{i}", "type": t} for i, t in enumerate(types)]
    relations: list[dict[str, Any]] = []
    if draw(st.booleans()):
        # arr, its length n, and k < n / lo <= hi
        lo_max = draw(st.integers(0, 5))
        args.append({"name": "arr", "type": {"type": "list", "elements": draw(scalars), "min_len": 1, "max_len": 8,
                                             "sorted": False}})  # fmt: skip
        args.append({"name": "n", "type": {"type": "int", "min": 0, "max": 100}})
        args.append({"name": "k", "type": {"type": "int", "min": 0, "max": lo_max + 10}})
        args.append({"name": "lo", "type": {"type": "float", "min": -5.0, "max": 5.0}})
        args.append({"name": "hi", "type": {"type": "int", "min": -3, "max": 3}})
        relations = [
            {"kind": "length_of", "arg": "n", "of": "arr"},
            {"kind": "lt", "left": "k", "right": "n"},
            {"kind": "le", "left": "lo", "right": "hi"},
        ]
        draw(st.randoms()).shuffle(args)
    return {"kind": "function", "args": args, "relations": relations}


@st.composite
def tokens(draw: Any, names: list[str]) -> dict[str, Any]:
    count: Any = draw(st.sampled_from([1, 1, 2, *names]))
    kind = draw(st.sampled_from(["int", "float", "str"]))
    if kind == "int":
        a, b = sorted([draw(ints), draw(ints)])
        return {"type": "int", "min": a, "max": b, "count": count}
    if kind == "float":
        a = draw(st.integers(-1000, 1000))
        return {"type": "float", "min": a / 10, "max": a / 10 + draw(st.integers(0, 100)),
                "decimals": draw(st.integers(1, 4)), "count": count}  # fmt: skip
    return {"type": "str", "min_len": 1, "max_len": draw(st.integers(1, 5)), "count": count,
            "alphabet": draw(st.sampled_from(["lowercase", "alphanumeric", "printable"]))}  # fmt: skip


@st.composite
def stdin_specs(draw: Any) -> dict[str, Any]:
    """Random stdin templates: a count line, then lines and blocks that use it."""
    lines: list[dict[str, Any]] = [{"tokens": [{"type": "int", "name": "n", "min": 0, "max": draw(st.integers(0, 5))}]}]
    for _ in range(draw(st.integers(0, 3))):
        choice = draw(st.sampled_from(["line", "repeated", "block"]))
        if choice == "line":
            lines.append({"tokens": draw(st.lists(tokens(["n"]), max_size=4))})
        elif choice == "repeated":
            lines.append({"count": "n", "tokens": [{"type": "int", "name": "m", "min": 0, "max": 3},
                                                   draw(tokens(["n", "m"]))]})  # fmt: skip
        else:
            lines.append({"kind": "block", "count": draw(st.sampled_from([2, "n"])), "lines": [
                {"tokens": [{"type": "int", "name": "q", "min": 0, "max": 2}]},
                {"count": "q", "tokens": draw(st.lists(tokens(["n", "q"]), max_size=3))},
            ]})  # fmt: skip
    return {"kind": "stdin", "lines": lines}
