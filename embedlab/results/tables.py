"""The one formatter for everything the CLI prints as results: ``--format table|markdown|json|csv``.

* ``table``: a plain aligned text table (numbers right-aligned), for reading in a terminal;
* ``markdown``: a GitHub-flavoured markdown table, for pasting into documents;
* ``json``: one JSON object per line (column name → value; numbers stay numbers), for programs;
* ``csv``: a header line and one line per row (Python's ``csv`` quoting), for spreadsheets.

Evaluation records print as a pivot (methods as columns) in ``table``/``markdown``, each value with its 95 %
confidence interval when it has one (``0.8203 [0.8071, 0.8322]``), and as one record per line, with the
metric's unit, the interval fields (``ci_low`` … ``ci_note``), the settings group and the cost, in
``json``/``csv`` (:func:`format_records`; ``json`` keeps ``settings`` and ``cost`` as objects, ``csv`` writes the
settings compactly, ``k=10 search=hnsw``, and the cost as JSON text). The pivot gets a ``settings`` column when
any record was computed with non-default settings; :func:`format_costs` prints one row of cost figures per
method and settings group.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence

from embedlab.errors import InputError
from embedlab.evaluation.cost import COST_KEYS
from embedlab.evaluation.records import CI_KEYS, RECORD_KEYS, Record
from embedlab.evaluation.settings_groups import compact_settings
from embedlab.results.formats import FORMATS

# json / csv output of records: every key, the metric's unit, the interval fields, the settings group and the cost
RECORD_COLUMNS = (*RECORD_KEYS, "unit", *CI_KEYS, "settings", "cost")
EMPTY = "(no results)"


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def _is_number(cell: str) -> bool:
    try:
        float(cell.replace(",", "").replace("%", "").split(" / ")[0].split(" [")[0])
    except ValueError:
        return False
    return True


def _numeric_columns(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[bool]:
    """A column is right-aligned when every non-empty cell in it reads as a number."""
    return [any(row[k] for row in body) and all(_is_number(row[k]) or row[k] in ("", "–", "nan") for row in body)
            for k in range(len(header))]


def render(header: Sequence[str], rows: Iterable[Sequence[object]], output_format: str) -> str:
    """``rows`` under ``header`` in one of :data:`FORMATS` (no trailing newline; ``(no results)`` when empty
    for the two human formats)."""
    header, rows = [str(h) for h in header], [list(row) for row in rows]
    if output_format == "json":
        return "\n".join(json.dumps(dict(zip(header, row)), ensure_ascii=False) for row in rows)
    if output_format == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(["" if value is None else value for value in row] for row in rows)
        return buffer.getvalue().rstrip("\n")
    if not rows:
        return EMPTY
    body = [[_text(value) for value in row] for row in rows]
    numeric = _numeric_columns(header, body)
    if output_format == "markdown":
        escape = lambda cell: cell.replace("|", "\\|").replace("\n", " ")  # noqa: E731
        lines = ["| " + " | ".join(escape(c) for c in header) + " |",
                 "|" + "|".join("---:" if right else "---" for right in numeric) + "|"]
        lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in body]
        return "\n".join(lines)
    if output_format != "table":
        raise InputError(f"unknown output format {output_format!r}; expected one of {', '.join(FORMATS)}")
    widths = [max(len(row[k]) for row in [header, *body]) for k in range(len(header))]
    lines = []
    for row in [header, *body]:
        cells = [cell.rjust(widths[k]) if numeric[k] else cell.ljust(widths[k]) for k, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def format_value(task: str, metric: str, value: float) -> str:
    """A table cell, styled by the task's declaration of the metric (counts, small rates, plain numbers)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "nan"
    from embedlab.evaluation.harness import metric_of  # the task table, loaded with the first record formatted

    style = metric_of(task, metric).style
    if style == "count" or (float(value).is_integer() and abs(value) >= 1000):
        return f"{int(round(value)):,}"
    if style == "rate":
        return f"{value:.2e}"
    if abs(value) >= 10:
        return f"{value:.2f}"
    return f"{value:.4f}"


def format_cell(record: Record) -> str:
    """A record's table cell: its value, and its interval when it has one (``0.8203 [0.8071, 0.8322]``)."""
    text = format_value(record.task, record.metric, record.value)
    if record.has_interval:
        low, high = (format_value(record.task, record.metric, bound) for bound in (record.ci_low, record.ci_high))
        text += f" [{low}, {high}]"
    return text


def methods_of(records: Iterable[Record]) -> list[str]:
    return list(dict.fromkeys(r.method for r in records))


def pivot(records: Sequence[Record]) -> tuple[list[str], list[tuple[tuple[str, ...], dict[str, Record]]]]:
    """(methods, rows): one row per (task, dataset, subset, metric), plus its compact settings when any record has
    non-default ones (each settings group its own rows), one column per method, in input order."""
    methods, shown = methods_of(records), has_settings(records)
    rows: dict[tuple[str, ...], dict[str, Record]] = {}
    for record in records:
        key = (record.task, record.dataset, record.subset, record.metric) + ((compact_settings(record.settings),) if shown else ())
        rows.setdefault(key, {})[record.method] = record
    return methods, list(rows.items())


def has_settings(records: Iterable[Record]) -> bool:
    """Whether any record was computed with non-default settings (then tables show a ``settings`` column)."""
    return any(record.settings for record in records)


def pivot_cells(records: Sequence[Record]) -> tuple[list[str], list[list[str]]]:
    """Header and formatted cells of the pivot: task, dataset, subset, metric, (settings, when any record has
    non-default ones: each settings group its own rows), one column per method, n."""
    methods, rows = pivot(records)
    header = ["task", "dataset", "subset", "metric", *(["settings"] if has_settings(records) else []), *methods, "n"]
    body = []
    for key, by_method in rows:
        n = next(iter(by_method.values())).n
        values = [format_cell(by_method[m]) if m in by_method else "" for m in methods]
        body.append([*key, *values, f"{n:,}"])
    return header, body


def record_row(record: Record, flat: bool = False) -> list[object]:
    """One record's values in :data:`RECORD_COLUMNS` order (the unit from the task's metric declaration);
    ``flat`` (csv): the settings as compact text and the cost as JSON text instead of objects."""
    from embedlab.evaluation.harness import metric_of

    settings: object = compact_settings(record.settings) if flat else record.settings
    cost: object = json.dumps(record.cost, sort_keys=True) if flat and record.cost is not None else record.cost
    return [*(getattr(record, key) for key in RECORD_KEYS), metric_of(record.task, record.metric).unit,
            *(getattr(record, key) for key in CI_KEYS), settings, cost]


COST_HEADER = ("method", "task", "dataset", "settings", "encode s", "CPU s", "texts", "texts/s", "peak MB", "bytes/vector",
               "parameters", "threads", "CPU", "note")


def format_costs(records: Sequence[Record], output_format: str) -> str:
    """What each (method, task, dataset, settings group) cost: one row of :data:`COST_KEYS` figures each (the
    same for every record of one run); ``json``/``csv`` give the figures under their own keys."""
    runs: dict[tuple[str, str, str, str], dict | None] = {}
    for record in records:
        runs.setdefault((record.method, record.task, record.dataset, compact_settings(record.settings)), record.cost)
    if output_format in ("json", "csv"):
        return render(("method", "task", "dataset", "settings", *COST_KEYS),
                      [[*key, *((cost or {}).get(name) for name in COST_KEYS)] for key, cost in runs.items()], output_format)
    rows = []
    for key, cost in runs.items():
        cost = cost or {"note": "no cost recorded (stored before costs were)"}
        numbers = [cost_figure(cost.get(name), digits) for name, digits in
                   (("encode_seconds", 2), ("cpu_seconds", 2), ("texts", 0), ("texts_per_second", 1), ("peak_memory_mb", 1),
                    ("bytes_per_vector", 0), ("parameters", 0), ("threads", 0))]
        note = "; ".join(part for part in ("partial" if cost.get("partial") else "", cost.get("note") or "") if part)
        rows.append([*key, *numbers, cost.get("cpu_model") or "", note])
    return render(COST_HEADER, rows, output_format)


def cost_figure(value: object, digits: int) -> str:
    """One cost figure as tables print it: ``digits`` decimals for a float, thousands separated; ``–`` for none."""
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def format_records(records: Sequence[Record], output_format: str) -> str:
    """Records as the pivot (``table``, ``markdown``) or one record per line with its unit (``json``, ``csv``)."""
    if output_format in ("json", "csv"):
        return render(RECORD_COLUMNS, [record_row(record, flat=output_format == "csv") for record in records], output_format)
    if not records:
        return EMPTY
    return render(*pivot_cells(records), output_format)
