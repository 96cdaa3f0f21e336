"""Tests for embedlab.evaluation.pairs: exact wrong-tuple counting (neural-embeddings paper Eq. 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import FakeMethod

from embedlab.evaluation.base import NotApplicableError
from embedlab.evaluation.pairs import pairs_sts
from embedlab.evaluation.pairs import PairsTask, count_wrong_tuples


def test_hand_computed_with_tie() -> None:
    # 0.9 loses to 0.95; 0.5 loses to 0.5 (tie counts as wrong) and 0.95 -> 3 wrong of 6
    counts = count_wrong_tuples(np.array([0.9, 0.5]), np.array([0.5, 0.2, 0.95]))
    assert (counts.total, counts.wrong) == (6, 3)
    assert counts.error == pytest.approx(0.5)
    assert counts.same == pytest.approx(0.7) and counts.diff == pytest.approx(1.65 / 3)


def test_matches_brute_force() -> None:
    rng = np.random.default_rng(1)
    similar = np.round(rng.normal(size=70), 1)  # rounding makes ties
    different = np.round(rng.normal(size=90), 1)
    brute = sum(int(s <= d) for s in similar for d in different)
    assert count_wrong_tuples(similar, different).wrong == brute


def test_sts_pair_counts_match_paper() -> None:
    data = pairs_sts()
    assert (len(data.similar), len(data.different)) == (338, 534)  # 180,492 tuples (neural-embeddings paper Table 3)


def test_task_on_user_file_with_pairwise_method(tmp_path: Path) -> None:
    file = tmp_path / "labelled.jsonl"
    file.write_text('{"text1": "a", "text2": "a", "score": 1}\n{"text1": "b", "text2": "c", "score": 0}\n'
                    '{"text1": "d", "text2": "e", "score": 0}\n')
    method = FakeMethod(pairwise=True)
    records = {r.metric: r for r in PairsTask("labelled", path=str(file)).run(method)}
    # identical texts score 1.0, above any other cosine: no wrong tuple
    assert records["total"].value == 2 and records["wrong"].value == 0 and records["error"].value == 0
    assert records["same"].value == pytest.approx(1.0)


def test_user_file_needs_binary_labels(tmp_path: Path) -> None:
    file = tmp_path / "bad.tsv"
    file.write_text("a\tb\t0.5\nc\td\t1\n")
    with pytest.raises(ValueError, match="labels 0"):
        PairsTask("bad", path=str(file)).run(FakeMethod())


def test_dot_product_on_unnormalised_vectors(tmp_path: Path) -> None:
    """A long non-similar pair wins under dot but not under cosine (Appendix F's option)."""
    file = tmp_path / "labelled.tsv"
    file.write_text("a\tb\t1\nc\td\t0\n")
    vectors = {"a": [1.0, 0.0], "b": [1.0, 1.0], "c": [3.0, 0.0], "d": [1.0, 2.0]}
    cosine = {r.metric: r for r in PairsTask("labelled", path=str(file)).run(FakeMethod(vectors=vectors))}
    dot = {r.metric: r for r in PairsTask("labelled", path=str(file), product="dot").run(FakeMethod(vectors=vectors))}
    # cosine: a·b = 0.707 > c·d = 0.447 (right); dot: 1 < 3 (wrong)
    assert cosine["wrong"].value == 0 and dot["wrong"].value == 1
    assert dot["same"].value == pytest.approx(1.0) and dot["diff"].value == pytest.approx(3.0)
    assert dot["wrong"].subset == "all,product=dot"
    with pytest.raises(NotApplicableError, match="product=dot needs embedding vectors"):
        PairsTask("labelled", path=str(file), product="dot").run(FakeMethod(pairwise=True))
