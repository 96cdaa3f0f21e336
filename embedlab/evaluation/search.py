"""Exact top-k search over a corpus that arrives block by block, in bounded memory.

Why blocks with a running top-k: a corpus may not fit in memory twice (1M × 384 float32 is 1.5 GB), so the
scores of one block of queries against one block of documents are computed, reduced to their best ``k``
and merged into each query's running best ``k``; nothing of size queries × corpus is ever held. Memory
beyond the vectors is one score block (``QUERY_BLOCK`` × the document block) plus the running results.

Ties are broken as trec_eval breaks them (score descending, then document id descending,
:mod:`embedlab.evaluation.ranking`): each document carries its id's rank in ascending string order
(``priority``), and a tie at a cut-off keeps the documents with the higher priority. Once every query holds
k documents, a block only contributes the scores at or above each query's current k-th best, found by one
comparison (faiss's heap rejects the rest the same way); until then a block's best k come from
``torch.topk``, and only rows where equal scores straddle the cut-off are re-selected exactly.

Binary vectors (packed bits, sentence-transformers' ``ubinary``/``binary``) are scored by Hamming distance
as ``bits − 2·hamming`` (the dot product of their ±1 vectors), optionally rescored with the float query
against the ±1 documents of the first candidates (sentence-transformers' "rescore" recipe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import torch

QUERY_BLOCK = 1024  # queries scored at once: with 16,384-document blocks, 64 MB of float32 scores
DOC_BLOCK = 16384
FIRST_CHUNK = 2048  # the first documents searched: their top-k sets the threshold the rest are compared with
_HAMMING_BYTES = 64 << 20  # the packed-bit XOR of a query block against a document block stays within this

BlockScorer = Callable[[np.ndarray, np.ndarray], np.ndarray]


def id_priorities(doc_ids: Sequence[str]) -> np.ndarray:
    """Each document's rank in ascending string order of its id (a larger id wins a tie, as in trec_eval)."""
    order = np.argsort(np.asarray(doc_ids, dtype=object).astype(str), kind="stable")
    priority = np.empty(len(doc_ids), dtype=np.int64)
    priority[order] = np.arange(len(doc_ids))
    return priority


def inner_products(queries: np.ndarray, documents: np.ndarray) -> np.ndarray:
    """Float32 scores of a block: the inner product (cosines for unit rows)."""
    return np.matmul(queries, np.ascontiguousarray(documents, dtype=np.float32).T)


def hamming_scores(queries: np.ndarray, documents: np.ndarray) -> np.ndarray:
    """``bits − 2·hamming`` of packed-bit rows (uint8 or int8 bytes): the dot product of their ±1 vectors."""
    queries, documents = queries.view(np.uint8), np.ascontiguousarray(documents).view(np.uint8)
    bits = 8 * queries.shape[1]
    step = max(1, _HAMMING_BYTES // max(1, documents.shape[0] * queries.shape[1]))
    out = np.empty((queries.shape[0], documents.shape[0]), dtype=np.float32)
    for start in range(0, queries.shape[0], step):
        xor = np.bitwise_xor(queries[start:start + step, None, :], documents[None, :, :])
        out[start:start + step] = bits - 2 * np.bitwise_count(xor).sum(axis=2, dtype=np.int32)
    return out


class RunningTopK:
    """The best ``k`` documents of every query so far, updated one document block at a time."""

    def __init__(self, queries: int, k: int, priority: np.ndarray, exclude: np.ndarray | None = None) -> None:
        self.k, self.priority = k, priority
        self.exclude = exclude if exclude is not None else np.full(queries, -1, dtype=np.int64)
        self.indices = np.full((queries, k), -1, dtype=np.int64)
        self.scores = np.full((queries, k), -np.inf, dtype=np.float32)

    def update(self, rows: slice, start: int, scores: np.ndarray) -> None:
        """Merge ``scores`` (the query rows ``rows`` against documents ``start …``) into the running best."""
        _mask_excluded(scores, self.exclude[rows], start)
        candidates = self._above_threshold(rows, start, scores)
        block_indices, block_scores = candidates if candidates is not None else self._block_top(scores, start)
        indices = np.concatenate([self.indices[rows], block_indices], axis=1)
        merged = np.concatenate([self.scores[rows], block_scores], axis=1)
        order = self._order(indices, merged)[:, :self.k]
        self.indices[rows] = np.take_along_axis(indices, order, axis=1)
        self.scores[rows] = np.take_along_axis(merged, order, axis=1)

    def _order(self, indices: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """Per row: positions by score descending, then id priority descending (an empty slot, -1, last).

        One integer key per entry (the score's bits made order-preserving, then the priority) sorted once,
        instead of a two-key lexsort: equal keys cannot occur, since a document appears once per row."""
        bits = np.ascontiguousarray(scores, dtype=np.float32).view(np.int32)
        ordered = (bits ^ ((bits >> 31) & 0x7FFFFFFF)).astype(np.int64)  # float order as signed integers
        key = (ordered << 32) + np.where(indices >= 0, self.priority[np.maximum(indices, 0)], 0)
        key[indices < 0] = np.iinfo(np.int64).min
        return np.argsort(key, axis=1)[:, ::-1]

    def _above_threshold(self, rows: slice, start: int, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The block's documents that can still enter each row's best ``k``: those scoring at least the row's
        current k-th best (ties included, the merge orders them). Once every row holds ``k`` documents these
        are few (about k·block/seen for a corpus in no particular order), so a comparison and a scan replace a
        top-k of the whole block; None (use the top-k) while a row is not full or too many qualify."""
        threshold = self.scores[rows, -1]
        if np.isneginf(threshold).any():
            return None
        flat = np.flatnonzero(scores >= threshold[:, None])
        if len(flat) > 4 * self.k * len(threshold):  # a corpus in some order (near-duplicates together): top-k is cheaper
            return None
        row, column = np.divmod(flat, scores.shape[1])
        counts = np.bincount(row, minlength=len(threshold))
        width = max(1, int(counts.max(initial=0)))
        slot = np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)
        indices = np.full((len(threshold), width), -1, dtype=np.int64)
        values = np.full((len(threshold), width), -np.inf, dtype=np.float32)
        indices[row, slot], values[row, slot] = column + start, scores[row, column]
        return indices, values

    def _block_top(self, scores: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        take = min(self.k, scores.shape[1])
        values, positions = torch.topk(torch.from_numpy(scores), take, dim=1, sorted=False)
        values, positions = values.numpy(), positions.numpy().astype(np.int64)
        threshold = values.min(axis=1, keepdims=True)
        straddling = np.flatnonzero((scores == threshold).sum(axis=1) > (values == threshold).sum(axis=1))
        for row in straddling:  # equal scores cross the cut-off: keep the ones trec_eval keeps
            candidates = np.flatnonzero(scores[row] >= threshold[row, 0])
            order = np.lexsort((-self.priority[start + candidates], -scores[row, candidates].astype(np.float64)))[:take]
            positions[row], values[row] = candidates[order], scores[row, candidates[order]]
        indices = np.where(np.isneginf(values), -1, positions + start)
        return indices, values

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, scores)``, each row best first; a row with fewer than ``k`` documents ends in -1 / -inf."""
        self.indices[np.isneginf(self.scores)] = -1
        return self.indices, self.scores


def _mask_excluded(scores: np.ndarray, exclude: np.ndarray, start: int) -> None:
    rows = np.flatnonzero((exclude >= start) & (exclude < start + scores.shape[1]))
    scores[rows, exclude[rows] - start] = -np.inf


def top_k(queries: np.ndarray, document_blocks: Iterable[np.ndarray], k: int, priority: np.ndarray, *,
          exclude: np.ndarray | None = None, scorer: BlockScorer = inner_products) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best documents of every query by ``scorer`` (default: inner product), in trec_eval's order.

    ``document_blocks`` yields the corpus in order, a block at a time; ``exclude[q]`` is a document index that
    query ``q`` never retrieves (its own document), or -1."""
    running = RunningTopK(len(queries), k, priority, exclude)
    start = 0
    for chunk in _growing_chunks(document_blocks, max(FIRST_CHUNK, k)):
        for first in range(0, len(queries), QUERY_BLOCK):
            rows = slice(first, min(first + QUERY_BLOCK, len(queries)))
            running.update(rows, start, scorer(queries[rows], chunk))
        start += len(chunk)
    return running.result()


def _growing_chunks(document_blocks: Iterable[np.ndarray], first: int) -> Iterable[np.ndarray]:
    """The corpus in chunks as large as everything before them (``first``, ``first``, 2·``first`` … up to
    ``DOC_BLOCK``): each chunk then holds about k candidates per query above the running threshold, so one
    small top-k starts the search and every later chunk is a comparison and a small merge."""
    seen = 0
    for block in document_blocks:
        offset = 0
        while offset < len(block):
            size = min(len(block) - offset, DOC_BLOCK, max(first, seen))
            yield block[offset:offset + size]
            offset, seen = offset + size, seen + size


def unpacked_signs(packed: np.ndarray) -> np.ndarray:
    """Packed-bit rows as float32 ±1 vectors (bit 1 → +1)."""
    return np.unpackbits(packed.view(np.uint8), axis=1).astype(np.float32) * 2 - 1


def rescore(query_vectors: np.ndarray, packed_documents: Callable[[np.ndarray], np.ndarray], indices: np.ndarray,
            k: int, priority: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hamming candidates re-ranked by the float query against the ±1 documents; the best ``k`` of each row.

    ``packed_documents(rows)`` returns the packed bits of the given document rows."""
    running = RunningTopK(len(query_vectors), k, priority)
    for row, candidates in enumerate(indices):
        kept = candidates[candidates >= 0]
        if len(kept):
            scores = unpacked_signs(packed_documents(kept)) @ query_vectors[row].astype(np.float32)
            order = np.lexsort((-priority[kept], -scores.astype(np.float64)))[:k]
            running.indices[row, :len(order)], running.scores[row, :len(order)] = kept[order], scores[order]
    return running.result()


def faiss_top_k(queries: np.ndarray, documents: np.ndarray, k: int, *, kind: str = "hnsw") -> tuple[np.ndarray, np.ndarray]:
    """Approximate inner-product search with faiss (``hnsw``: HNSW graph, M = 32) or its exact ``flat`` index,
    for comparison; ties are not ordered as trec_eval orders them. HNSW draws its levels from faiss's own
    fixed seed, so a rerun builds the same graph."""
    try:
        import faiss
    except ImportError as error:
        from embedlab.runtime.extras import MissingExtraError

        raise MissingExtraError("search", "approximate search (faiss)") from error
    documents = np.ascontiguousarray(documents, dtype=np.float32)
    if kind == "flat":
        index = faiss.IndexFlatIP(documents.shape[1])
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(documents.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = max(64, 2 * k)
    else:
        raise ValueError(f"unknown faiss index kind {kind!r}; expected hnsw or flat")
    index.add(documents)
    scores, indices = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
    return indices.astype(np.int64), scores
