"""Fixtures for the AXIOM synthesis tests: the scripted OpenAI-compatible server on a real loopback socket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_llm import ScriptedLLM


@pytest.fixture()
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as scripted:
        yield scripted
