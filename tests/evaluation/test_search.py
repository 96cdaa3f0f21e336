"""Blocked exact search equals a brute-force ranking in trec_eval's order; Hamming scores; faiss's exact index."""

from __future__ import annotations

import numpy as np
import pytest

from embedlab.evaluation import search
from embedlab.evaluation.ranking import trec_order


def brute_force(scores: np.ndarray, ids: list[str], k: int, exclude: np.ndarray) -> list[list[int]]:
    ranked = []
    for row, own in zip(scores, exclude):
        candidates = [j for j in range(len(ids)) if j != own]
        order = trec_order([ids[j] for j in candidates], [row[j] for j in candidates])[:k]
        ranked.append([candidates[o] for o in order])
    return ranked


@pytest.fixture
def tied_corpus(monkeypatch):
    monkeypatch.setattr(search, "QUERY_BLOCK", 16)  # several query blocks, as a large query set has
    rng = np.random.default_rng(3)
    documents = np.round(rng.standard_normal((600, 8))).astype(np.float32)  # integer vectors: many equal scores
    queries = np.round(rng.standard_normal((40, 8))).astype(np.float32)
    ids = [f"doc-{rng.integers(0, 10**6)}-{i}" for i in range(len(documents))]
    return documents, queries, ids, rng.integers(-1, len(documents), size=len(queries))


def test_blocked_search_equals_brute_force_with_ties_and_exclusions(tied_corpus):
    documents, queries, ids, exclude = tied_corpus
    blocks = [documents[start:start + 97] for start in range(0, len(documents), 97)]
    indices, scores = search.top_k(queries, blocks, 25, search.id_priorities(ids), exclude=exclude)
    assert indices.tolist() == brute_force(queries @ documents.T, ids, 25, exclude)
    assert np.array_equal(scores, np.take_along_axis(queries @ documents.T, indices, axis=1))


def test_hamming_search_is_the_sign_vectors_dot_product(tied_corpus):
    documents, queries, ids, exclude = tied_corpus
    packed_documents, packed_queries = np.packbits(documents > 0, axis=1), np.packbits(queries > 0, axis=1)
    signs = np.where(documents > 0, 1.0, -1.0), np.where(queries > 0, 1.0, -1.0)
    pad = np.unpackbits(packed_documents, axis=1).shape[1] - documents.shape[1]  # packbits pads with 0 bits: -1 on both sides
    expected = signs[1] @ signs[0].T + pad
    indices, scores = search.top_k(packed_queries, [packed_documents], 10, search.id_priorities(ids), exclude=exclude,
                                   scorer=search.hamming_scores)
    assert indices.tolist() == brute_force(expected, ids, 10, exclude)
    assert np.array_equal(scores, np.take_along_axis(expected, indices, axis=1).astype(np.float32))


def test_rescoring_ranks_candidates_by_the_float_query(tied_corpus):
    documents, queries, ids, _ = tied_corpus
    packed = np.packbits(documents > 0, axis=1)
    candidates = np.array([[5, 9, 2, -1], [7, 7 + 1, 3, 1]])
    indices, _ = search.rescore(queries[:2], lambda rows: packed[rows], candidates, 2, search.id_priorities(ids))
    for row in range(2):
        kept = [c for c in candidates[row] if c >= 0]
        scores = search.unpacked_signs(packed[kept]) @ queries[row]
        assert indices[row].tolist() == [kept[i] for i in trec_order([ids[c] for c in kept], scores)[:2]]


def test_a_corpus_smaller_than_k_leaves_empty_slots():
    indices, scores = search.top_k(np.eye(2, dtype=np.float32), [np.eye(2, dtype=np.float32)], 4, np.arange(2),
                                   exclude=np.array([1, -1]))
    assert indices.tolist() == [[0, -1, -1, -1], [1, 0, -1, -1]]
    assert np.isneginf(scores[0, 1:]).all()


def test_faiss_flat_index_agrees_on_distinct_scores():
    rng = np.random.default_rng(0)
    documents, queries = rng.standard_normal((500, 8)).astype(np.float32), rng.standard_normal((20, 8)).astype(np.float32)
    ours, _ = search.top_k(queries, [documents], 10, np.arange(500))
    theirs, _ = search.faiss_top_k(queries, documents, 10, kind="flat")
    assert np.array_equal(ours, theirs)
