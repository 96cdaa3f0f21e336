"""Tests for embedlab.evaluation.geometry: IsoScore on closed-form cases, alignment and uniformity."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import FakeMethod

from embedlab.evaluation.geometry import alignment, isoscore, uniformity


def test_isoscore_one_direction_is_zero() -> None:
    t = np.linspace(-1, 1, 50)[:, None]
    points = t * np.array([[1.0, 2.0, -1.0, 0.5]])  # all variance along one line
    assert isoscore(points) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("used", [2, 3, 5])
def test_isoscore_k_equal_directions(used: int) -> None:
    # k of n principal directions with equal variance: IsoScore = (k - 1) / (n - 1) (Rudman et al. 2022)
    n = 6
    corners = np.vstack([np.eye(n)[:used], -np.eye(n)[:used]])  # variance 1/k... equal along k axes
    rotation, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(n, n)))
    assert isoscore(corners @ rotation) == pytest.approx((used - 1) / (n - 1), abs=1e-9)


def test_isoscore_isotropic_gaussian_near_one_and_package_agrees() -> None:
    points = np.random.default_rng(0).normal(size=(20000, 8))
    assert isoscore(points) > 0.99
    skewed = points * np.array([5.0, 3, 1, 1, 0.5, 0.2, 0.1, 0.1])
    value = isoscore(skewed)
    assert 0 < value < 0.5
    package = pytest.importorskip("IsoScore.IsoScore")
    assert value == pytest.approx(float(package.IsoScore(skewed)), abs=1e-6)


def test_alignment_hand_computed() -> None:
    first = np.array([[0.0, 0.0], [1.0, 1.0]])
    second = np.array([[3.0, 4.0], [1.0, 2.0]])
    assert alignment(first, second) == pytest.approx((25 + 1) / 2)


def test_uniformity_hand_computed() -> None:
    # three points on a line at 0, 1, 3: squared distances 1, 9, 4
    points = np.array([[0.0], [1.0], [3.0]])
    expected = np.log(np.mean(np.exp(-2 * np.array([1.0, 9.0, 4.0]))))
    assert uniformity(points) == pytest.approx(expected)
    assert uniformity(points, block=1) == pytest.approx(expected)  # block boundaries do not matter
    far = np.array([[0.0], [100.0]])  # exp underflows; the log-sum-exp does not
    assert uniformity(far) == pytest.approx(-2 * 100.0 ** 2)


def test_alignment_task_on_stsb_train() -> None:
    from embedlab.data import sts
    from embedlab.evaluation.geometry import AlignmentTask

    method = FakeMethod(dim=3)
    records = {r.metric: r for r in AlignmentTask().run(method)}
    data = sts.stsb("train")
    positives = int(np.sum(data.scores == 5.0))
    assert records["alignment"].n == positives > 0
    assert records["uniformity"].n == len(set(data.first) | set(data.second))
    first = np.stack([method.vector(data.first[i]) for i in np.flatnonzero(data.scores == 5.0)])
    second = np.stack([method.vector(data.second[i]) for i in np.flatnonzero(data.scores == 5.0)])
    assert records["alignment"].value == pytest.approx(alignment(first, second), rel=1e-6)
    assert -4.0 <= records["uniformity_unit"].value < 0  # unit vectors: squared distances lie in [0, 4]
    assert len(method.encode_calls) == 1


def test_isotropy_task_encodes_distinct_sentences_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.evaluation import geometry
    from embedlab.evaluation.geometry import IsotropyTask

    sentences = [f"sentence number {k} is long enough" for k in range(40)] + ["sentence number 0 is long enough"]
    monkeypatch.setattr(geometry, "wikitext2_sentences", lambda split="test", min_chars=10: sentences)
    method = FakeMethod(dim=4)
    (record,) = IsotropyTask().run(method)
    vectors = np.stack([method.vector(s) for s in dict.fromkeys(sentences)])
    assert record.metric == "isoscore" and record.n == 40 and len(method.encode_calls) == 1
    assert record.value == pytest.approx(isoscore(vectors))


def test_isotropy_of_a_users_own_texts(tmp_path) -> None:
    from embedlab.evaluation.harness import evaluate, parse_tasks

    texts = [f"Text number {index} about topic {index % 7}." for index in range(30)]
    path = tmp_path / "mine.txt"
    path.write_text("\n".join(texts + texts[:5]) + "\n", encoding="utf-8")  # repeats are encoded once
    method = FakeMethod(dim=6)
    (record,) = evaluate([method], parse_tasks(f"isotropy:@{path}"), log=lambda message: None).records
    assert (record.dataset.split("@")[0], record.subset, record.n) == ("mine", "all", 30)
    expected = isoscore(np.stack([method.vector(text) for text in texts]))
    assert record.value == pytest.approx(expected, abs=1e-9)  # the same float32 rows, one float64 IsoScore
    assert record.ci_note  # IsoScore has no interval by design


@pytest.mark.parametrize("column", ["label", "score"])
def test_alignment_of_a_users_pairs_file(tmp_path, column: str) -> None:
    from embedlab.evaluation.harness import evaluate, parse_tasks

    values = [1, 0, 1] * 10 if column == "label" else [4.0, 3.5, 5.0] * 10  # positives: label 1, or score >= 4
    rows = [(f"First text {index}.", f"Second text {index}.", value) for index, value in enumerate(values)]
    path = tmp_path / "pairs.tsv"
    path.write_text(f"text1\ttext2\t{column}\n" + "".join(f"{a}\t{b}\t{v}\n" for a, b, v in rows), encoding="utf-8")
    method = FakeMethod(dim=6)
    records = {r.metric: r for r in evaluate([method], parse_tasks(f"alignment:@{path}"), log=lambda message: None).records}
    positive = [(a, b) for a, b, v in rows if v in (1, 4.0, 5.0)]
    first, second = (np.stack([method.vector(pair[side]) for pair in positive]) for side in (0, 1))
    assert records["alignment"].n == 20 and records["alignment"].subset == "all"
    assert records["alignment"].value == pytest.approx(alignment(first, second), abs=1e-9)  # same rows, float64 sums
    every = np.stack([method.vector(text) for a, b, _ in rows for text in (a, b)])
    assert records["uniformity"].value == pytest.approx(uniformity(every), abs=1e-9)
    assert records["uniformity"].ci_note and records["uniformity"].n == 60
