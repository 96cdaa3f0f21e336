"""Token-level matching (embedlab/matching.py): Eq. 1–2 by hand, BERTScore by a direct computation,
batching, the pairwise contract, and the explain heatmap."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch

import embedlab
from embedlab.matching.core import MatchingMethod, pair_score, plot_explanation, token_scores
from embedlab.spec import SpecError

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


def test_spec_and_pairwise_contract():
    method = embedlab.load("match:minilm,score=max,weights=idf")
    assert isinstance(method, MatchingMethod) and method.pairwise
    assert method.spec == "match:minilm,score=max,weights=idf"
    assert embedlab.load("match:minilm,weights=learned").spec == "match:minilm"
    with pytest.raises(TypeError, match="pairwise"):
        method.encode(["a text"])
    with pytest.raises(SpecError, match="bertscore"):
        embedlab.load("match:minilm,mode=bertscore,score=max-2nd")
    with pytest.raises(SpecError, match="score"):
        embedlab.load("match:minilm,score=3max")
    with pytest.raises(TypeError, match="index 1"):
        method.similarity([("a", "b"), ("only one",)])


def test_batching_equals_one_pair_at_a_time(sts_test_rows):
    pairs = [(a, b) for _, a, b in sts_test_rows[:6]] + [("Stop.", sts_test_rows[0][1])]
    method = embedlab.load("match:minilm,weights=idf")
    together = method.similarity(pairs, batch_size=4)
    assert together.dtype == np.float32 and together.shape == (len(pairs),)
    alone = np.concatenate([method.similarity([pair]) for pair in pairs])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert method.similarity([]).shape == (0,)


def _direct_token_vectors(minilm, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Last-layer vectors and ids of a text's non-special tokens, straight from transformers."""
    encoded = minilm.tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        hidden = minilm.model(**encoded).last_hidden_state[0].numpy()
    ids = encoded["input_ids"][0].numpy()
    content = ~np.isin(ids, minilm.tokenizer.all_special_ids)
    return hidden[content], ids[content]


def test_bertscore_mode_matches_direct_computation(minilm):
    from embedlab.pooling.weights import reference_token_statistics

    reference, candidate = "A man is playing a flute.", "A man plays the bamboo flute loudly."
    idf = reference_token_statistics(minilm.tokenizer)[0]
    ref_vectors, ref_ids = _direct_token_vectors(minilm, reference)
    cand_vectors, cand_ids = _direct_token_vectors(minilm, candidate)
    ref_vectors /= np.linalg.norm(ref_vectors, axis=1, keepdims=True)
    cand_vectors /= np.linalg.norm(cand_vectors, axis=1, keepdims=True)
    similarity = ref_vectors @ cand_vectors.T
    recall = np.sum(similarity.max(axis=1) * idf[ref_ids]) / np.sum(idf[ref_ids])
    precision = np.sum(similarity.max(axis=0) * idf[cand_ids]) / np.sum(idf[cand_ids])
    expected = 2 * precision * recall / (precision + recall)
    got = embedlab.load("match:minilm,mode=bertscore").similarity([(reference, candidate)])[0]
    assert got == pytest.approx(expected, abs=1e-4)
    # raw dot products: the same matrix without normalising the token vectors
    raw = embedlab.load("match:minilm,mode=bertscore,normalise-tokens=no").similarity([(reference, candidate)])[0]
    raw_matrix = _direct_token_vectors(minilm, reference)[0] @ _direct_token_vectors(minilm, candidate)[0].T
    raw_r = np.sum(raw_matrix.max(axis=1) * idf[ref_ids]) / np.sum(idf[ref_ids])
    raw_p = np.sum(raw_matrix.max(axis=0) * idf[cand_ids]) / np.sum(idf[cand_ids])
    assert raw == pytest.approx(2 * raw_p * raw_r / (raw_p + raw_r), rel=1e-4)


def test_special_tokens_switch():
    text_a, text_b = "a man is performing a card trick", "a man is doing trick with play cards"
    excluded = embedlab.load("match:minilm,weights=none").explain(text_a, text_b)
    included = embedlab.load("match:minilm,weights=none,special=include").explain(text_a, text_b)
    assert included.matrix.shape == (excluded.matrix.shape[0] + 2, excluded.matrix.shape[1] + 2)
    assert included.tokens_a[0] == "[CLS]" and "[CLS]" not in excluded.tokens_a


def test_explain_numbers_and_heatmap(tmp_path):
    method = embedlab.load("match:minilm,weights=idf")
    text_a, text_b = "a man is performing a card trick", "a man is doing trick with play cards"
    explanation = method.explain(text_a, text_b)
    assert explanation.tokens_a == ["a", "man", "is", "performing", "a", "card", "trick"]
    assert explanation.similarity == pytest.approx(float(method.similarity([(text_a, text_b)])[0]), abs=1e-5)
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


def test_explain_cli(tmp_path, capsys):
    from embedlab.cli.matching import add_cli

    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command", required=True))
    out = tmp_path / "cli.png"
    args = parser.parse_args(["explain", "match:minilm,weights=none", "A cat sits.", "A dog sits.", "--out", str(out)])
    assert args.handler(args) == 0
    printed = capsys.readouterr().out
    expected = embedlab.load("match:minilm,weights=none").similarity([("A cat sits.", "A dog sits.")])[0]
    assert f"similarity {expected:.4f}" in printed and "cat" in printed
    assert out.exists()
