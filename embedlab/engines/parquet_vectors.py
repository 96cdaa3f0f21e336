"""The one Parquet layout of embedlab's vectors: ``id``, ``vector`` and an optional ``text`` column, written
for a shard of an output folder and for ``embed --output FILE.parquet``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

# the numpy type the rows of each output precision (``precision=``) are stored in; binary: sign bits packed 8
# to a byte
VECTOR_DTYPES = {"float32": np.float32, "int8": np.int8, "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}


def shard_bytes(ids: Sequence[int | str], vectors: np.ndarray, texts: Sequence[str] | None = None,
                text_hashes: np.ndarray | None = None) -> object:
    """Parquet bytes (a pyarrow buffer): ``id``, ``vector`` (fixed-size list of float32, or of int8/uint8
    for quantised vectors), optional ``text``, optional ``text_hash`` (uint64: each row's text fingerprint,
    so a reader can tell the vectors' texts from another corpus's with the same ids).

    The one Parquet layout of embedlab's vectors: a shard, and ``embed --output FILE.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    vectors = np.asarray(vectors)
    vectors = np.ascontiguousarray(vectors, dtype=vectors.dtype if vectors.dtype in (np.int8, np.uint8) else np.float32)
    id_type = pa.int64() if ids and isinstance(ids[0], int) else pa.string()
    columns = {
        "id": pa.array(list(ids), type=id_type),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), type=pa.from_numpy_dtype(vectors.dtype)), vectors.shape[1]),
    }
    if texts is not None:
        columns["text"] = pa.array(list(texts), type=pa.string())
    if text_hashes is not None:
        columns["text_hash"] = pa.array(np.asarray(text_hashes, dtype=np.uint64), type=pa.uint64())
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def read_shard(path: Path) -> tuple[list[int | str], np.ndarray]:
    """``(ids, vectors)`` of one shard; the vectors C-contiguous, float32 (or int8/uint8 as stored)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    column = table.column("vector").combine_chunks()
    width = column.type.list_size
    flat = column.flatten().to_numpy(zero_copy_only=False)
    dtype = flat.dtype if flat.dtype in (np.int8, np.uint8) else np.float32
    return table.column("id").to_pylist(), np.ascontiguousarray(flat.reshape(-1, width), dtype=dtype)


def read_text_hashes(path: Path) -> np.ndarray | None:
    """The ``text_hash`` column of one shard (uint64), or None for a shard written before it existed."""
    import pyarrow.parquet as pq

    if "text_hash" not in pq.read_schema(path).names:
        return None
    return pq.read_table(path, columns=["text_hash"]).column("text_hash").to_numpy().astype(np.uint64, copy=False)
