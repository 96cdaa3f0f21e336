"""Tests for embedlab.results.summaries: each dataset's headline number, as its task declares it, and averages."""

from __future__ import annotations

import json

import pytest

from embedlab.evaluation.records import Record
from embedlab.results.summaries import headline_records, summary_records

from .test_tables import records


def test_headline_and_summary() -> None:
    headline = headline_records(records())
    assert ("sts12", "MSRpar") not in {(r.dataset, r.subset) for r in headline}  # STS12-16: the pooled "all"
    summary = {(r.method, r.task): r for r in summary_records(records())}
    assert summary[("a", "sts")].value == pytest.approx((0.7 + 0.8) / 2) and summary[("a", "sts")].n == 2
    assert summary[("b", "sts")].value == pytest.approx(0.9)
    assert summary[("a", "clustering")].value == pytest.approx(0.6)
    assert summary[("a", "triplets")].metric == "error"


def test_headlines_follow_each_tasks_declaration() -> None:
    rows = [
        Record("m", "alignsim", "mrpc", "c1", "sim_diff_mean", 0.77, 1194),
        Record("m", "alignsim", "mrpc", "c1", "sim_pass_avg", 0.82, 1194),
        Record("m", "alignsim", "afin", "c4", "sim_adjusted", 0.69, 3001),
        Record("m", "alignsim", "all", "adjustment", "alpha", 0.95, 9000),
        Record("m", "triplets", "sts", "vs other", "intersection", 0.5, 10),
        Record("m", "unknown-task", "x", "all", "score", 1.0, 1),
    ]
    assert [(r.dataset, r.metric) for r in headline_records(rows)] == [
        ("mrpc", "sim_diff_mean"), ("afin", "sim_adjusted"), ("all", "alpha")]


def test_each_settings_group_is_averaged_on_its_own() -> None:
    from dataclasses import replace

    plain = [Record("m", "retrieval", name, "all", "ndcg@10", value, 10) for name, value in (("a", 0.5), ("b", 0.7))]
    cut = [replace(record, value=record.value - 0.25, settings={"k": "10"}) for record in plain]
    averages = {json.dumps(r.settings): r.value for r in summary_records(plain + cut)}
    assert averages == {"{}": pytest.approx(0.6), '{"k": "10"}': pytest.approx(0.35)}
