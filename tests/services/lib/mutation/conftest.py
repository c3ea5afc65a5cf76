"""Fixtures for the perturbation tests: a real Executor (real nsjail) for running parents and mutants."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from executor.run import Executor
from tests.executor.conftest import dispose, make_executor


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    executor = make_executor(tmp_path_factory.mktemp("perturb-executor"))
    yield executor
    dispose(executor)
