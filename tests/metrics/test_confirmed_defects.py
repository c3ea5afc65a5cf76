"""Confirmed-defect A_j (issue 24 item 4): only mutants that differential fuzzing confirms count."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from metrics.errors import MetricInputError
from metrics.perturbation import confirmed_mask
from metrics.reports import build_report

# Per seed (p = 0.9): a real defect (drop 0.5, df_score 0.5), an equivalent "semantic" mutant (drop 0, df_score 1)
# and a control (df_score 1) whose drop varies by seed; seed 0 also has an unconfirmed control (no df_score).
CONTROL_DROPS = (0.1, 0.2, 0.6, 0.0)


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    base = {"problem_id": "p", "participant": None, "turn": None, "judge": "j", "method": None, "verdict": "AC"}
    base |= {"condition": "blind", "repeat": 0, "status": "ok", "score": None, "label_score": None}
    for s, control_drop in enumerate(CONTROL_DROPS):
        seed_id = f"seed{s}"
        rows.append({**base, "attempt_id": seed_id, "trajectory": seed_id, "label_ac": 1, "p_ac": 0.9})
        mutants = [("semantic", 0.5, 0.5), ("semantic", 0.0, 1.0), ("control", control_drop, 1.0)]
        if s == 0:
            mutants.append(("control", 0.9, None))
        for k, (arm, drop, df_score) in enumerate(mutants):
            rows.append(
                {
                    **base,
                    "attempt_id": f"{seed_id}-{k}",
                    "trajectory": f"{seed_id}-{k}",
                    "label_ac": 0,
                    "p_ac": round(0.9 - drop, 10),
                    "parent_attempt_id": seed_id,
                    "operator": f"OP{k}",
                    "arm": arm,
                    "severity": 2 if arm == "semantic" else None,
                    "df_score": df_score,
                }
            )
    return rows


def test_confirmed_mask() -> None:
    arms = ["semantic", "semantic", "control", "control", "semantic"]
    assert confirmed_mask(arms, [0.5, 1.0, 1.0, 0.75, None]).tolist() == [True, False, True, False, False]
    with pytest.raises(MetricInputError):
        confirmed_mask(["semantic"], [0.5, 1.0])


def test_confirmed_a_j_differs_from_raw_when_some_mutants_are_equivalent() -> None:
    report = build_report("perturbation", _rows(), {"bootstrap": 200}).to_json()
    row = report["tables"]["perturbation"]["rows"][0]
    # Raw: semantic drops 0.5 x4 and 0 x4 against controls 0.1, 0.2, 0.6, 0, 0.9: (4*3 + 4*0.5) / 40 = 0.35.
    raw_drops = [0.5] * 4 + [0.0] * 4 + [*CONTROL_DROPS, 0.9]
    raw = roc_auc_score([1] * 8 + [0] * 5, raw_drops)
    assert raw == pytest.approx(0.35)
    assert row["arm_discrimination"]["value"] == pytest.approx(raw)
    # Confirmed: the real defects (0.5 x4) against the confirmed controls: 12 / 16 = 0.75.
    confirmed = row["arm_discrimination_confirmed"]
    assert confirmed["value"] == pytest.approx(0.75)
    assert confirmed["n"] == 8 and confirmed["clusters"] == 4
    assert row["confirmed_mutants"] == 8
    difference = row["arm_discrimination_confirmed_difference"]
    assert difference["value"] == pytest.approx(0.4)
    assert difference["n"] == 13 and difference["clusters"] == 4
    lo, hi = difference["ci"]
    assert lo <= 0.4 <= hi and lo > 0  # the equivalent mutants only ever pull the raw A_j down here
    assert np.isfinite(confirmed["ci"]).all()


def test_without_df_scores_only_the_raw_a_j_is_reported() -> None:
    rows = [{k: v for k, v in r.items() if k != "df_score"} for r in _rows()]
    row = build_report("perturbation", rows, {"bootstrap": 20}).to_json()["tables"]["perturbation"]["rows"][0]
    assert "arm_discrimination" in row and "arm_discrimination_confirmed" not in row
    assert "confirmed_mutants" not in row


def test_a_trust_card_judges_defect_detection_on_the_confirmed_mutants() -> None:
    """Where differential fuzzing confirmed mutants, the defect-detection card's verdict reads the confirmed A_j
    (shown beside the raw one); without df_scores it reads the raw A_j."""
    from metrics.reports.trust import CONFIRMED_DEFECT_METRIC, DEFECT_METRIC, judge_cards

    def card(rows: list[dict[str, Any]]) -> dict[str, Any]:
        cards = judge_cards(rows, "j", "blind", bootstrap=50, min_items=1, min_clusters=1)["cards"]
        return next(c for c in cards if c["use"] == "defect_detection")

    confirmed = card(_rows())
    names = {f["name"] for f in confirmed["figures"]}
    assert {DEFECT_METRIC, CONFIRMED_DEFECT_METRIC} <= names
    assert "confirmed A_j" in confirmed["verdict"]
    raw = card([{**r, "df_score": None} for r in _rows()])
    assert CONFIRMED_DEFECT_METRIC not in {f["name"] for f in raw["figures"]}
    assert "confirmed" not in raw["verdict"] and "A_j" in raw["verdict"]
