"""Tables of results (methods as columns) and a single-file offline HTML report with matplotlib plots.

The HTML embeds every plot as a base64 PNG and needs no server, script or network to read.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from embedlab.evaluation import metric_of
from embedlab.evaluation.records import Record
from embedlab.results.summaries import headline_records


def methods_of(records: Iterable[Record]) -> list[str]:
    return list(dict.fromkeys(r.method for r in records))


def pivot(records: Sequence[Record]) -> tuple[list[str], list[tuple[tuple[str, str, str, str], dict[str, Record]]]]:
    """(methods, rows): one row per (task, dataset, subset, metric), one column per method, in input order."""
    methods = methods_of(records)
    rows: dict[tuple[str, str, str, str], dict[str, Record]] = {}
    for record in records:
        rows.setdefault((record.task, record.dataset, record.subset, record.metric), {})[record.method] = record
    return methods, list(rows.items())


def format_value(task: str, metric: str, value: float) -> str:
    """A table cell, styled by the task's declaration of the metric (counts, small rates, plain numbers)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "nan"
    style = metric_of(task, metric).style
    if style == "count" or (float(value).is_integer() and abs(value) >= 1000):
        return f"{int(round(value)):,}"
    if style == "rate":
        return f"{value:.2e}"
    if abs(value) >= 10:
        return f"{value:.2f}"
    return f"{value:.4f}"


def _table_cells(records: Sequence[Record]) -> tuple[list[str], list[list[str]]]:
    methods, rows = pivot(records)
    header = ["task", "dataset", "subset", "metric", *methods, "n"]
    body = []
    for (task, dataset, subset, metric), by_method in rows:
        n = next(iter(by_method.values())).n
        values = [format_value(task, metric, by_method[m].value) if m in by_method else "" for m in methods]
        body.append([task, dataset, subset, metric, *values, f"{n:,}"])
    return header, body


def text_table(records: Sequence[Record]) -> str:
    """Aligned plain-text table, methods as columns."""
    if not records:
        return "(no results)"
    header, body = _table_cells(records)
    widths = [max(len(row[k]) for row in [header, *body]) for k in range(len(header))]
    numeric_from = 4
    lines = []
    for row in [header, *body]:
        cells = [cell.rjust(widths[k]) if k >= numeric_from else cell.ljust(widths[k]) for k, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(records: Sequence[Record]) -> str:
    """GitHub-flavoured markdown table, methods as columns."""
    if not records:
        return "(no results)"
    header, body = _table_cells(records)
    escape = lambda cell: cell.replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(escape(c) for c in header) + " |",
             "|" + "|".join("---" if k < 4 else "---:" for k in range(len(header))) + "|"]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def _html_table(records: Sequence[Record]) -> str:
    header, body = _table_cells(records)
    methods, rows = pivot(records)
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for cells, ((task, _, _, metric), by_method) in zip(body, rows):
        values = {m: by_method[m].value for m in methods if m in by_method and not math.isnan(by_method[m].value)}
        better = metric_of(task, metric).better
        best = None
        if len(values) > 1 and better:
            best = (min if better == "lower" else max)(values, key=values.get)
        tds = []
        for k, cell in enumerate(cells):
            is_best = 4 <= k < 4 + len(methods) and methods[k - 4] == best
            klass = ' class="best"' if is_best else (' class="num"' if k >= 4 else "")
            tds.append(f"<td{klass}>{html.escape(cell)}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _png(figure) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _bar_plot(task: str, metric: str, chosen: Sequence[Record]) -> str:
    """Grouped bars of one headline metric: one group per dataset/subset, one bar per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    methods = methods_of(chosen)
    groups = list(dict.fromkeys((r.dataset, r.subset) for r in chosen))
    values = {(r.dataset, r.subset, r.method): r.value for r in chosen}
    figure, axis = plt.subplots(figsize=(max(5.0, 0.9 * len(groups) * max(1, len(methods)) ** 0.5 + 2), 3.4))
    width = 0.8 / len(methods)
    positions = np.arange(len(groups))
    for k, method in enumerate(methods):
        heights = [values.get((d, s, method), np.nan) for d, s in groups]
        axis.bar(positions + k * width - 0.4 + width / 2, heights, width, label=method)
    labels = [d if s in ("all", "test", "train", "similarity") else f"{d}\n{s}" for d, s in groups]
    axis.set_xticks(positions, labels, rotation=30 if len(groups) > 4 else 0, ha="right" if len(groups) > 4 else "center",
                    fontsize=8)
    axis.set_ylabel(metric)
    if metric_of(task, metric).style == "rate" and all(values[k] > 0 for k in values):
        axis.set_yscale("log")
    axis.set_title(f"{task}: {metric}" + (" (lower is better)" if metric_of(task, metric).lower_is_better else ""))
    axis.legend(fontsize=7, loc="best")
    axis.grid(axis="y", alpha=0.3)
    return _png(figure)


def _alignment_plot(records: Sequence[Record]) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = {}
    for r in records:
        if r.task == "alignment" and r.metric in ("alignment", "uniformity"):
            points.setdefault(r.method, {})[r.metric] = r.value
    points = {m: p for m, p in points.items() if len(p) == 2}
    if not points:
        return None
    figure, axis = plt.subplots(figsize=(5, 3.6))
    for method, p in points.items():
        axis.scatter(p["uniformity"], p["alignment"], label=method)
    axis.set_xlabel("uniformity (Eq. 9, lower is better)")
    axis.set_ylabel("alignment (Eq. 8, lower is better)")
    axis.legend(fontsize=7)
    axis.grid(alpha=0.3)
    return _png(figure)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { text-align: right; font-weight: bold; background: #e6f4e6; }
img { max-width: 100%; } h2 { border-bottom: 1px solid #ddd; } .meta { color: #666; font-size: 0.85em; }
"""


def html_report(records: Sequence[Record], *, title: str = "embedlab evaluation report", provenance: str = "") -> str:
    """One self-contained HTML page: a section per task with its table and plot."""
    records = list(records)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p class='meta'>Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}; "
             f"{len(records)} records; methods: {html.escape(', '.join(methods_of(records)) or '-')}. "
             f"{html.escape(provenance)} Best value per row in bold.</p>"]
    if not records:
        parts.append("<p>No results.</p>")
    for task in dict.fromkeys(r.task for r in records):
        task_records = [r for r in records if r.task == task]
        parts.append(f"<h2>{html.escape(task)}</h2>")
        headlines = [r for r in headline_records(task_records) if not math.isnan(r.value)]
        images = [_bar_plot(task, metric, [r for r in headlines if r.metric == metric])
                  for metric in dict.fromkeys(r.metric for r in headlines)]  # ALIGN-SIM: one per kind of dataset
        for image in images + [_alignment_plot(task_records) if task == "alignment" else None]:
            if image:
                parts.append(f"<img alt='{html.escape(task)} plot' src='data:image/png;base64,{image}'>")
        parts.append(_html_table(task_records))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(records: Sequence[Record], out: str | Path, **options) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html_report(records, **options), encoding="utf-8")
    return path
