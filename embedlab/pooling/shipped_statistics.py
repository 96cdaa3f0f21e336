"""Reference statistics shipped with the package: idf^W and token counts over WikiText-2 train for a tokenizer.

Counting them means tokenising all 70,505 train sentences (≈ 6 CPU s for the default model, once per machine
and cache folder). For the default model's tokenizer they ship in
``embedlab/resources/wikitext2-train-reference-<tokenizer>.npz``, named by the SHA-256 of the tokenizer's full
definition (``backend_tokenizer.to_str()`` without the truncation and padding a call leaves set: vocabulary,
normaliser, pre-tokeniser) and its unknown token, and
holding the SHA-256 of the train file they were counted on. They are used only where both match; anything else is
counted as before. ``scripts/reference_statistics.py`` writes them, and with ``--check`` counts them again and
compares (bit for bit).

A file is checked before use: its fields, dtypes and shapes, and the SHA-256 of its two arrays against the one
stored beside them; one that fails is refused with a :class:`~embedlab.data.DataFormatError` naming it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from embedlab.data import DataFormatError
from embedlab.data.reading import read_npz_fields, write_npz

STATISTICS_FOLDER = Path(__file__).resolve().parents[1] / "resources"
_FIELDS = ("idf", "counts", "tokenizer_sha256", "corpus_sha256", "arrays_sha256")


def tokenizer_sha256(tokenizer) -> str | None:
    """SHA-256 of the tokenizer's full definition and unknown token; None for a tokenizer without one (not fast)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    definition = json.loads(backend.to_str())
    for state in ("truncation", "padding"):  # set and reset by each call with other options: not the tokenizer
        definition.pop(state, None)
    text = json.dumps(definition, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{text}\n{tokenizer.unk_token}".encode("utf-8")).hexdigest()


def statistics_file(tokenizer_digest: str, folder: Path = STATISTICS_FOLDER) -> Path:
    """Where the shipped statistics of the tokenizer with SHA-256 ``tokenizer_digest`` would be."""
    return folder / f"wikitext2-train-reference-{tokenizer_digest[:16]}.npz"


def write_shipped_statistics(path: Path, tokenizer, corpus_sha256: str, idf: np.ndarray, counts: np.ndarray) -> None:
    """Write ``idf`` (float64) and ``counts`` for ``tokenizer``, counted on the train file hashing to ``corpus_sha256``."""
    idf, counts = np.asarray(idf, dtype=np.float64), np.asarray(counts, dtype=np.int64)
    write_npz(path, {"idf": idf, "counts": counts, "tokenizer_sha256": np.array(tokenizer_sha256(tokenizer)),
                     "corpus_sha256": np.array(corpus_sha256), "arrays_sha256": np.array(_arrays_digest(idf, counts))})


def shipped_statistics(tokenizer, corpus_sha256: str, folder: Path = STATISTICS_FOLDER) -> tuple[np.ndarray, np.ndarray] | None:
    """(idf^W, counts) shipped for ``tokenizer`` on this train file; None when there are none for this pair."""
    digest = tokenizer_sha256(tokenizer)
    path = statistics_file(digest, folder) if digest else None
    if path is None or not path.is_file():
        return None
    fields = read_npz_fields(path, _FIELDS, "reference-statistics")
    if str(fields["tokenizer_sha256"]) != digest or str(fields["corpus_sha256"]) != corpus_sha256:
        return None  # made for another tokenizer with the same name prefix, or another train file: count
    idf, counts = fields["idf"], fields["counts"]
    shape = (len(tokenizer),)
    if idf.dtype != np.float64 or counts.dtype != np.int64 or idf.shape != shape or counts.shape != shape:
        raise DataFormatError(f"{path}: idf and counts must be float64 and int64 vectors of {shape[0]} tokens")
    if _arrays_digest(idf, counts) != str(fields["arrays_sha256"]):
        raise DataFormatError(f"{path}: its idf and counts are not the ones it was written with (damaged)")
    return idf, counts


def _arrays_digest(idf: np.ndarray, counts: np.ndarray) -> str:
    hasher = hashlib.sha256()
    for array in (idf, counts):
        hasher.update(np.ascontiguousarray(array).tobytes())
    return hasher.hexdigest()
