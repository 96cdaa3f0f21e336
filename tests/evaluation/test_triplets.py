"""Tests for embedlab.evaluation.triplets: the exact fast count against brute-force enumeration."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import FakeMethod

from embedlab.data.containers import GroupedTexts, grouped
from embedlab.evaluation.base import NotApplicableError
from embedlab.evaluation.scoring import unit_rows
from embedlab.evaluation.triplets import triplets_mrpc, triplets_sts, triplets_text_summ_g
from embedlab.evaluation.triplets import TripletsTask, broken_intersection, count_triplets, intersection_ratio


def _brute(vectors: np.ndarray, data: GroupedTexts, other: np.ndarray | None = None) -> dict:
    products = unit_rows(vectors) @ unit_rows(vectors).T
    products_2 = unit_rows(other) @ unit_rows(other).T if other is not None else None
    out = dict(total=0, wrong=0, same=0.0, diff=0.0, common=0, wrong_2=0)
    n = len(data)
    for a in range(n):
        if not data.is_anchor[a]:
            continue
        for b in range(n):
            if b == a or not data.is_candidate[b] or data.groups[b] != data.groups[a]:
                continue
            for c in range(n):
                if not data.is_candidate[c] or data.groups[c] == data.groups[a]:
                    continue
                out["total"] += 1
                out["same"] += products[a, b]
                out["diff"] += products[a, c]
                broken = products[a, b] <= products[a, c]
                out["wrong"] += int(broken)
                if products_2 is not None:
                    broken_2 = products_2[a, b] <= products_2[a, c]
                    out["wrong_2"] += int(broken_2)
                    out["common"] += int(broken and broken_2)
    return out


@pytest.mark.parametrize("restricted", [False, True])
def test_fast_count_matches_brute_force(restricted: bool) -> None:
    rng = np.random.default_rng(7 + restricted)
    n = 36
    vectors = rng.normal(size=(n, 4)).astype(np.float32)
    vectors[5] = vectors[9]  # duplicate texts in different groups: exact ties
    groups = list(rng.integers(0, 6, n))
    anchors = list(rng.random(n) < 0.6) if restricted else None
    candidates = list(rng.random(n) < 0.8) if restricted else None
    data = grouped("random", [f"t{k}" for k in range(n)], groups, anchors, candidates)
    other = rng.normal(size=(n, 4))
    brute = _brute(vectors, data, other)
    fast = count_triplets(vectors, data)
    assert fast.total == brute["total"] == data.triplet_count()
    assert fast.wrong == brute["wrong"]
    assert fast.same == pytest.approx(brute["same"] / brute["total"])
    assert fast.diff == pytest.approx(brute["diff"] / brute["total"])
    assert broken_intersection(vectors, other, data) == (brute["common"], brute["wrong"], brute["wrong_2"])


def test_hand_computed() -> None:
    # groups {x, y} and {z}; x·y = 0.6, x·z = 0.8 -> anchor x breaks; y·x = 0.6 > y·z = 0 holds
    vectors = np.array([[1.0, 0.0], [0.6, -0.8], [0.8, 0.6]])
    data = grouped("hand", ["x", "y", "z"], [0, 0, 1])
    counts = count_triplets(vectors, data)
    assert (counts.total, counts.wrong) == (2, 1)
    assert counts.same == pytest.approx(0.6)
    assert counts.diff == pytest.approx((0.8 + 0.0) / 2)
    assert intersection_ratio(1, 1, 3) == 1.0 and np.isnan(intersection_ratio(0, 0, 3))


def test_paper_triplet_totals() -> None:
    assert triplets_sts().triplet_count() == 455_624  # neural-embeddings paper, Table 1
    assert triplets_mrpc().triplet_count() == 24_472_808
    assert triplets_text_summ_g().triplet_count() == 100 * 16 * 1584  # 16 systems here, 17 in the paper


def test_task_rejects_pairwise_and_encodes_once(tmp_path) -> None:
    file = tmp_path / "groups.tsv"
    file.write_text("a\tb\tc\nd\te\nf\tg\n")
    task = TripletsTask("groups", path=str(file), layout="line")
    with pytest.raises(NotApplicableError, match="pairwise"):
        task.run(FakeMethod(pairwise=True))
    method = FakeMethod()
    records = {r.metric: r.value for r in task.run(method)}
    assert records["total"] == 3 * 2 * 4 + 2 * 1 * 5 + 2 * 1 * 5 and len(method.encode_calls) == 1


def test_dot_product_keeps_the_lengths() -> None:
    """Appendix F's unnormalised embeddings, by hand: groups {x, y} and {z}, y and z not unit length.

    Cosine: x·y = 0.6 < cos(x, z) = 0.707 and cos(y, x) = 0.6 < cos(y, z) = 0.990 -> both broken.
    Dot: x·y = 0.6 > x·z = 0.5 holds; y·x = 0.6 < y·z = 0.7 breaks -> one broken."""
    vectors = np.array([[1.0, 0.0], [0.6, 0.8], [0.5, 0.5]])
    data = grouped("hand", ["x", "y", "z"], [0, 0, 1])
    assert count_triplets(vectors, data).wrong == 2
    dot = count_triplets(vectors, data, "dot")
    assert (dot.total, dot.wrong) == (2, 1)
    assert dot.same == pytest.approx(0.6) and dot.diff == pytest.approx((0.5 + 0.7) / 2)
    assert broken_intersection(vectors, vectors, data, "dot") == (1, 1, 1)


def test_product_option_names_the_subset(tmp_path) -> None:
    file = tmp_path / "groups.tsv"
    file.write_text("a\tb\nc\td\n")
    vectors = {"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.5, 0.5], "d": [-1.0, 2.0]}
    records = TripletsTask("groups", path=str(file), layout="line", product="dot").run(FakeMethod(vectors=vectors))
    assert {r.subset for r in records} == {"all,product=dot"}
    assert {r.subset for r in TripletsTask("groups", path=str(file), layout="line").run(FakeMethod(vectors=vectors))} == {"all"}
    with pytest.raises(ValueError, match="unknown product 'euclid'"):
        TripletsTask("sts", product="euclid")
