"""The spec format: parsing, defaults, and rejection of bad specs with the field path named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.lib.fuzzing import FunctionSpec, IntType, ListType, SpecError, StdinSpec, parse_spec
from services.lib.fuzzing.values import MAX_DEPTH, worst_case_bytes


def _fn(*types: dict[str, Any], relations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"kind": "function", "args": [{"name": f"a{i}", "type": t} for i, t in enumerate(types)],
            "relations": relations or []}  # fmt: skip


def _rejects(spec: Any, *fragments: str) -> str:
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    for fragment in fragments:
        assert fragment in str(err.value), str(err.value)
    return str(err.value)


def test_defaults_and_json_round_trip() -> None:
    spec = parse_spec(_fn({"type": "list"}, {"type": "int"}))
    assert isinstance(spec, FunctionSpec)
    xs = spec.args[0].type
    assert isinstance(xs, ListType) and isinstance(xs.elements, IntType)
    assert (xs.min_len, xs.max_len, xs.elements.min, xs.elements.max) == (0, 20, -1000, 1000)
    assert parse_spec(spec.model_dump_json()) == spec
    assert parse_spec(json.dumps(_fn({"type": "int"}))) == parse_spec(_fn({"type": "int"}))


def test_every_value_type_parses() -> None:
    spec = _fn(
        {"type": "float", "min": -1, "max": 1, "allow_nan": True},
        {"type": "str", "alphabet": "digits"},
        {"type": "str", "alphabet": {"chars": "()"}},
        {"type": "bool"},
        {"type": "none"},
        {"type": "tuple", "items": [{"type": "int"}, {"type": "str"}]},
        {"type": "dict", "keys": {"type": "str"}, "values": {"type": "list"}},
        {"type": "set", "elements": {"type": "int"}},
        {"type": "one_of", "options": [{"type": "int"}, {"type": "none"}]},
    )
    assert len(parse_spec(spec).args) == 9  # type: ignore[union-attr]


def test_caps_are_enforced_with_the_field_path() -> None:
    _rejects(_fn({"type": "list", "elements": {"type": "int"}, "max_len": 10_001}), "args[0].type.max_len")
    _rejects(_fn({"type": "int", "max": 10**19}), "args[0].type.max")
    _rejects(_fn({"type": "str", "min_len": 5, "max_len": 2}), "args[0].type.min_len")
    _rejects(_fn({"type": "int", "min": 3, "max": 2}), "args[0].type.min")
    nested: dict[str, Any] = {"type": "int"}
    for _ in range(MAX_DEPTH):
        nested = {"type": "list", "elements": nested}
    _rejects(_fn(nested), "args[0].type", "nesting depth")
    big = {"type": "list", "max_len": 10_000, "elements": {"type": "str", "max_len": 10_000}}
    _rejects(_fn(big), "args", "the cap is")


def test_malformed_specs_are_rejected_with_the_field_path() -> None:
    _rejects(_fn({"type": "int", "maximum": 3}), "args[0].type.maximum")  # extra="forbid"
    _rejects(_fn({"type": "integer"}), "args[0].type")
    _rejects(_fn({"type": "str", "alphabet": "klingon"}), "args[0].type.alphabet")
    _rejects(_fn({"type": "int", "min": "0"}), "args[0].type.min")  # strict: no string for an int
    _rejects({"kind": "function", "args": [{"name": "1x", "type": {"type": "int"}}]}, "args[0].name")
    _rejects({"kind": "program"}, "kind")
    _rejects("{not json", "not JSON")
    _rejects(_fn({"type": "int"}, {"type": "int"}) | {"args": [{"name": "a", "type": {"type": "int"}}] * 2},
             "args[1].name")  # fmt: skip


def test_list_flags_need_fitting_elements() -> None:
    _rejects(_fn({"type": "list", "elements": {"type": "list"}, "sorted": True}), "args[0].type.sorted")
    _rejects(_fn({"type": "list", "elements": {"type": "float", "allow_nan": True}, "sorted": True}), "NaN")
    _rejects(_fn({"type": "set", "elements": {"type": "list"}}), "args[0].type.elements", "hashable")
    _rejects(_fn({"type": "dict", "keys": {"type": "dict"}}), "args[0].type.keys")
    _rejects(_fn({"type": "list", "elements": {"type": "int", "min": 0, "max": 3}, "unique": True, "min_len": 5}),
             "args[0].type.min_len", "distinct")  # fmt: skip
    _rejects(_fn({"type": "set", "elements": {"type": "bool"}, "min_len": 3}), "args[0].type.min_len")


def test_relations_are_checked() -> None:
    arr, n = {"type": "list"}, {"type": "int", "min": 0, "max": 50}
    ok = _fn(arr, n, relations=[{"kind": "length_of", "arg": "a1", "of": "a0"}])
    assert parse_spec(ok)
    _rejects(_fn(arr, n, relations=[{"kind": "length_of", "arg": "zz", "of": "a0"}]), "relations[0].arg", "'zz'")
    _rejects(_fn(arr, n, relations=[{"kind": "length_of", "arg": "a0", "of": "a1"}]), "relations[0].arg")
    _rejects(_fn(n, {"type": "int"}, relations=[{"kind": "length_of", "arg": "a0", "of": "a1"}]), "relations[0].of")
    _rejects(_fn(arr, {"type": "str"}, relations=[{"kind": "le", "left": "a0", "right": "a1"}]), "relations[0].left")
    _rejects(_fn(n, {"type": "float", "allow_nan": True}, relations=[{"kind": "lt", "left": "a0", "right": "a1"}]),
             "relations[0].right", "NaN")  # fmt: skip
    cycle = [{"kind": "lt", "left": "a0", "right": "a1"}, {"kind": "le", "left": "a1", "right": "a0"}]
    _rejects(_fn(n, n, relations=cycle), "cycle")
    impossible = [{"kind": "lt", "left": "a0", "right": "a1"}]
    _rejects(_fn({"type": "int", "min": 10, "max": 20}, {"type": "int", "min": 0, "max": 10}, relations=impossible),
             "relations[0]", "cannot hold")  # fmt: skip
    length = [{"kind": "length_of", "arg": "a1", "of": "a0"}]
    _rejects(_fn(arr, {"type": "int", "min": 30, "max": 40}, relations=length), "len(a0)", "no possible value")
    _rejects(_fn(n, relations=[{"kind": "le", "left": "a0", "right": "a0"}]), "relations[0]")
    _rejects(_fn(n, relations=[{"kind": "ge", "left": "a0", "right": "a0"}]), "relations[0]")


def test_stdin_specs_are_checked() -> None:
    good = {"kind": "stdin", "lines": [{"tokens": [{"type": "int", "name": "n", "min": 0, "max": 10}]},
                                       {"tokens": [{"type": "int", "count": "n"}]}]}  # fmt: skip
    assert isinstance(parse_spec(good), StdinSpec)

    def stdin(*lines: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "stdin", "lines": list(lines)}

    _rejects(stdin({"tokens": [{"type": "int", "count": "n"}]}), "lines[0].tokens[0].count", "'n'")
    _rejects(stdin({"tokens": [{"type": "int", "name": "n"}]}, {"count": "n", "tokens": []}), "lines[1].count",
             "[0, 10000]")  # fmt: skip
    _rejects(stdin({"tokens": [{"type": "str", "name": "s"}]}, {"count": "s", "tokens": []}), "not an int token")
    _rejects(stdin({"tokens": [{"type": "str", "alphabet": {"chars": "a b"}}]}), "lines[0].tokens[0].alphabet")
    _rejects(stdin({"tokens": [{"type": "int", "name": "n", "count": 2}]}), "lines[0].tokens[0].name")
    _rejects(stdin({"tokens": [{"type": "float", "min": 0.11, "max": 0.12, "decimals": 1}]}), "decimals")
    scoped = stdin(
        {"kind": "block", "count": 2, "lines": [{"tokens": [{"type": "int", "name": "k", "min": 0, "max": 3}]}]},
        {"count": "k", "tokens": []},
    )
    _rejects(scoped, "lines[1].count", "'k'")
    n_big = {"type": "int", "name": "n", "min": 0, "max": 10_000}
    _rejects(stdin({"tokens": [n_big]}, {"count": "n", "tokens": [{"type": "int", "count": "n"}]}), "lines",
             "the cap is")  # fmt: skip


def test_worst_case_bytes() -> None:
    assert worst_case_bytes(IntType(min=-5, max=100)) == 3
    assert worst_case_bytes(ListType(elements=IntType(), max_len=10)) == 12 + 10 * 7
