"""One long text pooled in bounded memory: its chunks run through the model in the batches the whole-text
path forms (longest first) and are folded into the text's vector as each batch completes, so that a
2,000,000-character text never holds its token states (768 MB a layer at d = 384) at once.

Every aggregation is a fixed weighted sum of the text's token vectors except ``max``: the weights
(selection, idf, the per-text fallbacks, ``cls``/``last``/``mask`` positions) depend on the token ids,
chunk boundaries and template marks only, all known before the model runs. So the weights of the whole
text are computed first, exactly as :func:`~embedlab.pooling.aggregation.aggregate` would, and each chunk
adds its share; ``max`` keeps a running maximum. The chunks and batches are the ones the whole-text path
uses for the text alone, so the result equals it up to float summation order (tested to 1e-6).

A long text's token states are neither read from nor written to the token-state cache (one such text
would take the whole budget). Only a source that says it ``streams`` (contextual states, alone or mixed)
streams: each chunk's layer-averaged states go through its ``mix``. The functions take the stages
themselves (source, selection, aggregation), not the pipeline that holds them, so that the pipeline
imports this module and not the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from embedlab.pooling.aggregation import FlatTokens, aggregation_weights, select_tokens, token_weights
from embedlab.pooling.sources import TokenSource, mean_of_layers, special_token_ids
from embedlab.tokens.forward import run_sequences, text_sequences

# A text longer than this is pooled by streaming (the pipeline's stream chunk: a book-length text).
LONG_TEXT_CHARACTERS = 1 << 18


class Selection(Protocol):
    """Stage 2 as this module reads it (:class:`~embedlab.pooling.pipeline.TokenSelection`)."""

    include_special: bool
    excluded_vocab: np.ndarray | None


def long_positions(source: TokenSource, texts: list[str]) -> list[int]:
    """Indexes of the texts to stream (none unless the source streams)."""
    if not source.streams:
        return []
    return [index for index, text in enumerate(texts) if len(text) > LONG_TEXT_CHARACTERS]


def pool_around_long_texts(source: TokenSource, selection: Selection, aggregation: str, texts: list[str], long: list[int],
                           idf: np.ndarray | None, pool_rest: Callable[[list[str]], np.ndarray], batch_size: int) -> np.ndarray:
    """(n, d) pooled vectors: the long texts streamed one by one, the others by ``pool_rest`` together."""
    streamed = set(long)
    rest = [index for index in range(len(texts)) if index not in streamed]
    pooled: np.ndarray | None = None
    if rest:
        part = pool_rest([texts[index] for index in rest])
        pooled = np.empty((len(texts), part.shape[1]), dtype=part.dtype)
        pooled[rest] = part
    for index in long:
        vector = pool_long_text(source, selection, aggregation, texts[index], idf, batch_size)
        if pooled is None:
            pooled = np.empty((len(texts), vector.shape[0]), dtype=np.float32)
        pooled[index] = vector
    return pooled


def pool_long_text(source: TokenSource, selection: Selection, aggregation: str, text: str, idf: np.ndarray | None,
                   batch_size: int) -> np.ndarray:
    """(d,) float32: stages 1–3 for one text, one batch of its chunks held at a time."""
    contextual = source.contextual
    model = contextual.model
    token_ids_of_text = list(model.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    sequences = text_sequences(model, 0, text, token_ids_of_text, contextual.template, contextual.max_tokens)
    lengths = np.array([len(sequence.input_ids) for sequence in sequences], dtype=np.int64)
    token_ids = np.concatenate([np.asarray(sequence.input_ids, dtype=np.int64) for sequence in sequences])
    chunk_ids = np.repeat(np.arange(len(sequences), dtype=np.int32), lengths)
    template_mask = np.zeros(len(token_ids), dtype=bool)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for sequence, start in zip(sequences, starts):
        template_mask[start + np.asarray(sequence.template_positions, dtype=np.int64)] = True
    flat = FlatTokens.laid_flat([token_ids], chunk_ids, template_mask, special_token_ids(model))
    keep = select_tokens(flat, selection.include_special, selection.excluded_vocab)
    maximum = aggregation == "max"
    weights = None if maximum else aggregation_weights(flat, keep, token_weights(flat, keep, idf), aggregation)
    layers = contextual.layers
    total: np.ndarray | None = None
    for sequence, states in run_sequences(model, sequences, batch_size, False, layers):
        start = int(starts[sequence.chunk_index])
        stop = start + len(sequence.input_ids)
        matrix = source.mix(mean_of_layers(states), token_ids[start:stop])  # states: (layers, length, d)
        if maximum:
            part = np.where(keep[start:stop, None], matrix, -np.inf).max(axis=0)
            total = part if total is None else np.maximum(total, part)
        else:
            part = weights[start:stop].astype(np.float64) @ matrix.astype(np.float64)
            total = part if total is None else total + part
    return np.asarray(total, dtype=np.float32)

