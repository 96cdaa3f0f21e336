"""The matching scoring core (Eq. 1–2, BERTScore F1) on matrices worked by hand; no model involved."""

from __future__ import annotations

import numpy as np
import pytest

from embedlab.matching.scoring import TextSide, pair_score, score_sides, token_scores, weighted_mean

# A 3 × 4 token similarity matrix worked by hand below.
S = np.array(
    [
        [0.9, 0.2, 0.5, 0.1],
        [0.3, 0.8, 0.7, 0.0],
        [0.4, 0.4, 0.1, 0.6],
    ],
    dtype=np.float32,
)
W_A = np.array([1.0, 2.0, 1.0], dtype=np.float32)
W_B = np.array([1.0, 1.0, 2.0, 1.0], dtype=np.float32)


def test_eq1_token_scores_by_hand():
    rows, columns = token_scores(S, "2max-2nd")
    # rows: (max, 2nd) = (.9,.5), (.8,.7), (.6,.4) -> 2·max − 2nd
    np.testing.assert_allclose(rows, [1.3, 0.9, 0.8], atol=1e-6)
    # columns: (.9,.4), (.8,.4), (.7,.5), (.6,.1)
    np.testing.assert_allclose(columns, [1.4, 1.2, 0.9, 1.1], atol=1e-6)
    np.testing.assert_allclose(token_scores(S, "max")[0], [0.9, 0.8, 0.6], atol=1e-6)
    np.testing.assert_allclose(token_scores(S, "max-2nd")[1], [0.5, 0.4, 0.2, 0.5], atol=1e-6)


def test_eq2_sentence_score_by_hand():
    # side s: (1.3·1 + 0.9·2 + 0.8·1) / 4 = 0.975 ; side ŝ: (1.4 + 1.2 + 0.9·2 + 1.1) / 5 = 1.1
    assert pair_score(S, W_A, W_B, "2max-2nd") == pytest.approx(0.5 * 0.975 + 0.5 * 1.1, abs=1e-6)
    # no weights: plain means (4.0/3 and 4.6/4)
    assert pair_score(S, np.ones(3), np.ones(4), "2max-2nd") == pytest.approx(0.5 * 3.0 / 3 + 0.5 * 4.6 / 4, abs=1e-6)
    # swapping the sentences transposes S and leaves the score unchanged
    assert pair_score(S.T, W_B, W_A) == pytest.approx(pair_score(S, W_A, W_B), abs=1e-6)


def test_ties_and_one_token_side():
    tied = np.array([[0.5, 0.5, 0.2]], dtype=np.float32)
    rows, columns = token_scores(tied, "2max-2nd")
    assert rows[0] == pytest.approx(0.5)  # 2·0.5 − 0.5: a tie counts as the second maximum
    # one-token side: its columns have no second maximum; we define 2nd = max, so S(t̂) = max
    np.testing.assert_allclose(columns, [0.5, 0.5, 0.2])
    np.testing.assert_allclose(token_scores(tied, "max-2nd")[1], [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="non-empty"):
        token_scores(np.zeros((0, 3), np.float32))


def test_bertscore_f1_by_hand():
    # recall side: row maxima (.9, .8, .6) weighted (1, 2, 1) -> 3.1 / 4; precision side: column maxima
    # (.9, .8, .7, .6) weighted (1, 1, 2, 1) -> 3.7 / 5; F1 = 2PR / (P + R)
    recall, precision = 3.1 / 4, 3.7 / 5
    expected = 2 * recall * precision / (recall + precision)
    assert pair_score(S, W_A, W_B, mode="bertscore") == pytest.approx(expected, abs=1e-6)
    # bertscore ignores the score argument: it is always greedy max matching
    assert pair_score(S, W_A, W_B, "max-2nd", mode="bertscore") == pytest.approx(expected, abs=1e-6)


def test_zero_weights_fall_back_to_the_plain_mean():
    assert weighted_mean(np.array([1.0, 2.0, 6.0]), np.zeros(3)) == pytest.approx(3.0)
    assert weighted_mean(np.array([1.0, 2.0, 6.0]), np.array([0.0, 1.0, 1.0])) == pytest.approx(4.0)


def test_unknown_score_or_mode_is_refused():
    with pytest.raises(ValueError, match="unknown score"):
        token_scores(S, "3max")
    with pytest.raises(ValueError, match="unknown mode"):
        pair_score(S, W_A, W_B, mode="f2")


def test_score_sides_scores_pairs_of_prepared_texts():
    root_half = np.sqrt(0.5)
    identity = TextSide(np.array([1, 2]), np.eye(2, dtype=np.float32), np.ones(2, np.float32))
    tilted = TextSide(np.array([1, 3]), np.array([[1.0, 0.0], [root_half, root_half]], np.float32), np.ones(2, np.float32))
    # S(identity, tilted) = [[1, .7071], [0, .7071]]: rows 2·1 − .7071 and 2·.7071 − 0, columns 2·1 − 0 and
    # 2·.7071 − .7071, so both sides average (1.2929 + 1.4142) / 2 = (2 + .7071) / 2 = 1 + .7071 / 2
    scores = score_sides([identity, tilted], [(0, 1), (1, 0), (0, 0)])
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, [1 + root_half / 2, 1 + root_half / 2, 2.0], atol=1e-6)
