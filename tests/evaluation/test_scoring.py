"""embedlab.evaluation.scoring: each distinct text encoded once per call site, rows indexed back, cosines
against scikit-learn, the pairwise fallback, and the checksummed on-disk cache."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import FakeMethod
from sklearn.metrics.pairwise import cosine_similarity

from embedlab.evaluation.base import NotApplicableError
from embedlab.evaluation.scoring import Encoded, PairScorer, cosines, embed, encode_texts, pair_scores


def test_each_unique_text_is_encoded_once_and_indexed_back() -> None:
    method = FakeMethod(spec="count-unique")
    first, second = ["a", "b", "a", "c"], ["c", "d", "a"]
    left, right = embed(method, first, second)
    assert method.encode_calls == [["a", "b", "c", "d"]]  # one call, distinct texts, first-seen order
    np.testing.assert_array_equal(left, np.stack([method.vector(t) for t in first]))
    np.testing.assert_array_equal(right, np.stack([method.vector(t) for t in second]))
    # a second scorer over the same texts reads the disk cache: no new encode call
    again = Encoded(method, first, second)
    assert len(method.encode_calls) == 1
    np.testing.assert_array_equal(again.rows(["d", "a"]), right[[1, 2]])


def test_pair_scorer_encodes_all_pair_lists_in_one_call_and_gives_cosines() -> None:
    method = FakeMethod(spec="count-pairs")
    one, two = [("x", "y"), ("y", "z")], [("z", "x"), ("x", "y")]
    scorer = PairScorer(method, one, two)
    assert method.encode_calls == [["x", "y", "z"]]
    expected = [cosine_similarity(method.vector(a)[None], method.vector(b)[None])[0, 0] for a, b in two]
    np.testing.assert_allclose(scorer.similarity(two), expected, rtol=1e-6)


def test_cosines_match_scikit_learn_and_zero_rows_give_zero() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(20, 5)), rng.normal(size=(20, 5))
    np.testing.assert_allclose(cosines(a, b), np.diag(cosine_similarity(a, b)), rtol=1e-10)
    b[7] = 0
    assert cosines(a, b)[7] == 0.0


def test_pairwise_methods_score_distinct_pairs_in_one_call() -> None:
    method = FakeMethod(spec="pairwise-count", pairwise=True)
    scores = pair_scores(method, ["a", "b", "a"], ["b", "c", "b"])
    assert method.similarity_calls == 1
    assert scores[0] == scores[2] and scores.dtype == np.float64
    with pytest.raises(NotApplicableError):
        encode_texts(method, ["a"])
    with pytest.raises(NotApplicableError):
        PairScorer(method, [("a", "b")]).vectors([("a", "b")])


def test_a_damaged_cache_file_is_recomputed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    method = FakeMethod(spec="damage")
    first = encode_texts(method, ["p", "q"])
    (target,) = [path for path in (tmp_path / "eval").glob("*.safetensors") if not path.stem.endswith("-cost")]  # the vectors
    target.write_bytes(target.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.warns(RuntimeWarning, match="damaged cache file"):
        again = encode_texts(method, ["p", "q"])
    np.testing.assert_array_equal(first, again)
    assert len(method.encode_calls) == 2


def test_bad_encodings_are_rejected() -> None:
    class Broken(FakeMethod):
        def encode(self, texts, batch_size=32, show_progress_bar=None, normalize=False):
            return np.full((len(texts), 2), np.nan, dtype=np.float32)

    with pytest.raises(ValueError, match="non-finite embedding for text 0"):
        encode_texts(Broken(spec="broken"), ["a"])
