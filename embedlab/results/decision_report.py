"""The report's answer to "is it better, and at what cost", per task dataset with two or more methods:

* the **difference from the best**: each method's headline value minus the best's, with the *paired*
  95 % interval (:func:`embedlab.results.comparison.best_per_group`: the same resampled units for both
  methods), the methods tied with the best marked on their bars — the chart that agrees with ``compare``,
  where each method's own interval (the bar plot's error bars) can overlap for a pair that differs;
* **quality against cost**: the headline value against texts per second, bytes per vector and peak memory,
  one panel per measured figure, filled markers on the Pareto front of ``choose``
  (:func:`embedlab.results.choice.choose`), hollow ones off it.

Both keep the report's method order and colours, and put their legends beside the axes.
"""

from __future__ import annotations

from collections.abc import Sequence

from embedlab.evaluation.harness import metric_of
from embedlab.results.choice import COST_FIGURES, Choice, choose
from embedlab.results.comparison import AgainstBest
from embedlab.results.figures import img_tag, plain_log_ticks, png_base64
from embedlab.results.tables import format_value
from embedlab.runtime.extras import pyplot

FIGURE_LABELS = {"texts_per_second": "texts per second (higher is better)",
                 "bytes_per_vector": "bytes per vector (lower is better, log scale)",
                 "peak_memory_mb": "peak memory above the process, MB (lower is better)"}


def _ordered(methods: Sequence[str], colours: dict[str, str]) -> list[str]:
    order = {method: index for index, method in enumerate(colours)}
    return sorted(methods, key=lambda method: order.get(method, len(order)))


def difference_figure(key: tuple[str, str, str, str], group: AgainstBest, colours: dict[str, str]):
    """Horizontal bars of method − best with their paired 95 % intervals; the best and its ties labelled."""
    plt = pyplot()
    task, dataset, subset, metric = key
    methods = _ordered(list(group.records), colours)
    differences = [group.differences[m].diff if m in group.differences else 0.0 for m in methods]
    below = [d - group.differences[m].low if m in group.differences and group.differences[m].low is not None else 0.0
             for m, d in zip(methods, differences)]
    above = [group.differences[m].high - d if m in group.differences and group.differences[m].high is not None else 0.0
             for m, d in zip(methods, differences)]
    figure, axis = plt.subplots(figsize=(6.0, 0.34 * len(methods) + 1.1))
    bars = axis.barh(range(len(methods)), differences, height=0.6, color=[colours.get(m, "#777") for m in methods],
                     xerr=[below, above], error_kw={"elinewidth": 0.9, "capsize": 2.5, "ecolor": "#333"})
    for bar, method in zip(bars, methods):
        if group.mark(method) == "tied":
            bar.set_hatch("///")
            bar.set_edgecolor("#333")
    labels = [{"best": "best", "tied": "tied with best"}.get(group.mark(m), f"{d:+.4f}") for m, d in zip(methods, differences)]
    for row, (difference, high, label) in enumerate(zip(differences, above, labels)):
        axis.annotate(label, (max(difference + high, 0.0), row), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)
    span = max([abs(d) + max(lo, hi) for d, lo, hi in zip(differences, below, above)] + [1e-4])
    axis.set_xlim(-1.15 * span, 1.45 * span)
    axis.axvline(0.0, color="#333", linewidth=0.8)
    axis.set_yticks(range(len(methods)), methods, fontsize=7)
    axis.invert_yaxis()
    direction = {"higher": "higher is better", "lower": "lower is better"}.get(metric_of(task, metric).better, "")
    axis.set_xlabel(f"{metric} − best ({group.best}); paired 95 % interval; {direction}", fontsize=8)
    axis.set_title(f"{task} {dataset} ({subset}): difference from the best; hatched = tied with the best", fontsize=9)
    axis.grid(axis="x", alpha=0.3)
    return figure


def pareto_figure(choice: Choice, colours: dict[str, str]):
    """The headline value against each measured cost figure (one panel each); filled = on the Pareto front.
    None when no method has a cost figure."""
    plt = pyplot()
    from matplotlib.lines import Line2D

    task, dataset, subset, metric = choice.key
    panels = [name for name in COST_FIGURES if any(c.figure(name) is not None for c in choice.candidates)]
    if not panels:
        return None
    candidates = sorted(choice.candidates, key=lambda c: _ordered([x.method for x in choice.candidates], colours).index(c.method))
    figure, axes = plt.subplots(1, len(panels), figsize=(3.1 * len(panels) + 1.8, 3.0), squeeze=False)
    for axis, name in zip(axes[0], panels):
        for candidate in candidates:
            x = candidate.figure(name)
            if x is None:
                continue
            colour = colours.get(candidate.method, "#777")
            axis.scatter([x], [candidate.record.value], s=42, color=colour if candidate.pareto else "white",
                         edgecolors=colour, linewidths=1.6, zorder=3, label=candidate.method)
            axis.annotate(format_value(task, metric, candidate.record.value), (x, candidate.record.value),
                          xytext=(4, 3), textcoords="offset points", fontsize=6)
        if name == "bytes_per_vector":  # 48 against 1,536 bytes: a log axis, ticked at the sizes themselves
            axis.set_xscale("log")
            axis.set_xticks(sorted({c.figure(name) for c in candidates if c.figure(name) is not None}))
            plain_log_ticks(axis.xaxis, minor=False, form="{x:,.0f}")
        axis.set_xlabel(FIGURE_LABELS[name], fontsize=7)
        axis.set_ylabel(f"{metric}", fontsize=8)
        axis.grid(alpha=0.3)
        axis.margins(x=0.25, y=0.2)
        if name != "bytes_per_vector":  # a speed or a memory figure is never below 0
            axis.set_xlim(left=max(0.0, axis.get_xlim()[0]))
    figure.suptitle(f"{task} {dataset} ({subset}): quality against cost; filled = on the Pareto front", fontsize=9)
    figure.tight_layout()
    # one filled entry per method (the report's colours) and what a hollow marker means, beside the panels
    handles = [Line2D([], [], marker="o", linestyle="", color=colours.get(c.method, "#777"), label=c.method) for c in candidates]
    handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="white", color="#555", label="hollow: off the front"))
    axes[0][-1].legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return figure


def decision_section(against_best: dict[tuple[str, str, str, str], AgainstBest], colours: dict[str, str],
                     settings: dict[tuple[str, str], dict] | None = None) -> list[str]:
    """The HTML parts for one task's groups of two or more methods: the difference chart, then the cost scatter."""
    groups = {key: group for key, group in against_best.items() if len(group.records) > 1}
    parts = []
    for choice in choose(groups, settings=settings):
        task, dataset, subset, metric = choice.key
        figure = difference_figure(choice.key, groups[choice.key], colours)
        parts.append(img_tag(png_base64(figure), f"{task} {dataset} {metric}: difference from the best with paired "
                                                 "95% intervals, ties with the best marked"))
        scatter = pareto_figure(choice, colours)
        if scatter is not None:
            parts.append(img_tag(png_base64(scatter), f"{task} {dataset} {metric}: quality against cost, Pareto front"))
    return parts
