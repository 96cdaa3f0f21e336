"""Tests for embedlab.evaluation.sts: correlation metrics on hand-computed cases, "all" vs "mean", one encode call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import FakeMethod, minilm_method  # noqa: F401 (fixture)

from embedlab.data.containers import ScoredPairs
from embedlab.evaluation import sts
from embedlab.evaluation.scoring import unit_rows
from embedlab.evaluation.sts import STSTask, correlations


def test_correlations_hand_computed() -> None:
    # ranks agree except one swap: Spearman 1 - 6*2/(4*15) = 0.8; Kendall (5-1)/6
    values = correlations(np.array([1.0, 2, 3, 4]), np.array([1.0, 3, 2, 4]))
    assert values["spearman"] == pytest.approx(0.8)
    assert values["kendall_b"] == pytest.approx(4 / 6)
    # gold ties: C=4, D=0, 2 tied gold pairs -> tau-b = 4/sqrt(6*4); tau-c = 2*2*4/(16*(2-1)) = 1
    tied = correlations(np.array([1.0, 2, 3, 4]), np.array([1.0, 1, 2, 2]))
    assert tied["kendall_b"] == pytest.approx(4 / np.sqrt(24))
    assert tied["kendall_c"] == pytest.approx(1.0)
    assert tied["pearson"] == pytest.approx(np.corrcoef([1, 2, 3, 4], [1, 1, 2, 2])[0, 1])


def test_correlations_reject_mismatch() -> None:
    with pytest.raises(ValueError, match="shape"):
        correlations(np.zeros(3), np.zeros(4))


def _subset(name: str, pairs: list[tuple[str, str, float]]) -> ScoredPairs:
    return ScoredPairs("year", name, [p[0] for p in pairs], [p[1] for p in pairs], np.array([p[2] for p in pairs]))


def test_all_concatenates_and_mean_averages(monkeypatch: pytest.MonkeyPatch) -> None:
    # vectors on the unit circle: cosine = cos(angle difference), so the scores are known exactly
    angle = {f"t{k}": np.array([np.cos(k * 0.3), np.sin(k * 0.3)]) for k in range(8)}
    method = FakeMethod(vectors=angle, spec="circle")
    first = _subset("a", [("t0", "t1", 5.0), ("t0", "t2", 3.0), ("t0", "t3", 4.0)])
    second = _subset("b", [("t4", "t5", 1.0), ("t4", "t7", 2.0), ("t4", "t6", 0.0)])
    monkeypatch.setattr(STSTask, "load", lambda self: [first, second])
    task = STSTask("sts12")
    records = {(r.subset, r.metric): r for r in task.run(method)}
    # predicted cosines: a = cos .3, cos .6, cos .9 ; b = cos .3, cos .9, cos .6
    assert records[("a", "spearman")].value == pytest.approx(0.5)
    assert records[("b", "spearman")].value == pytest.approx(-0.5)
    assert records[("mean", "spearman")].value == pytest.approx(0.0)
    pairs = [("t0", "t1"), ("t0", "t2"), ("t0", "t3"), ("t4", "t5"), ("t4", "t7"), ("t4", "t6")]
    # the task's own arithmetic (float64 unit rows, einsum), so exact ties break the same way on any BLAS
    predicted = np.einsum("ij,ij->i", unit_rows(np.array([angle[a] for a, _ in pairs], dtype=np.float32)), unit_rows(np.array([angle[b] for _, b in pairs], dtype=np.float32)))
    gold = np.array([5.0, 3, 4, 1, 2, 0])
    assert records[("all", "spearman")].value == pytest.approx(correlations(predicted, gold)["spearman"])
    assert records[("all", "spearman")].n == 6
    assert len(method.encode_calls) == 1 and sorted(method.encode_calls[0]) == sorted(set(angle))


def test_pairwise_method_uses_similarity_pairs(tmp_path: Path) -> None:
    file = tmp_path / "pairs.tsv"
    file.write_text("text1\ttext2\tscore\na\tb\t1\nc\td\t2\ne\tf\t3\n")
    method = FakeMethod(pairwise=True, spec="pairwise-fake")
    records = STSTask("pairs", path=str(file)).run(method)
    assert method.similarity_calls == 1
    assert {r.metric for r in records} == {"spearman", "pearson", "kendall_b", "kendall_c"}
    assert all(r.n == 3 and r.task == "sts" and r.method == "pairwise-fake" for r in records)


def test_minilm_on_stsb_slice(minilm_method, tmp_path: Path) -> None:  # noqa: F811 (the fixture)
    """Real model on 80 STS-B test pairs: the harness gives scipy's Spearman of sentence-transformers' cosines."""
    from embedlab.data.sts import stsb

    data = stsb("test")
    rows = "\n".join(f"{a}\t{b}\t{s}" for a, b, s in list(zip(data.first, data.second, data.scores))[:80])
    file = tmp_path / "slice.tsv"
    file.write_text(rows + "\n")
    records = {r.metric: r.value for r in STSTask("slice", path=str(file)).run(minilm_method)}
    a = minilm_method.encode(data.first[:80], normalize_embeddings=True)
    b = minilm_method.encode(data.second[:80], normalize_embeddings=True)
    from scipy.stats import spearmanr

    expected = spearmanr(np.sum(a * b, axis=1), data.scores[:80]).statistic
    assert records["spearman"] == pytest.approx(expected, abs=1e-4)
    assert records["spearman"] > 0.7  # all-MiniLM-L6-v2 is a strong STS model (0.82 on the full test set)
    assert sts.STSTask.datasets[-1] == "sick-r"
