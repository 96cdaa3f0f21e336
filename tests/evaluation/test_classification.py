"""Tests for embedlab.evaluation.classification: SentEval validation schemes and pair features."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import FakeMethod
from sklearn.linear_model import LogisticRegression

from embedlab.evaluation.classification import (
    INNER_REGS,
    ClassificationTask,
    kfold_accuracy,
    nested_cv_accuracy,
    pair_features,
    split_accuracy,
)


def test_pair_features() -> None:
    u, v = np.array([[1.0, -2.0]]), np.array([[3.0, 4.0]])
    np.testing.assert_array_equal(pair_features(u, v), [[2.0, 6.0, 3.0, -8.0]])
    np.testing.assert_array_equal(pair_features(u, v, "full"), [[1.0, -2.0, 3.0, 4.0, 2.0, 6.0, 3.0, -8.0]])
    with pytest.raises(ValueError):
        pair_features(u, v, "other")


def _data(n: int, seed: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    features = rng.normal(size=(n, 5))
    features[:, 0] += (2 * labels - 1) * noise
    return features, labels


def test_separable_data_is_perfect() -> None:
    x, y = _data(120, 0, noise=6.0)
    dev, test, correct = nested_cv_accuracy(x, y, folds=3, inner_folds=3, seed=0)
    assert dev == 100.0 and test == 100.0 and correct.shape == (120,) and correct.all()
    dev, test, correct = kfold_accuracy(x[:80], y[:80], x[80:], y[80:], folds=3, seed=0)
    assert test == 100.0 and correct.shape == (40,)


def test_split_accuracy_selects_on_dev() -> None:
    x, y = _data(300, 1, noise=0.7)
    dev, test, correct = split_accuracy(x[:100], y[:100], x[100:200], y[100:200], x[200:], y[200:], seed=0)
    assert 100 * correct.mean() == test  # one 1/0 per test item: the accuracy is their mean
    dev_scores = [round(100 * LogisticRegression(C=c, random_state=0, max_iter=1000).fit(x[:100], y[:100])
                        .score(x[100:200], y[100:200]), 2) for c in INNER_REGS]
    best = INNER_REGS[int(np.argmax(dev_scores))]
    expected = 100 * LogisticRegression(C=best, random_state=0, max_iter=1000).fit(x[:100], y[:100]).score(x[200:], y[200:])
    assert dev == max(dev_scores) and test == pytest.approx(expected)


def test_user_file_task_and_pairwise_rejected(tmp_path: Path) -> None:
    texts = [f"pos{k}" for k in range(20)] + [f"neg{k}" for k in range(20)]
    vectors = {t: np.array([1.0 if t.startswith("pos") else -1.0, k * 0.01]) for k, t in enumerate(texts)}
    file = tmp_path / "labels.csv"
    file.write_text("label,text\n" + "".join(f"{t[:3]},{t}\n" for t in texts))
    records = {r.metric: r for r in ClassificationTask("labels", path=str(file), folds=4, inner_folds=3).run(
        FakeMethod(vectors=vectors))}
    assert records["accuracy"].value == 1.0 and records["accuracy"].n == 40  # a fraction (the unit convention)
    with pytest.raises(ValueError, match="pairwise"):
        ClassificationTask("labels", path=str(file)).run(FakeMethod(pairwise=True))


def test_empty_senteval_sentences_reach_the_encoder_as_a_full_stop(tmp_path: Path) -> None:
    """CR keeps 4 and MPQA 3 empty lines; SentEval's reference batchers hand an encoder '.' for them (so a
    decoder without a BOS token has a token to embed); a user's file is passed on as it is."""
    from embedlab.data.senteval import senteval_binary

    for name, empties in (("cr", 4), ("mpqa", 3)):
        texts = senteval_binary(name).texts
        encoded = ClassificationTask(name)._encoded(texts)
        assert len(encoded) == len(texts) and sum(not text.strip() for text in texts) == empties
        assert [(text, sent) for text, sent in zip(texts, encoded) if text != sent] == [("", ".")] * empties
    user = ClassificationTask("mine", path=str(tmp_path / "labelled.tsv"))
    assert user._encoded(["", "a text"]) == ["", "a text"]
