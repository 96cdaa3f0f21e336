"""A shard folder in its spec's output precision (``precision=``, ``truncate_dim=``).

The engines encode every slice as float32 (truncated to ``truncate_dim`` and, with ``--normalize``, unit
length after the cut, as sentence-transformers orders them); the runner turns each shard into the spec's
precision just before writing it. binary/ubinary need nothing more. int8/uint8 need each dimension's range,
and a range taken from one shard would give the same vector different bytes in different shards, so the
ranges are fitted once over the whole input (one extra encoding pass, streamed: memory is that of one
slice) and stored in the manifest, like post-processing state: a resumed run reads them back, and every
shard is quantised with the same ones (``quantize_embeddings(..., ranges=...)``, byte for byte
sentence-transformers' own).

A float32 folder of full width keeps the manifest it always had: none of these keys is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from embedlab.errors import InputError
from embedlab.methods.base import VectorMethod
from embedlab.methods.precision import BINARY_PRECISIONS, SCALAR_PRECISIONS, quantized


@dataclass
class OutputEncoding:
    """A folder's output stage: the spec's precision and width, and for int8/uint8 the ranges fitted on the
    whole input (``ranges_``, set by :meth:`fit`). The runner asks it; it asks the method once."""

    spec: str
    precision: str
    cut_width: int  # the width of the float32 rows the engines encode: ``truncate_dim``, or the method's
    truncate_dim: int | None
    ranges_: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def of(cls, method: VectorMethod) -> OutputEncoding:
        precision, truncate_dim = method.output_options()
        return cls(method.spec, precision, truncate_dim if truncate_dim is not None else method.dimension, truncate_dim)

    @property
    def stored_width(self) -> int:
        """The width of a stored row: the cut width, in bytes for binary."""
        return self.cut_width // 8 if self.precision in BINARY_PRECISIONS else self.cut_width

    def manifest_keys(self) -> dict[str, object]:
        """The manifest keys that name the folder's precision and width (none for float32 of full width)."""
        if (self.precision, self.truncate_dim) == ("float32", None):
            return {}
        return {"precision": self.precision, "truncate_dim": self.truncate_dim}

    def fit(self, manifest: dict, blocks: Iterable[np.ndarray]) -> OutputEncoding:
        """int8/uint8's (2, width) ranges over the whole input: read from ``manifest`` when a run stored them,
        else each dimension's min and max over the float32 rows of every block (a lazy iterable, drawn only
        here), stored there. Other precisions fit nothing."""
        if self.precision not in SCALAR_PRECISIONS:
            return self
        if "ranges" in manifest:
            ranges = np.asarray(manifest["ranges"], dtype=np.float32)
            if ranges.shape != (2, self.stored_width) or not np.isfinite(ranges).all():
                raise InputError(f"the manifest's int8 ranges have shape {ranges.shape}, expected (2, {self.stored_width}); "
                                 "rerun with --overwrite to fit and embed again")
            self.ranges_ = ranges
            return self
        low = high = None
        for rows in blocks:
            low, high = _widened(low, high, rows)
        if low is None or high is None:
            raise InputError(f"{self.spec}: no texts to fit precision={self.precision}'s ranges on")
        self.ranges_ = np.vstack((low, high)).astype(np.float32)
        manifest["ranges"] = self.ranges_.tolist()  # float32 → JSON → float32 is exact
        return self

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """A shard's float32 rows in the spec's precision (float32 unchanged)."""
        return quantized(vectors, self.precision, self.ranges_, where=self.spec)


def _widened(low: np.ndarray | None, high: np.ndarray | None, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    block_low, block_high = rows.min(axis=0), rows.max(axis=0)
    if low is None or high is None:
        return block_low, block_high
    return np.minimum(low, block_low), np.maximum(high, block_high)
