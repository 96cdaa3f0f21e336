"""The reproduction report: one markdown page and the same as one offline HTML file (no script, no network),
styled by ``resources/reproduce_report.css``."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from embedlab.results.reproduce.compare import Row, report_rows
from embedlab.results.reproduce.values import (PAPER_VALUES, PAPERS, RECORDS, RESOURCES, STATUSES, StoredRecord,
                                               printed_decimals, read_records)

STYLE_SHEET = RESOURCES / "reproduce_report.css"



def format_number(value: float | None, unit: str, like: str = "") -> str:
    """A cell: counts with thousands separators, other values with the paper's decimals (+1 to show gaps)."""
    if value is None:
        return "–"
    if unit == "count":
        return f"{value:,.0f}"
    decimals = max(printed_decimals(like) + 1, 2) if like else 4
    return f"{value:.{decimals}f}"


def _difference(row: Row) -> str:
    if row.difference is None:
        return "–"
    unit, decimals = row.paper_value.unit, printed_decimals(row.paper_value.value) + 1
    if unit == "count":
        relative = f" ({row.difference / row.paper_value.number:+.1%})" if row.paper_value.number else ""
        return f"{row.difference:+,.0f}{relative}"
    return f"{row.difference:+.{max(decimals, 2)}f}"


def _source(row: Row) -> str:
    if row.record is None:
        return "–"
    return "recomputed" if row.record.recomputed else "earlier run, not re-run"


HEADER = ("table", "row", "column", "dataset", "paper", "ours", "difference", "status", "ours: method", "source", "reason")


def _cells(row: Row) -> list[str]:
    value = row.paper_value
    return [value.table, value.row, value.column, value.dataset, value.value,
            format_number(row.ours, value.unit, value.value), _difference(row), row.status, value.method, _source(row),
            row.reason + (f" ({value.note})" if value.note else "")]


def status_counts(rows: Sequence[Row]) -> dict[str, int]:
    counts = {status: 0 for status in STATUSES}
    for row in rows:
        counts[row.status] += 1
    return {status: count for status, count in counts.items() if count}


def interval_summary(rows: Sequence[Row]) -> str:
    """How many cells outside tolerance have the paper's value inside our 95 % interval."""
    outside = [row for row in rows if row.status == "outside tolerance"]
    inside = sum(row.paper_in_interval is True for row in outside)
    unknown = sum(row.paper_in_interval is None for row in outside)
    return (f"{len(outside)} outside tolerance: the paper's value lies inside our 95 % CI in {inside}, outside it in "
            f"{len(outside) - inside - unknown}; {unknown} without an interval (recompute to get one)")


def provenance_lines(records: Sequence[StoredRecord]) -> list[str]:
    """One line per distinct provenance: how many records came from where."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record.provenance] = counts.get(record.provenance, 0) + 1
    return [f"{count} records: {provenance}" for provenance, count in counts.items()]


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(sections: dict[str, list[Row]], records: dict[str, list[StoredRecord]], *, command: str) -> str:
    """The report as one markdown page: a summary, then one table per paper."""
    lines = ["# embedlab reproduce: the papers beside our numbers", "",
             f"Rendered by `{command}` from the committed paper values (`embedlab/resources/paper_values/`) and "
             "records (`embedlab/resources/records/`). Paper values are as printed, in the paper's unit; ours are "
             "converted to it. Statuses: exact (rounds to the printed value), within / outside tolerance (same "
             "model and protocol), other protocol, analogue on another model, different model, not run here (reproducible, "
             "not computed yet: the reason gives its cost and command), not reproducible here.",
             "", "| paper | cells | " + " | ".join(STATUSES) + " |", "|---|---:|" + "---:|" * len(STATUSES)]
    for paper, rows in sections.items():
        counts = status_counts(rows)
        lines.append(f"| {paper} | {len(rows)} | " + " | ".join(str(counts.get(s, 0)) for s in STATUSES) + " |")
    for paper, rows in sections.items():
        lines += ["", f"## {paper}: {PAPERS[paper]}", ""]
        lines += [f"* {line}" for line in [interval_summary(rows), *provenance_lines(records[paper])]] + [""]
        lines.append("| " + " | ".join(HEADER) + " |")
        lines.append("|" + "|".join("---:" if name in ("paper", "ours", "difference") else "---" for name in HEADER) + "|")
        lines += ["| " + " | ".join(_md_escape(cell) for cell in _cells(row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def render_html(sections: dict[str, list[Row]], records: dict[str, list[StoredRecord]], *, command: str) -> str:
    """The same report as one self-contained HTML file (no script, no network)."""
    style = STYLE_SHEET.read_text(encoding="utf-8").removesuffix("\n")
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>embedlab reproduce</title>",
             f"<style>{style}</style></head><body><h1>embedlab reproduce: the papers beside our numbers</h1>",
             f"<p class='meta'>Rendered by <code>{html.escape(command)}</code> from the committed paper values and records "
             "(no date, so that a re-render differs only where a number or a status does). Paper values as printed, "
             "in the paper's unit; ours converted to it.</p>",
             "<table><tr><th>paper</th><th>cells</th>" + "".join(f"<th>{html.escape(s)}</th>" for s in STATUSES) + "</tr>"]
    for paper, rows in sections.items():
        counts = status_counts(rows)
        parts.append(f"<tr><td>{paper}</td><td class='num'>{len(rows)}</td>"
                     + "".join(f"<td class='num'>{counts.get(s, 0)}</td>" for s in STATUSES) + "</tr>")
    parts.append("</table>")
    numeric = {"paper", "ours", "difference"}
    for paper, rows in sections.items():
        parts.append(f"<h2>{paper}: {html.escape(PAPERS[paper])}</h2><ul>")
        parts += [f"<li>{html.escape(line)}</li>" for line in [interval_summary(rows), *provenance_lines(records[paper])]]
        parts.append("</ul><table><tr>" + "".join(f"<th>{html.escape(name)}</th>" for name in HEADER) + "</tr>")
        for row in rows:
            css = row.status.replace(" ", "-")
            cells = "".join(f"<td class='{'num' if name in numeric else ('status' if name == 'status' else '')}'>{html.escape(cell)}</td>"
                            for name, cell in zip(HEADER, _cells(row)))
            parts.append(f"<tr class='{css}'>{cells}</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(papers: Sequence[str], out: Path, *, command: str, values_folder: Path = PAPER_VALUES,
                 records_folder: Path = RECORDS) -> tuple[Path, Path]:
    """Render ``papers`` from their values and records into ``out``/report.md and ``out``/report.html."""
    from embedlab.runtime.outputs import write_output_text, writer_lock

    sections = {paper: report_rows(paper, values_folder=values_folder, records_folder=records_folder) for paper in papers}
    records = {paper: read_records(paper, records_folder) for paper in papers}
    markdown, page = out / "report.md", out / "report.html"
    with writer_lock(out):  # one writer at a time; each file atomic, a symlink replaced, not written through
        out.mkdir(parents=True, exist_ok=True)
        write_output_text(markdown, render_markdown(sections, records, command=command))
        write_output_text(page, render_html(sections, records, command=command))
    return markdown, page


