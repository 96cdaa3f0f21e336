"""Stable keys and digests for cache entries."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def cache_key(*parts: object) -> str:
    """A short stable key for the JSON-serialisable ``parts`` (spec, fingerprint, options, text hash …)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def file_sha256(path: Path | str) -> str:
    """SHA-256 of a file's bytes, read in blocks (``hashlib.file_digest``)."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 of a list of texts, length-prefixed so no two lists hash alike."""
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()


def array_digest(array: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and bytes (what :class:`~embedlab.runtime.cache.arrays.ArrayStore` checks)."""
    digest = hashlib.sha256(str((array.dtype.str, array.shape)).encode())
    digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()
