"""Match explanations (Fig. 2): the numbers behind a score, the printed table and the heatmap's boxes."""

from __future__ import annotations

import numpy as np
import pytest

import embedlab
from embedlab.matching.explain import explain_pair, plot_explanation, positions_of_top_two
from embedlab.matching.scoring import TextSide, token_scores


def test_positions_of_top_two_by_hand():
    matrix = np.array([[0.1, 0.7, 0.7], [0.9, 0.2, 0.4]], dtype=np.float32)
    first, second = positions_of_top_two(matrix, 1)
    assert first.tolist() == [1, 0] and second.tolist() == [2, 2]  # a tie: the earlier column is first
    first, second = positions_of_top_two(matrix[:, :1], 1)
    assert first.tolist() == second.tolist() == [0, 0]  # one column: no second maximum


def test_explain_pair_and_table_by_hand():
    a = TextSide(np.array([5, 6]), np.eye(2, dtype=np.float32), np.array([1.0, 3.0], np.float32))
    b = TextSide(np.array([7]), np.array([[0.6, 0.8]], np.float32), np.array([2.0], np.float32))
    explanation = explain_pair(a, b, ["x", "y"], ["z"])
    # S = [[.6], [.8]]: one column, so each row scores its maximum; the column scores 2·.8 − .6 = 1.0
    np.testing.assert_allclose(explanation.scores_a, [0.6, 0.8], atol=1e-6)
    np.testing.assert_allclose(explanation.scores_b, [1.0], atol=1e-6)
    # Eq. 2: ½ (.6·1 + .8·3) / 4 + ½ · 1.0
    assert explanation.similarity == pytest.approx(0.5 * 3.0 / 4 + 0.5, abs=1e-6)
    assert explanation.column_first.tolist() == [1]
    rows = explanation.rows()
    assert rows[0] == ["A", "x", 0.6, 1.0, "z"]
    assert rows[-1] == ["B", "z", 1.0, 2.0, "y"]


def test_explain_numbers_and_heatmap(tmp_path):
    method = embedlab.load("match:minilm,weights=idf")
    text_a, text_b = "a man is performing a card trick", "a man is doing trick with play cards"
    explanation = method.explain(text_a, text_b)
    assert explanation.tokens_a == ["a", "man", "is", "performing", "a", "card", "trick"]
    assert explanation.similarity == pytest.approx(float(method.similarity_pairs([(text_a, text_b)])[0]), abs=1e-5)
    rows, columns = token_scores(explanation.matrix, "2max-2nd")
    np.testing.assert_allclose(explanation.scores_a, rows, atol=1e-6)
    np.testing.assert_allclose(explanation.scores_b, columns, atol=1e-6)
    assert explanation.tokens_b[explanation.row_first[5]] == "cards"  # card ↔ cards, as in Fig. 2
    out = tmp_path / "match.png"
    figure = plot_explanation(explanation, out)
    assert out.stat().st_size > 1000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    marked = {"first": {}, "second": {}}
    for patch in figure.axes[0].patches:
        x, y = patch.get_xy()
        marked[patch.get_label()][round(y + 0.5)] = round(x + 0.5)
    matrix = explanation.matrix
    for row in range(matrix.shape[0]):
        assert matrix[row, marked["first"][row]] == matrix[row].max()
        assert matrix[row, marked["second"][row]] == np.sort(matrix[row])[-2]
        assert marked["first"][row] != marked["second"][row]
