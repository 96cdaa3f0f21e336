"""Tests for embedlab.results.report: tables with methods as columns, styled by the tasks' metric declarations, offline HTML."""

from __future__ import annotations

from embedlab.evaluation.records import Record
from embedlab.results.report import html_report, markdown_table, text_table


def records() -> list[Record]:
    """A few records of several tasks and two methods (also used by the summaries tests)."""
    return [
        Record("a", "sts", "sts12", "MSRpar", "spearman", 0.5, 750),
        Record("a", "sts", "sts12", "all", "spearman", 0.7, 3108),
        Record("a", "sts", "stsb", "test", "spearman", 0.8, 1379),
        Record("b", "sts", "stsb", "test", "spearman", 0.9, 1379),
        Record("a", "clustering", "tweet", "all", "accuracy", 0.6, 2472),
        Record("a", "triplets", "sts", "all", "error", 0.002, 455624),
        Record("b", "triplets", "sts", "all", "error", 0.001, 455624),
    ]


def test_text_and_markdown_tables_pivot_methods() -> None:
    table = text_table(records())
    header = table.splitlines()[0].split()
    assert header == ["task", "dataset", "subset", "metric", "a", "b", "n"]
    markdown = markdown_table(records())
    assert "| sts | stsb | test | spearman | 0.8000 | 0.9000 | 1,379 |" in markdown
    assert "| sts | sts12 | all | spearman | 0.7000 |  | 3,108 |" in markdown
    assert text_table([]) == "(no results)"


def test_html_is_self_contained_and_marks_best() -> None:
    page = html_report(records(), title="T <1>")
    assert "T &lt;1&gt;" in page and page.count("data:image/png;base64,") == 3
    assert "<script" not in page and "src='http" not in page
    # lower error is better: b's triplet error is the bold one
    row = [line for line in page.splitlines() if "<td>triplets</td>" in line][0]
    assert '<td class="best">1.00e-03</td>' in row


def test_cells_follow_the_metric_declarations() -> None:
    rows = [Record("a", "pairs", "sts", "all", "wrong", 7216.0, 180492), Record("a", "pairs", "sts", "all", "error", 0.04, 180492),
            Record("a", "alignsim", "mrpc", "c1", "sim_pass@0.1", 0.75, 1194)]
    table = markdown_table(rows)
    assert "| pairs | sts | all | wrong | 7,216 |" in table and "| 4.00e-02 |" in table and "| 0.7500 |" in table
    # descriptive numbers (a mean cosine of non-paraphrases) have no better direction: nothing is bold
    page = html_report([Record("a", "pairs", "sts", "all", "diff", 0.3, 534), Record("b", "pairs", "sts", "all", "diff", 0.4, 534)])
    assert 'class="best"' not in page
