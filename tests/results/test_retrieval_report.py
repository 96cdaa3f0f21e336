"""The report's retrieval section: a curve figure per dataset and the rerank table with its change."""

from __future__ import annotations

from embedlab.evaluation.records import Record
from embedlab.results.report import html_report
from embedlab.results.retrieval_report import curve_figures, rerank_table


def records() -> list[Record]:
    rows = []
    for method, shift in (("minilm", 0.0), ("st:mpnet", 0.05)):
        for k in (1, 10, 100):
            rows.append(Record(method, "retrieval", "qqp", "all", f"ndcg@{k}", 0.5 + shift + k / 1000, 100))
            rows.append(Record(method, "retrieval", "qqp", "all", f"recall@{k}", 0.4 + shift + k / 200, 100))
    rows += [Record("minilm", "retrieval", "qqp", "rerank:match:minilm@100", "ndcg@10", 0.6, 100),
             Record("minilm", "retrieval", "qqp", "rerank:match:minilm@100", "rerank_seconds_per_query", 0.0123, 100)]
    return rows


def test_one_figure_per_dataset_with_a_line_per_method_and_stage():
    import matplotlib.pyplot as plt

    ((figure, alt),) = curve_figures(records(), {"minilm": "#1f77b4", "st:mpnet": "#ff7f0e"})
    ndcg_axis, recall_axis = figure.axes
    assert [line.get_label() for line in ndcg_axis.lines] == ["minilm", "st:mpnet", "minilm → match:minilm@100"]
    assert ndcg_axis.lines[2].get_linestyle() == "--" and list(ndcg_axis.lines[0].get_xdata()) == [1, 10, 100]
    assert len(recall_axis.lines) == 2 and "qqp" in alt
    plt.close(figure)


def test_rerank_table_shows_before_after_and_cost():
    table = rerank_table(records())
    assert "<td>0.5100</td><td>0.6000</td><td>+0.0900</td><td>12.3 ms</td>" in table
    assert rerank_table([r for r in records() if not r.subset.startswith("rerank")]) == ""
    page = html_report(records())
    assert page.count("retrieval qqp nDCG@k and recall@k by method") == 1 and "+0.0900" in page


def test_cutoff_ticks_read_plainly_the_methods_keep_the_report_order_and_the_legend_sits_beside_the_curves():
    import matplotlib.pyplot as plt

    # the colours' order is the report's method order: st:mpnet first although its records come second
    ((figure, _),) = curve_figures(records(), {"st:mpnet": "#ff7f0e", "minilm": "#1f77b4"})
    figure.canvas.draw()
    ndcg_axis, recall_axis = figure.axes
    for axis in (ndcg_axis, recall_axis):
        labels = [label.get_text() for label in axis.get_xticklabels() if label.get_text()]
        assert labels == ["1", "10", "100"]  # not mathtext source such as $\mathdefault{10^{0}}$
    assert [line.get_label() for line in ndcg_axis.lines] == ["st:mpnet", "minilm", "minilm → match:minilm@100"]
    legend = recall_axis.get_legend().get_window_extent()
    assert legend.x0 >= recall_axis.get_window_extent().x1  # beside the axes: it covers no curve
    plt.close(figure)
