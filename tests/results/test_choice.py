"""Tests for embedlab.results.choice: the Pareto front over quality and three costs (a tie with the best counts
as equal quality; an unmeasured figure never dominates nor is dominated), the pick for each budget, the refusal of
a task without a rankable metric, and the one-row-per-method output."""

from __future__ import annotations

import json

import pytest

from embedlab.errors import InputError
from embedlab.evaluation.harness import parse_tasks
from embedlab.evaluation.records import Record
from embedlab.evaluation.significance import PairedDifference
from embedlab.results.choice import check_rankable, choose, dominates, format_choices
from embedlab.results.comparison import AgainstBest


def _cost(texts_per_second: float, bytes_per_vector: int, peak_memory_mb: float) -> dict:
    return {"encode_seconds": 1.0, "cpu_seconds": 1.0, "texts": 100, "texts_per_second": texts_per_second,
            "peak_memory_mb": peak_memory_mb, "bytes_per_vector": bytes_per_vector, "parameters": None,
            "cpu_model": "test CPU", "threads": 1, "partial": False, "note": None}


def _group(task: str, metric: str, values: dict[str, float], costs: dict[str, dict | None], best: str,
           tied: set[str]) -> dict:
    records = {m: Record(m, task, "d", "all", metric, v, 50, ci_low=v - 0.02, ci_high=v + 0.02, cost=costs[m])
               for m, v in values.items()}
    differences = {m: PairedDifference(v - values[best], v - values[best] - 0.01, v - values[best] + 0.01, 0.5, 200)
                   for m, v in values.items() if m != best}
    group = AgainstBest(best, records, differences, {m: 0.5 for m in differences}, tied)
    return {(task, "d", "all", metric): group}


def test_front_and_picks_follow_the_hand_worked_case() -> None:
    # a: the best. b: tied with it, smaller vectors but slower and more memory: both stay on the front.
    # c: the same costs as a, worse quality: dominated by a. d: not tied, 0.008 below the best, the smallest
    # vectors: on the front and the smallest within 0.01. e: no cost measured: kept on the front.
    values = {"a": 0.84, "b": 0.835, "c": 0.70, "d": 0.832, "e": 0.60}
    costs = {"a": _cost(100, 1536, 200), "b": _cost(90, 48, 210), "c": _cost(100, 1536, 200), "d": _cost(50, 32, 300),
             "e": None}
    choice, = choose(_group("retrieval", "ndcg@10", values, costs, "a", {"b"}))
    by_method = {c.method: c for c in choice.candidates}
    assert {m: c.pareto for m, c in by_method.items()} == {"a": True, "b": True, "c": False, "d": True, "e": True}
    assert {m: c.tied_with_best for m, c in by_method.items()} == {"a": True, "b": True, "c": False, "d": False, "e": False}
    assert by_method["e"].missing == ["texts_per_second", "bytes_per_vector", "peak_memory_mb"]
    assert {budget: c.method for budget, c in choice.picks.items()} == {
        "best": "a", "fastest tied with the best": "a", "smallest vectors within 0.01 of the best": "d"}
    # with a narrower budget d (0.008 below) is out, and b (0.005 below) has the smallest vectors
    narrow, = choose(_group("retrieval", "ndcg@10", values, costs, "a", {"b"}), within=0.006)
    assert narrow.picks["smallest vectors within 0.006 of the best"].method == "b"


def test_a_tie_with_the_best_is_equal_quality_so_a_faster_tie_takes_the_best_off_the_front() -> None:
    values = {"a": 0.84, "b": 0.835}
    costs = {"a": _cost(100, 1536, 200), "b": _cost(300, 1536, 200)}  # b: as good on every cost, faster
    choice, = choose(_group("retrieval", "ndcg@10", values, costs, "a", {"b"}))
    assert [c.pareto for c in choice.candidates] == [False, True]
    assert choice.picks["fastest tied with the best"].method == "b" and choice.picks["best"].method == "a"
    untied, = choose(_group("retrieval", "ndcg@10", values, costs, "a", set()))  # not tied: a's quality counts
    assert [c.pareto for c in untied.candidates] == [True, True]


def test_lower_is_better_metrics_rank_the_other_way() -> None:
    # pairs' error: 0.04 is the best; 0.045 is within 0.01 of it, 0.06 is not
    values = {"a": 0.06, "b": 0.04, "c": 0.045}
    costs = {"a": _cost(100, 16, 100), "b": _cost(100, 1536, 100), "c": _cost(100, 768, 100)}
    choice, = choose(_group("pairs", "error", values, costs, "b", set()))
    assert choice.picks["smallest vectors within 0.01 of the best"].method == "c"
    assert [c.pareto for c in choice.candidates] == [True, True, True]
    same_size = {"a": _cost(100, 1536, 100), "b": _cost(100, 1536, 100), "c": _cost(100, 1536, 100)}
    worse, = choose(_group("pairs", "error", values, same_size, "b", set()))
    assert [c.pareto for c in worse.candidates] == [False, True, False]  # equal costs: the lowest error dominates


def test_a_missing_figure_neither_dominates_nor_is_dominated() -> None:
    assert dominates([1.0, 2.0, -3.0, -4.0], [0.5, 2.0, -3.0, -4.0])
    assert not dominates([1.0, 2.0, -3.0, -4.0], [1.0, 2.0, -3.0, -4.0])  # equal on all four: not better on one
    assert not dominates([1.0, 2.0, -3.0, None], [0.5, 1.0, -4.0, -5.0])
    assert not dominates([1.0, 2.0, -3.0, -4.0], [0.5, 1.0, None, -5.0])


def test_tasks_without_a_rankable_metric_are_refused_before_any_work() -> None:
    check_rankable(parse_tasks("sts:stsb,pairs:sts"), None)  # spearman (higher), error (lower): fine
    with pytest.raises(InputError, match="metric total of task pairs/sts is neither higher- nor lower-is-better"):
        check_rankable(parse_tasks("pairs:sts"), "total")


def test_json_has_one_object_per_method_with_the_decision_fields() -> None:
    values = {"a": 0.84, "b": 0.70}
    costs = {"a": _cost(100, 1536, 200), "b": _cost(120, 48, 150)}
    choices = choose(_group("retrieval", "ndcg@10", values, costs, "a", set()), settings={("retrieval", "d"): {"k": "10"}})
    rows = [json.loads(line) for line in format_choices(choices, "json").splitlines()]
    assert [row["method"] for row in rows] == ["a", "b"]
    assert {key: rows[1][key] for key in ("metric", "value", "ci_low", "ci_high", "tied_with_best", "pareto",
                                          "texts_per_second", "bytes_per_vector", "peak_memory_mb", "settings")} == {
        "metric": "ndcg@10", "value": 0.70, "ci_low": pytest.approx(0.68), "ci_high": pytest.approx(0.72),
        "tied_with_best": False, "pareto": True, "texts_per_second": 120.0, "bytes_per_vector": 48.0,
        "peak_memory_mb": 150.0, "settings": "k=10"}
    # b is 0.14 below the best: a is every budget's pick
    assert rows[0]["picked_for"] == "best; fastest tied with the best; smallest vectors within 0.01 of the best"
    assert rows[1]["picked_for"] is None
    text = format_choices(choices, "table")
    assert "retrieval/d all ndcg@10 (task settings: k=10):" in text and "  best: a" in text


def test_a_metric_without_per_unit_scores_still_ranks_untested() -> None:
    from embedlab.results.comparison import best_per_group

    # IsoScore keeps no per-unit scores: no paired test, so nothing is tied with the best, yet the values rank
    records = [Record(m, "isotropy", "wikitext2", "test", "isoscore", v, 100, cost=_cost(100, b, 50))
               for m, v, b in (("a", 0.20, 1536), ("b", 0.30, 1536), ("c", 0.25, 48))]
    with pytest.raises(InputError, match="no per-unit scores"):
        best_per_group(records, {}, resamples=200, seed=0)
    groups = best_per_group(records, {}, resamples=200, seed=0, untested="keep")
    choice, = choose(groups)
    assert [c.mark for c in choice.candidates] == ["", "best", ""] and "no per-unit scores" in choice.untested
    assert [c.pareto for c in choice.candidates] == [False, True, True]  # a: b's costs, lower score
    row = json.loads(format_choices([choice], "json").splitlines()[0])
    assert row["untested"] == choice.untested and row["tied_with_best"] is False
    assert "no paired test, so no method is marked tied with the best" in format_choices([choice], "table")
