"""The shareable evaluation report: one offline HTML file (plots inline as PNG data URIs, no script, no
network). Each method keeps one colour and one place in every plot and table (by spec, in the order methods
first appear); plots zoom to the data, label every value and keep legends beside the axes; each row's best
value is bold for every method that reaches it (ties alike); every metric is described with its unit and
direction; ``layers=`` sweeps get a layer curve, ALIGN-SIM its criterion tables and ε-histograms, each task
dataset of several methods the paired difference from the best and quality against cost
(:mod:`embedlab.results.decision_report`). The header states the provenance (code version, seeds, model
fingerprints, task settings, the command), never machine paths.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from embedlab.evaluation.base import UNITS
from embedlab.evaluation.harness import TASK_FAMILIES, metric_of
from embedlab.evaluation.records import Record
from embedlab.evaluation.settings_groups import compact_settings
from embedlab.results.comparison import marks_of
from embedlab.results.decision_report import decision_section
from embedlab.results.figures import img_tag, plain_log_ticks, png_base64
from embedlab.results.retrieval_report import retrieval_section
from embedlab.results.summaries import headline_records
from embedlab.results.tables import format_value, methods_of, pivot, pivot_cells
from embedlab.runtime.cache.atomic import atomic_write_text
from embedlab.runtime.extras import pyplot

# Tableau 10, then its lighter half: distinct for up to 20 methods, then repeated.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
           "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5")
_LAYER_OPTION = re.compile(r"(?<=[:,])layers=(\d+)(?=,|$)")


def method_colours(methods: Sequence[str]) -> dict[str, str]:
    """One colour per method spec, the same in every section of a report."""
    return {method: PALETTE[index % len(PALETTE)] for index, method in enumerate(dict.fromkeys(methods))}


@dataclass
class Provenance:
    """Where the numbers come from: the rows of :meth:`ResultsDB.provenance` (fingerprint, code version,
    seed, settings per record), the command that wrote the report, and the database's file name."""

    rows: list[dict] = field(default_factory=list)
    command: str = ""
    source: str = ""


# ---------------------------------------------------------------------------------------------- plots


def _zoomed(values: list[float]) -> tuple[float, float]:
    """Axis limits around the data (not from 0), so that 0.8203 and 0.8155 look different, with room
    for the value labels."""
    low, high = min(values), max(values)
    span = high - low or max(abs(high) * 0.05, 0.01)
    return low - 0.35 * span, high + 0.3 * span


def _label(task: str, metric: str) -> str:
    declared = metric_of(task, metric)
    direction = {"higher": ", higher is better", "lower": ", lower is better"}.get(declared.better, "")
    return f"{metric} ({declared.unit}{direction})"


def _error_bars(chosen: Sequence[Record], keys: Sequence[tuple[str, str, str]]) -> list[list[float]]:
    """The 2 × n error extents (below, above) of the records at ``keys``: 95 % intervals, 0 where there is none."""
    found = list(map({(r.dataset, r.subset, r.method): r for r in chosen}.get, keys))
    return [[r.value - r.ci_low if r is not None and r.has_interval else 0.0 for r in found],
            [r.ci_high - r.value if r is not None and r.has_interval else 0.0 for r in found]]


def _bar_plot(task: str, metric: str, chosen: Sequence[Record], colours: dict[str, str]) -> str:
    """Bars of one headline metric, one per method, grouped by dataset/subset; compact horizontal bars
    when there is one group (a single value per method). Error bars show each record's 95 % interval."""
    import numpy as np

    plt = pyplot()
    methods = [m for m in colours if any(r.method == m for r in chosen)]
    groups = list(dict.fromkeys((r.dataset, r.subset) for r in chosen))
    values = {(r.dataset, r.subset, r.method): r.value for r in chosen}
    log_scale = metric_of(task, metric).style == "rate" and all(v > 0 for v in values.values())
    low, high = _zoomed([*values.values(), *(b for r in chosen if r.has_interval for b in (r.ci_low, r.ci_high))])
    if log_scale:
        low, high = min(values.values()) / 1.6, max(values.values()) * 1.6
    if len(groups) == 1:  # compact: one value per method
        (dataset, subset), = groups
        figure, axis = plt.subplots(figsize=(5.2, 0.32 * len(methods) + 0.9))
        heights = [values[(dataset, subset, m)] for m in methods]
        base = 0.0 if log_scale else low
        errors = _error_bars(chosen, [(dataset, subset, m) for m in methods])
        axis.barh(range(len(methods)), [h - base for h in heights], left=base, height=0.6, color=[colours[m] for m in methods],
                  xerr=errors, error_kw={"elinewidth": 0.9, "capsize": 2.5, "ecolor": "#333"})
        for row, (height, above) in enumerate(zip(heights, errors[1])):  # each label after its error bar
            axis.annotate(format_value(task, metric, height), (height + above, row), xytext=(3, 0), textcoords="offset points",
                          va="center", fontsize=7)
        axis.set_yticks(range(len(methods)), methods, fontsize=7)
        axis.invert_yaxis()
        axis.set_xlim(low, high)
        if log_scale:
            axis.set_xscale("log")
            plain_log_ticks(axis.xaxis)
        axis.set_xlabel(_label(task, metric), fontsize=8)
        axis.set_title(f"{task} {dataset} ({subset})", fontsize=9)
        axis.grid(axis="x", alpha=0.3)
        return png_base64(figure)
    figure, axis = plt.subplots(figsize=(max(5.0, 0.55 * len(groups) * max(1, len(methods)) ** 0.7 + 2), 3.4))
    width = 0.8 / len(methods)
    positions = np.arange(len(groups))
    base = 0.0 if log_scale else low
    for k, method in enumerate(methods):
        heights = [values.get((d, s, method), np.nan) for d, s in groups]
        bars = axis.bar(positions + k * width - 0.4 + width / 2, [h - base for h in heights], width, bottom=base,
                        label=method, color=colours[method], yerr=_error_bars(chosen, [(d, s, method) for d, s in groups]),
                        error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333"})
        axis.bar_label(bars, labels=["" if math.isnan(h) else format_value(task, metric, h) for h in heights],
                       padding=2, fontsize=6, rotation=90 if len(methods) > 2 else 0)
    labels = [d if s in ("all", "test", "train", "similarity") else f"{d}\n{s}" for d, s in groups]
    rotate = len(groups) > 4
    axis.set_xticks(positions, labels, rotation=30 if rotate else 0, ha="right" if rotate else "center", fontsize=8)
    axis.set_ylim(low, high + (high - low) * (0.25 if len(methods) > 2 else 0))
    if log_scale:
        axis.set_yscale("log")
        plain_log_ticks(axis.yaxis)
    axis.set_ylabel(_label(task, metric), fontsize=8)
    axis.set_title(f"{task}: {metric}", fontsize=9)
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # beside the bars
    axis.grid(axis="y", alpha=0.3)
    return png_base64(figure)


def layer_sweeps(records: Sequence[Record]) -> dict[str, dict[int, str]]:
    """Methods that differ only in a single ``layers=N`` option: {spec with ``layers=*``: {N: spec}}, for
    sweeps of at least three layers."""
    sweeps: dict[str, dict[int, str]] = {}
    for method in methods_of(records):
        match = _LAYER_OPTION.search(method)
        if match:
            sweeps.setdefault(_LAYER_OPTION.sub("layers=*", method), {})[int(match.group(1))] = method
    return {base: dict(sorted(layers.items())) for base, layers in sweeps.items() if len(layers) >= 3}


def _layer_plot(task: str, metric: str, chosen: Sequence[Record], sweeps: dict[str, dict[int, str]]) -> str | None:
    """The headline metric against the layer, one line per (sweep, dataset)."""
    plt = pyplot()
    values = {(r.method, r.dataset, r.subset): r.value for r in chosen}
    groups = list(dict.fromkeys((r.dataset, r.subset) for r in chosen))
    lines = []
    for base, layers in sweeps.items():
        for dataset, subset in groups:
            points = [(layer, values[(spec, dataset, subset)]) for layer, spec in layers.items() if (spec, dataset, subset) in values]
            if len(points) >= 3:
                lines.append((f"{base} · {dataset}", points))
    if not lines:
        return None
    figure, axis = plt.subplots(figsize=(5.6, 3.2))
    for index, (name, points) in enumerate(lines):
        layers, scores = zip(*points)
        axis.plot(layers, scores, marker="o", label=name, color=PALETTE[index % len(PALETTE)])
        for layer, score in points:
            axis.annotate(format_value(task, metric, score), (layer, score), textcoords="offset points", xytext=(0, 4),
                          ha="center", fontsize=6)
    axis.set_ylim(*_zoomed([score for _, points in lines for _, score in points]))
    axis.set_xticks(sorted({layer for _, points in lines for layer, _ in points}))
    axis.set_xlabel("layer")
    axis.set_ylabel(_label(task, metric), fontsize=8)
    axis.set_title(f"{task}: {metric} by layer", fontsize=9)
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axis.grid(alpha=0.3)
    return png_base64(figure)


def _alignment_plot(records: Sequence[Record], colours: dict[str, str]) -> str | None:
    plt = pyplot()
    points: dict[str, dict[str, float]] = {}
    for r in records:
        if r.task == "alignment" and r.metric in ("alignment", "uniformity"):
            points.setdefault(r.method, {})[r.metric] = r.value
    points = {m: p for m, p in points.items() if len(p) == 2}
    if not points:
        return None
    figure, axis = plt.subplots(figsize=(5, 3.4))
    for method, p in points.items():
        axis.scatter(p["uniformity"], p["alignment"], label=method, color=colours[method])
        axis.annotate(f"({p['uniformity']:.3f}, {p['alignment']:.3f})", (p["uniformity"], p["alignment"]),
                      textcoords="offset points", xytext=(4, 4), fontsize=6)
    axis.set_xlabel("uniformity (Eq. 9, lower is better)", fontsize=8)
    axis.set_ylabel("alignment (Eq. 8, lower is better)", fontsize=8)
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axis.grid(alpha=0.3)
    return png_base64(figure)


# --------------------------------------------------------------------------------------------- tables


def _swatch(method: str, colours: dict[str, str]) -> str:
    return f"<span class='swatch' style='background:{colours[method]}'></span>"


def _html_table(records: Sequence[Record], colours: dict[str, str], ties: dict | None = None) -> str:
    """Methods as columns (each headed with its colour); in each row every method whose printed value is the best
    one is bold (ties alike); ``ties`` (key → ``tied``, :func:`~embedlab.results.comparison.tie_marks`) shades the rest."""
    header, body = pivot_cells(records)
    methods, rows = pivot(records)
    first = len(header) - len(methods) - 1  # the method columns follow task … metric (and settings, when shown)
    heads = [f"<th>{_swatch(h, colours)}{html.escape(h)}</th>" if first <= k < first + len(methods) else f"<th>{html.escape(h)}</th>"
             for k, h in enumerate(header)]
    out = ["<table><thead><tr>" + "".join(heads) + "</tr></thead><tbody>"]
    for cells, (key, by_method) in zip(body, rows):
        task, dataset, subset, metric = key[:4]
        shown = {m: cells[first + k] for k, m in enumerate(methods) if m in by_method and not math.isnan(by_method[m].value)}
        better = metric_of(task, metric).better
        best: set[str] = set()
        if len(shown) > 1 and better:
            pick = min if better == "lower" else max
            best_value = pick(by_method[m].value for m in shown)
            best_text = format_value(task, metric, best_value)
            best = {m for m in shown if format_value(task, metric, by_method[m].value) == best_text}
            if len(best) == len(shown):
                best = set()  # everyone equal: nothing stands out
        tds = []
        for k, cell in enumerate(cells):
            method = methods[k - first] if first <= k < first + len(methods) else None
            is_best, tied = method in best, (ties or {}).get((method, task, dataset, subset, metric)) == "tied"
            klass = ' class="best"' if is_best else (' class="tied"' if tied else (' class="num"' if k >= first else ""))
            tds.append(f"<td{klass}>{html.escape(cell)}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _plain_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td class='num'>{html.escape(str(c))}</td>" if k else f"<td>{html.escape(str(c))}</td>"
                                    for k, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _metric_notes(task: str, records: Sequence[Record]) -> str:
    """What every metric of the section means: description, unit, better direction."""
    items = []
    for metric in dict.fromkeys(r.metric for r in records):
        declared = metric_of(task, metric)
        direction = {"higher": "higher is better", "lower": "lower is better"}.get(declared.better, "descriptive (neither better)")
        description = declared.description or "not declared by this version's task"
        items.append(f"<li><code>{html.escape(metric)}</code>: {html.escape(description)} "
                     f"<span class='meta'>[unit: {html.escape(declared.unit)} — {html.escape(UNITS[declared.unit])}; "
                     f"{direction}]</span></li>")
    return "<details><summary>Metrics: what each number means</summary><ul class='metrics'>" + "".join(items) + "</ul></details>"


# --------------------------------------------------------------------------------------------- ALIGN-SIM


def _alignsim_section(records: Sequence[Record], provenance: Provenance, colours: dict[str, str]) -> list[str]:
    """The paper's criterion tables and, where the margins are still in the cache, the ε-histograms."""
    from embedlab.evaluation.alignsim.task import MethodResult, stored_margins
    from embedlab.results.alignsim_report import DATASET_TITLES, histogram_figure, sections

    datasets = [d for d in DATASET_TITLES if any(r.dataset == d for r in records)]
    origin = {(row["method"], row["dataset"]): row for row in provenance.rows if row["task"] == "alignsim"}
    results = []
    for method in methods_of(records):
        result = MethodResult(method, [r for r in records if r.method == method])
        for dataset in datasets:
            row = origin.get((method, dataset))
            if row is not None:
                result.margins.update(stored_margins(method, row["fingerprint"], dataset, row["settings"]))
        results.append(result)
    parts = []
    for title, header, rows in sections(results, datasets, paper=True):
        parts.append(f"<h3>{html.escape(title)}</h3>")
        parts.append(_plain_table(header, rows))
    keys = sorted({key for result in results for key in result.margins})
    if keys:
        parts.append("<h3>ε-histograms: per-item margins (positive = aligned with the human expectation)</h3>")
        for dataset, subset, metric in keys:
            figure = histogram_figure(results, dataset, subset, metric, colours, size=(6.4, 2.9))
            if figure is not None:
                parts.append(img_tag(png_base64(figure), f"alignsim {subset} {dataset} {metric} histogram", "half"))
    elif records:
        parts.append("<p class='meta'>ε-histograms: the per-item margins are not in this machine's cache "
                     "(rerun <code>embedlab alignsim</code> to draw them).</p>")
    return parts


# --------------------------------------------------------------------------------------------- page

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1.2em; font-size: 0.8em; max-width: 100%; } /* wraps, never wider */
th, td { border: 1px solid #ccc; padding: 3px 8px; } th { background: #f3f3f3; text-align: left; }
th:has(.swatch), td { overflow-wrap: anywhere; } /* a long spec or file name breaks anywhere; plain headers stay whole */
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { text-align: right; font-weight: bold; background: #e6f4e6; font-variant-numeric: tabular-nums; }
td.tied { text-align: right; background: #f1f8f1; font-style: italic; font-variant-numeric: tabular-nums; }
img { max-width: 100%; margin: 0.3em 0.6em 0.3em 0; vertical-align: top; } img.half { max-width: 47%; }
h2 { border-bottom: 1px solid #ddd; margin-top: 2em; } h3 { font-size: 1em; margin-bottom: 0.2em; }
.meta { color: #666; font-size: 0.85em; } .swatch { display: inline-block; width: 0.8em; height: 0.8em;
  margin-right: 0.35em; border-radius: 2px; vertical-align: baseline; } ul.metrics { font-size: 0.85em; }
details { margin: 0.4em 0; } code { font-size: 0.95em; }
"""


def _provenance_section(records: Sequence[Record], provenance: Provenance, colours: dict[str, str]) -> str:
    by_method: dict[str, dict[str, set]] = {}
    for row in provenance.rows:
        entry = by_method.setdefault(row["method"], {"fingerprint": set(), "code_version": set(), "seed": set(), "settings": set()})
        entry["fingerprint"].add(row["fingerprint"])
        entry["code_version"].add(row["code_version"])
        entry["seed"].add(str(row["seed"]))
        settings = row["settings"]
        if settings:
            entry["settings"].add(f"{row['task']}: {json.dumps(settings, sort_keys=True)}")
    rows = []
    for method in methods_of(records):
        entry = by_method.get(method)
        if entry is None:
            rows.append(f"<tr><td>{_swatch(method, colours)}<code>{html.escape(method)}</code></td><td colspan='4'>–</td></tr>")
            continue
        cells = [", ".join(sorted(entry[key])) or "defaults" for key in ("fingerprint", "code_version", "seed", "settings")]
        rows.append(f"<tr><td>{_swatch(method, colours)}<code>{html.escape(method)}</code></td>"
                    + "".join(f"<td><code>{html.escape(cell)}</code></td>" for cell in cells) + "</tr>")
    command = f"<p>Written by <code>{html.escape(provenance.command)}</code>" if provenance.command else "<p>"
    source = f" from <code>{html.escape(provenance.source)}</code>" if provenance.source else ""
    return (f"<h2>Methods and provenance</h2>{command}{source} on {datetime.now(timezone.utc):%Y-%m-%d}; "
            f"{len(records)} records. Each method keeps its colour in every plot and table; the best value of "
            "each row is bold (every method that reaches it); shaded italic: statistically tied with the best "
            "(paired bootstrap, Holm, α = 0.05). Brackets and error bars are 95 % bootstrap intervals "
            "(docs/evaluation.md, Uncertainty).</p>"
            "<table><thead><tr><th>method</th><th>model fingerprint</th><th>code version</th><th>seed</th>"
            "<th>task settings (non-default)</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def html_report(records: Sequence[Record], *, title: str = "embedlab evaluation report",
                provenance: Provenance | None = None, ties: dict | None = None, against_best: dict | None = None) -> str:
    """One self-contained HTML page: provenance, then a section per task with its plots and table. ``against_best``
    (:func:`~embedlab.results.comparison.best_per_group`) adds each task's difference-from-the-best and cost charts
    and gives the tie marks when ``ties`` is not given."""
    records, against_best = list(records), against_best or {}
    ties = ties if ties is not None else marks_of(against_best)
    provenance = provenance or Provenance()
    colours = method_colours(methods_of(records))
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    if not records:
        parts.append("<p>No results.</p>")
    else:
        parts.append(_provenance_section(records, provenance, colours))
    sweeps = layer_sweeps(records)
    for task in dict.fromkeys(r.task for r in records):
        task_records = [r for r in records if r.task == task]
        family = TASK_FAMILIES.get(task)
        parts.append(f"<h2>{html.escape(task)}</h2>")
        if family is not None and family.description:
            parts.append(f"<p class='meta'>{html.escape(family.description)}</p>")
        headlines = [replace(r, subset=f"{r.subset} {compact_settings(r.settings)}") if r.settings else r  # a group's own bars
                     for r in headline_records(task_records) if not math.isnan(r.value)]
        if task != "alignsim":
            for metric in dict.fromkeys(r.metric for r in headlines):
                chosen = [r for r in headlines if r.metric == metric]
                parts.append(img_tag(_bar_plot(task, metric, chosen, colours), f"{task} {metric} by method"))
                curve = _layer_plot(task, metric, chosen, sweeps) if sweeps else None
                if curve:
                    parts.append(img_tag(curve, f"{task} {metric} by layer"))
        parts += decision_section({key: group for key, group in against_best.items() if key[0] == task}, colours)
        if task == "alignment":
            scatter = _alignment_plot(task_records, colours)
            if scatter:
                parts.append(img_tag(scatter, "alignment against uniformity"))
        parts.append(_metric_notes(task, task_records))
        if task == "retrieval":
            parts += retrieval_section(task_records, colours)
        if task == "alignsim":
            parts += _alignsim_section(task_records, provenance, colours)
            parts.append(f"<details><summary>All {len(task_records)} ALIGN-SIM records</summary>"
                         f"{_html_table(task_records, colours)}</details>")
        else:
            parts.append(_html_table(task_records, colours, ties))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(records: Sequence[Record], out: str | Path, **options) -> Path:
    """Write :func:`html_report` to ``out`` (folders created) atomically: a failed write (a full disk)
    leaves the old file whole, and a symlink at ``out`` is replaced, not written through; the path written."""
    path = Path(out)
    atomic_write_text(path, html_report(records, **options))
    return path
