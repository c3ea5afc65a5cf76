"""The one place request parameters become builder arguments.

A report request (``POST /v1/reports``: ``kind``, ``judges``, ``conditions``, ``folds``, ``bootstrap``, ``cluster``,
``seed``, ``k``; ``filter`` selects the rows and is not the builder's) is passed to the builder of its kind by name:
every request field that the builder declares as a keyword parameter reaches it, and no other. Adding a parameter to a
builder is therefore enough for the API's value of that name to reach it; nothing here lists which builder takes
what. A field left out of the request (or null) leaves the builder's default, so ``cluster`` defaults per kind:
``seed`` for perturbation (mutants of one seed program are dependent), ``problem`` for similarity (pairs of one
problem share their reference) and pass_at_k (the only one it takes: a task's samples are resampled together),
``trajectory`` for the rest.

``min_items`` and ``min_clusters`` are not a builder's: they are the minimums a figure's n and clusters must reach to
be judged (``Report.judge_trust``), applied to every kind alike once it is built. metrics/ holds no default for them:
the platform passes its operators' settings (``TRIBUNAL_MIN_ITEMS``, ``TRIBUNAL_MIN_CLUSTERS``) or the request's own;
a request without them gets figures that carry n and clusters but no ``trust``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from metrics.errors import MetricInputError
from metrics.reports import agreement, axiom, cocreation, judge_quality, panels, passk, perturbation, similarity, trust
from metrics.reports.common import CLUSTERS, TidyRow
from metrics.reports.coverage import add_judge_rows
from metrics.reports.model import Report

Builder = Callable[..., Report]


class ReportKind(StrEnum):
    """The kinds of report (``POST /v1/reports`` ``kind``), one module each."""

    JUDGE_QUALITY = judge_quality.KIND
    AGREEMENT = agreement.KIND
    COCREATION = cocreation.KIND
    AXIOM = axiom.KIND
    PERTURBATION = perturbation.KIND
    SIMILARITY = similarity.KIND
    PASS_AT_K = passk.KIND
    PANELS = panels.KIND
    TRUST = trust.KIND


BUILDERS: dict[str, Builder] = {
    ReportKind.JUDGE_QUALITY: judge_quality.build,
    ReportKind.AGREEMENT: agreement.build,
    ReportKind.COCREATION: cocreation.build,
    ReportKind.AXIOM: axiom.build,
    ReportKind.PERTURBATION: perturbation.build,
    ReportKind.SIMILARITY: similarity.build,
    ReportKind.PASS_AT_K: passk.build,
    ReportKind.PANELS: panels.build,
    ReportKind.TRUST: trust.build,
}
KINDS: tuple[ReportKind, ...] = tuple(ReportKind)

# The cluster values each kind accepts (a builder refuses any other).
CLUSTERS_OF: dict[str, tuple[str, ...]] = dict.fromkeys(KINDS, CLUSTERS) | {
    cocreation.KIND: cocreation.CLUSTERS,
    passk.KIND: passk.CLUSTERS,
}

# Request fields every report takes after it is built: the minimums of a figure that can be judged.
TRUST_FIELDS = ("min_items", "min_clusters")
# Request fields a builder may take; ``filter`` (which rows) is the reports service's. ``thresholds`` (the trust
# cards' verdicts) comes from the operator's settings; a builder that declares the minimums (the trust report's
# verdicts) also gets them before it is built.
REQUEST_FIELDS = (
    "judges",
    "conditions",
    "folds",
    "bootstrap",
    "cluster",
    "seed",
    "k",
    "mutants",
    "calibration",
    "thresholds",
    *TRUST_FIELDS,
)


class ReportParamError(MetricInputError):
    """A report request that no builder can run; ``field`` names the request field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def builder(kind: str) -> Builder:
    """The builder of a report kind; ReportParamError naming ``kind`` for an unknown one."""
    if kind not in BUILDERS:
        raise ReportParamError("kind", f"unknown report kind {kind!r}; expected one of {', '.join(KINDS)}")
    return BUILDERS[kind]


def parameters(kind: str) -> tuple[str, ...]:
    """The request fields the builder of ``kind`` takes (its keyword parameters among ``REQUEST_FIELDS``)."""
    declared = inspect.signature(builder(kind)).parameters
    return tuple(name for name in REQUEST_FIELDS if name in declared)


def default_cluster(kind: str) -> str:
    """The cluster a report of ``kind`` resamples when the request names none."""
    return str(inspect.signature(builder(kind)).parameters["cluster"].default)


def resolve_cluster(kind: str, cluster: str | None) -> str:
    """The cluster a request gets: the one it names, or its kind's default; ReportParamError naming ``cluster``
    when the kind does not take that one (co-creation intervals must not split a trajectory: no ``seed``)."""
    chosen = default_cluster(kind) if cluster is None else cluster
    if chosen not in CLUSTERS_OF[kind]:
        raise ReportParamError(
            "cluster", f"a {kind} report resamples one of {', '.join(CLUSTERS_OF[kind])}, not {chosen!r}"
        )
    return chosen


def builder_arguments(kind: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments the builder of ``kind`` gets from a request: every field it declares that the request
    gives (non-null); ``cluster`` is checked against the kind (:func:`resolve_cluster`)."""
    arguments: dict[str, Any] = {}
    for name in parameters(kind):
        value = request.get(name)
        if name == "cluster":
            value = resolve_cluster(kind, value)
        if value is not None:
            arguments[name] = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value
    return arguments


def trust_minimums(request: Mapping[str, Any]) -> tuple[int, int] | None:
    """The request's ``(min_items, min_clusters)``, None when it gives neither; ReportParamError naming the field
    for one that is missing or not a positive integer."""
    values = [request.get(name) for name in TRUST_FIELDS]
    if all(value is None for value in values):
        return None
    minimums: list[int] = []
    for name, value in zip(TRUST_FIELDS, values, strict=True):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ReportParamError(name, f"{name} must be a positive integer, got {value!r}")
        minimums.append(value)
    return minimums[0], minimums[1]


def build_report(
    kind: str, rows: Sequence[TidyRow], request: Mapping[str, Any], configured_judges: Sequence[str] | None = None
) -> Report:
    """The report of ``kind`` over the tidy judgment table ``rows``, with the request's parameters; its figures
    judged against the request's ``min_items`` and ``min_clusters`` when it gives them. It ends with the
    ``judge_rows`` section (:mod:`metrics.reports.coverage`): every judge the request names, every one of
    ``configured_judges`` (the deployment's) and every judge of the rows, with its counts of ok, failed and
    not-applicable rows. Rows that are not judgments (a similarity report's code pairs) and no configured judges:
    no such section."""
    minimums = trust_minimums(request)
    report = builder(kind)(rows, **builder_arguments(kind, request))
    if minimums is not None:
        report.judge_trust(*minimums)
    if configured_judges is not None or any(row.get("judge") is not None for row in rows):
        listed = [*(request.get("judges") or []), *(configured_judges or [])]
        add_judge_rows(report, rows, list(dict.fromkeys(str(judge) for judge in listed)))
    return report
