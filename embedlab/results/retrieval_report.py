"""The report's retrieval section: each metric against its cut-off k, first stage and reranked, and the table
of what reranking changed.

Why a section of its own: a retrieval run emits five measures at several cut-offs, and the headline (nDCG@10)
alone hides where two methods differ (early precision or late recall); a rerank's rows are a subset of their
own (``rerank:<spec>@<depth>``) that the headline plot leaves out.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from embedlab.evaluation.records import Record
from embedlab.results.figures import img_tag, plain_log_ticks, png_base64
from embedlab.runtime.extras import pyplot

CURVE_MEASURES = ("ndcg", "recall")


def retrieval_section(records: Sequence[Record], colours: dict[str, str]) -> list[str]:
    """The section's HTML parts: a curve figure per dataset, then the rerank table."""
    return [img_tag(png_base64(figure), alt) for figure, alt in curve_figures(records, colours)] + [rerank_table(records)]


def _cutoff(metric: str) -> tuple[str, int] | None:
    measure, _, k = metric.partition("@")
    return (measure, int(k)) if k.isdigit() else None


def curve_figures(records: Sequence[Record], colours: dict[str, str]) -> list[tuple[object, str]]:
    """One figure per dataset: nDCG@k and recall@k against k, a line per (method, stage); reranks dashed."""
    plt = pyplot()
    figures = []
    for dataset in dict.fromkeys(r.dataset for r in records):
        points: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
        for record in records:
            parsed = _cutoff(record.metric)
            if record.dataset == dataset and parsed and parsed[0] in CURVE_MEASURES:
                points.setdefault((parsed[0], record.method, record.subset), []).append((parsed[1], record.value))
        if not points:
            continue
        order = {method: index for index, method in enumerate(colours)}  # the report's one method order
        lines = sorted(points, key=lambda line: (line[2] != "all", order.get(line[1], len(order)), line[2]))
        figure, axes = plt.subplots(1, len(CURVE_MEASURES), figsize=(9.0, 3.2))
        for axis, measure in zip(axes, CURVE_MEASURES):
            for name, method, subset in lines:
                if name != measure:
                    continue
                cutoffs, scores = zip(*sorted(points[(name, method, subset)]))
                label = method if subset == "all" else f"{method} → {subset.removeprefix('rerank:')}"
                axis.plot(cutoffs, scores, marker="o", markersize=3, color=colours.get(method, "#444444"),
                          linestyle="-" if subset == "all" else "--", label=label)
            axis.set_xscale("log")
            axis.set_xticks(sorted({k for line in lines if line[0] == measure for k, _ in points[line]}))
            plain_log_ticks(axis.xaxis, minor=False)  # the cut-offs themselves, printed plainly
            axis.set_xlabel("k (log scale)", fontsize=8)
            axis.set_ylabel(f"{measure}@k (fraction 0–1)", fontsize=8)
            axis.set_title(f"retrieval {dataset}: {measure}@k", fontsize=9)
            axis.grid(alpha=0.3)
        figure.tight_layout()
        # beside the plots, never over the curves (the figure is saved with its bounding box around the legend)
        lines = {label: line for axis in axes for line, label in zip(*axis.get_legend_handles_labels())}  # either panel's
        axes[-1].legend(lines.values(), lines.keys(), fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
        figures.append((figure, f"retrieval {dataset} nDCG@k and recall@k by method"))
    return figures


def rerank_table(records: Sequence[Record], headline: str = "ndcg@10") -> str:
    """First stage against each rerank of it, at the headline metric, with the rerank's cost per query."""
    values = {(r.method, r.dataset, r.subset, r.metric): r.value for r in records}
    rows = []
    for method, dataset, subset, metric in values:
        if subset.startswith("rerank:") and metric == headline and (method, dataset, "all", headline) in values:
            before, after = values[(method, dataset, "all", headline)], values[(method, dataset, subset, headline)]
            seconds = values.get((method, dataset, subset, "rerank_seconds_per_query"))
            cost = f"{seconds * 1000:.1f} ms" if seconds is not None else "—"
            rows.append(f"<tr><td>{html.escape(method)}</td><td>{html.escape(dataset)}</td><td>{html.escape(subset.removeprefix('rerank:'))}</td>"
                        f"<td>{before:.4f}</td><td>{after:.4f}</td><td>{after - before:+.4f}</td><td>{cost}</td></tr>")
    if not rows:
        return ""
    return (f"<table><thead><tr><th>first stage</th><th>dataset</th><th>reranked by @ depth</th><th>{headline} before</th>"
            f"<th>after</th><th>change</th><th>rerank per query</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
