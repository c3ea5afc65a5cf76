"""The local loader: LoCaL pairs pass through, checked, as similarity pairs (no problems, no attempts)."""

from __future__ import annotations

import pytest

from services.lib.datasets import RecordError, load
from tests.services.lib.datasets.helpers import records

ROWS = records("local")


def test_pairs_pass_through_unchanged_labels_included() -> None:
    for line, row in enumerate(ROWS, start=1):
        bodies = load("local", row, line)
        assert bodies.pairs == [row] and not bodies.problems and not bodies.attempts
    assert load("local", ROWS[0], 1).pairs[0]["codebleu"] == 0.62


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"id": None}, "id"),
        ({"golden_code": " "}, "golden_code"),
        ({"generated_code": 1}, "generated_code"),
        ({"language": "rust"}, "language"),
        ({"mode": "batch"}, "mode"),
        ({"input_spec": []}, "input_spec"),
    ],
)
def test_a_bad_pair_names_its_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as caught:
        load("local", {**ROWS[0], **change}, 1)
    assert caught.value.field == field
