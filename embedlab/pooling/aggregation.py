"""Token aggregation (pooling paper §3.1, §3.3, §4.2): from token states to one vector per text.

All texts' tokens are laid out flat (``FlatTokens``) so that layer averaging, weighting, filtering and
aggregation are a few vectorised numpy operations whatever the number of texts: many pooling
configurations over the same cached states cost little next to one model run.

Aggregations: ``mean`` (weighted, mask-aware), ``cls`` (each chunk's first token, averaged over chunks),
``max`` (element-wise over the kept tokens), ``mask`` (mean of the [MASK] tokens a template inserted),
``mean-no-mask`` (mean of all tokens except those [MASK] tokens).

Fallbacks, so that no text is ever silently empty: when the special-token switch or the filters leave
a text with no token, all its tokens are used; when its weights sum to zero (e.g. every token has
idf 0), its kept tokens are weighted uniformly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

from embedlab.tokens.states import TokenStates

AGGREGATIONS = ("mean", "cls", "max", "mask", "mean-no-mask")


@dataclass
class FlatTokens:
    """The tokens of many texts, concatenated; text ``i`` owns rows ``offsets[i]:offsets[i+1]``."""

    token_ids: np.ndarray  # (T,) int64
    offsets: np.ndarray  # (n + 1,) int64
    chunk_start: np.ndarray  # (T,) bool: the first token of a chunk ([CLS] for BERT)
    template_mask: np.ndarray  # (T,) bool
    special: np.ndarray  # (T,) bool
    special_ids: np.ndarray  # the ids ``special`` marks

    @classmethod
    def from_states(cls, states: Sequence[TokenStates], special_ids: np.ndarray) -> FlatTokens:
        lengths = np.array([item.num_tokens for item in states], dtype=np.int64)
        empty = np.flatnonzero(lengths == 0)
        if empty.size:
            raise ValueError(f"text at index {int(empty[0])} has no tokens (empty text and a model without special tokens)")
        token_ids = np.concatenate([item.token_ids for item in states])
        chunk_ids = np.concatenate([item.chunk_ids for item in states])
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        chunk_start = np.ones(len(token_ids), dtype=bool)
        chunk_start[1:] = chunk_ids[1:] != chunk_ids[:-1]
        chunk_start[offsets[:-1]] = True
        return cls(
            token_ids=token_ids,
            offsets=offsets,
            chunk_start=chunk_start,
            template_mask=np.concatenate([item.template_mask for item in states]),
            special=np.isin(token_ids, special_ids),
            special_ids=np.asarray(special_ids),
        )

    @property
    def num_texts(self) -> int:
        return len(self.offsets) - 1

    def text_index(self) -> np.ndarray:
        return np.repeat(np.arange(self.num_texts), np.diff(self.offsets))

    def per_text_sum(self, values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values, self.offsets[:-1], axis=0)

    def weighted_sum(self, matrix: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """(n, d): Σ_t weights[t]·matrix[t] over each text's rows.

        One sparse (n × T) by dense (T × d) product: an order of magnitude faster than scaling the
        (T, d) matrix and ``reduceat`` over its rows, and it allocates nothing of size T × d.
        """
        selector = csr_matrix((weights, np.arange(len(weights)), self.offsets), shape=(self.num_texts, len(weights)))
        return np.asarray(selector @ matrix)


def resolve_layers(layers: str, num_layers: int) -> tuple[int, ...]:
    """``"1+last"`` -> (1, L); layers run from -1 (static token embeddings) to L."""
    resolved = []
    for item in layers.split("+"):
        layer = num_layers if item == "last" else int(item)
        if not -1 <= layer <= num_layers:
            raise ValueError(f"layer {item} is outside -1..{num_layers} for this model")
        resolved.append(layer)
    return tuple(resolved)


def layer_matrix(states: Sequence[TokenStates], layers: Sequence[int]) -> np.ndarray:
    """(T, d): each token's vector averaged over ``layers`` (e.g. first+last, Eq. 3)."""
    total = np.concatenate([item.layer(layers[0]) for item in states])
    for layer in layers[1:]:
        total = total + np.concatenate([item.layer(layer) for item in states])
    return total / np.float32(len(layers)) if len(layers) > 1 else total


class LayoutMemo:
    """The flat layout and layer matrices of the most recent list of token states.

    Many pooling configurations over the same texts receive the same ``TokenStates`` objects from the
    store; laying them flat and concatenating their layers is then done once, not once per
    configuration. The memo holds the states it was built from, so their ids cannot be reused while
    it lives; matrices are kept up to ``matrix_limit_bytes``. Results are read-only arrays.
    """

    def __init__(self, matrix_limit_bytes: int = 1 << 30) -> None:
        self.matrix_limit_bytes = matrix_limit_bytes
        self._states: tuple[TokenStates, ...] = ()
        self._identity: tuple[int, ...] = ()
        self._flat: FlatTokens | None = None
        self._matrices: dict[tuple[int, ...], np.ndarray] = {}

    def _select(self, states: Sequence[TokenStates]) -> None:
        identity = tuple(map(id, states))
        if identity != self._identity:
            self._states, self._identity, self._flat, self._matrices = tuple(states), identity, None, {}

    def flat(self, states: Sequence[TokenStates], special_ids: np.ndarray) -> FlatTokens:
        self._select(states)
        if self._flat is None or not np.array_equal(self._flat.special_ids, special_ids):
            self._flat = FlatTokens.from_states(states, special_ids)
        return self._flat

    def matrix(self, states: Sequence[TokenStates], layers: Sequence[int]) -> np.ndarray:
        self._select(states)
        key = tuple(layers)
        if key not in self._matrices:
            matrix = layer_matrix(states, key)
            matrix.flags.writeable = False
            if sum(m.nbytes for m in self._matrices.values()) + matrix.nbytes > self.matrix_limit_bytes:
                self._matrices.clear()
            self._matrices[key] = matrix
        return self._matrices[key]

    def clear(self) -> None:
        self._select(())


def select_tokens(flat: FlatTokens, include_special: bool, excluded_vocab: np.ndarray | None) -> np.ndarray:
    """(T,) bool: tokens that take part, with the per-text fallback to all tokens."""
    keep = np.ones(len(flat.token_ids), dtype=bool)
    if not include_special:
        keep &= ~flat.special
    if excluded_vocab is not None:
        keep &= ~excluded_vocab[flat.token_ids]
    empty_texts = flat.per_text_sum(keep.astype(np.int64)) == 0
    if empty_texts.any():
        keep |= empty_texts[flat.text_index()]
    return keep


def token_weights(flat: FlatTokens, keep: np.ndarray, idf: np.ndarray | None) -> np.ndarray:
    """(T,) float32 weights, zero outside ``keep``, summing to 1 within every text."""
    raw = keep.astype(np.float64) if idf is None else np.where(keep, idf[flat.token_ids], 0.0)
    sums = flat.per_text_sum(raw)
    zero = sums <= 0
    if zero.any():  # e.g. every kept token has idf 0: weight the kept tokens uniformly
        uniform = keep.astype(np.float64)
        raw = np.where(zero[flat.text_index()], uniform, raw)
        sums = flat.per_text_sum(raw)
    return (raw / sums[flat.text_index()]).astype(np.float32)


def aggregate(matrix: np.ndarray, flat: FlatTokens, weights: np.ndarray, keep: np.ndarray, aggregation: str) -> np.ndarray:
    """(n, d) text vectors from (T, d) token vectors."""
    if aggregation == "mean":
        return flat.weighted_sum(matrix, weights)
    if aggregation == "mean-no-mask":
        return aggregate(matrix, flat, _renormalise(flat, np.where(flat.template_mask, 0.0, weights)), keep, "mean")
    if aggregation == "max":
        masked = np.where(keep[:, None], matrix, -np.inf)
        return np.maximum.reduceat(masked, flat.offsets[:-1], axis=0)
    if aggregation == "cls":
        return aggregate(matrix, flat, _renormalise(flat, flat.chunk_start.astype(np.float64)), keep, "mean")
    if aggregation == "mask":
        counts = flat.per_text_sum(flat.template_mask.astype(np.int64))
        missing = np.flatnonzero(counts == 0)
        if missing.size:
            raise ValueError(f"pool=mask needs a template with [MASK] tokens; text at index {int(missing[0])} has none")
        return aggregate(matrix, flat, _renormalise(flat, flat.template_mask.astype(np.float64)), keep, "mean")
    raise ValueError(f"unknown aggregation {aggregation!r}; choose one of: {', '.join(AGGREGATIONS)}")


def _renormalise(flat: FlatTokens, raw: np.ndarray) -> np.ndarray:
    sums = flat.per_text_sum(raw)
    if (sums <= 0).any():
        index = int(np.flatnonzero(sums <= 0)[0])
        raise ValueError(f"text at index {index} has no token left to aggregate")
    return (raw / sums[flat.text_index()]).astype(np.float32)
