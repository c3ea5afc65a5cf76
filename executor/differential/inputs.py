"""The fuzzing inputs as the programs receive them: each input's bytes (function mode: the JSON of its encoded
arguments, the very text a test's call message holds; stdio mode: its stdin), and which of them are the problem's
own tests."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from executor.harness import function_runner as harness
from services.kernel.contracts import Mode

MAX_INPUT_BYTES = 64 * 1024 * 1024


def encode_repetitions(mode: Mode, repetitions: Sequence[Sequence[Any]]) -> tuple[list[int], list[list[bytes]]]:
    """(N per repetition, each input's bytes per repetition: function mode, the JSON of its encoded arguments, the
    very text a test's call message holds; stdio mode, its stdin); ValueError for anything that cannot be sent."""
    if not repetitions:
        raise ValueError("repetitions must not be empty")
    counts: list[int] = []
    lines: list[list[bytes]] = []
    total = 0
    for rep, inputs in enumerate(repetitions):
        if isinstance(inputs, str | bytes) or not isinstance(inputs, Sequence) or not inputs:
            raise ValueError(f"repetitions[{rep}] must be a non-empty list of inputs")
        encoded: list[bytes] = []
        for index, item in enumerate(inputs):
            if mode == Mode.STDIO:
                if not isinstance(item, str):
                    raise ValueError(f"repetitions[{rep}][{index}]: a stdio input must be text")
                data = item.encode("utf-8", "surrogatepass")  # as a test's stdin (executor/run.py)
            else:
                if not isinstance(item, list | tuple):
                    raise ValueError(f"repetitions[{rep}][{index}]: an input must be a list of positional arguments")
                try:
                    args = [harness.encode_value(arg, 0, harness.MAX_ARGUMENT_DEPTH) for arg in item]
                except (harness.NotData, RecursionError) as exc:
                    raise ValueError(f"repetitions[{rep}][{index}]: {str(exc)[:200]}") from None
                data = json.dumps(args, separators=(",", ":")).encode("utf-8", "surrogatepass")
            total += len(data) + 1
            if total > MAX_INPUT_BYTES:
                raise ValueError(f"the inputs are over {MAX_INPUT_BYTES >> 20} MiB serialized")
            encoded.append(data)
        counts.append(len(inputs))
        lines.append(encoded)
    return counts, lines


def test_positions_of(test_positions: Sequence[Collection[int]] | None, counts: Sequence[int]) -> list[frozenset[int]]:
    if test_positions is None:
        return [frozenset() for _ in counts]
    if len(test_positions) != len(counts):
        raise ValueError("test_positions must name one set of positions per repetition")
    out = []
    for rep, (positions, count) in enumerate(zip(test_positions, counts, strict=True)):
        chosen = frozenset(positions)
        if any(not isinstance(p, int) or not 0 <= p < count for p in chosen):
            raise ValueError(f"test_positions[{rep}] holds a position outside the repetition")
        out.append(chosen)
    return out
