"""The typed report: sections, tables of cells, plots; ``Report.to_json()`` is the JSON the API serves.

A builder fills a :class:`Report`; the JSON (``to_json``) is what the reports service stores and ``GET
/v1/reports/{id}`` returns under ``result``, and what :mod:`metrics.plots` and :mod:`metrics.html` read. The JSON
shape is the contract (docs/metrics.md): ``{"kind", "params", "generated_at", "sections", "tables", "plots",
"errors"}``; a metric cell is ``{"value": estimate, "ci": [lo, hi], "degenerate", "n", "clusters", "trust"}`` with
``ci`` (and ``degenerate``) absent when there is no interval.

How far a figure can be trusted: every metric cell carries ``n``, the items it was computed from, and ``clusters``,
the distinct bootstrap clusters among them (the units its interval resampled); ``degenerate`` is true when every
bootstrap resample had the same value (:func:`metrics.bootstrap.is_degenerate`), so that the interval's zero width
says nothing. :meth:`Report.judge_trust` then marks every cell against the operator's minimums, passed in as
parameters (the platform reads them from its settings): ``trust`` is ``"too_few"`` when ``n < min_items`` or
``clusters < min_clusters`` ("too few to judge"), else ``"ok"``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, TypeGuard

from metrics.errors import MetricInputError

Scalar = str | int | float | bool | None


def finite(value: object) -> TypeGuard[int | float]:
    """A real, finite number (not a bool, not NaN or infinite)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(float(value))


class Trust(StrEnum):
    """Whether a figure comes from enough items and clusters to be judged (the operator's minimums)."""

    OK = "ok"
    TOO_FEW = "too_few"


def trust_of(n: int, clusters: int, min_items: int, min_clusters: int) -> Trust:
    """``too_few`` when a figure from ``n`` items in ``clusters`` clusters is below either minimum, else ``ok``."""
    return Trust.TOO_FEW if n < min_items or clusters < min_clusters else Trust.OK


@dataclass(frozen=True)
class Cell:
    """A metric cell: an estimate and, when one could be computed, its 95% interval ``[lo, hi]`` (``degenerate``
    when every resample had the same value); ``n`` items and ``clusters`` clusters behind it, and its ``trust``
    once judged against the minimums (:meth:`Report.judge_trust`)."""

    estimate: float
    lo: float | None = None
    hi: float | None = None
    degenerate: bool = False
    n: int | None = None
    clusters: int | None = None
    trust: Trust | None = None

    def __post_init__(self) -> None:
        if (self.lo is None) != (self.hi is None):
            raise ValueError("an interval needs both ends")

    @classmethod
    def of(cls, estimate: float, interval: object = None, degenerate: object = False) -> Cell:
        """A cell from an estimate and an interval-like ``[lo, hi]``; the interval (and its ``degenerate`` flag) is
        dropped unless both ends are finite numbers."""
        if isinstance(interval, list | tuple) and len(interval) == 2 and all(finite(v) for v in interval):
            return cls(float(estimate), float(interval[0]), float(interval[1]), degenerate=degenerate is True)
        return cls(float(estimate))

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.lo is None or self.hi is None else (self.lo, self.hi)

    def sized(self, n: int, clusters: int) -> Cell:
        """This cell computed from ``n`` items in ``clusters`` clusters."""
        return replace(self, n=int(n), clusters=int(clusters))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.estimate}
        if self.interval is not None:
            out["ci"] = list(self.interval)
            out["degenerate"] = self.degenerate
        if self.n is not None and self.clusters is not None:
            out["n"], out["clusters"] = self.n, self.clusters
        if self.trust is not None:
            out["trust"] = self.trust.value
        return out


CellValue = Scalar | Cell
Row = dict[str, CellValue]


@dataclass(frozen=True)
class Column:
    key: str
    label: str


# The row keys that hold a table's item and cluster counts, stamped on its cells (Report.add_table's ``size``).
Size = tuple[str, str]
DEFAULT_SIZE: Size = ("n", "clusters")


@dataclass
class Table:
    """Rows keyed by column keys. A metric that could not be computed is absent from its row (the report's
    ``errors`` says why); a plain value is a label or a count. ``observations``: the rows are single items (one code
    pair each), whose cells are measurements of that item rather than estimates, so no minimum applies to them."""

    title: str
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)
    observations: bool = False

    def stamp(self, size: Size) -> None:
        """Give every cell that does not carry its own sample size the row's (the row keys ``size`` names: items,
        clusters)."""
        n_key, clusters_key = size
        for row in self.rows:
            n, clusters = row.get(n_key), row.get(clusters_key)
            if not isinstance(n, int) or not isinstance(clusters, int):
                continue
            for key, value in row.items():
                if isinstance(value, Cell) and value.n is None:
                    row[key] = value.sized(n, clusters)

    def judge_trust(self, min_items: int, min_clusters: int) -> None:
        """Mark every sized cell ``ok`` or ``too_few`` against the minimums (observation tables are left as they
        are)."""
        if self.observations:
            return
        for row in self.rows:
            for key, value in row.items():
                if isinstance(value, Cell) and value.n is not None and value.clusters is not None:
                    row[key] = replace(value, trust=trust_of(value.n, value.clusters, min_items, min_clusters))

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "columns": [{"key": c.key, "label": c.label} for c in self.columns],
            "rows": [{k: v.to_json() if isinstance(v, Cell) else v for k, v in row.items()} for row in self.rows],
        }


@dataclass
class Section:
    """A part of the report in reading order; ``note`` (when set) says in plain words that it has no data and why."""

    id: str
    title: str
    explanation: str
    tables: list[str] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "explanation": self.explanation,
            "tables": list(self.tables),
            "plots": list(self.plots),
        }
        if self.note is not None:
            out["note"] = self.note
        return out


# --------------------------------------------------------------------------------------------------------- plots


@dataclass
class Plot(ABC):
    """Plot data; ``plot_type`` names its renderer in :mod:`metrics.plots`."""

    title: str

    @property
    @abstractmethod
    def plot_type(self) -> str: ...

    @abstractmethod
    def data(self) -> dict[str, Any]: ...

    def judge_trust(self, min_items: int, min_clusters: int) -> None:
        """Mark what the plot draws against the minimums, where it draws an estimate from a sample (a no-op
        otherwise)."""
        return None

    def to_json(self) -> dict[str, Any]:
        return {"type": self.plot_type, "title": self.title, **self.data()}


@dataclass
class RocCurve:
    """One judge's ROC curve, with the ``n`` attempts in ``clusters`` clusters it is drawn from and, once judged,
    its ``trust``."""

    fpr: list[float]
    tpr: list[float]
    auc: float | None = None
    n: int | None = None
    clusters: int | None = None
    trust: Trust | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fpr": self.fpr, "tpr": self.tpr}
        if self.auc is not None:
            out["auc"] = self.auc
        if self.n is not None and self.clusters is not None:
            out["n"], out["clusters"] = self.n, self.clusters
        if self.trust is not None:
            out["trust"] = self.trust.value
        return out


@dataclass
class RocPlot(Plot):
    """ROC curves: ``conditions[condition][judge]`` (the panel included)."""

    conditions: dict[str, dict[str, RocCurve]] = field(default_factory=dict)

    @property
    def plot_type(self) -> str:
        return "roc"

    def data(self) -> dict[str, Any]:
        return {"conditions": {c: {j: v.to_json() for j, v in by.items()} for c, by in self.conditions.items()}}

    def judge_trust(self, min_items: int, min_clusters: int) -> None:
        for curves in self.conditions.values():
            for curve in curves.values():
                if curve.n is not None and curve.clusters is not None:
                    curve.trust = trust_of(curve.n, curve.clusters, min_items, min_clusters)


@dataclass
class ReliabilityPlot(Plot):
    """``judges[judge][condition]``: the bins of :func:`metrics.calibration.reliability_diagram`."""

    bins: int
    judges: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)

    @property
    def plot_type(self) -> str:
        return "reliability"

    def data(self) -> dict[str, Any]:
        return {"bins": self.bins, "judges": self.judges}


@dataclass
class KappaHeatmap(Plot):
    """Per condition a judges x judges matrix in ``labels[condition]`` order, None where kappa is undefined."""

    judges: list[str]
    labels: dict[str, list[str]]
    conditions: dict[str, list[list[float | None]]]

    @property
    def plot_type(self) -> str:
        return "kappa_heatmap"

    def data(self) -> dict[str, Any]:
        return {"judges": self.judges, "labels": self.labels, "conditions": self.conditions}


@dataclass
class ErrorCorrelationHeatmap(KappaHeatmap):
    """Per condition the judges x judges correlation of their errors against ground truth (``metrics.panels``), in
    ``labels[condition]`` order, None where undefined; ``sizes[condition]``: the ``n`` items in ``clusters``
    clusters it is computed from."""

    sizes: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def plot_type(self) -> str:
        return "error_correlation"

    def data(self) -> dict[str, Any]:
        return {**super().data(), "sizes": self.sizes}


@dataclass
class TurnCurve(Plot):
    """Success@Turn or the Kaplan-Meier share unsolved, per turn; lo/hi None where there is no interval."""

    kind: Literal["success_at_turn", "kaplan_meier"]
    turns: list[int]
    value: list[float]
    lo: list[float | None]
    hi: list[float | None]
    n: int | None = None
    clusters: int | None = None
    trust: Trust | None = None

    @property
    def plot_type(self) -> str:
        return self.kind

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"turns": self.turns, "value": self.value, "lo": self.lo, "hi": self.hi}
        if self.n is not None and self.clusters is not None:
            out["n"], out["clusters"] = self.n, self.clusters
        if self.trust is not None:
            out["trust"] = self.trust.value
        return out

    def judge_trust(self, min_items: int, min_clusters: int) -> None:
        if self.n is not None and self.clusters is not None:
            self.trust = trust_of(self.n, self.clusters, min_items, min_clusters)


@dataclass(frozen=True)
class ShiftPanel:
    operators: list[str]
    mean_drop: list[float]
    count: list[int]
    arm: list[str]
    control_band: tuple[float, float] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "operators": self.operators,
            "mean_drop": self.mean_drop,
            "count": self.count,
            "arm": self.arm,
            "control_band": None if self.control_band is None else list(self.control_band),
        }


@dataclass
class PerturbationShiftPlot(Plot):
    """Mean probability drop by operator, one panel per ``"judge / condition"``."""

    panels: dict[str, ShiftPanel] = field(default_factory=dict)

    @property
    def plot_type(self) -> str:
        return "perturbation_shift"

    def data(self) -> dict[str, Any]:
        return {"panels": {name: panel.to_json() for name, panel in self.panels.items()}}


@dataclass(frozen=True)
class Thresholds:
    """Algorithm 2's region thresholds (paper 002): DFS = x <= x_lo and y >= y_hi, SFD = x >= x_hi and y <= y_lo."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    objective: float

    def to_json(self) -> dict[str, float | None]:
        """The thresholds; ``objective`` None when they were given rather than chosen by Algorithm 2."""
        objective = None if math.isnan(self.objective) else self.objective
        return {"x_lo": self.x_lo, "x_hi": self.x_hi, "y_lo": self.y_lo, "y_hi": self.y_hi, "objective": objective}


@dataclass
class SimilarityScatter(Plot):
    """SurfaceSim (x) against df_score (y), one point per code pair, with the thresholds when found."""

    surface_similarity: list[float]
    df_score: list[float]
    thresholds: Thresholds | None = None

    @property
    def plot_type(self) -> str:
        return "similarity_scatter"

    def data(self) -> dict[str, Any]:
        return {
            "surface_similarity": self.surface_similarity,
            "df_score": self.df_score,
            "thresholds": None if self.thresholds is None else self.thresholds.to_json(),
        }


# -------------------------------------------------------------------------------------------------------- report


@dataclass
class Report:
    """One report of one kind. ``errors`` maps where a number is missing (``"<table>/<row ids>/<column>"``, with
    ``/ci`` when only the interval is missing, or a section name) to why."""

    kind: str
    params: dict[str, Any]
    generated_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    sections: list[Section] = field(default_factory=list)
    tables: dict[str, Table] = field(default_factory=dict)
    plots: dict[str, Plot] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def add_table(
        self,
        name: str,
        title: str,
        keys: Sequence[str],
        rows: list[Row],
        labels: Mapping[str, str],
        size: Size = DEFAULT_SIZE,
        observations: bool = False,
    ) -> None:
        """Add a table; every cell without its own n and clusters gets its row's (the row keys ``size`` names)."""
        table = Table(title, [Column(k, labels.get(k, k)) for k in keys], rows, observations)
        table.stamp(size)
        self.tables[name] = table

    def judge_trust(self, min_items: int, min_clusters: int) -> None:
        """Mark every figure against the operator's minimums (``trust``: ``too_few`` below either, else ``ok``) and
        record them in ``params``.

        Raises:
            MetricInputError: a minimum that is not a positive integer, naming it.
        """
        for name, value in (("min_items", min_items), ("min_clusters", min_clusters)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MetricInputError(f"{name} must be a positive integer, got {value!r}")
        self.params = {**self.params, "min_items": min_items, "min_clusters": min_clusters}
        for table in self.tables.values():
            table.judge_trust(min_items, min_clusters)
        for plot in self.plots.values():
            plot.judge_trust(min_items, min_clusters)

    def add_section(
        self,
        sid: str,
        title: str,
        explanation: str,
        tables: Sequence[str] = (),
        plots: Sequence[str] = (),
        note: str | None = None,
    ) -> None:
        """Append a section; it lists only the tables and plots the report has."""
        self.sections.append(
            Section(
                sid,
                title,
                explanation,
                [t for t in tables if t in self.tables],
                [p for p in plots if p in self.plots],
                note,
            )
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "params": self.params,
            "generated_at": self.generated_at,
            "sections": [s.to_json() for s in self.sections],
            "tables": {name: t.to_json() for name, t in self.tables.items()},
            "plots": {name: p.to_json() for name, p in self.plots.items()},
            "errors": dict(self.errors),
        }
