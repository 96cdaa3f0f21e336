"""Tests for embedlab.results.report: the shareable offline HTML report (colours, ties, metric notes,
provenance, layer curves, ALIGN-SIM sections). tests/results/test_report_browser.py opens a real one in
headless Chromium."""

from __future__ import annotations

import re

import pytest

from .test_tables import records

from embedlab.evaluation.records import Record
from embedlab.results.report import PALETTE, Provenance, html_report, layer_sweeps, method_colours


def test_html_is_self_contained_and_marks_best() -> None:
    page = html_report(records(), title="T <1>")
    assert "T &lt;1&gt;" in page and page.count("data:image/png;base64,") == 3
    assert "<script" not in page and "src='http" not in page
    # lower error is better: b's triplet error is the bold one
    row = [line for line in page.splitlines() if "<td>triplets</td>" in line][0]
    assert '<td class="best">1.00e-03</td>' in row


def test_ties_are_bold_alike_and_descriptive_metrics_never() -> None:
    tied = [Record("a", "sts", "stsb", "test", "spearman", 0.82031, 1379), Record("b", "sts", "stsb", "test", "spearman", 0.82029, 1379),
            Record("c", "sts", "stsb", "test", "spearman", 0.8155, 1379)]
    row = [line for line in html_report(tied).splitlines() if "<td>sts</td>" in line][0]
    assert row.count('class="best">0.8203<') == 2 and '<td class="num">0.8155</td>' in row
    page = html_report([Record("a", "pairs", "sts", "all", "diff", 0.3, 534), Record("b", "pairs", "sts", "all", "diff", 0.4, 534)])
    assert 'class="best"' not in page


def test_one_colour_per_method_and_metrics_explained() -> None:
    assert method_colours(["x", "y", "x", "z"]) == {"x": PALETTE[0], "y": PALETTE[1], "z": PALETTE[2]}
    page = html_report(records())
    # the swatch of method b has the same colour in the provenance table and in every table header
    swatches = re.findall(r"background:(#[0-9a-f]{6})'></span><code>b<|background:(#[0-9a-f]{6})'></span>b<", page)
    assert {colour for pair in swatches for colour in pair if colour} == {PALETTE[1]}
    assert "<code>error</code>: fraction of comparisons that are wrong" in page
    assert "unit: fraction" in page and "lower is better" in page and "unit: correlation" in page


def test_provenance_states_versions_seeds_fingerprints_and_command() -> None:
    rows = [{"method": "a", "task": "sts", "dataset": "stsb", "subset": "test", "metric": "spearman", "fingerprint": "abc123",
             "code_version": "0.1.0+deadbeef", "seed": 0, "extra": None, "settings": {}},
            {"method": "a", "task": "clustering", "dataset": "tweet", "subset": "all", "metric": "accuracy", "fingerprint": "abc123",
             "code_version": "0.1.0+deadbeef", "seed": 3, "extra": None, "settings": {"seed": 3}}]
    page = html_report(records(), provenance=Provenance(rows=rows, command="embedlab report --out r.html", source="results.sqlite"))
    row = [line for line in page.splitlines() if "abc123" in line][0]
    assert "0.1.0+deadbeef" in row and "0, 3" in row and 'clustering: {&quot;seed&quot;: 3}' in row
    assert "<code>embedlab report --out r.html</code>" in page and "<code>results.sqlite</code>" in page


def test_layer_sweeps_get_a_curve() -> None:
    swept = [Record(f"minilm:layers={layer}", "sts", "stsb", "test", "spearman", 0.7 + layer / 100, 1379) for layer in (1, 2, 3, 6)]
    swept.append(Record("minilm:layers=1+last", "sts", "stsb", "test", "spearman", 0.8, 1379))
    assert layer_sweeps(swept) == {"minilm:layers=*": {1: "minilm:layers=1", 2: "minilm:layers=2", 3: "minilm:layers=3",
                                                       6: "minilm:layers=6"}}
    page = html_report(swept)
    assert "alt='sts spearman by layer'" in page and page.count("data:image/png;base64,") == 2
    assert "by layer" not in html_report(swept[:2])


def test_alignsim_section_has_criterion_tables_not_a_dump() -> None:
    rows = [Record("m", "alignsim", "mrpc", "c1", metric, value, 100) for metric, value in
            (("sim_pass_avg", 0.9), ("ned_pass_avg", 0.7), ("sim_pos_mean", 0.8), ("sim_rnd_mean", 0.1), ("sim_diff_mean", 0.7),
             ("ned_pos_mean", 0.1), ("ned_rnd_mean", 0.5), ("ned_diff_mean", -0.4), ("skipped", 3.0))]
    page = html_report(rows)
    assert "<h3>Criterion 1: semantic distinction" in page and "90.0" in page  # Table 3 prints % as the paper does
    assert "<details><summary>All 9 ALIGN-SIM records</summary>" in page
    assert ">3<" in page and "3.0000" not in page


def test_intervals_become_error_bars_and_ties_with_the_best_are_shaded() -> None:
    from embedlab.results.report import _error_bars

    bounded = Record("a", "sts", "stsb", "test", "spearman", 0.82, 1379, ci_low=0.80, ci_high=0.83, ci_resamples=1000)
    bare = Record("b", "sts", "stsb", "test", "spearman", 0.81, 1379)
    extents = _error_bars([bounded, bare], [("stsb", "test", "a"), ("stsb", "test", "b"), ("stsb", "test", "c")])
    assert extents == [[pytest.approx(0.02), 0.0, 0.0], [pytest.approx(0.01), 0.0, 0.0]]
    ties = {("a", "sts", "stsb", "test", "spearman"): "best", ("b", "sts", "stsb", "test", "spearman"): "tied"}
    page = html_report([bounded, bare], ties=ties)
    row = [line for line in page.splitlines() if "<td>sts</td>" in line][0]
    assert '<td class="best">0.8200 [0.8000, 0.8300]</td>' in row and '<td class="tied">0.8100</td>' in row
    assert "statistically tied with the best" in page


def test_a_settings_column_leaves_the_method_columns_and_their_marks_in_place() -> None:
    # rows of non-default settings add a settings column before the methods (and each group its own rows)
    records = [Record("a", "retrieval", "d", "all", "ndcg@10", 0.80, 20, settings={"k": "10"}),
               Record("b", "retrieval", "d", "all", "ndcg@10", 0.70, 20, settings={"k": "10"}),
               Record("a", "retrieval", "d", "all", "ndcg@10", 0.60, 20),
               Record("b", "retrieval", "d", "all", "ndcg@10", 0.65, 20)]
    page = html_report(records, ties={("b", "retrieval", "d", "all", "ndcg@10"): "tied"})
    assert "<th>settings</th>" in page and "<td>k=10</td>" in page
    assert '<td class="best">0.8000</td><td class="tied">0.7000</td>' in page  # a best, b shaded as tied
    assert '<td class="num">0.6000</td><td class="best">0.6500</td>' in page  # the defaults' own row


def test_each_settings_group_gets_bars_of_its_own(monkeypatch) -> None:
    import embedlab.results.report as report

    drawn = []
    monkeypatch.setattr(report, "_bar_plot", lambda task, metric, chosen, colours: drawn.append(chosen) or "")
    records = [Record("a", "retrieval", "d", "all", "ndcg@10", 0.80, 20, settings={"k": "10"}),
               Record("a", "retrieval", "d", "all", "ndcg@10", 0.60, 20)]
    html_report(records)
    # two bars, labelled by their settings, instead of one bar per (dataset, subset, method) where one hides the other
    assert sorted((r.subset, r.value) for r in drawn[0]) == [("all", 0.60), ("all k=10", 0.80)]
