"""The report's "is it better, and at what cost" charts: the difference from the best with its paired interval
(ties marked), and quality against cost with the Pareto front (filled markers), in the report's method order."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pytest

from embedlab.evaluation.records import Record
from embedlab.evaluation.significance import PairedDifference
from embedlab.results.choice import choose
from embedlab.results.comparison import AgainstBest
from embedlab.results.decision_report import difference_figure, pareto_figure
from embedlab.results.report import html_report

COLOURS = {"c": "#2ca02c", "a": "#1f77b4", "b": "#ff7f0e"}  # the report's order: c, a, b
KEY = ("retrieval", "d", "all", "ndcg@10")


def _cost(texts_per_second: float, bytes_per_vector: int, peak_memory_mb: float) -> dict:
    return {"encode_seconds": 1.0, "cpu_seconds": 1.0, "texts": 10, "texts_per_second": texts_per_second,
            "peak_memory_mb": peak_memory_mb, "bytes_per_vector": bytes_per_vector, "parameters": None,
            "cpu_model": "test CPU", "threads": 1, "partial": False, "note": None}


def group(costs: bool = True) -> AgainstBest:
    # a best; b tied (−0.005, paired interval [−0.012, +0.002]); c worse (−0.10 [−0.15, −0.05]) with the same costs as a
    figures = {"a": _cost(100, 1536, 20), "b": _cost(90, 48, 25), "c": _cost(100, 1536, 20)}
    records = {m: Record(m, *KEY, v, 50, ci_low=v - 0.03, ci_high=v + 0.03, cost=figures[m] if costs else None)
               for m, v in (("a", 0.84), ("b", 0.835), ("c", 0.74))}
    differences = {"b": PairedDifference(-0.005, -0.012, 0.002, 0.2, 200), "c": PairedDifference(-0.10, -0.15, -0.05, 0.005, 200)}
    return AgainstBest("a", records, differences, {"b": 0.2, "c": 0.01}, {"b"})


def test_difference_chart_draws_each_paired_interval_and_hatches_the_ties() -> None:
    import matplotlib.pyplot as plt

    figure = difference_figure(KEY, group(), COLOURS)
    axis = figure.axes[0]
    assert [label.get_text() for label in axis.get_yticklabels()] == ["c", "a", "b"]
    bars = axis.patches
    assert [bar.get_width() for bar in bars] == pytest.approx([-0.10, 0.0, -0.005])
    assert [bar.get_hatch() for bar in bars] == [None, None, "///"]  # b is tied with the best
    # the error bars span the paired intervals: c from −0.15 to −0.05, b from −0.012 to +0.002
    segments = [segment for collection in axis.collections for segment in collection.get_segments()]
    spans = sorted((round(float(min(s[:, 0])), 6), round(float(max(s[:, 0])), 6)) for s in segments if np.ptp(s[:, 0]) > 0)
    assert spans == [(-0.15, -0.05), (-0.012, 0.002)]
    assert {text.get_text() for text in axis.texts} == {"best", "tied with best", "-0.1000"}
    plt.close(figure)


def test_cost_scatter_fills_the_front_and_ticks_bytes_plainly() -> None:
    import matplotlib.pyplot as plt

    choice, = choose({KEY: group()})
    assert [c.pareto for c in choice.candidates] == [True, True, False]  # c: a's costs, lower quality
    figure = pareto_figure(choice, COLOURS)
    figure.canvas.draw()
    speed, size, memory = figure.axes
    faces = [mcolors.to_hex(collection.get_facecolor()[0]) for collection in speed.collections]
    assert faces == ["#ffffff", COLOURS["a"], COLOURS["b"]]  # c hollow (off the front), in the report's order
    assert [label.get_text() for label in size.get_xticklabels() if label.get_text()] == ["48", "1,536"]
    assert memory.get_legend().get_window_extent().x0 >= memory.get_window_extent().x1  # beside the data
    plt.close(figure)
    bare, = choose({KEY: group(costs=False)})
    assert pareto_figure(bare, COLOURS) is None  # nothing measured: no scatter


def test_the_page_carries_both_charts_with_their_alt_text_and_the_tie_marks() -> None:
    found = group()
    page = html_report(list(found.records.values()), against_best={KEY: found})
    assert "retrieval d ndcg@10: difference from the best with paired 95% intervals, ties with the best marked" in page
    assert "retrieval d ndcg@10: quality against cost, Pareto front" in page
    assert "class=\"tied\">0.8350" in page  # b's cell shaded as tied with the best
