"""Render the plot data of a metrics report (``report["plots"]``, see :mod:`metrics.reports`) to PNG bytes.

Pure: plot-data dicts in, PNG bytes out (matplotlib, headless ``Agg`` backend, ~110 dpi). Each plot-data dict names
its renderer in ``"type"``: roc, reliability, kappa_heatmap, error_correlation, perturbation_shift, success_at_turn,
kaplan_meier, similarity_scatter.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from metrics.reports.model import Report  # noqa: E402

DPI = 110
PlotData = Mapping[str, Any]


def _grid(count: int, width: float = 5.0, height: float = 4.4, max_cols: int = 3) -> tuple[Figure, list[Any]]:
    cols = max(1, min(count, max_cols))
    rows = max(1, math.ceil(count / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]


def _png(fig: Figure, title: str | None) -> bytes:
    if title:
        fig.suptitle(title, fontsize=13)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return buffer.getvalue()


def _empty(title: str, message: str) -> bytes:
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, wrap=True)
    return _png(fig, title)


def _size(curve: Mapping[str, Any]) -> str:
    """``; n=124, 40 clusters`` (and ``, too few to judge``) for a curve that carries its sample size."""
    if "n" not in curve or "clusters" not in curve:
        return ""
    return f"; n={curve['n']}, {curve['clusters']} clusters" + (
        ", too few to judge" if curve.get("trust") == "too_few" else ""
    )


def _roc(data: PlotData) -> bytes:
    conditions: Mapping[str, Mapping[str, Any]] = data.get("conditions", {})
    if not conditions:
        return _empty(data.get("title", "ROC"), "no ROC curve could be drawn (one class only?)")
    fig, axes = _grid(len(conditions))
    for ax, (condition, curves) in zip(axes, conditions.items(), strict=True):
        for judge, curve in curves.items():
            auc = curve.get("auc")
            label = f"{judge} (AUC {auc:.3f}{_size(curve)})" if auc is not None else judge
            style = {"linestyle": "--", "linewidth": 2.2, "color": "black"} if judge == "panel" else {"linewidth": 1.6}
            ax.step(curve["fpr"], curve["tpr"], where="post", label=label, **style)
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, label="chance")
        ax.set(xlim=(0, 1), ylim=(0, 1.01), xlabel="False positive rate", ylabel="True positive rate")
        ax.set_title(f"Condition: {condition}")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
    return _png(fig, data.get("title"))


def _reliability(data: PlotData) -> bytes:
    judges: Mapping[str, Mapping[str, list[Mapping[str, Any]]]] = data.get("judges", {})
    if not judges:
        return _empty(data.get("title", "Reliability"), "no reliability data")
    fig, axes = _grid(len(judges))
    for ax, (judge, by_condition) in zip(axes, judges.items(), strict=True):
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, label="perfect calibration")
        width = 1.0 / float(data.get("bins", 15))
        offsets = np.linspace(-0.25, 0.25, max(1, len(by_condition))) * width if len(by_condition) > 1 else [0.0]
        counts_ax = ax.twinx()
        for offset, (condition, bins) in zip(offsets, by_condition.items(), strict=True):
            predicted = [b["mean_predicted"] for b in bins]
            observed = [b["observed_rate"] for b in bins]
            line = ax.plot(predicted, observed, marker="o", markersize=4, label=condition)[0]
            centres = [(b["lower"] + b["upper"]) / 2 + offset for b in bins]
            bar_width = width / max(1, len(by_condition))
            counts_ax.bar(centres, [b["count"] for b in bins], width=bar_width, alpha=0.18, color=line.get_color())
        counts_ax.set_ylabel("attempts per bin (bars)", fontsize=8)
        ax.set_zorder(counts_ax.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="Mean predicted probability", ylabel="Observed acceptance rate")
        ax.set_title(f"Judge: {judge}")
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    return _png(fig, data.get("title"))


def _kappa_heatmap(data: PlotData, label: str = "Cohen's kappa") -> bytes:
    conditions: Mapping[str, list[list[float | None]]] = data.get("conditions", {})
    if not conditions:
        return _empty(data.get("title", label), f"no {label} matrix")
    sizes: Mapping[str, Mapping[str, int]] = data.get("sizes", {})
    labels: Mapping[str, list[str]] = data.get("labels", {})
    fig, axes = _grid(len(conditions), width=5.2, height=4.6)
    image = None
    for ax, (condition, matrix) in zip(axes, conditions.items(), strict=True):
        names = labels.get(condition) or list(data.get("judges", []))[: len(matrix)]
        values = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)
        image = ax.imshow(values, vmin=-1, vmax=1, cmap="RdBu")
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
        ax.set_yticks(range(len(names)), names)
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                text = "n/a" if np.isnan(values[i, j]) else f"{values[i, j]:.2f}"
                colour = "white" if abs(np.nan_to_num(values[i, j])) > 0.6 else "black"
                ax.text(j, i, text, ha="center", va="center", fontsize=9, color=colour)
        size = sizes.get(condition)
        suffix = f" (n={size['n']}, clusters={size['clusters']})" if size else ""
        ax.set_title(f"Condition: {condition}{suffix}")
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label=label)
        fig.suptitle(data.get("title", ""), fontsize=13)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _perturbation_shift(data: PlotData) -> bytes:
    panels: Mapping[str, Mapping[str, Any]] = data.get("panels", {})
    if not panels:
        return _empty(data.get("title", "Perturbation"), "no mutants")
    fig, axes = _grid(len(panels), width=5.4)
    for ax, (name, panel) in zip(axes, panels.items(), strict=True):
        operators = list(panel["operators"])
        colours = ["tab:red" if arm == "semantic" else "tab:blue" for arm in panel["arm"]]
        positions = np.arange(len(operators))
        drops = [math.nan if v is None else float(v) for v in panel["mean_drop"]]
        missing = [not math.isfinite(v) or count == 0 for v, count in zip(drops, panel["count"], strict=True)]
        ax.bar(positions, [0.0 if gap else v for v, gap in zip(drops, missing, strict=True)], color=colours, alpha=0.8)
        # A bar at 0 must not look like no data: a zero is written on the axis, a missing bar is a hatched box.
        top = max([abs(v) for v, gap in zip(drops, missing, strict=True) if not gap] or [0.1]) or 0.1
        for x, value, gap in zip(positions, drops, missing, strict=True):
            if gap:
                ax.bar(x, top * 0.3, bottom=-top * 0.15, fill=False, hatch="//", edgecolor="grey", linewidth=0.5)
                ax.text(x, top * 0.17, "no data", ha="center", va="bottom", fontsize=7, color="grey")
            elif value == 0:
                ax.text(x, top * 0.02, "0", ha="center", va="bottom", fontsize=8)
        band = panel.get("control_band")
        if band:
            ax.axhspan(band[0], band[1], color="tab:blue", alpha=0.15, label="control band (central 95%)")
        ax.axhline(0, color="black", linewidth=0.8)
        labels = [f"{op}\n(n={n})" for op, n in zip(operators, panel["count"], strict=True)]
        ax.set_xticks(positions, labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("Mean drop p(seed) - p(mutant)")
        ax.set_title(name)
        handles = [plt.Rectangle((0, 0), 1, 1, color=c, alpha=0.8) for c in ("tab:red", "tab:blue")]
        extra = ax.get_legend_handles_labels()
        ax.legend(handles + extra[0], ["semantic", "control", *extra[1]], fontsize=8, loc="best")
        ax.grid(axis="y", alpha=0.3)
    return _png(fig, data.get("title"))


def _turn_curve(data: PlotData, ylabel: str, step: bool) -> bytes:
    turns = list(data.get("turns", []))
    if not turns:
        return _empty(data.get("title", ""), "no turns")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    values = data["value"]
    lo, hi = data.get("lo") or [], data.get("hi") or []
    has_band = bool(lo) and all(v is not None for v in lo) and all(v is not None for v in hi)
    if step:
        ax.step([0, *turns], [1.0, *values], where="post", linewidth=2, label="Kaplan-Meier estimate")
        if has_band:
            ax.fill_between([0, *turns], [1.0, *lo], [1.0, *hi], step="post", alpha=0.25, label="95% interval")
        ax.set_xlim(0, max(turns))
    else:
        ax.plot(turns, values, marker="o", linewidth=2, label="Success@Turn")
        if has_band:
            ax.fill_between(turns, lo, hi, alpha=0.25, label="95% interval")
        ax.set_xlim(min(turns) - 0.2, max(turns) + 0.2)
    ax.set_xticks(turns)
    size = _size(data).removeprefix("; ")
    ax.set(ylim=(0, 1.02), xlabel=f"Turn ({size})" if size else "Turn", ylabel=ylabel)
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3)
    return _png(fig, data.get("title"))


def _similarity_scatter(data: PlotData) -> bytes:
    x = np.asarray(data.get("surface_similarity", []), dtype=float)
    y = np.asarray(data.get("df_score", []), dtype=float)
    fig, ax = plt.subplots(figsize=(6.5, 6))
    th = data.get("thresholds")
    colours = np.array(["tab:grey"] * x.size, dtype=object)
    if th:
        dfs = (x <= th["x_lo"]) & (y >= th["y_hi"])
        sfd = (x >= th["x_hi"]) & (y <= th["y_lo"])
        colours[dfs], colours[sfd] = "tab:green", "tab:red"
        ax.add_patch(plt.Rectangle((0, th["y_hi"]), th["x_lo"], 1 - th["y_hi"], color="tab:green", alpha=0.12))
        ax.add_patch(plt.Rectangle((th["x_hi"], 0), 1 - th["x_hi"], th["y_lo"], color="tab:red", alpha=0.12))
        ax.text(0.01, 0.99, f"DFS ({int(dfs.sum())})", va="top", color="tab:green", fontsize=10)
        ax.text(0.99, 0.01, f"SFD ({int(sfd.sum())})", ha="right", color="tab:red", fontsize=10)
    ax.scatter(x, y, c=list(colours), s=14, alpha=0.7)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="SurfaceSim", ylabel="df_score (functional similarity)")
    ax.grid(alpha=0.3)
    return _png(fig, data.get("title"))


RENDERERS: dict[str, Callable[[PlotData], bytes]] = {
    "roc": _roc,
    "reliability": _reliability,
    "kappa_heatmap": _kappa_heatmap,
    "error_correlation": lambda d: _kappa_heatmap(d, "Error correlation (p - label)"),
    "perturbation_shift": _perturbation_shift,
    "success_at_turn": lambda d: _turn_curve(d, "Share of trajectories solved", step=False),
    "kaplan_meier": lambda d: _turn_curve(d, "Share of trajectories still unsolved", step=True),
    "similarity_scatter": _similarity_scatter,
}


def render(kind_or_plot_name: str, plot_data: PlotData) -> bytes:
    """PNG bytes of one plot; the renderer is ``plot_data["type"]`` when present, else ``kind_or_plot_name``.

    Raises:
        ValueError: no renderer of that name.
    """
    name = str(plot_data.get("type") or kind_or_plot_name)
    if name not in RENDERERS:
        raise ValueError(f"no plot renderer {name!r}; known: {', '.join(RENDERERS)}")
    return RENDERERS[name](plot_data)


def render_all(report: Mapping[str, Any] | Report) -> dict[str, bytes]:
    """PNG bytes of every plot in ``report["plots"]`` (a typed report's or its JSON's) that has a renderer, keyed by
    plot name."""
    if isinstance(report, Report):
        report = report.to_json()
    images: dict[str, bytes] = {}
    for name, data in (report.get("plots") or {}).items():
        kind = str(data.get("type") or name)
        if kind in RENDERERS:
            images[name] = render(name, data)
    return images
