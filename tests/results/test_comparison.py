"""Tests for embedlab.results.comparison: each method against the first, Holm across the call, ties with
the best, and the bad inputs (one method, units that do not pair, too few units)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedlab.errors import InputError
from embedlab.evaluation.bootstrap import point
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.significance import holm, paired_difference
from embedlab.results.comparison import COLUMNS, compare_records, format_comparison

_RNG = np.random.default_rng(11)
GOLD = _RNG.normal(size=200)
PREDICTED = {"a": GOLD + _RNG.normal(scale=0.4, size=200), "b": GOLD + _RNG.normal(scale=0.41, size=200),
             "c": GOLD + _RNG.normal(scale=2.0, size=200)}
CORRECT = {"a": (_RNG.random(150) < 0.7).astype(float), "b": (_RNG.random(150) < 0.72).astype(float),
           "c": (_RNG.random(150) < 0.5).astype(float)}


def _stored() -> tuple[list[Record], dict]:
    records, units = [], {}
    for method in "abc":
        sts = UnitScores("pairs", "spearman", {"predicted": PREDICTED[method], "gold": GOLD})
        accuracy = UnitScores("items", "mean", {"score": CORRECT[method]})
        for task, dataset, subset, metric, found in (("sts", "stsb", "test", "spearman", sts),
                                                      ("classification", "trec", "test", "accuracy", accuracy)):
            records.append(Record(method, task, dataset, subset, metric, point(found), len(found)))
            units[(method, task, dataset, subset, metric)] = found
        records.append(Record(method, "sts", "stsb", "test", "pearson", 0.0, 200))  # not the headline: left out
    return records, units


def test_each_method_against_the_first_with_holm_over_the_call() -> None:
    records, units = _stored()
    rows = compare_records(records, units, ["a", "b", "c"], resamples=500, seed=0).rows
    assert [(r.record.task, r.record.method) for r in rows] == [(t, m) for t in ("sts", "classification") for m in "abc"]
    tested = [row for row in rows if row.difference is not None]
    expected = [paired_difference(units[(r.record.method, r.record.task, r.record.dataset, "test", r.record.metric)],
                                  units[("a", r.record.task, r.record.dataset, "test", r.record.metric)], 500, 0) for r in tested]
    assert [row.difference for row in tested] == expected
    assert [row.p_holm for row in tested] == holm([d.p for d in expected])
    by = {(row.record.task, row.record.method): row for row in rows}
    assert by[("sts", "c")].difference.high < 0 and by[("sts", "c")].p_holm < 0.05 and by[("sts", "c")].analytic is not None
    assert by[("classification", "c")].analytic is None  # the analytic tests are for correlations only
    # a and b are close on both tasks: the better one is "best", the other tied with it; c is worse
    for task in ("sts", "classification"):
        best = max("abc", key=lambda m: by[(task, m)].record.value)
        assert by[(task, best)].tie == "best" and {by[(task, m)].tie for m in "ab"} == {"best", "tied"}
        assert by[(task, "c")].tie == ""
    lines = [json.loads(line) for line in format_comparison(compare_records(records, units, ["a", "b", "c"], resamples=500, seed=0), "json").splitlines()]
    assert list(lines[1]) == list(COLUMNS) and lines[0]["diff"] is None and lines[2]["p_holm"] == by[("sts", "c")].p_holm
    table = format_comparison(compare_records(records, units, ["a", "b", "c"], resamples=500, seed=0), "table")
    assert "tied with best" in table and "Zou [" in table and "nan" not in table


def test_bad_comparisons_are_one_clear_error() -> None:
    records, units = _stored()
    with pytest.raises(InputError, match="at least two methods"):
        compare_records(records, units, ["a"], resamples=100, seed=0)
    shifted = dict(units)
    shifted[("b", "sts", "stsb", "test", "spearman")] = UnitScores("pairs", "spearman", {"predicted": PREDICTED["b"][:-1], "gold": GOLD[:-1]})
    with pytest.raises(InputError, match="cover different units"):
        compare_records(records, shifted, ["a", "b"], resamples=100, seed=0)
    few = [Record(m, "sts", "tiny", "test", "spearman", 0.5, 5) for m in "ab"]
    few_units = {(m, "sts", "tiny", "test", "spearman"): UnitScores("pairs", "spearman", {"predicted": np.arange(5.0) * (i + 1),
                                                                                        "gold": np.arange(5.0)})
                 for i, m in enumerate("ab")}
    with pytest.raises(InputError, match="fewer than the 10"):
        compare_records(few, few_units, ["a", "b"], resamples=100, seed=0)
    with pytest.raises(InputError, match="no per-unit scores"):
        compare_records(records, {}, ["a", "b"], resamples=100, seed=0)


def test_a_p_value_at_the_bootstrap_floor_is_printed_as_a_bound() -> None:
    """B = 10 and c far below a: no resample crosses 0, so p = 2/(B + 1) = 0.1818, the smallest B = 10 can give:
    the table says "≤ 0.1818" (a bound), JSON keeps the number."""
    records, units = _stored()
    comparison = compare_records(records, units, ["a", "c"], resamples=10, seed=0)
    row = next(r for r in comparison.rows if r.record.task == "sts" and r.record.method == "c")
    assert row.difference.p == pytest.approx(2 / 11)
    table_row = next(line for line in format_comparison(comparison, "table").splitlines() if " c " in f" {line} " and "sts" in line)
    assert "≤ 0.1818" in table_row
    assert json.loads(format_comparison(comparison, "json").splitlines()[1])["p"] == pytest.approx(2 / 11)
    wide = compare_records(records, units, ["a", "b"], resamples=500, seed=0)
    assert "≤" not in format_comparison(wide, "table")  # a and b overlap: a measured p, printed as is


def test_compare_takes_other_spellings_of_a_metric_and_names_the_present_ones() -> None:
    records, units = _stored()
    by_name = compare_records(records, units, ["a", "b"], resamples=50, seed=0, metric="Spearman")
    assert [(row.record.task, row.record.metric) for row in by_name.rows] == [("sts", "spearman")] * 2
    with pytest.raises(InputError, match="--metric 'ndcg_at_10': no such metric in these results; the metrics present: "
                                         "accuracy, pearson, spearman"):
        compare_records(records, units, ["a", "b"], resamples=50, seed=0, metric="ndcg_at_10")
