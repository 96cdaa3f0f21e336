"""Shared helpers for the ALIGN-SIM tests: the real minilm model on small slices, a recorder of its encode
calls, and a pairwise stand-in with a similarity we can recompute by hand."""

from __future__ import annotations

import numpy as np


class RecordingMethod:
    """Wraps a vector method and records every encode() call's texts (to check one call per dataset)."""

    pairwise = False

    def __init__(self, inner) -> None:
        self.inner = inner
        self.spec = str(getattr(inner, "spec", "st:minilm"))
        self.fingerprint = str(getattr(inner, "fingerprint", "test"))
        self.calls: list[list[str]] = []

    def encode(self, texts, batch_size=32, show_progress_bar=None, normalize=False):
        self.calls.append(list(texts))
        return self.inner.encode(list(texts), batch_size=batch_size, show_progress_bar=False)


def load_minilm():
    """The sentence-transformers baseline of the default model, through the method registry."""
    import embedlab

    return embedlab.load("st:minilm")


def jaccard(a: str, b: str) -> float:
    first, second = set(a.lower().split()), set(b.lower().split())
    return len(first & second) / len(first | second)


class JaccardPairwise:
    """A pairwise method (no vectors): word-set Jaccard overlap."""

    spec = "test:jaccard"
    fingerprint = "jaccard"
    pairwise = True

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    def similarity_pairs(self, pairs, batch_size=32, show_progress_bar=None):
        self.calls.append(list(pairs))
        return np.array([jaccard(a, b) for a, b in pairs], dtype=np.float32)
