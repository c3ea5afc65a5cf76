"""The judges of a report and their rows: every judge, with how many of its rows are ok, failed and not applicable.

Every report kind ends with this section (:func:`metrics.reports.build_report` adds it), so that a judge the
deployment runs never vanishes from a report without a word: a judge with no ``ok`` row has no figures anywhere in
the report, and its row here says why (it did not apply to these attempts, it failed, or it has no rows at all).

Table ``judge_rows``: one row per judge (the configured judges in their order, then any other judge the rows name,
sorted) with ``judge, ok, failed, not_applicable, rows`` and ``note``: None for a judge with ok rows, else the reason
it has no figures, with the most common reason its rows give (the tidy row's ``error``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from metrics.reports.common import LABELS, TidyRow
from metrics.reports.model import Report, Row

TABLE = "judge_rows"
SECTION = "judge_rows"
STATUSES = ("ok", "failed", "not_applicable")
KEYS = ("judge", "ok", "failed", "not_applicable", "rows", "note")
COVERAGE_LABELS = {
    **LABELS,
    "ok": "ok",
    "failed": "failed",
    "not_applicable": "not applicable",
    "rows": "Rows",
    "note": "Why no figures",
}


def _most_common(reasons: Counter[str]) -> str:
    if not reasons:
        return ""
    reason, count = reasons.most_common(1)[0]
    return f' (most often "{reason}", {count} row{"s" if count != 1 else ""})'


def judge_rows(rows: Sequence[TidyRow], configured: Sequence[str] = ()) -> list[Row]:
    """A row per judge: its counts of ok, failed and not_applicable rows among ``rows`` (every condition, repeat
    and attempt the report read), and for a judge without an ok row the reason it has no figures."""
    judged = sorted({str(r["judge"]) for r in rows if r.get("judge") is not None} - set(configured))
    counts: dict[str, Counter[str]] = {judge: Counter() for judge in [*configured, *judged]}
    reasons: dict[tuple[str, str], Counter[str]] = {}
    for row in rows:
        if row.get("judge") is None:
            continue
        judge, status = str(row["judge"]), str(row.get("status"))
        counts[judge][status] += 1
        if status != "ok" and row.get("error"):
            reasons.setdefault((judge, status), Counter())[str(row["error"])] += 1
    out: list[Row] = []
    for judge, by_status in counts.items():
        total = sum(by_status.values())
        note: str | None = None
        if total == 0:
            note = "no rows: the judge did not judge these attempts (not asked to, disabled, or not yet done)"
        elif by_status["ok"] == 0:
            parts = []
            if by_status["not_applicable"]:
                why = _most_common(reasons.get((judge, "not_applicable"), Counter()))
                parts.append(f"it does not apply to {by_status['not_applicable']} of its rows{why}")
            if by_status["failed"]:
                why = _most_common(reasons.get((judge, "failed"), Counter()))
                parts.append(f"it failed on {by_status['failed']}{why}")
            other = total - sum(by_status[s] for s in STATUSES)
            if other:
                parts.append(f"{other} rows have another status")
            note = "no ok rows, so no figures: " + "; ".join(parts)
        out.append(
            {
                "judge": judge,
                **{status: by_status[status] for status in STATUSES},
                "rows": total,
                "note": note,
            }
        )
    return out


def add_judge_rows(report: Report, rows: Sequence[TidyRow], configured: Sequence[str] = ()) -> None:
    """Append the ``judge_rows`` table and its section to ``report`` (see the module)."""
    table = judge_rows(rows, configured)
    report.add_table(TABLE, "Judges and their rows", KEYS, table, COVERAGE_LABELS)
    silent = [str(row["judge"]) for row in table if row["note"]]
    report.add_section(
        SECTION,
        "Judges and their rows",
        "Every judge, with how many of its judgment rows in this report's attempts are ok (scored), failed (the "
        "judge could not score the attempt: a provider or tool error, a budget) and not applicable (the judge does "
        "not apply to the attempt: no reference solution, no public tests, no linter for its language). Only ok "
        "rows are scored; failed and not-applicable rows never count as a score or as a failure of the program.",
        [TABLE],
        note=f"No figures for {', '.join(silent)}: see the last column." if silent else None,
    )
