"""A deterministic fake embedding method for tests that check harness logic, not a model."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest


class FakeMethod:
    """Maps each text to a fixed vector (given, or derived from its hash) and counts encode calls."""

    def __init__(self, vectors: dict[str, np.ndarray] | None = None, dim: int = 8, spec: str = "fake",
                 pairwise: bool = False) -> None:
        self.vectors = vectors or {}
        self.dim = dim
        self.spec = spec
        # the eval cache keys encodings by spec and fingerprint: two fakes that map texts differently must
        # not share entries, whichever xdist worker or test order brings them together
        described = sorted((text, np.asarray(vector, dtype=np.float32).tobytes().hex()) for text, vector in self.vectors.items())
        self.fingerprint = "fake-" + hashlib.sha256(repr((described, dim, pairwise)).encode()).hexdigest()[:16]
        self.pairwise = pairwise
        self.encode_calls: list[list[str]] = []
        self.similarity_calls = 0

    def vector(self, text: str) -> np.ndarray:
        if text in self.vectors:
            return np.asarray(self.vectors[text], dtype=np.float32)
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        return np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)

    def encode(self, texts, batch_size=32, show_progress_bar=None, normalize=False):
        if self.pairwise:
            raise AssertionError("encode called on a pairwise method")
        self.encode_calls.append(list(texts))
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)

    def similarity_pairs(self, pairs, batch_size=32, show_progress_bar=None):
        self.similarity_calls += 1
        scores = []
        for a, b in pairs:
            u, v = self.vector(a), self.vector(b)
            scores.append(float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v))))
        return np.array(scores, dtype=np.float32)


def scored_pairs_file(folder, count: int = 40):
    """A user scored-pairs file of ``count`` pairs with seeded gold scores 0–5 (enough units for intervals)."""
    rng = np.random.default_rng(0)
    path = folder / "pairs.tsv"
    path.write_text("".join(f"text a {i}\ttext b {i}\t{rng.integers(0, 6)}\n" for i in range(count)))
    return path


@pytest.fixture(autouse=True)
def isolated_eval_cache(tmp_path_factory, monkeypatch):
    """Encodings and results of evaluation tests go to a per-session temporary folder, never the user's.
    (Autouse in every test module that imports it.)"""
    base = tmp_path_factory.getbasetemp()
    # the cache is shared by this run's xdist workers (it is safe for concurrent builders, and each encoding
    # is then computed once); the results database stays one per worker
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    monkeypatch.setenv("EMBEDLAB_CACHE", str(shared / "eval-cache"))
    monkeypatch.setenv("EMBEDLAB_RESULTS", str(base / "eval-results.sqlite"))


@pytest.fixture(scope="session")
def minilm_method():
    """The default model through sentence-transformers' own encode (the ``st:minilm`` baseline)."""
    import embedlab

    return embedlab.load("st:minilm")


def beir_folder(root, documents: dict[str, str], queries: dict[str, str], qrels: list[tuple[str, str, int]]):
    """A BEIR folder at ``root``: ``corpus.jsonl`` (id → text), ``queries.jsonl`` and ``qrels/test.tsv`` (query id,
    document id, grade)."""
    import json

    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": key, "text": text}) + "\n" for key, text in documents.items()))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": key, "text": text}) + "\n" for key, text in queries.items()))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels))
    return root
