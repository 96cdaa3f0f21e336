"""Tests for embedlab.results.report: tables with methods as columns, headline/summary records, offline HTML."""

from __future__ import annotations

import pytest

from embedlab.evaluation.records import Record
from embedlab.results.report import headline_records, html_report, markdown_table, summary_records, text_table


def _records() -> list[Record]:
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
    table = text_table(_records())
    header = table.splitlines()[0].split()
    assert header == ["task", "dataset", "subset", "metric", "a", "b", "n"]
    markdown = markdown_table(_records())
    assert "| sts | stsb | test | spearman | 0.8000 | 0.9000 | 1,379 |" in markdown
    assert "| sts | sts12 | all | spearman | 0.7000 |  | 3,108 |" in markdown
    assert text_table([]) == "(no results)"


def test_headline_and_summary() -> None:
    headline = headline_records(_records())
    assert ("sts12", "MSRpar") not in {(r.dataset, r.subset) for r in headline}  # STS12-16 use "all"
    summary = {(r.method, r.task): r for r in summary_records(_records())}
    assert summary[("a", "sts")].value == pytest.approx((0.7 + 0.8) / 2) and summary[("a", "sts")].n == 2
    assert summary[("b", "sts")].value == pytest.approx(0.9)
    assert summary[("a", "clustering")].value == pytest.approx(0.6)


def test_html_is_self_contained_and_marks_best() -> None:
    page = html_report(_records(), title="T <1>")
    assert "T &lt;1&gt;" in page and page.count("data:image/png;base64,") == 3
    assert "<script" not in page and "src='http" not in page
    # lower error is better: b's triplet error is the bold one
    row = [line for line in page.splitlines() if "<td>triplets</td>" in line][0]
    assert '<td class="best">1.00e-03</td>' in row
