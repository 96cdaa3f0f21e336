"""Why a pair got its matching score (token-matching paper §4.5 "Case Study", Fig. 2).

:func:`explain_pair` lays out every number behind one pair's Eq. 2 score (the token similarity matrix
S, each row's and column's first and second maximum, the Eq. 1 token scores and the token weights);
:meth:`MatchExplanation.rows` lists them and :func:`plot_explanation` draws the Fig. 2 heatmap with
each row's maximum (solid box) and second maximum (dashed box).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedlab.matching.scoring import TextSide, pair_score, token_scores
from embedlab.runtime.cache.atomic import save_figure
from embedlab.runtime.extras import pyplot


@dataclass
class MatchExplanation:
    """Everything behind one pair's score (Fig. 2): tokens, matrix, maxima, token scores and weights."""

    tokens_a: list[str]
    tokens_b: list[str]
    matrix: np.ndarray  # (|s|, |ŝ|) float32
    row_first: np.ndarray  # (|s|,) column of each row's maximum
    row_second: np.ndarray  # (|s|,) column of each row's second maximum (= row_first for one column)
    column_first: np.ndarray  # (|ŝ|,) row of each column's maximum
    column_second: np.ndarray
    scores_a: np.ndarray  # token matching scores S(t_i)
    scores_b: np.ndarray  # S(t̂_j)
    weights_a: np.ndarray  # token weights w_{t_i}
    weights_b: np.ndarray
    similarity: float

    COLUMNS = ("side", "token", "score", "weight", "best match")

    def rows(self) -> list[list[object]]:
        """Per-token matching scores and weights, one row per token of A then of B (columns :attr:`COLUMNS`);
        the best match is the other text's token at the row's (column's) maximum."""
        rows = []
        for side, tokens, scores, weights, first, other in (
            ("A", self.tokens_a, self.scores_a, self.weights_a, self.row_first, self.tokens_b),
            ("B", self.tokens_b, self.scores_b, self.weights_b, self.column_first, self.tokens_a),
        ):
            rows += [[side, token, round(float(value), 4), round(float(weight), 4), other[match]]
                     for token, value, weight, match in zip(tokens, scores, weights, first)]
        return rows


def positions_of_top_two(matrix: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the first and second maximum along ``axis`` sit (ties: the earlier position first)."""
    order = np.argsort(-matrix, axis=axis, kind="stable")
    first = np.take(order, 0, axis=axis)
    second = np.take(order, 1, axis=axis) if matrix.shape[axis] > 1 else first.copy()
    return first, second


def explain_pair(
    a: TextSide, b: TextSide, tokens_a: list[str], tokens_b: list[str], score: str = "2max-2nd", mode: str = "eq2"
) -> MatchExplanation:
    """The numbers behind the score of the pair (a, b); ``tokens_*`` are the sides' token strings."""
    matrix = (a.vectors @ b.vectors.T).astype(np.float32)
    scores_a, scores_b = token_scores(matrix, "max" if mode == "bertscore" else score)
    row_first, row_second = positions_of_top_two(matrix, 1)
    column_first, column_second = positions_of_top_two(matrix, 0)
    return MatchExplanation(
        tokens_a=tokens_a,
        tokens_b=tokens_b,
        matrix=matrix,
        row_first=row_first,
        row_second=row_second,
        column_first=column_first,
        column_second=column_second,
        scores_a=scores_a.astype(np.float32),
        scores_b=scores_b.astype(np.float32),
        weights_a=a.weights,
        weights_b=b.weights,
        similarity=pair_score(matrix, a.weights, b.weights, score, mode),
    )


def plot_explanation(explanation: MatchExplanation, out: Path | str, title: str | None = None):
    """Heatmap of the token similarity matrix with each row's first (solid) and second (dashed) maximum.

    Returns the matplotlib Figure (closed after saving); the marks are Rectangle patches whose
    ``get_label()`` is ``"first"`` or ``"second"``.
    """
    plt = pyplot()
    from matplotlib.patches import Rectangle

    rows, columns = explanation.matrix.shape
    figure, axes = plt.subplots(figsize=(1.0 + 0.6 * columns + 2.0, 1.0 + 0.5 * rows + 1.0))
    image = axes.imshow(explanation.matrix, cmap="Blues", aspect="auto")
    figure.colorbar(image, ax=axes, fraction=0.04)
    for row in range(rows):
        for label, column, style in (
            ("first", explanation.row_first[row], "-"),
            ("second", explanation.row_second[row], "--"),
        ):
            if label == "second" and columns == 1:
                continue  # no second maximum in a one-column matrix
            axes.add_patch(
                Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="darkorange" if label == "first" else "green", linewidth=2.5, linestyle=style, label=label)
            )
        for column in range(columns):
            axes.text(column, row, f"{explanation.matrix[row, column]:.2f}", ha="center", va="center", fontsize=7)
    axes.set_xticks(range(columns), [f"{token}\n{score:.2f}" for token, score in zip(explanation.tokens_b, explanation.scores_b)], rotation=90)
    axes.set_yticks(range(rows), [f"{token} {score:.2f} (w {weight:.2f})" for token, score, weight in zip(explanation.tokens_a, explanation.scores_a, explanation.weights_a)])
    axes.set_title(title or f"similarity {explanation.similarity:.3f}; boxes: row max (solid), 2nd max (dashed)", fontsize=9)
    figure.tight_layout()
    save_figure(figure, Path(out), dpi=120)
    plt.close(figure)
    return figure
