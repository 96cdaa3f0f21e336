"""Tests for embedlab.evaluation.harness's intervals: computed with each fresh run, stored on the rows,
recomputed in place from stored per-unit scores (nothing encoded again), never a second row."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeMethod, isolated_eval_cache, scored_pairs_file  # noqa: F401 (autouse fixture)

from embedlab.evaluation.bootstrap import point
from embedlab.evaluation.harness import evaluate, parse_tasks
from embedlab.evaluation.records import Record
from embedlab.results.database import ResultsDB


@pytest.fixture()
def scored_pairs(tmp_path: Path) -> Path:
    return scored_pairs_file(tmp_path)


def _intervals(records: list[Record]) -> dict[str, tuple]:
    return {r.metric: (r.ci_low, r.ci_high, r.ci_resamples, r.ci_resampled) for r in records}


def test_intervals_are_stored_reused_and_recomputed_in_place(scored_pairs: Path, tmp_path: Path) -> None:
    db, method = ResultsDB(tmp_path / "r.sqlite"), FakeMethod()
    tasks = parse_tasks(f"sts:@{scored_pairs}")
    fresh = evaluate([method], tasks, db=db, bootstrap=200, seed=0, log=lambda _: None).records
    assert all(r.ci_low < r.value < r.ci_high and r.ci_resamples == 200 and r.ci_resampled == "pairs" for r in fresh)
    assert _intervals(db.records()) == _intervals(fresh)
    calls = len(method.encode_calls)
    again = evaluate([method], tasks, db=db, bootstrap=200, seed=0, log=lambda _: None).records
    assert _intervals(again) == _intervals(fresh)  # bit-identical: the stored ones, equal to a recomputation
    other = evaluate([method], tasks, db=db, bootstrap=300, seed=1, log=lambda _: None).records
    assert len(method.encode_calls) == calls  # from the stored per-unit scores, nothing encoded
    assert {r.ci_resamples for r in other} == {300} and _intervals(other) != _intervals(fresh)
    assert len(db.records()) == 4 and _intervals(db.records()) == _intervals(other)  # in place, no second row
    off = evaluate([method], tasks, db=db, bootstrap=0, seed=1, log=lambda _: None).records
    assert {r.ci_low for r in off} == {None} and _intervals(db.records()) == _intervals(other)  # B = 0 erases nothing
    back = evaluate([method], tasks, db=db, bootstrap=200, seed=0, log=lambda _: None).records
    assert _intervals(back) == _intervals(fresh)
    forced = evaluate([method], tasks, db=db, bootstrap=0, seed=0, force=True, log=lambda _: None).records
    assert {r.ci_low for r in forced} == {None}
    assert _intervals(evaluate([method], tasks, db=db, bootstrap=200, seed=0, log=lambda _: None).records) == _intervals(fresh)


def test_records_stored_without_units_say_how_to_get_an_interval(scored_pairs: Path, tmp_path: Path) -> None:
    db, method = ResultsDB(tmp_path / "r.sqlite"), FakeMethod()
    tasks = parse_tasks(f"sts:@{scored_pairs}")
    evaluate([method], tasks, db=db, bootstrap=0, log=lambda _: None)
    import sqlite3

    with sqlite3.connect(db.path) as connection:  # as a database from before per-unit scores were kept
        connection.execute("UPDATE results SET units = NULL")
    reused = evaluate([method], tasks, db=db, bootstrap=100, log=lambda _: None).records
    assert {r.ci_note for r in reused} == {"no interval: recompute to get one (stored without per-unit scores)"}


def test_every_record_has_an_interval_or_says_why_not(tmp_path: Path) -> None:
    pairs = tmp_path / "labelled.tsv"
    pairs.write_text("".join(f"s {i}\tt {i}\t{i % 2}\n" for i in range(30)))
    groups = tmp_path / "groups.tsv"
    groups.write_text("".join(f"g{i} a\tg{i} b\tg{i} c\n" for i in range(12)))
    labelled = tmp_path / "labelled_texts.tsv"
    labelled.write_text("".join(f"{'xy'[i % 2]}\ttext {i}\n" for i in range(24)))
    tasks = parse_tasks(f"sts:@{pairs},pairs:@{pairs},correlations:@{pairs},triplets:@{groups},clustering:@{labelled}",
                        layout="line")
    records = evaluate([FakeMethod()], tasks, bootstrap=50, log=lambda _: None).records
    resampled = {(r.task, r.metric): r.ci_resampled for r in records if r.has_interval}
    assert resampled == {**{("sts", m): "pairs" for m in ("spearman", "pearson", "kendall_b", "kendall_c")},
                         **{("correlations", m): "pairs" for m in ("spearman", "pearson", "kendall_b", "kendall_c")},
                         ("pairs", "error"): "pairs", ("pairs", "same"): "pairs", ("pairs", "diff"): "pairs",
                         ("triplets", "error"): "anchors", ("triplets", "same"): "anchors", ("triplets", "diff"): "anchors",
                         ("clustering", "accuracy"): "seeds"}
    assert all(r.ci_note for r in records if not r.has_interval)  # counts, spreads: each with its reason
    for record in records:  # the units reproduce the record's value
        if record.units is not None:
            assert point(record.units) == pytest.approx(record.value, rel=1e-9, abs=1e-12)
