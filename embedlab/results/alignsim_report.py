"""ALIGN-SIM report: Markdown tables shaped like the paper's Tables 3–9 and ε-histograms like its
Figures 1–3 (and A.5's Figures 4–21), written as PNG files with matplotlib.

The paper's SBERT rows (all-MiniLM-L6-v2, the ``st:minilm`` baseline) are printed beside ours so
that a run can be checked against the published numbers at a glance.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from embedlab.evaluation.alignsim.perturb import N_VALUES
from embedlab.evaluation.alignsim.task import MethodResult
from embedlab.results.reproduce.values import paper_values
from embedlab.results.tables import render
from embedlab.runtime.cache.atomic import atomic_write_text, save_figure
from embedlab.runtime.extras import pyplot

DATASET_TITLES = {"qqp": "QQP", "paws": "PAWS-Wiki", "mrpc": "MRPC", "afin": "AFIN"}
PAPER_LABEL = "paper SBERT"

_PAPER_COLUMNS = {"qqp": "QQP", "paws": "WIKI", "mrpc": "MRPC"}


def paper_sbert() -> dict:
    """The paper's SBERT rows of Tables 3–9, read from the transcribed paper values
    (``embedlab/resources/paper_values/alignsim.csv``), so no paper number is typed twice. A cell compared
    with several of our variants (``SBERT, perturbation=ours`` / ``…=authors``) has one paper value."""
    cells = {(value.table, value.column): float(value.value) for value in paper_values("alignsim")
             if value.row.startswith("SBERT")}

    def row(table: str, names: tuple[str, ...]) -> dict[str, tuple[float, ...]]:
        return {dataset: tuple(cells[table, f"{column} {name}"] for name in names) for dataset, column in _PAPER_COLUMNS.items()}

    return {"c1_pass": row("Table 3", ("Sim", "NED")), "c1_sim": row("Table 6", ("Pos", "RND", "Diff")),
            "c1_ned": row("Table 7", ("Pos", "Neg", "Diff")), "c2_sim": row("Table 4", ("n=1", "n=2", "n=3")),
            "c2_ned": row("Table 8", ("n=1", "n=2", "n=3")), "c4_sim": cells["Table 5", "adjusted sim"],
            "c4_ned": cells["Table 9", "adjusted NED"]}


MARGIN_LABELS = {
    ("c1", "sim"): "Sim(S, S_P) − Sim(R1, R2)",
    ("c1", "ned"): "NED(R1, R2) − NED(S, S_P)",
    ("c3", "sim"): "Sim(S, S'_P) − Sim(S, S'_A)",
    ("c3", "ned"): "NED(S, S'_A) − NED(S, S'_P)",
    ("c5", "sim"): "Sim(S, S'_P) − Sim(S, S'_J)",
    ("c5", "ned"): "NED(S, S'_J) − NED(S, S'_P)",
}


def _number(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _datasets_with(results: list[MethodResult], subset_prefix: str, datasets: list[str]) -> list[str]:
    present = {r.dataset for result in results for r in result.records if r.subset.startswith(subset_prefix)}
    return [d for d in datasets if d in present]


Section = tuple[str, list[str], list[list[str]]]  # title, header, rows of formatted cells


def sections(results: list[MethodResult], datasets: list[str], paper: bool = True) -> list[Section]:
    """Every table the results support, as (title, header, rows): the paper's Tables 3–9 and the
    criterion 3/5 margin summaries. Shares print as percentages here, as the paper's tables do."""
    sbert = paper_sbert() if paper else {}
    lines: list[Section] = []
    paraphrase = _datasets_with(results, "c1", datasets)
    if paraphrase:
        lines += _criterion1_sections(results, paraphrase, sbert, paper)
    adjustment = [(r.method, r.value("all", "adjustment", "alpha"), r.value("all", "adjustment", "random_ned")) for r in results]
    if any(a is not None for _, a, _ in adjustment):
        lines.append(("Adjustment factors (Eq. 1 α; Eq. 2 mean random-pair NED)", ["method", "α", "mean RND NED"],
                      [[m, _number(a, 4), _number(b, 4)] for m, a, b in adjustment]))
    synonym = _datasets_with(results, "c2", datasets)
    if synonym:
        lines += _criterion2_sections(results, synonym, sbert, paper)
    if any(r.value("afin", "c4", "sim_mean") is not None for r in results):
        lines.append(_criterion4_section(results, sbert, paper))
    for criterion, subsets, title in (
        ("c3", ["c3"], "Criterion 3: paraphrase vs antonym replacement (Figures 1, 4–9)"),
        ("c5", [f"c5/n={n}" for n in N_VALUES], "Criterion 5: paraphrase vs jumbling (Figures 2, 3, 10–21)"),
    ):
        present = _datasets_with(results, criterion, datasets)
        if present:
            lines.append(_margin_section(results, present, subsets, title))
    return lines


def _criterion1_sections(results: list[MethodResult], paraphrase: list[str], sbert: dict, paper: bool) -> list[Section]:
    """Tables 3, 6 and 7: pass rates over the ε grid, and mean cosine / NED of positive and random pairs."""
    title = "Criterion 1: semantic distinction — % of items passing, averaged over the ε grid (Table 3)"
    header = ["method"] + [f"{DATASET_TITLES[d]} {m}" for d in paraphrase for m in ("Sim", "NED")]
    rows = [
        [result.method]
        + [_number(_percent(result.value(d, "c1", f"{m}_pass_avg")), 1) for d in paraphrase for m in ("sim", "ned")]
        for result in results
    ]
    if paper:
        rows.append([PAPER_LABEL] + [_number(v, 1) for d in paraphrase for v in sbert["c1_pass"][d]])
    lines = [(title, header, rows)]
    for metric, table_name, key in (("sim", "Table 6, cosine", "c1_sim"), ("ned", "Table 7, NED", "c1_ned")):
        title = f"Criterion 1: mean {metric} of positive and random pairs ({table_name})"
        header = ["method"] + [f"{DATASET_TITLES[d]} {c}" for d in paraphrase for c in ("Pos", "RND", "Diff")]
        rows = [
            [result.method]
            + [_number(result.value(d, "c1", f"{metric}_{c}_mean"), 4 if metric == "ned" else 3) for d in paraphrase for c in ("pos", "rnd", "diff")]
            for result in results
        ]
        if paper:
            rows.append([PAPER_LABEL] + [_number(v, 4 if metric == "ned" else 3) for d in paraphrase for v in sbert[key][d]])
        lines.append((title, header, rows))
    return lines


def _criterion2_sections(results: list[MethodResult], synonym: list[str], sbert: dict, paper: bool) -> list[Section]:
    """Tables 4 and 8: α-adjusted cosine and β-adjusted NED of synonym-replaced sentences, raw beside them."""
    lines = []
    for metric, title, key in (("sim", "α-adjusted mean cosine (Table 4)", "c2_sim"), ("ned", "β-adjusted mean NED (Table 8)", "c2_ned")):
        title = f"Criterion 2: synonym replacement — {title}"
        header = ["method"] + [f"{DATASET_TITLES[d]} n={n}" for d in synonym for n in N_VALUES]
        rows = [[r.method] + [_number(r.value(d, f"c2/n={n}", f"{metric}_adjusted")) for d in synonym for n in N_VALUES] for r in results]
        rows += [[f"{r.method} (raw)"] + [_number(r.value(d, f"c2/n={n}", f"{metric}_mean")) for d in synonym for n in N_VALUES] for r in results]
        if paper:
            rows.append([PAPER_LABEL] + [_number(v) for d in synonym for v in sbert[key][d]])
        lines.append((title, header, rows))
    return lines


def _criterion4_section(results: list[MethodResult], sbert: dict, paper: bool) -> Section:
    """Tables 5 and 9: AFIN's negated sentences beside their affirmative interpretations."""
    title = "Criterion 4: paraphrase without negation, AFIN (Tables 5 and 9)"
    header = ["method", "adjusted Sim (α)", "raw Sim", "adjusted NED (β)", "raw NED", "pairs"]
    rows = [
        [
            r.method,
            _number(r.value("afin", "c4", "sim_adjusted")),
            _number(r.value("afin", "c4", "sim_mean")),
            _number(r.value("afin", "c4", "ned_adjusted")),
            _number(r.value("afin", "c4", "ned_mean")),
            str(next((x.n for x in r.records if x.dataset == "afin" and x.metric == "sim_mean"), "–")),
        ]
        for r in results
    ]
    if paper:
        rows.append([PAPER_LABEL, _number(sbert["c4_sim"]), "–", _number(sbert["c4_ned"]), "–", "–"])
    return title, header, rows


def _margin_section(results: list[MethodResult], present: list[str], subsets: list[str], title: str) -> Section:
    """Criteria 3 and 5: mean margin, % passing over the ε grid and % with a positive margin, per subset."""
    title = f"{title} — mean margin / % passing averaged over the ε grid / % with margin > 0"
    header = ["method", "metric"] + [f"{DATASET_TITLES[d]} {s.split('/')[-1] if '/' in s else ''}".strip() for d in present for s in subsets]
    rows = []
    for r in results:
        for metric in ("sim", "ned"):
            cells = []
            for d in present:
                for s in subsets:
                    mean = r.value(d, s, f"{metric}_margin_mean")
                    cells.append(
                        "–"
                        if mean is None
                        else f"{mean:+.3f} / {_percent(r.value(d, s, f'{metric}_pass_avg')):.1f} / {_percent(r.value(d, s, f'{metric}_pass@0')):.1f}"
                    )
            if any(c != "–" for c in cells):
                rows.append([r.method, metric] + cells)
    return title, header, rows


def tables(results: list[MethodResult], datasets: list[str], paper: bool = True, output_format: str = "markdown") -> str:
    """Every table of :func:`sections`, each under its title, in ``table`` or ``markdown`` format."""
    blocks = []
    for title, header, rows in sections(results, datasets, paper=paper):
        heading = f"### {title}" if output_format == "markdown" else f"{title}\n{'=' * min(len(title), 100)}"
        blocks.append(f"{heading}\n\n{render(header, rows, output_format)}\n")
    return "\n".join(blocks)


def _percent(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def histogram_figure(results: list[MethodResult], dataset: str, subset: str, metric: str,
                     colours: dict[str, str] | None = None, size: tuple[float, float] = (8, 4.5)):
    """A matplotlib figure overlaying every method's margin histogram for (dataset, subset, metric), each
    method in its colour from ``colours``; None when no method has margins there."""
    plt = pyplot()
    series = [(r.method, r.margins[(dataset, subset, metric)]) for r in results if (dataset, subset, metric) in r.margins]
    if not series:
        return None
    width, limit = (0.05, 1.0) if metric == "sim" else (0.025, 0.5)
    bins = np.arange(-limit, limit + width / 2, width)
    figure, axes = plt.subplots(figsize=size)
    for method, margins in series:
        axes.hist(np.clip(margins, -limit, limit), bins=bins, histtype="step", linewidth=1.6,
                  label=f"{method} (n={len(margins)})", color=(colours or {}).get(method))
    axes.axvline(0.0, color="black", linewidth=0.8, linestyle="--")
    criterion = subset.split("/")[0]
    detail = f", {subset.split('/')[1]}" if "/" in subset else ""
    axes.set_title(f"{criterion.upper()}{detail} on {DATASET_TITLES.get(dataset, dataset)}: {MARGIN_LABELS[(criterion, metric)]}",
                   fontsize=9)
    axes.set_xlabel("margin ε (positive = aligned with the human expectation)")
    axes.set_ylabel("items per bin")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # beside the plot, not on it
    figure.tight_layout()
    return figure


def histogram(results: list[MethodResult], dataset: str, subset: str, metric: str, path: Path) -> bool:
    """One PNG overlaying every method's margin histogram for (dataset, subset, metric); False if no data."""
    plt = pyplot()
    figure = histogram_figure(results, dataset, subset, metric)
    if figure is None:
        return False
    save_figure(figure, path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return True


def figure_name(dataset: str, subset: str, metric: str) -> str:
    return f"{subset.replace('/', '_').replace('=', '')}_{dataset}_{metric}.png"


def write_report(
    results: list[MethodResult], folder: Path, datasets: list[str], summaries: dict[str, dict], paper: bool = True
) -> Path:
    """Write ``report.md`` and ``figures/*.png`` under ``folder``, one writer at a time (a second is refused
    while the first holds the folder's lock); return the report's path."""
    from embedlab.runtime.outputs import writer_lock

    with writer_lock(folder):
        return _write_report(results, folder, datasets, summaries, paper)


def _write_report(results: list[MethodResult], folder: Path, datasets: list[str], summaries: dict[str, dict], paper: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["# ALIGN-SIM report", "", "Methods: " + ", ".join(f"`{r.method}`" for r in results), ""]
    if summaries:
        lines += ["## Perturbation sets (items kept / sentences skipped)", ""]
        rows = []
        for dataset, summary in summaries.items():
            counts = ", ".join(f"{k}: {v}" for k, v in summary["counts"].items())
            skipped = ", ".join(f"{k}: {v}" for k, v in summary["skipped"].items()) or "–"
            rows.append([DATASET_TITLES.get(dataset, dataset), counts, skipped])
        lines += [render(["dataset", "items", "skipped (no replaceable word / too short)"], rows, "markdown"), ""]
    lines += ["## Tables", "", tables(results, datasets, paper=paper)]
    figure_lines = []
    keys = sorted({key for r in results for key in r.margins})
    for dataset, subset, metric in keys:
        name = figure_name(dataset, subset, metric)
        if histogram(results, dataset, subset, metric, folder / "figures" / name):
            figure_lines.append(f"![{subset} {dataset} {metric}](figures/{name})")
    if figure_lines:
        lines += ["## ε-histograms", ""] + figure_lines + [""]
    notes = [note for r in results for note in r.notes]
    if notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in notes] + [""]
    path = folder / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path
