"""Report builders (metrics.reports), plots and the HTML page on seeded synthetic tidy judgment tables."""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

import numpy as np
import pytest

from metrics.html import render_html
from metrics.panel import panel_consensus
from metrics.plots import render, render_all
from metrics.registry import compute
from metrics.reports import (
    BUILDERS,
    KINDS,
    ReportParamError,
    agreement,
    axiom,
    build_report,
    cocreation,
    judge_quality,
    perturbation,
    similarity,
)
from metrics.reports.params import parameters

BOOT = 200
SLOW_BOOT = 60  # the AXIOM subtask MCCs call scikit-learn once per resample (~3 ms each)
JUDGES = ("alpha", "beta", "gamma")
CONDITIONS = ("blind", "nonblind")
PNG = b"\x89PNG\r\n\x1a\n"


def make_rows(
    seed: int = 0, n_traj: int = 40, repeats: int = 1, mutants: bool = False, one_class: bool = False
) -> list[dict[str, Any]]:
    """3 judges x 2 conditions over ~120 attempts in ``n_traj`` trajectories (1..5 turns each)."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    skill = {"alpha": 2.5, "beta": 1.5, "gamma": 0.7}
    attempts: list[dict[str, Any]] = []
    for t in range(n_traj):
        participant, problem = f"u{t % 13}", f"p{t % 7}"
        turns = int(rng.integers(1, 6))
        solve_at = int(rng.integers(1, 7))
        for k in range(1, turns + 1):
            label = 1 if k >= solve_at else 0
            if one_class:
                label = 1
            quality = int(np.clip(round(rng.normal(3.5 if label else 1.5, 1.0)), 0, 5))
            attempts.append(
                {
                    "attempt_id": f"a{t}_{k}",
                    "problem_id": problem,
                    "participant": participant,
                    "turn": k,
                    "trajectory": f"{participant}|{problem}",
                    "label_ac": label,
                    "label_score": float(quality),
                }
            )
    for attempt in attempts:
        latent = {c: rng.normal() for c in CONDITIONS}
        for judge in JUDGES:
            for ci, condition in enumerate(CONDITIONS):
                base = (skill[judge] + 0.5 * ci) * (attempt["label_ac"] - 0.5) + 0.6 * latent[condition]
                for repeat in range(repeats):
                    logit = base + 0.3 * rng.normal()
                    p = float(round(1 / (1 + math.exp(-logit)), 2))
                    row = {
                        **attempt,
                        "judge": judge,
                        "condition": condition,
                        "repeat": repeat,
                        "status": "ok",
                        "p_ac": p if judge != "gamma" else None,
                        "score": float(np.clip(round(attempt["label_score"] + rng.normal(0, 1.0)), 0, 5))
                        if judge == "gamma"
                        else None,
                        "parent_attempt_id": None,
                        "operator": None,
                        "arm": None,
                        "severity": None,
                    }
                    if judge == "gamma":
                        row["score"] = float(np.clip(round(5 * p), 0, 5))
                    rows.append(row)
    rows.append({**rows[0], "status": "failed", "p_ac": None, "score": None, "judge": "delta"})
    if mutants:
        rows += _mutants(rng, attempts)
    return rows


def _mutants(rng: np.random.Generator, attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    accepted = [a for a in attempts if a["label_ac"] == 1][:25]
    operators = {
        "flip_cmp": ("semantic", 2.0),
        "off_by_one": ("semantic", 3.0),
        "drop_check": ("semantic", 4.0),
        "rename": ("control", None),
        "reformat": ("control", None),
    }
    for seed_attempt in accepted:
        for op, (arm, severity) in operators.items():
            for judge in JUDGES:
                for condition in CONDITIONS:
                    drop = (0.1 * (severity or 0) + rng.normal(0, 0.05)) if arm == "semantic" else rng.normal(0, 0.03)
                    out.append(
                        {
                            **seed_attempt,
                            "attempt_id": f"{seed_attempt['attempt_id']}~{op}",
                            "label_ac": 0,
                            "judge": judge,
                            "condition": condition,
                            "repeat": 0,
                            "status": "ok",
                            "p_ac": float(np.clip(0.9 - drop, 0, 1)),
                            "score": None,
                            "parent_attempt_id": seed_attempt["attempt_id"],
                            "operator": op,
                            "arm": arm,
                            "severity": severity,
                        }
                    )
    return out


def make_pairs(seed: int = 0, n: int = 150) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        surface = float(rng.random())
        df = float(np.clip(0.5 * surface + 0.5 * rng.random(), 0, 1))
        if rng.random() < 0.2:
            df = 1.0
        pairs.append(
            {
                "df_score": round(df, 3),
                "surface_similarity": round(surface, 3),
                "cems": {
                    "codebleu": float(np.clip(surface + rng.normal(0, 0.1), 0, 1)),
                    "bleu": float(np.clip(0.8 * surface + rng.normal(0, 0.1), 0, 1)),
                },
            }
        )
    return pairs


def _row(report: dict[str, Any], table: str, **keys: Any) -> dict[str, Any]:
    matches = [r for r in report["tables"][table]["rows"] if all(r.get(k) == v for k, v in keys.items())]
    assert len(matches) == 1, (table, keys)
    return matches[0]


def _json_clean(report: dict[str, Any]) -> None:
    text = json.dumps(report, allow_nan=False)  # raises on NaN/inf
    assert "NaN" not in text


def _contains(cell: dict[str, Any]) -> None:
    lo, hi = cell["ci"]
    assert lo - 1e-9 <= cell["value"] <= hi + 1e-9


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return make_rows()


@pytest.fixture(scope="module")
def quality(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return judge_quality.build(rows, bootstrap=BOOT, folds=5).to_json()


def test_judge_quality_matches_registry(rows: list[dict[str, Any]], quality: dict[str, Any]) -> None:
    _json_clean(quality)
    assert quality["kind"] == "judge_quality"
    metric_rows = quality["tables"]["metrics"]["rows"]
    assert len(metric_rows) == len(JUDGES) * len(CONDITIONS) + len(CONDITIONS)  # + panel per condition
    for judge, condition in (("alpha", "blind"), ("gamma", "nonblind")):
        chosen = sorted(
            (r for r in rows if r["judge"] == judge and r["condition"] == condition and r["status"] == "ok"),
            key=lambda r: r["attempt_id"],
        )
        y = [r["label_ac"] for r in chosen]
        p = [r["p_ac"] if r["p_ac"] is not None else r["score"] / 5 for r in chosen]
        groups = [r["trajectory"] for r in chosen]
        expected = compute(
            list(judge_quality.METRICS),
            y,
            p,
            groups=groups,
            params={"folds": 5, "bins": 15},
            bootstrap=BOOT,
            cluster=groups,
            seed=0,
        )
        row = _row(quality, "metrics", judge=judge, condition=condition)
        assert row["n"] == len(chosen) and row["positives"] == sum(y)
        for metric in judge_quality.METRICS:
            assert row[metric]["value"] == pytest.approx(expected["values"][metric])
            assert row[metric]["ci"] == pytest.approx(expected["ci"][metric])
            _contains(row[metric])


def test_judge_quality_panel_and_differences(rows: list[dict[str, Any]], quality: dict[str, Any]) -> None:
    panel_row = _row(quality, "metrics", judge="panel", condition="nonblind")
    for metric in judge_quality.PANEL_METRICS:
        _contains(panel_row[metric])
    assert "log_loss" not in panel_row and "metrics/panel/nonblind/log_loss" in quality["errors"]
    # Panel value equals registry on panel_consensus of the judges' probabilities.
    chosen = [r for r in rows if r["condition"] == "nonblind" and r["status"] == "ok"]
    aids = sorted({r["attempt_id"] for r in chosen})
    prob = {(r["judge"], r["attempt_id"]): r["p_ac"] if r["p_ac"] is not None else r["score"] / 5 for r in chosen}
    consensus = panel_consensus([[prob[(j, a)] for a in aids] for j in JUDGES])
    label = {r["attempt_id"]: r["label_ac"] for r in chosen}
    expected = compute(["roc_auc"], [label[a] for a in aids], consensus)
    assert panel_row["roc_auc"]["value"] == pytest.approx(expected["values"]["roc_auc"])
    diffs = quality["tables"]["condition_differences"]["rows"]
    assert {r["difference"] for r in diffs} == {"nonblind - blind"}
    for row in diffs:
        for metric in judge_quality.METRICS:
            assert len(row[metric]["ci"]) == 2
    panel_diffs = quality["tables"]["panel_differences"]["rows"]
    assert {r["difference"] for r in panel_diffs} == {f"{j} - panel" for j in JUDGES}
    alpha_blind = _row(quality, "metrics", judge="alpha", condition="blind")
    d = _row(quality, "panel_differences", condition="blind", difference="alpha - panel")
    assert d["roc_auc"]["value"] == pytest.approx(
        alpha_blind["roc_auc"]["value"] - _row(quality, "metrics", judge="panel", condition="blind")["roc_auc"]["value"]
    )
    assert set(quality["plots"]) == {"roc", "reliability"}
    assert set(quality["plots"]["roc"]["conditions"]["blind"]) == {*JUDGES, "panel"}


def test_weighted_outputs_are_a_twin_beside_the_sampled_ones_on_the_same_resamples(
    rows: list[dict[str, Any]],
) -> None:
    """A judge whose rows carry probability-weighted outputs is also scored as "<judge> (weighted)", with exactly the
    figures the registry gives those outputs, and a paired weighted-minus-sampled difference; the twin never joins
    the panel (it is the same judge read another way)."""
    rng = np.random.default_rng(7)
    weighted_rows = []
    for row in rows:
        if row["judge"] == "alpha" and row["status"] == "ok":
            # A smoother probability than the sampled one, as a judge's token probabilities are.
            row = {**row, "weighted_p_ac": float(np.clip(row["p_ac"] + rng.normal(0, 0.05), 0, 1))}
        weighted_rows.append(row)
    report = judge_quality.build(weighted_rows, bootstrap=BOOT, folds=5).to_json()
    plain = judge_quality.build(rows, bootstrap=BOOT, folds=5).to_json()
    twin = _row(report, "metrics", judge="alpha (weighted)", condition="blind")
    chosen = sorted(
        (r for r in weighted_rows if r["judge"] == "alpha" and r["condition"] == "blind" and r["status"] == "ok"),
        key=lambda r: r["attempt_id"],
    )
    expected = compute(
        list(judge_quality.METRICS),
        [r["label_ac"] for r in chosen],
        [r["weighted_p_ac"] for r in chosen],
        groups=[r["trajectory"] for r in chosen],
        params={"folds": 5, "bins": judge_quality.ECE_BINS},
    )
    for metric in ("roc_auc", "ece", "brier"):
        assert twin[metric]["value"] == pytest.approx(expected["values"][metric])
    # The sampled rows and the panel are those of the report without weights.
    assert _row(report, "metrics", judge="alpha", condition="blind") == _row(
        plain, "metrics", judge="alpha", condition="blind"
    )
    assert _row(report, "metrics", judge="panel", condition="blind") == _row(
        plain, "metrics", judge="panel", condition="blind"
    )
    diff = _row(report, "weighting_differences", judge="alpha", condition="blind")
    assert diff["difference"] == "alpha (weighted) - alpha"
    assert diff["roc_auc"]["value"] == pytest.approx(
        twin["roc_auc"]["value"] - _row(report, "metrics", judge="alpha", condition="blind")["roc_auc"]["value"]
    )
    assert len(diff["ece"]["ci"]) == 2
    assert {r["judge"] for r in report["tables"]["weighting_differences"]["rows"]} == {"alpha"}
    # Choosing the judge brings its twin.
    chosen_only = judge_quality.build(weighted_rows, judges=["alpha"], bootstrap=BOOT, folds=5).to_json()
    assert _row(chosen_only, "metrics", judge="alpha (weighted)", condition="blind") == twin
    assert _row(chosen_only, "weighting_differences", judge="alpha", condition="blind") == diff


def test_judge_quality_one_class_gives_reasons() -> None:
    report = judge_quality.build(make_rows(one_class=True), bootstrap=BOOT, folds=5).to_json()
    _json_clean(report)
    row = _row(report, "metrics", judge="alpha", condition="blind")
    for metric in ("roc_auc", "pr_auc", "mcc_oof"):
        assert metric not in row
        assert report["errors"][f"metrics/alpha/blind/{metric}"]
    assert "brier" in row  # still defined on one class


def test_judge_quality_empty_and_problem_cluster() -> None:
    report = judge_quality.build([], bootstrap=BOOT).to_json()
    _json_clean(report)
    assert report["tables"]["metrics"]["rows"] == []
    by_problem = judge_quality.build(
        make_rows(), judges=["alpha", "beta"], bootstrap=BOOT, folds=5, cluster="problem"
    ).to_json()
    assert by_problem["params"]["cluster"] == "problem"
    _contains(_row(by_problem, "metrics", judge="alpha", condition="blind")["roc_auc"])
    with pytest.raises(ValueError, match="cluster"):
        judge_quality.build(make_rows(), cluster="participant")


@pytest.fixture(scope="module")
def agreement_report() -> dict[str, Any]:
    return agreement.build(make_rows(repeats=2), bootstrap=BOOT).to_json()


@pytest.fixture(scope="module")
def axiom_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return axiom.build(rows, bootstrap=SLOW_BOOT).to_json()


@pytest.fixture(scope="module")
def perturbation_report() -> dict[str, Any]:
    return perturbation.build(make_rows(mutants=True), bootstrap=BOOT).to_json()


def test_agreement(rows: list[dict[str, Any]], agreement_report: dict[str, Any]) -> None:
    report = agreement_report
    _json_clean(report)
    pairs = report["tables"]["pairwise"]["rows"]
    assert len(pairs) == 3 * len(CONDITIONS)
    for row in pairs:
        for metric in ("cohen_kappa", "spearman", "kendall_tau"):
            _contains(row[metric])
    multi = _row(report, "multi_rater", condition="blind")
    _contains(multi["fleiss_kappa"])
    _contains(multi["krippendorff_alpha"])
    consistency = report["tables"]["consistency"]["rows"]
    assert len(consistency) == len(JUDGES) * len(CONDITIONS)
    assert all("icc" in r and "krippendorff_alpha" in r for r in consistency)
    assert len(report["plots"]["kappa_heatmap"]["conditions"]["blind"]) == 3
    single = agreement.build(rows, judges=["alpha", "beta"], conditions=["blind"], bootstrap=10).to_json()
    assert "consistency" in single["errors"]
    empty = agreement.build([], bootstrap=BOOT).to_json()
    assert empty["tables"]["pairwise"]["rows"] == []


def test_cocreation(rows: list[dict[str, Any]]) -> None:
    report = cocreation.build(rows, bootstrap=BOOT).to_json()
    _json_clean(report)
    turns = report["tables"]["turns"]["rows"]
    assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1))
    for row in turns:
        _contains(row["success_at_turn"])
        _contains(row["unsolved_km"])
    values = [r["success_at_turn"]["value"] for r in turns]
    assert values == sorted(values)
    _contains(report["tables"]["summary"]["rows"][0]["success_after_failure"])
    assert {"success_at_turn", "kaplan_meier"} <= set(report["plots"])
    empty = cocreation.build([], bootstrap=BOOT).to_json()
    assert "cocreation" in empty["errors"] and not empty["plots"]


def test_axiom(rows: list[dict[str, Any]], axiom_report: dict[str, Any]) -> None:
    report = axiom_report
    _json_clean(report)
    alpha = _row(report, "axiom", judge="alpha", condition="blind")
    assert alpha["scale"].startswith("[0, 1]")
    gamma = _row(report, "axiom", judge="gamma", condition="blind")
    assert gamma["scale"] == "0..5"
    for metric in ("axiom_gating", "axiom_functionality", "spearman", "emd", "mean", "entropy"):
        assert metric in gamma or f"axiom/gamma/blind/{metric}" in report["errors"]
    assert "spearman" in gamma and "mean" in gamma
    empty = axiom.build([{**r, "label_score": None} for r in rows], bootstrap=BOOT).to_json()
    assert "axiom" in empty["errors"]


def test_perturbation(perturbation_report: dict[str, Any]) -> None:
    report = perturbation_report
    _json_clean(report)
    row = _row(report, "perturbation", judge="alpha", condition="blind")
    _contains(row["arm_discrimination"])
    assert row["arm_discrimination"]["value"] > 0.8
    assert "semantic_share" in row and "severity_gradient" in row
    panels = report["plots"]["perturbation_shift"]["panels"]
    assert panels["alpha / blind"]["control_band"] is not None
    with_mutants = make_rows(mutants=True)
    assert (
        "cocreation" not in cocreation.build(with_mutants, bootstrap=10).to_json()["errors"]
    )  # mutants are not attempts here
    plain = judge_quality.build(with_mutants, judges=["alpha"], conditions=["blind"], bootstrap=0, folds=5).to_json()
    assert _row(plain, "metrics", judge="alpha", condition="blind")["n"] == len(
        {r["attempt_id"] for r in make_rows() if r["status"] == "ok"}
    )
    none = perturbation.build(make_rows(), bootstrap=10).to_json()
    assert none["errors"]["perturbation"].startswith("no mutants")


def test_similarity() -> None:
    report = similarity.from_pairs(make_pairs(), bootstrap=BOOT, step=0.05).to_json()
    _json_clean(report)
    row = _row(report, "metrics", metric="codebleu")
    _contains(row["mae"])
    _contains(row["distinguishability"])
    regions = report["tables"]["regions"]["rows"]
    assert sum(r["pairs"] for r in regions) == 150
    assert report["plots"]["similarity_scatter"]["thresholds"] is not None
    empty = similarity.from_pairs([], bootstrap=BOOT).to_json()
    assert "similarity" in empty["errors"]


def _check_png(data: bytes) -> None:
    assert data.startswith(PNG) and len(data) > 1024


@pytest.fixture(scope="module")
def all_reports(
    rows: list[dict[str, Any]],
    quality: dict[str, Any],
    agreement_report: dict[str, Any],
    axiom_report: dict[str, Any],
    perturbation_report: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    return {
        "judge_quality": quality,
        "agreement": agreement_report,
        "cocreation": cocreation.build(rows, bootstrap=BOOT).to_json(),
        "perturbation": perturbation_report,
        "similarity": similarity.from_pairs(make_pairs(), bootstrap=BOOT, step=0.05).to_json(),
        "axiom": axiom_report,
    }


def test_render_all_plots(all_reports: dict[str, dict[str, Any]]) -> None:
    seen = set()
    for report in all_reports.values():
        images = render_all(report)
        assert set(images) == set(report["plots"])
        for data in images.values():
            _check_png(data)
        seen |= set(images)
    expected = {
        "roc",
        "reliability",
        "kappa_heatmap",
        "perturbation_shift",
        "success_at_turn",
        "kaplan_meier",
        "similarity_scatter",
    }
    assert expected <= seen
    _check_png(render("roc", all_reports["judge_quality"]["plots"]["roc"]))


def test_render_html(all_reports: dict[str, dict[str, Any]]) -> None:
    for kind, report in all_reports.items():
        images = render_all(report)
        page = render_html(report, images, f"Tribunal <{kind}>")
        assert page.lower().startswith("<!doctype html>") and page.count("<html") == 1
        assert "Tribunal &lt;" in page
        for table in report["tables"].values():
            assert table["title"] in page
        assert page.count("data:image/png;base64,") == len(images)
        for encoded in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page):
            assert base64.b64decode(encoded).startswith(PNG)
        assert not re.search(r"(src|href)=\"https?:", page)
        assert "http://" not in page and "https://" not in page
        assert "<script" not in page
        for where in report["errors"]:
            assert where.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in page
    page = render_html(all_reports["judge_quality"], {}, "x")
    assert re.search(r"\d\.\d{3} \[-?\d\.\d{3}, -?\d\.\d{3}\]", page)


def test_uniform_builder_signature(rows: list[dict[str, Any]]) -> None:
    options = {"judges": ["alpha", "beta"], "conditions": ["blind"], "bootstrap": 5, "seed": 1}
    assert set(KINDS) == {
        "judge_quality",
        "agreement",
        "cocreation",
        "axiom",
        "perturbation",
        "similarity",
        "pass_at_k",
        "panels",
        "trust",
    }
    for kind in KINDS:
        report = BUILDERS[kind](rows, cluster="problem", **options).to_json()
        assert report["kind"] == kind and report["params"]["cluster"] == "problem"
        json.dumps(report, allow_nan=False)


# ------------------------------------------------------------------------------ request parameters -> builders


def _clusters(report: dict[str, Any], table: str) -> set[int]:
    return {row["clusters"] for row in report["tables"][table]["rows"]}


def test_every_request_parameter_reaches_every_builder_that_takes_it(rows: list[dict[str, Any]]) -> None:
    """The worker once passed `cluster` to judge_quality only: agreement and perturbation reports silently resampled
    trajectories and seeds whatever the request said. Every field a builder declares now reaches it."""
    request = {
        "judges": ["alpha", "beta"],
        "conditions": ["blind"],
        "folds": 3,
        "bootstrap": 7,
        "cluster": "problem",
        "seed": 5,
        "k": [1, 2],
        "filter": {"problem_ids": ["p0"]},
    }
    for kind in KINDS:
        taken = parameters(kind)
        assert {"bootstrap", "cluster", "seed"} <= set(taken), kind
        report = build_report(kind, rows, request).to_json()
        assert report["kind"] == kind
        for name in taken:
            # The trust report records the thresholds and minimums it used, which this request does not give.
            if name in report["params"] and name in request:
                assert report["params"][name] == request[name], (kind, name)
        assert report["params"]["cluster"] == "problem" and report["params"]["seed"] == 5
        assert report["params"]["bootstrap"] == 7
    assert "folds" in parameters("judge_quality") and "folds" not in parameters("agreement")


def test_agreement_requested_by_problem_is_clustered_by_problem() -> None:
    table = make_rows(repeats=2)
    problems = len({r["problem_id"] for r in table})
    trajectories = len({r["trajectory"] for r in table})
    assert problems < trajectories
    base = {"judges": ["alpha", "beta"], "conditions": ["blind"], "bootstrap": 100}
    by_problem = build_report("agreement", table, {**base, "cluster": "problem"}).to_json()
    by_trajectory = build_report("agreement", table, {**base, "cluster": "trajectory"}).to_json()
    default = build_report("agreement", table, base).to_json()
    assert by_problem["params"]["cluster"] == "problem" and default["params"]["cluster"] == "trajectory"
    for name in ("pairwise", "multi_rater", "consistency"):
        assert _clusters(by_problem, name) == {problems}
        assert _clusters(by_trajectory, name) == {trajectories} == _clusters(default, name)
    key = {"condition": "blind", "judge_a": "alpha", "judge_b": "beta"}
    wide, narrow = _row(by_problem, "pairwise", **key), _row(by_trajectory, "pairwise", **key)
    assert wide["spearman"]["value"] == narrow["spearman"]["value"]  # same sample, other resampling units
    assert wide["spearman"]["ci"] != narrow["spearman"]["ci"]
    assert default["tables"] == by_trajectory["tables"]


def test_perturbation_honours_the_requested_cluster() -> None:
    table = make_rows(mutants=True)
    by_seed = build_report("perturbation", table, {"bootstrap": 50}).to_json()
    by_problem = build_report("perturbation", table, {"cluster": "problem", "bootstrap": 50}).to_json()
    seeds = {r["parent_attempt_id"] for r in table if r.get("parent_attempt_id")}
    problems = {r["problem_id"] for r in table if r.get("parent_attempt_id")}
    assert by_seed["params"]["cluster"] == "seed" and by_problem["params"]["cluster"] == "problem"
    assert _clusters(by_seed, "perturbation") == {len(seeds)}
    assert _clusters(by_problem, "perturbation") == {len(problems)}


def test_a_cluster_the_kind_cannot_take_is_refused_naming_the_field(rows: list[dict[str, Any]]) -> None:
    with pytest.raises(ReportParamError, match="trajectory, problem") as refused:
        build_report("cocreation", rows, {"cluster": "seed"})
    assert refused.value.field == "cluster"
    with pytest.raises(ReportParamError) as unknown:
        build_report("vibes", rows, {})
    assert unknown.value.field == "kind"


# ------------------------------------------------------------------------------------------ similarity from rows


def similarity_rows(seed: int = 0, n: int = 60) -> list[dict[str, Any]]:
    """Attempts on 6 problems scored by two reference judges and an LLM judge, with executions of 4 tests."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for i in range(n):
        passed = int(rng.integers(0, 5))
        surface = float(np.clip(0.15 * passed + rng.normal(0.2, 0.15), 0, 1))
        attempt = {
            "attempt_id": f"s{i}",
            "problem_id": f"q{i % 6}",
            "participant": f"u{i % 5}",
            "turn": 1,
            "trajectory": f"u{i % 5}|q{i % 6}",
            "label_ac": int(passed == 4),
            "label_score": None,
            "repeat": 0,
            "status": "ok",
            "parent_attempt_id": None,
            "operator": None,
            "arm": None,
            "severity": None,
            "verdict": "AC" if passed == 4 else "WA",
            "passed": passed,
            "total": 4,
        }
        judges = {
            "edit": ("edit_similarity", surface),
            "cb": ("codebleu", float(np.clip(surface + rng.normal(0, 0.1), 0, 1))),
            "llm": (None, float(rng.random())),
        }
        for condition in CONDITIONS:
            for judge, (method, value) in judges.items():
                rows.append(
                    {**attempt, "judge": judge, "condition": condition, "method": method, "p_ac": value, "score": None}
                )
    rows.append({**rows[0], "attempt_id": "broken", "verdict": "IE", "passed": 0})
    return rows


def test_similarity_pairs_every_attempt_with_its_reference() -> None:
    table = similarity_rows()
    pairs, reason = similarity.pairs_from_rows(table)
    assert reason is None and len(pairs) == 60  # the IE execution is left out
    by_id = {p["attempt_id"]: p for p in pairs}
    first = [r for r in table if r["attempt_id"] == "s0"]
    assert by_id["s0"]["df_score"] == first[0]["passed"] / 4
    assert by_id["s0"]["surface_similarity"] == next(r["p_ac"] for r in first if r["judge"] == "edit")
    assert set(by_id["s0"]["cems"]) == {"cb", "edit"}  # the LLM judge is no reference metric
    assert by_id["s0"]["cluster"] == "q0"
    only = similarity.pairs_from_rows(table, judges=["cb"])[0]
    assert all(set(p["cems"]) == {"cb"} for p in only)

    report = build_report("similarity", table, {"bootstrap": BOOT}).to_json()
    _json_clean(report)
    assert report["params"]["cluster"] == "problem"
    for metric in ("cb", "edit"):
        row = _row(report, "metrics", metric=metric)
        assert row["n"] == 60 and row["clusters"] == 6
        _contains(row["mae"])
        _contains(row["distinguishability"])
        assert row["distinguishability"]["value"] > 1  # equivalent pairs look more alike
    assert sum(r["pairs"] for r in report["tables"]["regions"]["rows"]) == 60
    assert len(report["plots"]["similarity_scatter"]["df_score"]) == 60
    assert all("note" not in s for s in report["sections"])


def test_similarity_without_data_says_so(rows: list[dict[str, Any]]) -> None:
    for table in ([], rows, [{**r, "passed": None, "total": None} for r in similarity_rows()]):
        report = build_report("similarity", table, {"bootstrap": BOOT}).to_json()
        _json_clean(report)
        assert report["errors"]["similarity"].startswith("no code pairs")
        assert report["tables"]["metrics"]["rows"] == []
        notes = [s["note"] for s in report["sections"] if s.get("note")]
        assert notes and notes[0].startswith("No data: no code pairs")
        page = render_html(report, render_all(report), "similarity")
        assert "No data: no code pairs" in page
    report = build_report("similarity", [{**r, "passed": None} for r in similarity_rows()], {}).to_json()
    assert "61 attempts have an ok score" in report["errors"]["similarity"]
    assert "0 of those an execution" in report["errors"]["similarity"]


def test_every_kind_without_data_has_a_section_saying_so() -> None:
    for kind in KINDS:
        report = build_report(kind, [], {"bootstrap": 10}).to_json()
        _json_clean(report)
        assert report["sections"], kind
        assert any(s.get("note", "").startswith(("No data", "Not computed")) for s in report["sections"]), kind
        page = render_html(report, render_all(report), kind)
        assert "No data" in page


def test_the_perturbation_report_sets_guard_context_mutants_aside_in_its_variant() -> None:
    """Paper 001 VI-B4: semantic mutants in a guard context may be unreachable; A_j without them is reported."""
    rows: list[dict[str, Any]] = []
    for s in range(8):
        seed_id = f"seed{s}"
        base = {"problem_id": "p", "participant": None, "turn": None, "judge": "j", "method": None}
        base |= {"condition": "blind", "repeat": 0, "status": "ok", "score": None, "passed": 1, "total": 1}
        rows.append(
            {
                **base,
                "attempt_id": seed_id,
                "trajectory": seed_id,
                "label_ac": 1,
                "label_score": None,
                "p_ac": 0.9,
                "parent_attempt_id": None,
                "operator": None,
                "arm": None,
                "severity": None,
                "guard_context": None,
                "verdict": "AC",
            }
        )
        for k, (arm, severity, guard, p_ac) in enumerate(
            [("semantic", 4, False, 0.1), ("semantic", 2, True, 0.9), ("control", None, False, 0.88)]
        ):
            rows.append(
                {
                    **base,
                    "attempt_id": f"{seed_id}-{k}",
                    "trajectory": f"{seed_id}-{k}",
                    "label_ac": 0,
                    "label_score": None,
                    "p_ac": p_ac,
                    "parent_attempt_id": seed_id,
                    "operator": f"OP{k}",
                    "arm": arm,
                    "severity": severity,
                    "guard_context": guard,
                    "verdict": "WA",
                }
            )
    report = build_report("perturbation", rows, {"bootstrap": 0}).to_json()
    row = report["tables"]["perturbation"]["rows"][0]
    assert row["guard_mutants"] == 8
    # With the guard mutants (no drop at all), a semantic mutant outdrops a control half the time; without, always.
    assert row["arm_discrimination"]["value"] == pytest.approx(0.5)
    assert row["arm_discrimination_without_guard"]["value"] == pytest.approx(1.0)


def test_judge_quality_counts_mutants_as_attempts_only_when_asked() -> None:
    """A study of references and their verified mutants: by default a mutant is not an attempt (paper 001 measures
    judges on submissions); with `mutants`, each is one, labelled by its own verdict, clustered with its seed."""
    table = make_rows(n_traj=20, mutants=True)
    plain = judge_quality.build(table, bootstrap=50, folds=3, cluster="seed").to_json()
    counted = judge_quality.build(table, bootstrap=50, folds=3, cluster="seed", mutants=True).to_json()
    alpha = {"judge": "alpha", "condition": "blind"}
    attempts = {r["attempt_id"] for r in table if r["judge"] == "alpha" and r["condition"] == "blind"}
    originals = {a for a in attempts if "~" not in a}
    assert _row(plain, "metrics", **alpha)["n"] == len(originals)
    assert _row(counted, "metrics", **alpha)["n"] == len(attempts) > len(originals)
    # Clusters: a mutant joins its seed's, so the cluster count is the originals' either way.
    assert _row(counted, "metrics", **alpha)["clusters"] == _row(plain, "metrics", **alpha)["clusters"]
    assert counted["params"]["mutants"] is True and plain["params"]["mutants"] is False
