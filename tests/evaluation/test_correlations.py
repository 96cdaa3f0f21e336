"""Tests for embedlab.evaluation.correlations: SummEval article-summary products and user files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import FakeMethod
from scipy import stats

from embedlab.data import summeval
from embedlab.evaluation.correlations import CorrelationsTask


def test_summeval_products_vs_expert_scores() -> None:
    method = FakeMethod(dim=4)
    records = CorrelationsTask("summeval").run(method)
    assert {r.subset for r in records} == set(summeval.SUMMEVAL_ASPECTS)
    assert all(r.n == 1600 for r in records)
    items = summeval.summeval()
    unit = lambda v: v / np.linalg.norm(v)  # noqa: E731
    products = np.array([unit(method.vector(i.article)) @ unit(method.vector(i.summary)) for i in items])
    gold = np.array([i.scores["relevance"] for i in items])
    by_key = {(r.subset, r.metric): r.value for r in records}
    assert by_key[("relevance", "kendall_c")] == pytest.approx(stats.kendalltau(products, gold, variant="c").statistic)
    assert by_key[("relevance", "spearman")] == pytest.approx(stats.spearmanr(products, gold).statistic)
    assert len(method.encode_calls) == 1  # articles and summaries encoded together, once


def test_user_scored_pairs_perfect_order(tmp_path: Path) -> None:
    angle = {f"t{k}": np.array([np.cos(k * 0.2), np.sin(k * 0.2)]) for k in range(5)}
    file = tmp_path / "scores.csv"
    file.write_text("".join(f"t0,t{k},{10 - k}\n" for k in range(1, 5)))  # closer angle, higher score
    records = {r.metric: r.value for r in CorrelationsTask("scores", path=str(file)).run(FakeMethod(vectors=angle))}
    assert records["spearman"] == pytest.approx(1.0)
    assert records["kendall_b"] == pytest.approx(1.0) and records["kendall_c"] == pytest.approx(1.0)


def test_dot_product_correlations_follow_the_raw_products(tmp_path: Path) -> None:
    vectors = {"t0": [1.0, 0.0], "t1": [2.0, 2.0], "t2": [0.5, 0.1], "t3": [1.0, 1.0]}
    file = tmp_path / "scores.csv"
    file.write_text("t0,t1,3\nt0,t2,1\nt0,t3,2\n")  # dot products 2, 0.5, 1: the scores' order; cosines 0.71, 0.98, 0.71
    records = {r.metric: r for r in CorrelationsTask("scores", path=str(file), product="dot").run(FakeMethod(vectors=vectors))}
    assert records["spearman"].value == pytest.approx(1.0) and records["spearman"].subset == "score,product=dot"
    cosine = {r.metric: r.value for r in CorrelationsTask("scores", path=str(file)).run(FakeMethod(vectors=vectors))}
    assert cosine["spearman"] == pytest.approx(stats.spearmanr([0.7071, 0.9806, 0.7071], [3, 1, 2]).statistic, abs=1e-3)
