"""Shared fixtures: the real default model (minilm) as an evaluation method, and small tasks."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class _SentenceTransformerMethod:
    """all-MiniLM-L6-v2 through sentence-transformers, used only while ``embedlab.load`` is not on main."""

    pairwise = False

    def __init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        from embedlab.models import model_fingerprint, resolve_model_path

        path = resolve_model_path("minilm")
        self.model = SentenceTransformer(str(path), device="cpu")
        self.spec = "st:minilm"
        self.fingerprint = model_fingerprint(path)

    def encode(self, texts, batch_size=32, show_progress_bar=None, normalize=False):
        return self.model.encode(list(texts), batch_size=batch_size, show_progress_bar=False,
                                 normalize_embeddings=normalize, convert_to_numpy=True).astype(np.float32)

    def similarity(self, pairs, batch_size=32, show_progress_bar=None):
        a = self.encode([p[0] for p in pairs], normalize=True)
        b = self.encode([p[1] for p in pairs], normalize=True)
        return np.sum(a * b, axis=1).astype(np.float32)


@pytest.fixture(scope="session")
def minilm():
    """The default model as a method (``embedlab.load('st:minilm')`` once the foundation provides it)."""
    import embedlab

    load = getattr(embedlab, "load", None)
    return load("st:minilm") if load is not None else _SentenceTransformerMethod()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Encodings and results go to a per-session temporary cache, never the user's."""
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("EMBEDLAB_RESULTS", str(tmp_path_factory.getbasetemp() / "results.sqlite"))
