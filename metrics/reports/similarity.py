"""The ``similarity`` report: reference-based code metrics against functional similarity (paper 002, LoCaL: 3.2.2,
3.4, 4.2).

Its unit is a code pair ``{"df_score", "surface_similarity", "cems": {metric: score}}`` (optionally ``"equivalent":
0/1`` and ``"cluster"``): :func:`from_pairs` builds the report from pairs, :func:`build` from the tidy judgment
table, pairing every attempt with its problem's reference solution:

- ``cems``: the scores of the reference-based offline judges (``method`` chrf, codebleu or edit_similarity: the
  judge's ``p_ac``, its raw similarity to the reference), one metric per judge name;
- ``surface_similarity``: the ``edit_similarity`` judge's raw score (token edit similarity; LoCaL's SurfaceSim also
  averages an AST similarity, which the platform does not compute);
- ``df_score``: the share of the problem's tests on which the attempt behaves as the reference, read as the share of
  tests it passes (``passed / total`` of its execution, the reference being correct on every test); executions with
  an internal error (IE) are left out. This stands in for differential fuzzing on generated inputs until the
  platform stores those results; a pair is functionally equivalent when ``df_score >= equivalent_at`` (1: every
  test passed).

Tables: ``metrics`` (``metric, n, clusters, distinguishability, mae``), ``thresholds`` and ``regions`` (Algorithm 2).
Plot: ``similarity_scatter``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from metrics import similarity as similarity_lib
from metrics.errors import MetricInputError, UndefinedMetricError
from metrics.reports.common import (
    CLUSTERS,
    LABELS,
    TidyRow,
    check_cluster,
    cluster_of,
    compute_cells,
    interval_text,
    names,
    probability,
)
from metrics.reports.model import Cell, Report, Row, SimilarityScatter, Thresholds

KIND = "similarity"
REFERENCE_METHODS = ("chrf", "codebleu", "edit_similarity")
SURFACE_METHOD = "edit_similarity"
_METRIC_KEYS = ("metric", "n", "clusters", "distinguishability", "mae")
DF_SCORE_SOURCE = "share of the problem's tests the attempt passes (passed / total; IE executions left out)"
DF_SCORE_FUZZING = "differential fuzzing (paper 002, Algorithm 1) of the job's pairs"
# Algorithm 2's protocols (metrics/similarity.py): the paper's pseudo-code, or with the RQ3 constraints.
Protocol = Literal["pseudocode", "local_rq3"]
REGION_NAMES = {"dfs": "DFS", "sfd": "SFD", "control": "Control"}


def scored_pairs(results: Mapping[int, Mapping[str, Any] | None]) -> tuple[dict[int, dict[str, Any]], list[int]]:
    """The pairs of a similarity job that enter its table, by ordinal, as :func:`from_pairs` reads them, and the
    ordinals left out: a df_score of -1 (every repetition timed out, as LoCaL excludes them) or no surface
    similarity (the two programs in different languages)."""
    kept: dict[int, dict[str, Any]] = {}
    left_out: list[int] = []
    for ordinal, result in sorted(results.items()):
        result = result or {}
        df, surface = result.get("df_score"), (result.get("surface_similarity") or {}).get("mean")
        if df is None or df < 0 or surface is None:
            left_out.append(ordinal)
            continue
        cems = {k: v for k, v in (result.get("cems") or {}).items() if v is not None}
        kept[ordinal] = {"df_score": float(df), "surface_similarity": float(surface), "cems": cems}
    return kept, left_out


def dataset_summary(
    results: Mapping[int, Mapping[str, Any] | None],
    *,
    thresholds: Mapping[str, float] | None = None,
    protocol: Protocol = "local_rq3",
    complete: bool = True,
) -> dict[str, Any]:
    """A similarity job's LoCaL-style summary (paper 002, 3.4 and 4.2) over its scored pairs (ordinal -> result):
    each metric's MAE against df_score, the SFD/DFS thresholds (``thresholds`` if given, else Algorithm 2 under
    ``protocol`` once the job is ``complete``), the pairs and each metric's MAE per region, and every pair's region
    (``regions_by_pair``). Metrics missing for some pair are left out of Algorithm 2 and say so."""
    pairs, left_out = scored_pairs(results)
    summary: dict[str, Any] = {"pairs": len(pairs), "left_out": left_out, "errors": {}}
    errors: dict[str, str] = summary["errors"]
    if not pairs:
        errors["pairs"] = "no scored pair with a df_score of at least 0 yet"
        return summary
    ordinals = sorted(pairs)
    df = np.array([pairs[o]["df_score"] for o in ordinals])
    surface = np.array([pairs[o]["surface_similarity"] for o in ordinals])
    names_all = sorted({m for p in pairs.values() for m in p["cems"]})
    scores = {m: np.array([pairs[o]["cems"].get(m, np.nan) for o in ordinals]) for m in names_all}
    complete_scores = {m: v for m, v in scores.items() if not np.isnan(v).any()}
    summary["mae"] = {
        m: similarity_lib.prediction_error(df[~np.isnan(v)], v[~np.isnan(v)]) if (~np.isnan(v)).any() else None
        for m, v in scores.items()
    }
    for m in sorted(set(scores) - set(complete_scores)):
        errors[f"metrics/{m}"] = "some pairs lack this metric's score; Algorithm 2 leaves it out"
    chosen: similarity_lib.RegionThresholds | None = None
    if thresholds is not None:
        chosen = similarity_lib.RegionThresholds(
            float(thresholds["x_lo"]),
            float(thresholds["x_hi"]),
            float(thresholds["y_lo"]),
            float(thresholds["y_hi"]),
            float("nan"),
        )
        summary["thresholds_source"] = "given"
    elif not complete:
        errors["thresholds"] = "Algorithm 2 runs once every pair is scored"
    elif not complete_scores:
        errors["thresholds"] = "no metric scored every pair: Algorithm 2 needs metric scores"
    else:
        try:
            chosen = similarity_lib.select_region_thresholds(surface, df, complete_scores, protocol=protocol)
        except (MetricInputError, UndefinedMetricError) as exc:
            errors["thresholds"] = str(exc)
        summary["thresholds_source"] = f"algorithm 2 ({protocol})"
    if chosen is None:
        summary["thresholds"] = None
        return summary
    summary["thresholds"] = {
        "x_lo": chosen.x_lo,
        "x_hi": chosen.x_hi,
        "y_lo": chosen.y_lo,
        "y_hi": chosen.y_hi,
        "objective": None if np.isnan(chosen.objective) else chosen.objective,
    }
    masks = similarity_lib.region_masks(surface, df, chosen)
    regions: dict[str, Any] = {}
    for key, mask in masks.items():
        regions[REGION_NAMES[key]] = {
            "pairs": int(mask.sum()),
            "mae": {
                m: similarity_lib.prediction_error(df[mask & ~np.isnan(v)], v[mask & ~np.isnan(v)])
                if (mask & ~np.isnan(v)).any()
                else None
                for m, v in scores.items()
            },
        }
    summary["regions"] = regions
    summary["regions_by_pair"] = {
        o: next(REGION_NAMES[k] for k in ("dfs", "sfd", "control") if masks[k][i]) for i, o in enumerate(ordinals)
    }
    return summary


def _df_score(row: TidyRow) -> float | None:
    passed, total = row.get("passed"), row.get("total")
    if passed is None or not total or row.get("verdict") in (None, "IE"):
        return None
    return float(passed) / float(total)


def pairs_from_rows(
    rows: Sequence[TidyRow],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    cluster: str = "problem",
) -> tuple[list[dict[str, Any]], str | None]:
    """The code pairs (attempt, reference) of a tidy judgment table, and why there are none when there are none.

    Reads the rows of reference-based offline judges (``method`` in ``REFERENCE_METHODS``), ok and repeat 0; an
    offline judge scores every condition alike, so each judge's score is taken from the first of ``conditions``
    (sorted, by default) it has. ``judges`` restricts the metrics compared (``cems``), not the surface similarity.
    Every row's ``passed``, ``total`` and ``verdict`` are its attempt's execution (run 0).
    """
    chosen = [
        r
        for r in rows
        if r.get("method") in REFERENCE_METHODS
        and r.get("status") == "ok"
        and (r.get("repeat") or 0) == 0
        and probability(r) is not None
    ]
    order = {c: i for i, c in enumerate(names(chosen, "condition", conditions))}
    facts: dict[str, TidyRow] = {}
    cems: dict[str, dict[str, tuple[int, float]]] = {}
    surface: dict[str, tuple[int, str, float]] = {}
    for row in chosen:
        rank = order.get(str(row.get("condition")))
        if rank is None:
            continue
        aid, judge, value = str(row["attempt_id"]), str(row["judge"]), float(probability(row) or 0.0)
        facts.setdefault(aid, row)
        if judges is None or judge in judges:
            held = cems.setdefault(aid, {}).get(judge)
            if held is None or rank < held[0]:
                cems[aid][judge] = (rank, value)
        if row.get("method") == SURFACE_METHOD and (aid not in surface or (rank, judge) < surface[aid][:2]):
            surface[aid] = (rank, judge, value)
    pairs: list[dict[str, Any]] = []
    with_surface = with_execution = 0
    for aid in sorted(facts):
        df = _df_score(facts[aid])
        with_surface += aid in surface
        with_execution += aid in surface and df is not None
        if aid not in surface or df is None or not cems.get(aid):
            continue
        pairs.append(
            {
                "attempt_id": aid,
                "df_score": df,
                "surface_similarity": surface[aid][2],
                "cems": {judge: value for judge, (_, value) in sorted(cems[aid].items())},
                "cluster": cluster_of(facts[aid], cluster),
            }
        )
    if pairs:
        return pairs, None
    reason = (
        f"no code pairs: {len(facts)} attempts have an ok score of a reference-based offline judge "
        f"({', '.join(REFERENCE_METHODS)}; it needs a reference solution in the attempt's language), {with_surface} "
        f"of them an {SURFACE_METHOD} score (the surface similarity), {with_execution} of those an execution to "
        "compare behaviour with (passed / total tests, not IE)"
    )
    if with_execution and judges is not None:
        reason += f", and none is scored by the chosen judges ({', '.join(judges)})"
    return pairs, reason


def build(
    rows: Sequence[TidyRow],
    *,
    judges: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    bootstrap: int = 2000,
    cluster: str = "problem",
    seed: int = 0,
    step: float = 0.01,
    equivalent_at: float = 1.0,
) -> Report:
    """The similarity report of a tidy judgment table: every attempt paired with its problem's reference
    (:func:`pairs_from_rows`, module docstring); intervals resample ``cluster`` (by default the problem: pairs of one
    problem share their reference). No pair is a report whose sections say so, never an error.

    Rows of a similarity job (filter ``job_id``; the reports service reads them with ``pair_id``, ``df_score`` from
    differential fuzzing, ``surface_similarity``, ``cems``, and the job's ``thresholds`` and ``protocol``) are
    code pairs already: the report then shows them in a ``pairs`` table, with the job's thresholds or Algorithm 2
    under its protocol."""
    cluster = check_cluster(cluster, CLUSTERS, "similarity")
    if rows and all("pair_id" in row for row in rows):
        first = rows[0]
        pairs = [{**row, "cluster": cluster_of(row, cluster)} for row in rows]
        return from_pairs(
            pairs,
            bootstrap=bootstrap,
            seed=seed,
            equivalent_at=equivalent_at,
            thresholds=first.get("thresholds"),
            protocol=first.get("protocol") or "local_rq3",
            params={"cluster": cluster, "df_score": DF_SCORE_FUZZING, "surface_similarity": "SurfaceSim (Eq. 1)"},
        )
    pairs, reason = pairs_from_rows(rows, judges=judges, conditions=conditions, cluster=cluster)
    return from_pairs(
        pairs,
        bootstrap=bootstrap,
        seed=seed,
        step=step,
        equivalent_at=equivalent_at,
        params={
            "judges": None if judges is None else list(judges),
            "conditions": None if conditions is None else list(conditions),
            "cluster": cluster,
            "df_score": DF_SCORE_SOURCE,
            "surface_similarity": f"{SURFACE_METHOD} judge's raw score",
        },
        empty_reason=reason,
    )


def from_pairs(
    pairs: Sequence[Mapping[str, Any]],
    *,
    bootstrap: int = 2000,
    seed: int = 0,
    step: float = 0.01,
    equivalent_at: float = 1.0,
    params: Mapping[str, Any] | None = None,
    empty_reason: str | None = None,
    thresholds: Mapping[str, float] | None = None,
    protocol: Protocol | None = None,
) -> Report:
    """Reference-based metrics against functional similarity (paper 002, 3.2.2, 3.4, 4.2).

    ``pairs``: ``{"df_score", "surface_similarity", "cems": {metric: score}}`` per code pair (optionally
    ``"equivalent": 0/1``, otherwise a pair counts as functionally equivalent when ``df_score >= equivalent_at``;
    and ``"cluster"``, the bootstrap cluster, else every pair its own). Per metric: distinguishability and MAE
    against ``df_score``; the SFD/DFS thresholds (``thresholds`` if given, else Algorithm 2: the pseudo-code on grid
    ``step``, or under ``protocol``) with the number of pairs and each metric's MAE per region. Pairs with a
    ``pair_id`` are also listed, one row each, in a ``pairs`` table.
    """
    report = Report(
        KIND, {**(params or {}), "bootstrap": bootstrap, "seed": seed, "step": step, "equivalent_at": equivalent_at}
    )
    errors = report.errors
    cluster = str((params or {}).get("cluster") or "pair")
    if not pairs:
        errors["similarity"] = empty_reason or (
            "no code pairs: similarity needs pairs with df_score, surface_similarity and cems"
        )
        report.add_table("metrics", "Metrics against functional similarity", _METRIC_KEYS, [], LABELS)
        _sections(report, cluster, bootstrap, note=f"No data: {errors['similarity']}.")
        return report
    df = [float(p["df_score"]) for p in pairs]
    surface = [float(p["surface_similarity"]) for p in pairs]
    clusters = [str(p["cluster"]) for p in pairs] if all(p.get("cluster") is not None for p in pairs) else None
    equivalent = [
        int(p["equivalent"]) if p.get("equivalent") is not None else int(float(p["df_score"]) >= equivalent_at)
        for p in pairs
    ]
    metric_rows: list[Row] = []
    scores: dict[str, list[float]] = {}
    for name in sorted({m for p in pairs for m in (p.get("cems") or {})}):
        values = [(p.get("cems") or {}).get(name) for p in pairs]
        where = f"metrics/{name}"
        if any(v is None for v in values):
            errors[where] = "some pairs lack this metric's score; it is left out"
            continue
        scores[name] = [float(v) for v in values if v is not None]
        common = {"y_score": scores[name], "cluster": clusters, "seed": seed}
        d, _ = compute_cells(["distinguishability"], where, errors, bootstrap, y_true=equivalent, **common)
        m, _ = compute_cells(["mae"], where, errors, bootstrap, y_true=df, **common)
        n_clusters = len(set(clusters)) if clusters is not None else len(pairs)
        metric_rows.append({"metric": name, "n": len(pairs), "clusters": n_clusters, **d, **m})
    report.add_table("metrics", "Metrics against functional similarity", _METRIC_KEYS, metric_rows, LABELS)
    plot = SimilarityScatter("SurfaceSim vs df_score", surface_similarity=surface, df_score=df)
    if not scores:
        errors["regions"] = "no metric scored every pair: Algorithm 2 needs metric scores"
    else:
        try:
            if thresholds is not None:
                th = similarity_lib.RegionThresholds(
                    float(thresholds["x_lo"]),
                    float(thresholds["x_hi"]),
                    float(thresholds["y_lo"]),
                    float(thresholds["y_hi"]),
                    objective=float("nan"),
                )
            elif protocol is not None:
                th = similarity_lib.select_region_thresholds(surface, df, scores, protocol=protocol)
            else:
                th = similarity_lib.select_region_thresholds(surface, df, scores, step=step)
        except (MetricInputError, UndefinedMetricError) as exc:
            errors["regions"] = str(exc)
        else:
            plot.thresholds = Thresholds(th.x_lo, th.x_hi, th.y_lo, th.y_hi, th.objective)
            masks = similarity_lib.region_masks(surface, df, th)
            region_rows: list[Row] = []
            pair_clusters = clusters if clusters is not None else [str(i) for i in range(len(pairs))]
            for region in ("dfs", "sfd", "control"):
                mask = masks[region]
                row: Row = {
                    "region": region.upper() if region != "control" else "Control",
                    "pairs": int(mask.sum()),
                    "clusters": len({c for c, m in zip(pair_clusters, mask.tolist(), strict=True) if m}),
                }
                for name, metric_values in scores.items():
                    if mask.any():
                        err = similarity_lib.prediction_error(np.array(df)[mask], np.array(metric_values)[mask])
                        row[f"mae:{name}"] = Cell(err)
                    else:
                        errors[f"regions/{region}/mae:{name}"] = "empty region"
                region_rows.append(row)
            report.add_table(
                "thresholds",
                "Algorithm 2 thresholds",
                ["pairs", "clusters", "x_lo", "x_hi", "y_lo", "y_hi", "objective"],
                [{"pairs": len(pairs), "clusters": len(set(pair_clusters)), **plot.thresholds.to_json()}],
                LABELS,
            )
            report.add_table(
                "regions",
                "Pairs and MAE per region",
                ["region", "pairs", "clusters", *[f"mae:{n}" for n in scores]],
                region_rows,
                LABELS,
                size=("pairs", "clusters"),
            )
    report.plots["similarity_scatter"] = plot
    if all(p.get("pair_id") is not None for p in pairs):
        _pairs_table(report, pairs, plot.thresholds, sorted(scores))
    _sections(report, cluster, bootstrap)
    return report


def _pairs_table(
    report: Report, pairs: Sequence[Mapping[str, Any]], thresholds: Thresholds | None, metrics: Sequence[str]
) -> None:
    """LoCaL's table: one row per pair with df_score, SurfaceSim, every metric and its region."""
    rows: list[Row] = []
    for pair in pairs:
        x, y = float(pair["surface_similarity"]), float(pair["df_score"])
        region = None
        if thresholds is not None:
            region = "DFS" if x <= thresholds.x_lo and y >= thresholds.y_hi else "Control"
            region = "SFD" if x >= thresholds.x_hi and y <= thresholds.y_lo else region
        # One pair's own measurements: each from one item in one cluster, never judged against the minimums.
        row: Row = {
            "pair": str(pair["pair_id"]),
            "df_score": Cell(y, n=1, clusters=1),
            "surface_similarity": Cell(x, n=1, clusters=1),
            "region": region,
        }
        for name in metrics:
            value = (pair.get("cems") or {}).get(name)
            row[name] = None if value is None else Cell(float(value), n=1, clusters=1)
        rows.append(row)
    report.add_table(
        "pairs",
        "Pairs",
        ["pair", "df_score", "surface_similarity", *metrics, "region"],
        rows,
        LABELS,
        observations=True,
    )


def _sections(report: Report, cluster: str, bootstrap: int, note: str | None = None) -> None:
    report.add_section(
        "metrics",
        "Do the code metrics track functional similarity?",
        "Each code pair is an attempt and its problem's reference solution. Distinguishability is a metric's mean "
        "score on functionally equivalent pairs divided by its mean on non-equivalent pairs (above 1 = it scores "
        "equivalent code higher). MAE is the mean absolute gap between the metric's score and df_score, the share "
        "of tests on which both programs behave the same (lower is better). Brackets are 95% intervals from a "
        f"{interval_text(cluster, bootstrap)}.",
        ["metrics"],
        note=note,
    )
    report.add_section(
        "regions",
        "Where do the metrics fail?",
        "Algorithm 2 picks the thresholds that separate two corners: DFS (different surface, same function: low "
        "SurfaceSim, high df_score) and SFD (similar surface, different function), where surface-based metrics err "
        "most compared with the rest (Control).",
        ["thresholds", "regions"],
        ["similarity_scatter"],
    )
