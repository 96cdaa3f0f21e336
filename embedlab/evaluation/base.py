"""The shared evaluator interface and the encoding cache every task uses.

A :class:`Task` has a ``name`` (the task family, e.g. ``"sts"``), a ``dataset`` name and
``run(method) -> list[Record]``. Methods follow the foundation's contract (``spec``, ``fingerprint``,
``pairwise``, ``encode``, ``similarity``). Because some methods fit statistics on the texts of one
``encode()`` call (idf over target texts, target-fitted post-processing; paper 2 §2), every task encodes
the unique texts of a dataset in ONE call and indexes into the result. Encodings are cached as ``.npy``
files keyed by method spec, model fingerprint and a hash of the text list, so reruns and interrupted runs
recompute nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from threadpoolctl import threadpool_limits

from embedlab.runtime import atomic_write_bytes, cache_dir
from embedlab.evaluation.records import Record


@runtime_checkable
class Method(Protocol):
    """What the harness needs from an embedding method (``embedlab.load(spec)`` returns one)."""

    spec: str
    fingerprint: str
    pairwise: bool

    def encode(self, texts: list[str], batch_size: int = 32, show_progress_bar: bool | None = None,
               normalize: bool = False) -> np.ndarray: ...

    def similarity(self, pairs: list[tuple[str, str]], batch_size: int = 32,
                   show_progress_bar: bool | None = None) -> np.ndarray: ...


class NotApplicableError(ValueError):
    """The task cannot evaluate this kind of method (e.g. a pairwise method where vectors are needed)."""


class Task:
    """One evaluation: ``run(method)`` returns records for ``(method.spec, name, dataset, subset, metric)``."""

    name: str = ""
    needs_vectors: bool = True  # False: pairwise methods work through method.similarity(pairs)

    def __init__(self, dataset: str) -> None:
        self.dataset = dataset

    def applies_to(self, method: Method) -> bool:
        return not (method.pairwise and self.needs_vectors)

    def check(self, method: Method) -> None:
        if not self.applies_to(method):
            raise NotApplicableError(
                f"task {self.name}/{self.dataset} needs embedding vectors, but {method.spec!r} is a pairwise "
                "method (it only scores text pairs); evaluate it with sts, pairs or correlations"
            )

    def run(self, method: Method) -> list[Record]:
        raise NotImplementedError

    def record(self, method: Method, subset: str, metric: str, value: float, n: int) -> Record:
        return Record(method.spec, self.name, self.dataset, subset, metric, float(value), int(n))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dataset!r})"


# ------------------------------------------------------------------------------------------------
# Encoding with a cache
# ------------------------------------------------------------------------------------------------


def _texts_hash(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "little"))  # length prefix: no two lists hash alike
        digest.update(encoded)
    return digest.hexdigest()


def cache_key(method: Method, kind: str, texts: Sequence[str]) -> str:
    payload = json.dumps([kind, method.spec, method.fingerprint, _texts_hash(texts)])
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _load_cached(key: str, rows: int) -> np.ndarray | None:
    path = cache_dir("eval") / f"{key}.npy"
    if not path.exists():
        return None
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None  # unreadable cache file: recompute and overwrite it
    return array if array.shape[0] == rows else None


def _store(key: str, array: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    atomic_write_bytes(cache_dir("eval") / f"{key}.npy", buffer.getvalue())


def unique_texts(*text_lists: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    """The distinct texts of several lists in first-seen order, and each text's row."""
    index: dict[str, int] = {}
    for texts in text_lists:
        for text in texts:
            index.setdefault(text, len(index))
    return list(index), index


def encode_texts(method: Method, texts: Sequence[str], *, use_cache: bool = True) -> np.ndarray:
    """``method.encode`` of ``texts`` in ONE call (float32, one row per text), cached on disk."""
    if method.pairwise:
        raise NotApplicableError(f"{method.spec!r} is a pairwise method and produces no embedding vectors")
    texts = list(texts)
    key = cache_key(method, "encode", texts)
    if use_cache and (cached := _load_cached(key, len(texts))) is not None:
        return cached
    vectors = np.asarray(method.encode(texts), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(f"{method.spec!r}.encode returned shape {vectors.shape} for {len(texts)} texts")
    if not np.all(np.isfinite(vectors)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(vectors), axis=1))[0])
        raise ValueError(f"{method.spec!r}.encode returned a non-finite embedding for text {bad}: {texts[bad][:80]!r}")
    if use_cache:
        _store(key, vectors)
    return vectors


def encode_unique(method: Method, *text_lists: Sequence[str]) -> list[np.ndarray]:
    """Encode the union of several text lists once; return one row-aligned array per list."""
    texts, index = unique_texts(*text_lists)
    vectors = encode_texts(method, texts)
    return [vectors[np.fromiter((index[t] for t in lst), dtype=np.int64, count=len(lst))] for lst in text_lists]


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float64 (zero rows stay zero), so products are cosines."""
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def pair_scores(method: Method, first: Sequence[str], second: Sequence[str], *, use_cache: bool = True) -> np.ndarray:
    """The product of unit-normalised embeddings (= cosine) of each pair; pairwise methods score the pairs
    themselves. Vector methods encode all unique texts of both sides in one call."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first texts but {len(second)} second texts")
    if method.pairwise:
        pairs = list(zip(first, second))
        key = cache_key(method, "similarity", [t for pair in pairs for t in pair])
        if use_cache and (cached := _load_cached(key, len(pairs))) is not None:
            return cached.astype(np.float64)
        scores = np.asarray(method.similarity(pairs), dtype=np.float32)
        if scores.shape != (len(pairs),):
            raise ValueError(f"{method.spec!r}.similarity returned shape {scores.shape} for {len(pairs)} pairs")
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"{method.spec!r}.similarity returned a non-finite score for pair {int(np.flatnonzero(~np.isfinite(scores))[0])}")
        if use_cache:
            _store(key, scores)
        return scores.astype(np.float64)
    left, right = encode_unique(method, first, second)
    return np.einsum("ij,ij->i", unit_rows(left), unit_rows(right))


def solver_threads() -> threadpool_limits:
    """Thread limit for scikit-learn fits (BLAS and OpenMP): ``$EMBEDLAB_SOLVER_THREADS``, default 1.

    The classifiers and k-means here solve many small problems; with several threads on shared cores
    the BLAS/OpenMP workers spin-wait and a fit runs ~10x slower than on one thread (measured on 2 cores).
    """
    return threadpool_limits(limits=int(os.environ.get("EMBEDLAB_SOLVER_THREADS", "1")))
