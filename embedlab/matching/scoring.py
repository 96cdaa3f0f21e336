"""The scoring core of token-level matching (token-matching paper, Wang & Yu 2023, §3 Eq. 1–2, §4.5).

Pure numpy, no model: given the token similarity matrix S = X X̂ᵀ of a pair of texts s, ŝ, every token
gets a matching score from its row (tokens of s) or column (tokens of ŝ):

* ``score=2max-2nd`` (Eq. 1): S(t) = 2·max − 2nd-max = significance + uniqueness;
* ``score=max``: significance only (BERTScore's greedy matching);
* ``score=max-2nd``: uniqueness only (the ablation of Table 3).

The sentence score is Eq. 2, the mean of the two sides' weighted token-score averages (``mode=eq2``), or
BERTScore's F1, the harmonic mean 2PR/(P+R) of the two sides' greedy max averages (``mode=bertscore``,
the last row of Table 3).

One-token side: a row (or column) with a single entry has no second maximum. We take the second maximum
equal to the maximum there, so the uniqueness term is 0 and the token scores its significance (``max``);
under ``score=max-2nd`` it scores 0. This keeps S(t) within the range of S and is symmetric.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from embedlab.errors import InputError

SCORES = ("2max-2nd", "max", "max-2nd")
MODES = ("eq2", "bertscore")


def top_two(matrix: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Maximum and second maximum along ``axis``; with a single entry the second equals the first."""
    if matrix.shape[axis] == 1:
        first = np.take(matrix, 0, axis=axis)
        return first, first.copy()
    part = np.partition(matrix, matrix.shape[axis] - 2, axis=axis)
    return np.take(part, -1, axis=axis), np.take(part, -2, axis=axis)


def token_scores(matrix: np.ndarray, score: str = "2max-2nd") -> tuple[np.ndarray, np.ndarray]:
    """Matching scores of the row tokens (s) and the column tokens (ŝ) of a similarity matrix (Eq. 1)."""
    if matrix.ndim != 2 or 0 in matrix.shape:
        raise ValueError(f"a token similarity matrix must be 2-D and non-empty, got shape {matrix.shape}")
    if score not in SCORES:
        raise InputError(f"unknown score {score!r}; choose one of: {', '.join(SCORES)}")
    results = []
    for axis in (1, 0):  # rows: maxima over ŝ's tokens; columns: maxima over s's tokens
        first, second = top_two(matrix, axis)
        if score == "2max-2nd":
            results.append(2 * first - second)
        elif score == "max":
            results.append(first)
        else:
            results.append(first - second)
    return results[0], results[1]


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    """Σ v·w / Σ w; when every weight is zero the plain mean, so a side never turns into NaN."""
    total = float(weights.sum())
    if total <= 0:
        return float(values.mean())
    return float(np.dot(values, weights) / total)


def pair_score(
    matrix: np.ndarray, weights_a: np.ndarray, weights_b: np.ndarray, score: str = "2max-2nd", mode: str = "eq2"
) -> float:
    """Eq. 2 (``mode=eq2``) or BERTScore F1 (``mode=bertscore``) of one pair's similarity matrix."""
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; choose one of: {', '.join(MODES)}")
    scores_a, scores_b = token_scores(matrix, "max" if mode == "bertscore" else score)
    side_a, side_b = weighted_mean(scores_a, weights_a), weighted_mean(scores_b, weights_b)
    if mode == "eq2":
        return 0.5 * side_a + 0.5 * side_b
    # BERTScore: a = candidate (precision over its tokens), b = reference (recall); F1 is symmetric
    return 2 * side_a * side_b / (side_a + side_b) if side_a + side_b != 0 else 0.0


@dataclass
class TextSide:
    """One text's tokens as matching sees them: the rows (or columns) of S and their Eq. 2 weights."""

    token_ids: np.ndarray  # (n,) int64
    vectors: np.ndarray  # (n, d) float32, unit rows when normalised
    weights: np.ndarray  # (n,) float32 token weights of Eq. 2


def score_sides(
    sides: Sequence[TextSide], pair_indices: Sequence[tuple[int, int]], score: str = "2max-2nd", mode: str = "eq2"
) -> np.ndarray:
    """Scores (float32) of pairs given as indices into ``sides``: each text's tokens are prepared once."""
    scores = np.empty(len(pair_indices), dtype=np.float32)
    for position, (left, right) in enumerate(pair_indices):
        a, b = sides[left], sides[right]
        scores[position] = pair_score(a.vectors @ b.vectors.T, a.weights, b.weights, score, mode)
    return scores
