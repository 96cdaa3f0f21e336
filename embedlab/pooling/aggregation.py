"""Token selection, weights and aggregation (pooling paper §3.1, §3.3, §4.2): token vectors → one vector per text.

All texts' tokens are laid out flat (``FlatTokens``, what a token source in :mod:`embedlab.pooling.sources`
gives with its (T, d) token vectors) so that weighting, filtering and aggregation are a few vectorised
numpy operations whatever the number of texts: many pooling configurations over the same cached states
cost little next to one model run.

Aggregations: ``mean`` (weighted, mask-aware), ``cls`` (each chunk's first token, averaged over chunks),
``max`` (element-wise over the kept tokens), ``mask`` (mean of the tokens a template marks: its [MASK]
tokens, or echo's second copy of the text), ``mean-no-mask`` (mean of all tokens except those),
``last`` (each chunk's last kept token, averaged over chunks: the standard for causal models, whose last
token alone has seen the whole input; MetaEOL's prompts are chunks of one text, so this averages them).

Fallbacks, so that no text is ever silently empty: when the special-token switch or the filters leave
a text with no token, all its tokens are used; when its weights sum to zero (e.g. every token has
idf 0), its kept tokens are weighted uniformly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

from embedlab.errors import InputError
from embedlab.tokens.entry import TokenStates

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
    def from_token_ids(cls, sequences: Sequence[np.ndarray], special_ids: np.ndarray) -> FlatTokens:
        """Texts known only by their token ids (static token sources): one chunk each, no template."""
        return cls.laid_flat(sequences, None, None, special_ids)

    @classmethod
    def from_states(cls, states: Sequence[TokenStates], special_ids: np.ndarray) -> FlatTokens:
        """Texts run through the model: chunk boundaries and template [MASK] positions come with the states."""
        return cls.laid_flat(
            [item.token_ids for item in states],
            np.concatenate([item.chunk_ids for item in states]) if states else None,
            np.concatenate([item.template_mask for item in states]) if states else None,
            special_ids,
        )

    @classmethod
    def laid_flat(
        cls, sequences: Sequence[np.ndarray], chunk_ids: np.ndarray | None, template_mask: np.ndarray | None, special_ids: np.ndarray
    ) -> FlatTokens:
        """Texts laid end to end: ``sequences`` (token ids per text), each token's chunk (``chunk_ids``, None:
        one chunk per text) and template [MASK] positions (None: no template)."""
        lengths = np.array([len(ids) for ids in sequences], dtype=np.int64)
        empty = np.flatnonzero(lengths == 0)
        if empty.size:
            raise InputError(f"text at index {int(empty[0])} has no tokens (empty text and a model without special tokens)")
        token_ids = np.concatenate(sequences).astype(np.int64, copy=False) if sequences else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        chunk_start = np.zeros(len(token_ids), dtype=bool)
        if chunk_ids is not None:
            chunk_start[1:] = chunk_ids[1:] != chunk_ids[:-1]
        chunk_start[offsets[:-1]] = True
        return cls(
            token_ids=token_ids,
            offsets=offsets,
            chunk_start=chunk_start,
            template_mask=np.zeros(len(token_ids), dtype=bool) if template_mask is None else template_mask,
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
    """(n, d) text vectors from (T, d) token vectors; ``weights``: the mean's per-token weights."""
    if aggregation == "max":
        masked = np.where(keep[:, None], matrix, -np.inf)
        return np.maximum.reduceat(masked, flat.offsets[:-1], axis=0)
    return flat.weighted_sum(matrix, aggregation_weights(flat, keep, weights, aggregation))


def aggregation_weights(flat: FlatTokens, keep: np.ndarray, weights: np.ndarray, aggregation: str) -> np.ndarray:
    """(T,) float32 weights whose per-text weighted sum is ``aggregation`` (every one but max), given the
    mean's per-token ``weights``: the one rule for the whole-text path and for long texts streamed in pieces."""
    if aggregation not in AGGREGATIONS or AGGREGATIONS[aggregation] is None:
        raise InputError(f"unknown aggregation {aggregation!r}; choose one of: {', '.join(AGGREGATIONS)}")
    return AGGREGATIONS[aggregation](flat, keep, weights)


def _mask_weights(flat: FlatTokens, keep: np.ndarray, weights: np.ndarray) -> np.ndarray:
    counts = flat.per_text_sum(flat.template_mask.astype(np.int64))
    missing = np.flatnonzero(counts == 0)
    if missing.size:
        raise InputError(f"pool=mask needs a template with [MASK] tokens; text at index {int(missing[0])} has none")
    return _renormalise(flat, flat.template_mask.astype(np.float64))


def last_of_chunks(flat: FlatTokens, keep: np.ndarray) -> np.ndarray:
    """(T,) float64: 1 at each chunk's last kept token, 0 elsewhere (a chunk with no kept token has none)."""
    if not len(keep):
        return np.zeros(0)
    starts = np.flatnonzero(flat.chunk_start)
    positions = np.where(keep, np.arange(len(keep)), -1)
    last = np.maximum.reduceat(positions, starts)
    marked = np.zeros(len(keep))
    marked[last[last >= 0]] = 1.0
    return marked


def _renormalise(flat: FlatTokens, raw: np.ndarray) -> np.ndarray:
    sums = flat.per_text_sum(raw)
    if (sums <= 0).any():
        index = int(np.flatnonzero(sums <= 0)[0])
        raise InputError(f"text at index {index} has no token left to aggregate")
    return (raw / sums[flat.text_index()]).astype(np.float32)


# Every aggregation, registered once (the pool= option's choices, in this order): the rule giving each
# token its weight in the text's weighted sum, or None for max (a running maximum, no weighted sum).
AGGREGATIONS: dict[str, Callable[[FlatTokens, np.ndarray, np.ndarray], np.ndarray] | None] = {
    "mean": lambda flat, keep, weights: weights,
    "cls": lambda flat, keep, weights: _renormalise(flat, flat.chunk_start.astype(np.float64)),
    "max": None,
    "mask": _mask_weights,
    "mean-no-mask": lambda flat, keep, weights: _renormalise(flat, np.where(flat.template_mask, 0.0, weights)),
    "last": lambda flat, keep, weights: _renormalise(flat, last_of_chunks(flat, keep)),
}
