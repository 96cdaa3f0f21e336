"""Token-level matching similarity (token-matching paper, Wang & Yu 2023, §3 Eq. 1–2, §4.3, §4.5).

For a pair of texts s, ŝ with token vectors X (|s| × d) and X̂ (|ŝ| × d) from any pooled-family encoder
(chosen layers; special tokens left out by default), the token similarity matrix is S = X X̂ᵀ on unit
token vectors (``normalise-tokens=yes``) or raw vectors (``no``). Every token gets a matching score
from its row (tokens of s) or column (tokens of ŝ):

* ``score=2max-2nd`` (Eq. 1): S(t) = 2·max − 2nd-max = significance + uniqueness;
* ``score=max``: significance only (BERTScore's greedy matching);
* ``score=max-2nd``: uniqueness only (the ablation of Table 3).

The sentence score is Eq. 2, the mean of the two sides' weighted token-score averages, with token
weights ``none`` (all 1), ``idf`` (idf^W over WikiText-2 train sentences) or ``learned`` (SimCSE-trained
weights, ``embedlab.training.token_weights``). ``mode=bertscore`` is BERTScore's F1 instead: greedy
max matching, idf weights, and the harmonic mean 2PR/(P+R) of the two sides (the last row of Table 3).

One-token side: a row (or column) with a single entry has no second maximum. We take the second
maximum equal to the maximum there, so the uniqueness term is 0 and the token scores its significance
(``max``); under ``score=max-2nd`` it scores 0. This keeps S(t) within the range of S and is symmetric.

Matching is a *pairwise* method: it gives no vector per text, so ``encode`` raises a TypeError that
says so; ``similarity(pairs)`` runs every unique text through one cached token-state pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedlab.methods.base import EmbeddingMethod, Family, check_texts
from embedlab.methods.pooled import LAYERS_OPTION, POOLED_FAMILY, PooledMethod
from embedlab.models import LoadedModel, load_model
from embedlab.pooling.aggregation import FlatTokens, select_tokens
from embedlab.spec import MethodSpec, Option, SpecError, build_spec

SCORES = ("2max-2nd", "max", "max-2nd")
WEIGHTS = ("learned", "idf", "none")
MODES = ("eq2", "bertscore")
RESOURCES = Path(__file__).resolve().parent.parent / "resources"

MATCH_OPTIONS = {
    "layers": LAYERS_OPTION,
    "score": Option("2max-2nd", SCORES, "token matching score: 2max-2nd (Eq. 1), max (significance), max-2nd (uniqueness)"),
    "weights": Option("learned", WEIGHTS, "token weights in Eq. 2: learned (SimCSE-trained), idf (idf^W, WikiText-2), none"),
    "mode": Option("eq2", MODES, "eq2: Eq. 2 average of both sides; bertscore: max + idf combined as F1 (score/weights must stay default)"),
    "special": Option("exclude", ("exclude", "include"), "[CLS]/[SEP] take part in matching or not"),
    "normalise-tokens": Option("yes", ("yes", "no"), "yes: cosine of token vectors; no: raw dot product"),
}


# --- the scoring core (pure numpy, independent of any model) ---------------------------------------

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
    results = []
    for axis in (1, 0):  # rows: maxima over ŝ's tokens; columns: maxima over s's tokens
        first, second = top_two(matrix, axis)
        if score == "2max-2nd":
            results.append(2 * first - second)
        elif score == "max":
            results.append(first)
        elif score == "max-2nd":
            results.append(first - second)
        else:
            raise ValueError(f"unknown score {score!r}; choose one of: {', '.join(SCORES)}")
    return results[0], results[1]


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    total = float(weights.sum())
    if total <= 0:  # every weight zero: fall back to the plain mean (no silent NaN)
        return float(values.mean())
    return float(np.dot(values, weights) / total)


def pair_score(
    matrix: np.ndarray, weights_a: np.ndarray, weights_b: np.ndarray, score: str = "2max-2nd", mode: str = "eq2"
) -> float:
    """Eq. 2 (``mode=eq2``) or BERTScore F1 (``mode=bertscore``) of one pair's similarity matrix."""
    scores_a, scores_b = token_scores(matrix, "max" if mode == "bertscore" else score)
    side_a, side_b = _weighted_mean(scores_a, weights_a), _weighted_mean(scores_b, weights_b)
    if mode == "eq2":
        return 0.5 * side_a + 0.5 * side_b
    if mode == "bertscore":
        # BERTScore: recall over the reference tokens, precision over the candidate's; F1 is symmetric
        return 2 * side_a * side_b / (side_a + side_b) if side_a + side_b != 0 else 0.0
    raise ValueError(f"unknown mode {mode!r}; choose one of: {', '.join(MODES)}")


@dataclass
class TextSide:
    """One text's tokens as matching sees them."""

    token_ids: np.ndarray  # (n,) int64
    vectors: np.ndarray  # (n, d) float32, unit rows when normalised
    weights: np.ndarray  # (n,) float32 token weights of Eq. 2


def text_sides(
    flat: FlatTokens, matrix: np.ndarray, include_special: bool, normalise: bool, vocab_weights: np.ndarray | None
) -> list[TextSide]:
    """Split flat token vectors into per-text sides: special-token switch, normalisation, weights."""
    keep = select_tokens(flat, include_special, None)  # a text with no other token keeps its specials
    if normalise:
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms > 0, norms, 1.0)
    matrix = matrix.astype(np.float32, copy=False)
    weights = np.ones(len(flat.token_ids), np.float32) if vocab_weights is None else vocab_weights[flat.token_ids].astype(np.float32)
    sides = []
    for index in range(flat.num_texts):
        rows = np.arange(flat.offsets[index], flat.offsets[index + 1])
        rows = rows[keep[rows]]
        sides.append(TextSide(flat.token_ids[rows], matrix[rows], weights[rows]))
    return sides


# --- learned weights -------------------------------------------------------------------------------

def learned_weights_path(model: LoadedModel) -> Path:
    """The packaged weights for a named model, else the cache location the training command writes."""
    from embedlab.runtime import cache_dir

    packaged = RESOURCES / f"{model.name}_token_weights.safetensors"
    if packaged.exists():
        return packaged
    return cache_dir("token_weights") / f"{model.fingerprint}.safetensors"


def load_learned_weights(model: LoadedModel) -> np.ndarray:
    from embedlab.training.token_weights import read_weights

    path = learned_weights_path(model)
    if not path.exists():
        raise FileNotFoundError(
            f"no learned token weights for model {model.name!r} (looked for {path}); train them with "
            f"`embedlab train-token-weights {model.name}` or use weights=idf / weights=none"
        )
    weights, metadata = read_weights(path, len(model.tokenizer))
    if metadata.get("model_fingerprint") not in (None, model.fingerprint):
        raise ValueError(f"{path} was learned for another model (fingerprint {metadata.get('model_fingerprint')}, not {model.fingerprint})")
    return weights


# --- explanations ------------------------------------------------------------------------------------

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

    def table(self) -> str:
        """Per-token matching scores and weights, one line per token, as the CLI prints them."""
        lines = [f"similarity {self.similarity:.4f}"]
        for side, tokens, scores, weights, first, other in (
            ("A", self.tokens_a, self.scores_a, self.weights_a, self.row_first, self.tokens_b),
            ("B", self.tokens_b, self.scores_b, self.weights_b, self.column_first, self.tokens_a),
        ):
            lines.append(f"{side}: token  score  weight  best match")
            for token, value, weight, match in zip(tokens, scores, weights, first):
                lines.append(f"   {token:<16} {value:7.4f} {weight:7.4f}  {other[match]}")
        return "\n".join(lines)


def _argsort_top_two(matrix: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-matrix, axis=axis, kind="stable")
    first = np.take(order, 0, axis=axis)
    second = np.take(order, 1, axis=axis) if matrix.shape[axis] > 1 else first.copy()
    return first, second


def plot_explanation(explanation: MatchExplanation, out: Path | str, title: str | None = None):
    """Heatmap of the token similarity matrix with each row's first (solid) and second (dashed) maximum.

    Returns the matplotlib Figure (closed after saving); the marks are Rectangle patches whose
    ``get_label()`` is ``"first"`` or ``"second"``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
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
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return figure


# --- the method --------------------------------------------------------------------------------------

class MatchingMethod(EmbeddingMethod):
    """``match:MODEL,...``: token-level matching similarity of text pairs (pairwise, no vectors)."""

    pairwise = True

    def __init__(self, spec: MethodSpec) -> None:
        super().__init__(spec)
        self.score = spec.get("score")
        self.weight_kind = spec.get("weights")
        self.mode = spec.get("mode")
        if self.mode == "bertscore" and (self.score != MATCH_OPTIONS["score"].default or self.weight_kind != MATCH_OPTIONS["weights"].default):
            raise SpecError(f"{spec}: mode=bertscore fixes score=max and weights=idf; leave score and weights unset")
        if self.mode == "bertscore":
            self.weight_kind = "idf"
        # the encoder part is a pooled-family method: its cached token states feed the matching
        self.encoder = PooledMethod(build_spec(POOLED_FAMILY.schema, spec.model, {"layers": spec.get("layers")}))
        self.include_special = spec.get("special") == "include"
        self.normalise = spec.get("normalise-tokens") == "yes"
        self._vocab_weights: np.ndarray | None = None

    @property
    def model(self) -> LoadedModel:
        return load_model(self.parsed.model)

    @property
    def fingerprint(self) -> str:
        base = self.model.fingerprint
        if self.weight_kind != "learned":
            return base
        digest = hashlib.sha256(np.ascontiguousarray(self.vocabulary_weights())).hexdigest()[:12]
        return f"{base}+w{digest}"

    def encode(self, *args: object, **kwargs: object) -> np.ndarray:
        raise TypeError(f"{self.spec} is a pairwise method (token-level matching): it scores text pairs and gives no vectors; use similarity(pairs)")

    def vocabulary_weights(self) -> np.ndarray | None:
        """One weight per vocabulary id (None for weights=none)."""
        if self.weight_kind == "none":
            return None
        if self._vocab_weights is None:
            if self.weight_kind == "idf":
                from embedlab.pooling.weights import reference_token_statistics

                self._vocab_weights = reference_token_statistics(self.model.tokenizer)[0].astype(np.float32)
            else:
                self._vocab_weights = load_learned_weights(self.model)
        return self._vocab_weights

    # -- token vectors of many texts ------------------------------------------------------------------
    def sides(self, flat: FlatTokens, matrix: np.ndarray) -> list[TextSide]:
        """Each text's matching tokens (ids, vectors, weights) from flat token vectors."""
        return text_sides(flat, matrix, self.include_special, self.normalise, self.vocabulary_weights())

    def prepare(self, texts: list[str], batch_size: int = 32, show_progress_bar: bool | None = None) -> list[TextSide]:
        """Every text's matching tokens, from one (cached) token-state pass over all texts."""
        flat, matrix = self.encoder.token_vectors(texts, batch_size, show_progress_bar)
        return self.sides(flat, matrix)

    def score_sides(self, sides: Sequence[TextSide], pair_indices: Sequence[tuple[int, int]]) -> np.ndarray:
        """Scores of pairs given as indices into ``sides``."""
        scores = np.empty(len(pair_indices), dtype=np.float32)
        for position, (left, right) in enumerate(pair_indices):
            a, b = sides[left], sides[right]
            scores[position] = pair_score(a.vectors @ b.vectors.T, a.weights, b.weights, self.score, self.mode)
        return scores

    def similarity(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, show_progress_bar: bool | None = None) -> np.ndarray:
        """Matching similarity of each pair (float32, shape (n,)); all unique texts go through one pass."""
        pairs = list(pairs)
        for position, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"pair at index {position} is not a (text, text) pair")
            check_texts(list(pair))
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        unique = list(dict.fromkeys(text for pair in pairs for text in pair))
        index = {text: row for row, text in enumerate(unique)}
        sides = self.prepare(unique, batch_size, show_progress_bar)
        return self.score_sides(sides, [(index[a], index[b]) for a, b in pairs])

    def explain(self, text_a: str, text_b: str) -> MatchExplanation:
        """The numbers behind one pair's score, for printing and plotting (Fig. 2)."""
        check_texts([text_a, text_b])
        a, b = self.prepare([text_a, text_b])
        matrix = (a.vectors @ b.vectors.T).astype(np.float32)
        scores_a, scores_b = token_scores(matrix, "max" if self.mode == "bertscore" else self.score)
        row_first, row_second = _argsort_top_two(matrix, 1)
        column_first, column_second = _argsort_top_two(matrix, 0)
        tokenizer = self.model.tokenizer
        return MatchExplanation(
            tokens_a=tokenizer.convert_ids_to_tokens(a.token_ids.tolist()),
            tokens_b=tokenizer.convert_ids_to_tokens(b.token_ids.tolist()),
            matrix=matrix,
            row_first=row_first,
            row_second=row_second,
            column_first=column_first,
            column_second=column_second,
            scores_a=scores_a.astype(np.float32),
            scores_b=scores_b.astype(np.float32),
            weights_a=a.weights,
            weights_b=b.weights,
            similarity=pair_score(matrix, a.weights, b.weights, self.score, self.mode),
        )


MATCH_FAMILY = Family(
    "match",
    MATCH_OPTIONS,
    MatchingMethod,
    "token-level matching similarity of text pairs (pairwise; Eq. 1–2 of the token-matching paper)",
)
