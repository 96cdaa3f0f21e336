"""Safetensors bytes in a canonical order (``sorted_header``)."""

from __future__ import annotations

import json

import numpy as np
from safetensors.numpy import load as safetensors_load
from safetensors.numpy import save as safetensors_save

from embedlab.runtime.cache.arrays import sorted_header

METADATA = {"spec": "minilm:post=zscore", "fingerprint": "fcf7cd7986f4b540", "steps": "[\"zscore\"]", "é": "ü", "a": "1"}
TENSORS = {"post.0.mean": np.arange(6, dtype=np.float32), "idf": np.linspace(0, 1, 5), "ids": np.arange(3, dtype=np.int64)}


def test_the_same_tensors_and_metadata_give_the_same_bytes() -> None:
    """safetensors writes its metadata map in an order that changes between calls; the sorted bytes do not."""
    payloads = {sorted_header(safetensors_save(TENSORS, metadata=dict(reversed(list(METADATA.items())) if turn % 2 else METADATA)))
                for turn in range(40)}
    assert len(payloads) == 1


def test_sorting_keeps_the_file_readable_and_its_contents() -> None:
    original = safetensors_save(TENSORS, metadata=METADATA)
    ordered = sorted_header(original)
    assert len(ordered) == len(original)
    length = int.from_bytes(ordered[:8], "little")
    header = json.loads(ordered[8 : 8 + length])
    assert list(header) == sorted(header) and list(header["__metadata__"]) == sorted(METADATA)
    assert header["__metadata__"] == METADATA
    loaded = safetensors_load(ordered)
    assert loaded.keys() == TENSORS.keys()
    for name, tensor in TENSORS.items():
        assert loaded[name].dtype == tensor.dtype and np.array_equal(loaded[name], tensor)
