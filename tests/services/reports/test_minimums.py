"""The reports worker judges every figure against the operators' minimums (TRIBUNAL_MIN_ITEMS,
TRIBUNAL_MIN_CLUSTERS), or a request's own, and the page and JSON it stores say which figures are too few."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.kernel.settings import get_settings
from services.reports import worker
from tests.metrics.test_trust import four_attempts


@pytest.fixture()
def minimums(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    get_settings.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()


def _auc_trust(params: dict[str, object]) -> tuple[str, dict[str, object], str]:
    result, _, page = worker.build("judge_quality", four_attempts(), {"bootstrap": 50, "folds": 2, **params}, "t")
    return result["tables"]["metrics"]["rows"][0]["roc_auc"]["trust"], result["params"], page


def test_the_defaults_find_four_attempts_too_few(minimums: pytest.MonkeyPatch) -> None:
    settings = get_settings()
    assert (settings.min_items, settings.min_clusters) == (30, 10)
    trust, params, page = _auc_trust({})
    assert trust == "too_few" and (params["min_items"], params["min_clusters"]) == (30, 10)
    assert "too few to judge (n=4, 4 clusters)" in page


def test_the_minimums_come_from_the_settings(minimums: pytest.MonkeyPatch) -> None:
    minimums.setenv("TRIBUNAL_MIN_ITEMS", "4")
    minimums.setenv("TRIBUNAL_MIN_CLUSTERS", "4")
    get_settings.cache_clear()
    trust, params, page = _auc_trust({})
    assert trust == "ok" and (params["min_items"], params["min_clusters"]) == (4, 4)
    assert "too few to judge (" not in page
    minimums.setenv("TRIBUNAL_MIN_CLUSTERS", "5")
    get_settings.cache_clear()
    assert _auc_trust({})[0] == "too_few"


def test_a_requests_own_minimums_win(minimums: pytest.MonkeyPatch) -> None:
    trust, params, _ = _auc_trust({"min_items": 2, "min_clusters": 2})
    assert trust == "ok" and (params["min_items"], params["min_clusters"]) == (2, 2)
    # Stored before the fields existed (or left null): the settings' minimums.
    assert _auc_trust({"min_items": None, "min_clusters": None})[0] == "too_few"
