"""The one scorer every task uses: encode each distinct text once, index back; or score pairs.

Some methods fit statistics on the texts of one ``encode()`` call (idf over the target texts,
target-fitted post-processing; pooling paper §2), so a task hands the scorer every text of its dataset (all
splits, both sides of every pair, every perturbation) and the scorer calls ``encode`` ONCE on the
distinct texts, in first-seen order, then gives each list its rows back. Pairwise methods
(``method.pairwise``, e.g. token matching) have no vectors: they get one ``similarity_pairs()`` call on the
distinct pairs, and their score stands in for the cosine.

Encodings and pair scores are cached on disk through ``runtime.cache.arrays.ArrayStore("eval")`` (checksummed,
atomic), keyed by method spec, model fingerprint and a digest of the text list, so reruns and
interrupted runs recompute nothing. Each entry's cost (:mod:`embedlab.evaluation.cost`: time, CPU, memory of
the call that computed it) is kept beside it and reported again whenever the entry is reused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from embedlab.errors import InputError
from embedlab.evaluation.base import Method, NotApplicableError, method_identity
from embedlab.evaluation.cost import CallCost, measured, report, vector_bytes
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.cache.hashing import cache_key, texts_digest
from embedlab.runtime.progress import show_progress

_STORE = ArrayStore("eval")


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float64 (zero rows stay zero), so products are cosines.

    Float64, not the methods' float32: the neural-embeddings paper's products are compared for exact ties (``≤``)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def cosines(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two row-aligned arrays (float64; a zero row gives 0)."""
    return np.einsum("ij,ij->i", unit_rows(first), unit_rows(second))


PRODUCTS = ("cosine", "dot")  # the embedding product of the neural-embeddings paper's tasks: unit-normalised (§3) or as encoded (App. F)


def check_product(product: str) -> str:
    if product not in PRODUCTS:
        raise InputError(f"unknown product {product!r}; expected one of {', '.join(PRODUCTS)}")
    return product


def product_rows(vectors: np.ndarray, product: str = "cosine") -> np.ndarray:
    """Float64 rows whose dot products are the asked-for product: unit rows for ``cosine``, the vectors as
    encoded for ``dot`` (neural-embeddings paper Appendix F: unnormalised embeddings)."""
    return unit_rows(vectors) if check_product(product) == "cosine" else np.asarray(vectors, dtype=np.float64)


def product_subset(subset: str, product: str) -> str:
    """The record subset of a task run with ``product``: unchanged for the default (cosine), so stored
    results keep their names; ``SUBSET,product=dot`` otherwise, so the two are never mixed."""
    return subset if check_product(product) == "cosine" else f"{subset},product={product}"


def _cache_key(method: Method, kind: str, texts: Sequence[str]) -> str:
    return cache_key(kind, method_identity(method), texts_digest(texts))


def _cached_measured(method: Method, key: str, count: int, compute: Callable[[], tuple[np.ndarray, int | None]]) -> np.ndarray:
    """The array of ``key`` from the eval cache, or ``compute()`` (the array and bytes per vector) measured and
    stored with its cost beside it; either way the cost of the call that computed it is reported
    (:func:`embedlab.evaluation.cost.report`): measured now, read back, or untimed for an entry cached
    before costs were kept."""
    fresh: list[CallCost] = []

    def run() -> np.ndarray:
        (array, width_bytes), call = measured(compute, count)
        fresh.append(replace(call, bytes_per_vector=width_bytes))
        return array

    array = _STORE.get(key, run)
    if fresh:
        call = fresh[0]
        _STORE.save(key + "-cost", np.frombuffer(json.dumps(call.as_json()).encode(), dtype=np.uint8))
    else:
        stored = _STORE.load(key + "-cost")
        call = CallCost.from_json(json.loads(stored.tobytes())) if stored is not None else CallCost(texts=count)
    report(method, call)
    return array


def encode_texts(method: Method, texts: Sequence[str], *, batch_size: int = 32, role: str | None = None,
                 precision: str | None = None) -> np.ndarray:
    """``method.encode(texts)`` in ONE call (float32, one row per text), cached on disk.

    ``role`` (``query`` or ``document``): the side of an asymmetric search; a method with a prompt of that name
    (``method.prompts``) encodes with it, under a cache key of its own. ``precision`` overrides the method's
    output precision for this call (``float32`` for the float queries that rescore binary candidates)."""
    if method.pairwise:
        raise NotApplicableError(f"{method.spec!r} is a pairwise method and produces no embedding vectors")
    texts = list(texts)
    overrides = {"prompt_name": role} if role is not None and role in getattr(method, "prompts", {}) else {}
    if precision is not None:
        overrides["precision"] = precision

    def compute() -> tuple[np.ndarray, int | None]:
        vectors = method.encode(texts, batch_size=batch_size, show_progress_bar=show_progress(), **overrides)
        # bytes of one vector as the method returns it, in its own precision (not a --rescore float override)
        width_bytes = vector_bytes(vectors) if precision is None else None
        # quantised outputs (precision=binary ...) compared as their precision means them: bits as ±1
        vectors = np.asarray(method.comparable(vectors) if hasattr(method, "comparable") else vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise InputError(f"{method.spec!r}.encode returned shape {vectors.shape} for {len(texts)} texts")
        if not np.all(np.isfinite(vectors)):
            bad = int(np.flatnonzero(~np.all(np.isfinite(vectors), axis=1))[0])
            raise InputError(f"{method.spec!r}.encode returned a non-finite embedding for text {bad}: {texts[bad][:80]!r}")
        return vectors, width_bytes

    kind = "encode" + "".join(f":{name}={value}" for name, value in sorted(overrides.items()))
    return _cached_measured(method, _cache_key(method, kind, texts), len(texts), compute)


def score_pairs(method: Method, pairs: list[tuple[str, str]], batch_size: int = 32, *, cached: bool = True) -> np.ndarray:
    """``method.similarity_pairs(pairs)`` in ONE call (float32, one score per pair), cached on disk unless
    ``cached=False`` (a caller that times the scoring itself)."""

    def compute() -> tuple[np.ndarray, None]:
        scores = np.asarray(method.similarity_pairs(pairs, batch_size=batch_size, show_progress_bar=show_progress()), dtype=np.float32)
        if scores.shape != (len(pairs),):
            raise InputError(f"{method.spec!r}.similarity_pairs returned shape {scores.shape} for {len(pairs)} pairs")
        if not np.all(np.isfinite(scores)):
            bad = int(np.flatnonzero(~np.isfinite(scores))[0])
            raise InputError(f"{method.spec!r}.similarity_pairs returned a non-finite score for pair {bad}")
        return scores, None

    if not cached:
        return compute()[0]
    key = _cache_key(method, "similarity", [text for pair in pairs for text in pair])
    return _cached_measured(method, key, len(pairs), compute)


class Encoded:
    """The embeddings of the distinct texts of several lists, from one ``encode`` call; rows by text."""

    def __init__(self, method: Method, *text_lists: Sequence[str], batch_size: int = 32) -> None:
        self.row: dict[str, int] = {}
        for texts in text_lists:
            for text in texts:
                self.row.setdefault(text, len(self.row))
        self.texts = list(self.row)
        self.vectors = encode_texts(method, self.texts, batch_size=batch_size)

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        """The embeddings of ``texts`` (row-aligned; repeated texts repeat their row)."""
        return self.vectors[np.fromiter((self.row[t] for t in texts), dtype=np.int64, count=len(texts))]


def embed(method: Method, *text_lists: Sequence[str]) -> list[np.ndarray]:
    """Encode the union of several text lists once; one row-aligned float32 array per list."""
    encoded = Encoded(method, *text_lists)
    return [encoded.rows(texts) for texts in text_lists]


class PairScorer:
    """The similarity (cosine, or a pairwise method's own score) of any pair among ``pair_lists``, from one
    ``encode()`` of their distinct texts or one ``similarity_pairs()`` call on the distinct pairs.

    Texts are encoded in the order: first texts of the first list, its second texts, then the next list."""

    def __init__(self, method: Method, *pair_lists: Sequence[tuple[str, str]], batch_size: int = 32) -> None:
        self.pairwise = bool(method.pairwise)
        if self.pairwise:
            distinct = list(dict.fromkeys(pair for pairs in pair_lists for pair in pairs))
            self._scores = dict(zip(distinct, score_pairs(method, distinct, batch_size).astype(np.float64)))
        else:
            sides = [[pair[side] for pair in pairs] for pairs in pair_lists for side in (0, 1)]
            self._encoded = Encoded(method, *sides, batch_size=batch_size)

    def vectors(self, pairs: Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        """The (first, second) embeddings of ``pairs``; only for vector methods."""
        if self.pairwise:
            raise NotApplicableError("a pairwise method has no embedding vectors")
        return self._encoded.rows([a for a, _ in pairs]), self._encoded.rows([b for _, b in pairs])

    def similarity(self, pairs: Sequence[tuple[str, str]], product: str = "cosine") -> np.ndarray:
        """Float64 similarity of each pair: the cosine (or, with ``product="dot"``, the dot product) of its
        embeddings, or the pairwise method's score."""
        check_product(product)
        if self.pairwise:
            if product != "cosine":
                raise NotApplicableError(f"product={product} needs embedding vectors; a pairwise method has only its own score")
            return np.array([self._scores[pair] for pair in pairs], dtype=np.float64)
        first, second = self.vectors(pairs)
        if product == "cosine":
            return cosines(first, second)
        return np.einsum("ij,ij->i", product_rows(first, product), product_rows(second, product))


def pair_scores(method: Method, first: Sequence[str], second: Sequence[str], product: str = "cosine") -> np.ndarray:
    """The similarity of each (first[i], second[i]) pair (see :class:`PairScorer`)."""
    if len(first) != len(second):
        raise InputError(f"{len(first)} first texts but {len(second)} second texts")
    pairs = list(zip(first, second))
    return PairScorer(method, pairs).similarity(pairs, product)
