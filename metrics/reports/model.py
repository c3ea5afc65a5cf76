"""The typed report: sections, tables of cells, plots; ``Report.to_json()`` is the JSON the API serves.

A builder fills a :class:`Report`; the JSON (``to_json``) is what the reports service stores and ``GET
/v1/reports/{id}`` returns under ``result``, and what :mod:`metrics.plots` and :mod:`metrics.html` read. The JSON
shape is the contract (docs/metrics.md): ``{"kind", "params", "generated_at", "sections", "tables", "plots",
"errors"}``; a metric cell is ``{"value": estimate, "ci": [lo, hi]}`` with ``ci`` absent when there is no interval.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeGuard

Scalar = str | int | float | bool | None


def finite(value: object) -> TypeGuard[int | float]:
    """A real, finite number (not a bool, not NaN or infinite)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(float(value))


@dataclass(frozen=True)
class Cell:
    """A metric cell: an estimate and, when one could be computed, its 95% interval ``[lo, hi]``."""

    estimate: float
    lo: float | None = None
    hi: float | None = None

    def __post_init__(self) -> None:
        if (self.lo is None) != (self.hi is None):
            raise ValueError("an interval needs both ends")

    @classmethod
    def of(cls, estimate: float, interval: object = None) -> Cell:
        """A cell from an estimate and an interval-like ``[lo, hi]``; the interval is dropped unless both ends
        are finite numbers."""
        if isinstance(interval, list | tuple) and len(interval) == 2 and all(finite(v) for v in interval):
            return cls(float(estimate), float(interval[0]), float(interval[1]))
        return cls(float(estimate))

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.lo is None or self.hi is None else (self.lo, self.hi)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.estimate}
        if self.interval is not None:
            out["ci"] = list(self.interval)
        return out


CellValue = Scalar | Cell
Row = dict[str, CellValue]


@dataclass(frozen=True)
class Column:
    key: str
    label: str


@dataclass
class Table:
    """Rows keyed by column keys. A metric that could not be computed is absent from its row (the report's
    ``errors`` says why); a plain value is a label or a count."""

    title: str
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)

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

    def to_json(self) -> dict[str, Any]:
        return {"type": self.plot_type, "title": self.title, **self.data()}


@dataclass(frozen=True)
class RocCurve:
    fpr: list[float]
    tpr: list[float]
    auc: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fpr": self.fpr, "tpr": self.tpr}
        if self.auc is not None:
            out["auc"] = self.auc
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
class TurnCurve(Plot):
    """Success@Turn or the Kaplan-Meier share unsolved, per turn; lo/hi None where there is no interval."""

    kind: Literal["success_at_turn", "kaplan_meier"]
    turns: list[int]
    value: list[float]
    lo: list[float | None]
    hi: list[float | None]

    @property
    def plot_type(self) -> str:
        return self.kind

    def data(self) -> dict[str, Any]:
        return {"turns": self.turns, "value": self.value, "lo": self.lo, "hi": self.hi}


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

    def add_table(self, name: str, title: str, keys: Sequence[str], rows: list[Row], labels: Mapping[str, str]) -> None:
        self.tables[name] = Table(title, [Column(k, labels.get(k, k)) for k in keys], rows)

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
