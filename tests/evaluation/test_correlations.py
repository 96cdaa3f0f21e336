"""Tests for embedlab.evaluation.correlations: SummEval article-summary products and user files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import FakeMethod
from scipy import stats

from embedlab.data import datasets
from embedlab.evaluation.correlations import CorrelationsTask


def test_summeval_products_vs_expert_scores() -> None:
    method = FakeMethod(dim=4)
    records = CorrelationsTask("summeval").run(method)
    assert {r.subset for r in records} == set(datasets.SUMMEVAL_ASPECTS)
    assert all(r.n == 1600 for r in records)
    items = datasets.summeval()
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
