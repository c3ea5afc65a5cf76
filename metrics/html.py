"""Render a metrics report (:mod:`metrics.reports`) and its PNG plots as one self-contained HTML page.

Pure: report (its JSON, or the typed :class:`metrics.reports.Report`) + PNG bytes in, HTML text out. Inline CSS
only, PNGs embedded as base64 data URIs, no scripts and no external assets; every piece of text from the report is
escaped with :func:`html.escape`.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping
from typing import Any

from metrics.reports.model import Report

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1200px;color:#222;
padding:0 1rem;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:1px solid #ddd}
h3{font-size:1.05rem;margin-bottom:.3rem}
.meta{color:#555;font-size:.9rem}.meta td{padding:.1rem .8rem .1rem 0;vertical-align:top}
.explain{background:#f6f8fa;border-left:4px solid #4a7fb5;padding:.6rem .9rem;margin:.6rem 0 1rem}
.note{background:#fff8e6;border-left:4px solid #d99a00;padding:.6rem .9rem;margin:.6rem 0 1rem}
table.data{border-collapse:collapse;font-size:.85rem;margin:.4rem 0 1.2rem;display:block;overflow-x:auto}
table.data th,table.data td{border:1px solid #ddd;padding:.3rem .55rem;text-align:right;white-space:nowrap}
table.data th{background:#eef2f6;text-align:center}table.data td.text{text-align:left}
table.data{max-width:100%}table.data td.text{white-space:normal;overflow-wrap:anywhere;max-width:24rem}
table.data tr:nth-child(even) td{background:#fafafa}
.missing{color:#aaa}td.too-few{background:#fff3cd !important;color:#7a5b00}
.flag{font-size:.75rem;font-style:italic}.errors li{margin:.15rem 0}.errors code{background:#f3f3f3;padding:0 .25rem}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:.85rem}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def format_number(value: float) -> str:
    """Three decimals, or an integer as is."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.3f}"


def trust_marks(cell: Mapping[str, Any]) -> list[str]:
    """What a metric cell says about how far it can be trusted, in words: ``degenerate interval`` (every bootstrap
    resample had the same value) and ``too few to judge (n=4, 2 clusters)`` (below the report's minimums)."""
    marks = []
    if cell.get("degenerate") is True:
        marks.append("degenerate interval")
    if cell.get("trust") == "too_few":
        marks.append(f"too few to judge (n={cell.get('n')}, {cell.get('clusters')} clusters)")
    return marks


def format_cell(cell: Any) -> str:
    """Plain text of one table cell: ``0.873 [0.831, 0.913]`` for a metric cell, followed by its
    :func:`trust_marks` in parentheses when it has any; the value itself otherwise."""
    if isinstance(cell, Mapping) and "value" in cell:
        text = format_number(cell["value"])
        interval = cell.get("ci")
        if isinstance(interval, list | tuple) and len(interval) == 2:
            text += f" [{format_number(interval[0])}, {format_number(interval[1])}]"
        marks = trust_marks(cell)
        return text + (f" ({'; '.join(marks)})" if marks else "")
    if cell is None:
        return ""
    if isinstance(cell, int | float):
        return format_number(cell)
    if isinstance(cell, list | dict):
        return json.dumps(cell)
    return str(cell)


def _table(name: str, table: Mapping[str, Any]) -> str:
    columns = table.get("columns", [])
    parts = [f'<h3 id="table-{_e(name)}">{_e(table.get("title", name))}</h3>', '<table class="data">', "<tr>"]
    parts += [f"<th>{_e(col.get('label', col['key']))}</th>" for col in columns]
    parts.append("</tr>")
    rows = table.get("rows", [])
    if not rows:
        parts.append(f'<tr><td class="text missing" colspan="{max(1, len(columns))}">no rows</td></tr>')
    for row in rows:
        parts.append("<tr>")
        for col in columns:
            key = col["key"]
            if key not in row:
                parts.append('<td class="missing" title="not computed: see the errors below">&ndash;</td>')
                continue
            cell = row[key]
            if isinstance(cell, Mapping) and "value" in cell:
                parts.append(_metric_cell(cell))
                continue
            numeric = isinstance(cell, int | float) and not isinstance(cell, bool)
            parts.append(f"<td{'' if numeric else ' class="text"'}>{_e(format_cell(cell))}</td>")
        parts.append("</tr>")
    parts.append("</table>")
    return "\n".join(parts)


def _metric_cell(cell: Mapping[str, Any]) -> str:
    """A metric cell: the estimate and interval, its trust marks on a line of their own, and its n and clusters as
    the cell's tooltip; a figure too few to judge is shaded."""
    text = format_number(cell["value"])
    interval = cell.get("ci")
    if isinstance(interval, list | tuple) and len(interval) == 2:
        text += f" [{format_number(interval[0])}, {format_number(interval[1])}]"
    size = f"n = {cell['n']} items, {cell['clusters']} clusters" if "n" in cell and "clusters" in cell else ""
    css = ' class="too-few"' if cell.get("trust") == "too_few" else ""
    title = f' title="{_e(size)}"' if size else ""
    marks = "".join(f'<br><span class="flag">{_e(mark)}</span>' for mark in trust_marks(cell))
    return f"<td{css}{title}>{_e(text)}{marks}</td>"


def _figure(name: str, png: bytes, caption: str) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{encoded}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _trust_legend(params: Mapping[str, Any]) -> str:
    """What the trust marks mean, with the minimums the report was judged against (when it was)."""
    text = (
        "Hover a number to see n, the items it was computed from, and its clusters, the units the bootstrap "
        "resampled. A <i>degenerate interval</i> is one whose bootstrap resamples all had the same value (e.g. "
        "1.000 [1.000, 1.000] over a handful of attempts): its zero width says nothing about the uncertainty."
    )
    if isinstance(params.get("min_items"), int) and isinstance(params.get("min_clusters"), int):
        text += (
            f" A shaded number marked <i>too few to judge</i> comes from fewer than {params['min_items']} items or "
            f"fewer than {params['min_clusters']} clusters, the minimums this report was judged against."
        )
    return f'<p class="explain">{text}</p>'


def render_html(report: Mapping[str, Any] | Report, plots: Mapping[str, bytes], title: str) -> str:
    """One self-contained HTML page for a report: header (kind, params, date), sections with explanations, tables
    (metric cells as ``value [lo, hi]``), plots (base64 PNGs), and the list of what could not be computed and why.

    Args:
        report: a report from :mod:`metrics.reports` (typed, or its JSON).
        plots: plot name -> PNG bytes (e.g. :func:`metrics.plots.render_all`); plots without data are skipped.
        title: page title.

    A section is shown when it has a table or plot to show, or a ``note`` (e.g. that it has no data, and why).
    """
    if isinstance(report, Report):
        report = report.to_json()
    tables: Mapping[str, Any] = report.get("tables", {})
    plot_meta: Mapping[str, Any] = report.get("plots", {})
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        '<table class="meta">',
        f"<tr><td>Report kind</td><td><b>{_e(report.get('kind', ''))}</b></td></tr>",
        f"<tr><td>Generated</td><td>{_e(report.get('generated_at', ''))}</td></tr>",
    ]
    for key, value in (report.get("params") or {}).items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        parts.append(f"<tr><td>{_e(key)}</td><td>{_e(shown)}</td></tr>")
    parts.append("</table>")
    parts.append(
        '<p class="explain">Numbers are shown with three decimals; <code>0.873 [0.831, 0.913]</code> is a point '
        "estimate with its 95% bootstrap interval. A dash means the number could not be computed; the reason is "
        "listed under &ldquo;Not computed&rdquo; at the end of the page.</p>"
    )
    parts.append(_trust_legend(report.get("params") or {}))
    shown_tables: set[str] = set()
    shown_plots: set[str] = set()
    for section in report.get("sections", []):
        section_tables = [t for t in section.get("tables", []) if t in tables]
        section_plots = [p for p in section.get("plots", []) if p in plots]
        note = section.get("note")
        if not section_tables and not section_plots and not note:
            continue
        parts.append(f'<h2 id="section-{_e(section.get("id", ""))}">{_e(section.get("title", ""))}</h2>')
        if note:
            parts.append(f'<p class="note">{_e(note)}</p>')
        if section.get("explanation"):
            parts.append(f'<p class="explain">{_e(section["explanation"])}</p>')
        for name in section_tables:
            parts.append(_table(name, tables[name]))
            shown_tables.add(name)
        for name in section_plots:
            parts.append(_figure(name, plots[name], str(plot_meta.get(name, {}).get("title", name))))
            shown_plots.add(name)
    leftover_tables = [t for t in tables if t not in shown_tables]
    leftover_plots = [p for p in plots if p not in shown_plots]
    if leftover_tables or leftover_plots:
        parts.append("<h2>Other results</h2>")
        parts += [_table(name, tables[name]) for name in leftover_tables]
        parts += [
            _figure(name, plots[name], str(plot_meta.get(name, {}).get("title", name))) for name in leftover_plots
        ]
    errors: Mapping[str, str] = report.get("errors", {})
    parts.append("<h2>Not computed</h2>")
    if errors:
        parts.append(
            '<p class="explain">Each entry names where a number is missing (table / row / column) and why it could '
            "not be computed, e.g. a single class of labels or too few items.</p>"
        )
        parts.append('<ul class="errors">')
        parts += [f"<li><code>{_e(where)}</code>: {_e(reason)}</li>" for where, reason in errors.items()]
        parts.append("</ul>")
    else:
        parts.append("<p>Everything was computed.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
