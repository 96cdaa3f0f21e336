"""Tests for embedlab.evaluation.clustering: Hungarian-matched accuracy and k-means runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import FakeMethod

from embedlab.evaluation.base import NotApplicableError
from embedlab.evaluation.clustering import ClusteringTask, kmeans_accuracies, matched_accuracy


def test_matched_accuracy_hand_computed() -> None:
    # best one-to-one map: cluster 1 -> class 0 (2), 0 -> 1 (2), 2 -> 2 (1): 5 of 6
    assert matched_accuracy(np.array([0, 0, 1, 1, 2, 2]), np.array([1, 1, 0, 0, 0, 2])) == pytest.approx(5 / 6)
    # a renaming of the classes is perfect
    assert matched_accuracy(np.array([3, 3, 7, 7]), np.array([0, 0, 1, 1])) == 1.0
    # one cluster for everything: only the largest class can be matched
    assert matched_accuracy(np.array([0, 0, 0, 1]), np.zeros(4, dtype=int)) == pytest.approx(0.75)


def test_kmeans_separated_blobs_and_determinism() -> None:
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    labels = np.repeat(np.arange(3), 30)
    points = centres[labels] + rng.normal(scale=0.5, size=(90, 2))
    scores = kmeans_accuracies(points, labels, runs=3, seed=0)
    assert scores.shape == (3,) and np.all(scores == 1.0)
    np.testing.assert_array_equal(kmeans_accuracies(points, labels, runs=3, seed=5),
                                  kmeans_accuracies(points, labels, runs=3, seed=5))


def test_task_on_user_file(tmp_path: Path) -> None:
    vectors = {f"a{k}": [1.0, 0.01 * k] for k in range(5)} | {f"b{k}": [0.01 * k, 1.0] for k in range(5)}
    file = tmp_path / "labelled.tsv"
    file.write_text("".join(f"{text[0]}\t{text}\n" for text in vectors))
    method = FakeMethod(vectors={t: np.array(v) for t, v in vectors.items()})
    records = {r.metric: r for r in ClusteringTask("labelled", path=str(file), runs=4).run(method)}
    assert records["accuracy"].value == 1.0 and records["accuracy_std"].value == 0.0 and records["accuracy"].n == 10
    with pytest.raises(NotApplicableError):
        ClusteringTask("labelled", path=str(file)).run(FakeMethod(pairwise=True))
