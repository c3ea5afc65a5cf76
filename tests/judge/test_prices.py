"""A judge's price table (judges file) becomes the per-token price gauge the judges dashboard's cost panel reads;
a judge without one exports no price (and so no invented cost), and a negative price is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from judge.runner import LLMRunner
from services.kernel.judges import JudgesFileError, LLMJudge, load_judges

JUDGE = 'name = "{name}"\nkind = "llm"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'


def _price(judge: str, direction: str) -> float | None:
    return REGISTRY.get_sample_value("tribunal_judge_price_dollars_per_token", {"judge": judge, "direction": direction})


async def test_prices_per_million_tokens_become_prices_per_token(tmp_path: Path) -> None:
    path = tmp_path / "judges.toml"
    path.write_text(
        "[[judge]]\n" + JUDGE.format(name="priced") + "price_per_mtok_in = 3.0\nprice_per_mtok_out = 15.0\n\n"
        "[[judge]]\n" + JUDGE.format(name="unpriced")
    )
    runners = [LLMRunner(judge) for judge in load_judges(path) if isinstance(judge, LLMJudge)]
    try:
        assert _price("priced", "in") == pytest.approx(3.0e-6)
        assert _price("priced", "out") == pytest.approx(15.0e-6)
        assert _price("unpriced", "in") is None and _price("unpriced", "out") is None
    finally:
        for runner in runners:
            await runner.close()


def test_a_negative_price_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "judges.toml"
    path.write_text("[[judge]]\n" + JUDGE.format(name="cheap") + "price_per_mtok_in = -1\n")
    with pytest.raises(JudgesFileError, match="price_per_mtok_in"):
        load_judges(path)
