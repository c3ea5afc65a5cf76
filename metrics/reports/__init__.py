"""The reports of the metrics service (api.md "Metrics", ``POST /v1/reports`` kinds), built from a tidy judgment table.

Pure: python data in, typed reports out (:mod:`metrics.reports.model`; ``Report.to_json()`` is the stored and
served JSON). Every number comes from the metric library (``metrics.registry`` and the modules it wraps); these
modules only select rows, align arrays and lay the results out. One module per kind (``judge_quality``,
``agreement``, ``cocreation``, ``axiom``, ``perturbation``, ``similarity``, ``panels``, and ``passk`` for
``pass_at_k``), each
with a ``build(rows, **params)``; :mod:`metrics.reports.params` maps a request's parameters to a builder's arguments
(``build_report``), which ends every report over judgments with the ``judge_rows`` section
(:mod:`metrics.reports.coverage`: every judge's counts of ok, failed and not_applicable rows, and why a judge with
no ok row has no figures).

Input: the tidy judgment table
    A list of dicts, one per stored judgment row, with the keys ``attempt_id, problem_id, participant, turn, trajectory,
    label_ac, label_score, judge, condition, repeat, status, p_ac, score, parent_attempt_id, operator, arm, severity``,
    and for the similarity report ``method`` (the offline judge's method, None for an LLM judge) and the attempt's
    execution ``verdict, passed, total``, and (optional) ``error``, the reason of a row that is not ok, and ``df_score``
    (optional; a mutant's confirmation pair, read by ``perturbation``). ``status`` is ``ok``, ``failed`` or
    ``not_applicable``; only ``status == "ok"`` rows with ``repeat == 0`` are scored, except the consistency part of
    ``agreement``, which reads every repeat. A judge's probability for an attempt is ``p_ac`` when present, else
    ``score / 5`` (the 0..5 rubric score read as a probability); a row with neither is left out. Perturbation mutants
    (rows with a ``parent_attempt_id``) are read by ``perturbation`` (and as code pairs by ``similarity``) only; every
    other builder ignores them. ``pass_at_k`` reads one row per attempt and its ``verdict`` (correct when ``"AC"``),
    whatever the judge.

Output: a :class:`Report`, as JSON ``{"kind", "params", "generated_at", "sections", "tables", "plots", "errors"}``
    - ``params``: the arguments the report was built with (and the bootstrap actually used).
    - ``sections``: ``[{"id", "title", "explanation", "tables": [table name], "plots": [plot name], "note"?}]`` in
      reading order; ``explanation`` says in plain language what the numbers mean; ``note``, when present, that the
      section has no data and why.
    - ``tables``: ``{name: {"title", "columns": [{"key", "label"}], "rows": [row]}}``. A row is a dict keyed by the
      column keys. A cell is a plain value (str / int / float / None for "not applicable", e.g. a judge name or a
      count) or a metric cell ``{"value": float, "ci": [lo, hi], "degenerate": bool, "n", "clusters", "trust"}``
      (``ci`` and ``degenerate`` absent when no interval could be computed; ``degenerate`` when every resample had
      the same value; ``n`` items in ``clusters`` bootstrap clusters behind the figure; ``trust`` ``"ok"`` or
      ``"too_few"`` against the request's ``min_items`` / ``min_clusters``, absent when it gave none). A metric that
      cannot be computed is ABSENT from its row, and ``errors`` says why. Tables with intervals have a ``clusters``
      column: how many clusters the bootstrap resampled.
    - ``plots``: ``{name: plot data}``, each with ``"type"`` (the renderer in :mod:`metrics.plots`) and ``"title"``.
    - ``errors``: ``{where: reason}``; ``where`` is ``"<table>/<row identifiers>/<column>"`` for a missing cell (with a
      ``/ci`` suffix when only the interval is missing), or a section name for a whole missing part.

    Intervals are 95% cluster-bootstrap percentile intervals (``bootstrap`` resamples, ``seed``), clustered by
    ``cluster``: the trajectory (participant x problem, the unit of dependence, paper 001 IV-C2), the problem (the
    robustness check), or the seed program for perturbation mutants. Paired differences are computed on the same
    resamples (``metrics.registry.compare``).

Plot data (``report["plots"]``; rendered by :func:`metrics.plots.render`)
    - ``roc``: ``{"conditions": {condition: {judge: {"fpr": [...], "tpr": [...], "auc", "n", "clusters",
      "trust"}}}}`` (panel included).
    - ``reliability``: ``{"bins": 15, "judges": {judge: {condition: [calibration.reliability_diagram bins]}}}``.
    - ``kappa_heatmap``: ``{"judges", "labels": {condition: [judge]}, "conditions": {condition: matrix}}``, matrix
      rows/columns in ``labels[condition]`` order, None where kappa is undefined.
    - ``error_correlation``: the same shape as ``kappa_heatmap`` (judges' error correlations) plus ``"sizes":
      {condition: {"n", "clusters"}}``.
    - ``success_at_turn`` / ``kaplan_meier``: ``{"turns", "value", "lo", "hi", "n", "clusters", "trust"}`` (lo/hi
      None without interval).
    - ``perturbation_shift``: ``{"panels": {"judge / condition": {"operators", "mean_drop", "count", "arm",
      "control_band": [lo, hi] | None}}}``.
    - ``similarity_scatter``: ``{"surface_similarity", "df_score", "thresholds": {x_lo, x_hi, y_lo, y_hi} | None}``.
"""

from metrics.reports.common import Cluster
from metrics.reports.model import Cell, Column, Plot, Report, Section, Table
from metrics.reports.params import (
    BUILDERS,
    KINDS,
    ReportKind,
    ReportParamError,
    build_report,
    builder_arguments,
    default_cluster,
    resolve_cluster,
)

__all__ = [
    "BUILDERS",
    "KINDS",
    "Cell",
    "Cluster",
    "Column",
    "Plot",
    "Report",
    "ReportKind",
    "ReportParamError",
    "Section",
    "Table",
    "build_report",
    "builder_arguments",
    "default_cluster",
    "resolve_cluster",
]
